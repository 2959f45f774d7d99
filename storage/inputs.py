"""An input folder, as ``pairank import`` writes it: the tables a job or command reads, validated.

::

    <input>/candidates.parquet        CANDIDATES (required)
    <input>/human_scores.parquet      HUMAN_SCORES (optional)
    <input>/pairwise_labels.parquet   PAIRWISE_LABELS (optional)
"""

from __future__ import annotations

import pyarrow as pa

from storage.fs import Location
from storage.schemas import CANDIDATES, HUMAN_SCORES, PAIRWISE_LABELS, validate


def read_candidates(folder: Location) -> pa.Table:
    """The folder's candidates; a missing table says how to make one."""
    cand = folder.join("candidates.parquet")
    if not cand.exists():
        raise FileNotFoundError(f"{cand.uri}: no candidates table (import a data set with `pairank import`)")
    return validate(cand.read_parquet(), CANDIDATES, cand.uri)


def read_optional(folder: Location, name: str, schema: pa.Schema) -> pa.Table:
    """``<folder>/<name>.parquet`` validated against ``schema``, or an empty table when there is none."""
    loc = folder.join(f"{name}.parquet")
    return validate(loc.read_parquet(), schema, loc.uri) if loc.exists() else schema.empty_table()


def read_human_scores(folder: Location) -> pa.Table:
    return read_optional(folder, "human_scores", HUMAN_SCORES)


def read_labels(folder: Location) -> pa.Table:
    return read_optional(folder, "pairwise_labels", PAIRWISE_LABELS)
