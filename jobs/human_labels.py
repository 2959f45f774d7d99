"""``pairank leaderboard --human PATH``: human pairwise labels beside the judge's board.

PATH is a PAIRWISE_LABELS table (``pairwise_labels.parquet``, e.g. of an input folder, or written by
``pairank import battles`` with the judge ``human``) or a folder holding one. Its rows name candidates of the
board's runs; each is a (context, system pair) key the judge compared. The board's prediction-powered
rank-sets and win rates (operators.prediction_powered) come from the board's judgments and these labels.
"""

from __future__ import annotations

import pyarrow as pa

from pairank.operators.prediction_powered import human_keys, judged_keys, prediction_powered
from pairank.storage.fs import Location
from pairank.storage.schemas import PAIRWISE_LABELS
from pairank.storage.validation import validate

FILE = "pairwise_labels.parquet"


def read_human_labels(path: str) -> tuple[pa.Table, str]:
    """The labels at ``path`` (a Parquet file or a folder with :data:`FILE`), checked against PAIRWISE_LABELS,
    and the file's URI."""
    loc = Location.of(path)
    if loc.is_dir():
        loc = loc.join(FILE)
    if not loc.exists():
        raise FileNotFoundError(
            f"{loc.uri}: no such file (--human takes a {FILE} of PAIRWISE_LABELS rows, e.g. written by "
            "`pairank import battles` with --judge human, or the folder holding it)"
        )
    if not loc.path.endswith(".parquet"):
        raise ValueError(f"{loc.uri}: --human takes a Parquet table of PAIRWISE_LABELS rows, or its folder")
    return validate(loc.read_parquet(), PAIRWISE_LABELS, loc.uri), loc.uri


def human_board(
    path: str, judgments: pa.Table, candidates: pa.Table, alpha: float, n_boot: int, seed: int
) -> tuple[pa.Table, dict]:
    """The PREDICTION_POWERED table of the board's ``judgments`` (every aspect pooled per key) with the labels at
    ``path``, and what the board's JSON says of it: the file, its labels, the keys, the judge's disagreement."""
    labels, uri = read_human_labels(path)
    if labels.num_rows == 0:
        raise ValueError(f"{uri}: no human labels (the table is empty); --human needs some")
    keys = judged_keys(judgments, candidates)
    human = human_keys(labels, candidates, keys, uri)
    result = prediction_powered(keys, human, alpha=alpha, n_boot=n_boot, seed=seed)
    meta = {"source": uri, "labels": labels.num_rows, **result.summary, "rows": result.table.to_pylist()}
    return result.table, meta


def human_lines(meta: dict) -> list[str]:
    """What the command prints of the human comparison.

    >>> human_lines({"labels": 3, "labelled": 2, "judged_keys": 9, "disagree": 0.5, "alpha": 0.1,
    ...              "source": "h.parquet"})
    ['human labels: 3 from h.parquet on 2 of the 9 judged (context, system pair) keys; the judge disagrees with \
them on 50.0% of those keys; rank-sets at 90%']
    """
    return [
        f"human labels: {meta['labels']} from {meta['source']} on {meta['labelled']} of the {meta['judged_keys']} "
        f"judged (context, system pair) keys; the judge disagrees with them on {meta['disagree']:.1%} of those "
        f"keys; rank-sets at {1 - meta['alpha']:.0%}"
    ]
