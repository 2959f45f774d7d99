"""Importers of the public meta-evaluation sets into pairank's tables.

Each importer reads one dataset folder laid out as in ``shared/data`` (see its
README) and returns an :class:`ImportedSet` of CANDIDATES, HUMAN_SCORES and
PAIRWISE_LABELS tables (see :mod:`storage.schemas`); a table a set has none of is
empty. A bad source record fails with a :class:`storage.schemas.TableError` that
names the file, the row (0-based record index) and the field.

    >>> counts = run_import("summeval", "/work/shared/data/summeval", "s3://bucket/sets/summeval")  # doctest: +SKIP
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable

from storage.fs import Location
from storage.schemas import CANDIDATES, HUMAN_SCORES, PAIRWISE_LABELS, validate

from . import hanna, llmbar, newsroom, summeval, topicalchat
from ._records import ImportedSet

__all__ = ["IMPORTERS", "ImportedSet", "get_importer", "run_import"]

IMPORTERS: dict[str, Callable[[Location], ImportedSet]] = {
    "summeval": summeval.load,
    "newsroom": newsroom.load,
    "topicalchat": topicalchat.load,
    "hanna": hanna.load,
    "llmbar": llmbar.load,
}


def get_importer(name: str) -> Callable[[Location], ImportedSet]:
    """The importer called ``name``; an unknown name is a ValueError listing the known ones."""
    try:
        return IMPORTERS[name]
    except KeyError:
        raise ValueError(f"unknown importer {name!r}; available: {', '.join(sorted(IMPORTERS))}") from None


def run_import(name: str, src: str, dst: str) -> dict:
    """Import the set ``name`` from ``src`` (a local folder, or a file in it) into ``dst``.

    Writes ``candidates.parquet``, ``human_scores.parquet`` and, when the set has
    any, ``pairwise_labels.parquet`` under ``dst`` (a local path or an s3:// URI).
    Returns the counts: contexts, candidates, human_scores, pairwise_labels, and dst.
    """
    load = get_importer(name)
    source = Location.of(src)
    if not source.exists():
        raise FileNotFoundError(f"{src}: no such file or folder")
    if not source.is_dir():
        source = Location(source.fs, posixpath.dirname(source.path), posixpath.dirname(source.uri))
    imported = load(source)
    out = Location.of(dst)
    tables = {
        "candidates": validate(imported.candidates, CANDIDATES, f"{name} candidates from {src}"),
        "human_scores": validate(imported.human_scores, HUMAN_SCORES, f"{name} human_scores from {src}"),
        "pairwise_labels": validate(imported.pairwise_labels, PAIRWISE_LABELS, f"{name} pairwise_labels from {src}"),
    }
    for table_name, table in tables.items():
        if table_name != "pairwise_labels" or table.num_rows:
            out.join(f"{table_name}.parquet").write_parquet(table)
    return {
        "contexts": len(set(tables["candidates"].column("context_id").to_pylist())),
        **{table_name: table.num_rows for table_name, table in tables.items()},
        "dst": out.uri,
    }
