"""``pairank leaderboard --input DIR``: the board of an input folder's own judgments (verdicts imported with
``pairank import battles``, or any judgments table), without runs.

Reads ``<input>/candidates.parquet``, the judgments (``--judgments PATH ...``, default
``<input>/judgments.parquet``), ``<input>/human_scores.parquet`` where there is one and
``<input>/style_features.parquet`` where an import brought style counts (style control then uses
them instead of counting markdown in the texts). Writes, under ``--out`` (default
``<input>/leaderboard``), the three files of every board (``leaderboard.parquet``,
``leaderboard.json``, ``index.html``) and, with a baseline, ``alpaca_eval.csv`` and
``arena_hard.csv`` (:mod:`pairank.operators.board_csv`). The numbers are those of
:func:`pairank.operators.leaderboard.leaderboard`, the same code as every board.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.leaderboard import write_leaderboard
from pairank.judges.engines.replay_judge import read_judgments
from pairank.operators.board_csv import alpaca_eval_csv, arena_hard_csv
from pairank.operators.board_quality import board_quality, human_reference
from pairank.operators.judge_bias import judge_bias
from pairank.operators.leaderboard import OVERALL, LeaderboardOptions, leaderboard
from pairank.operators.style_control import lc_warnings
from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidates, read_human_scores, read_style_features
from pairank.storage.schemas import LEADERBOARD
from pairank.storage.validation import validate


def input_leaderboard(
    input: str,
    judgments: Sequence[str] = (),
    out: str | None = None,
    baseline: str | None = None,
    n_boot: int = 200,
    seed: int = 0,
    progress: Callable[[str], None] = lambda m: None,
    compat: Sequence[str] = (),
) -> dict:
    """Build and write the board of an input folder (see the module docstring); returns its metadata."""
    folder = Location.of(input)
    candidates = read_candidates(folder)
    sources = list(judgments) or [folder.join("judgments.parquet").uri]
    table = pa.concat_tables([read_judgments(s) for s in sources])
    ids = candidates.column("candidate_id")
    inside = pc.and_(pc.is_in(table.column("candidate_a"), ids), pc.is_in(table.column("candidate_b"), ids))
    if not pc.all(inside).as_py():
        row = pc.index(inside, False).as_py()
        r = table.slice(row, 1).to_pylist()[0]
        raise ValueError(
            f"judgment {r['key']} (context {r['context_id']!r}) of {', '.join(sources)}: candidates "
            f"{r['candidate_a']!r} / {r['candidate_b']!r} "
            f"are not both in {folder.join('candidates.parquet').uri}"
        )
    style = read_style_features(folder)
    options = LeaderboardOptions(n_boot=n_boot, seed=seed, baseline=baseline, compat=tuple(compat))
    board = leaderboard(table, candidates, None, options, style_features=style)
    rows = validate(board.table, LEADERBOARD, "the leaderboard")
    aspects = sorted(set(table.column("aspect").to_pylist()))
    human = human_reference(read_human_scores(folder), candidates, aspects, folder.join("human_scores.parquet").uri)
    warnings = lc_warnings(table, candidates, baseline) if baseline else []
    meta = {
        "generated_at": dt.datetime.now(dt.UTC).isoformat(),
        "input": folder.uri,
        "judgments_from": sources,
        "runs": [],
        "judges": board.judges,
        "n_boot": n_boot,
        "seed": seed,
        "mass": options.mass,
        "prior_ties": options.prior_ties,
        "baseline": board.baseline,
        "counts": board.counts,
        "intervals": board.intervals,
        "style_features": "given (style_features.parquet)" if style is not None else "counted in the texts",
        "lc_warnings": warnings,
        "judge_bias": judge_bias(table, candidates),
        "quality": board_quality(rows, table, candidates, options, [human] if human.scores else []),
    }
    target = Location.of(out) if out else folder.join("leaderboard")
    write_leaderboard(target, rows, meta, None, None)
    written = ["leaderboard.parquet", "leaderboard.json", "index.html"]
    if board.baseline is not None:
        tokens = None
        if style is not None:
            tokens = dict(zip(style.column("candidate_id").to_pylist(), style.column("length").to_pylist()))
        target.join("alpaca_eval.csv").write_text(alpaca_eval_csv(rows, table, candidates, board.baseline, OVERALL))
        target.join("arena_hard.csv").write_text(arena_hard_csv(rows, candidates, board.baseline, OVERALL, tokens))
        written += ["alpaca_eval.csv", "arena_hard.csv"]
    for w in warnings:
        progress(f"warning: {w}")
    progress(f"wrote {target.uri}/: {', '.join(written)}")
    return {**meta, "out": target.uri, "written": written}
