"""Importers of the public meta-evaluation sets into pairank's tables.

Each importer reads one dataset folder laid out as in ``shared/data`` (see its
README) and returns an :class:`ImportedSet` of CANDIDATES, HUMAN_SCORES and
PAIRWISE_LABELS tables, and JUDGMENTS where the set publishes LLM verdicts (see
:mod:`pairank.storage.schemas`); a table a set has none of is empty. A bad source record
fails with a :class:`pairank.storage.validation.TableError` that names the file, the row
(0-based record index) and the field.

    >>> counts = run_import("summeval", "/work/shared/data/summeval", "s3://bucket/sets/summeval")  # doctest: +SKIP
"""

from __future__ import annotations

import inspect
import posixpath
from collections.abc import Callable

from pairank.storage.fs import Location, remove_stale_temporaries
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, JUDGMENTS, PAIRWISE_LABELS
from pairank.storage.validation import validate

from . import hanna, llmbar, newsroom, summeval, topicalchat
from ._records import ImportedSet

__all__ = ["IMPORTERS", "ImportedSet", "get_importer", "run_import"]

IMPORTERS: dict[str, Callable[..., ImportedSet]] = {
    "summeval": summeval.load,
    "newsroom": newsroom.load,
    "topicalchat": topicalchat.load,
    "hanna": hanna.load,
    "llmbar": llmbar.load,
}

#: Tables written only when the set has rows (and removed from ``dst`` when it has none).
OPTIONAL_TABLES = ("pairwise_labels", "judgments")


def get_importer(name: str) -> Callable[..., ImportedSet]:
    """The importer called ``name``; an unknown name is a ValueError listing the known ones."""
    try:
        return IMPORTERS[name]
    except KeyError:
        raise ValueError(f"unknown importer {name!r}; available: {', '.join(sorted(IMPORTERS))}") from None


def run_import(
    name: str,
    src: str,
    dst: str,
    skip_invalid: bool = False,
    systems: list[str] | None = None,
    contexts: int | None = None,
) -> dict:
    """Import the set ``name`` from ``src`` (a local folder, or a file in it) into ``dst``.

    ``systems`` and ``contexts`` keep a slice: those systems' outputs on the first
    ``contexts`` contexts by id (and the scores, labels and judgments among them),
    e.g. one night's drop under a nightly input prefix. A slice may hold one
    output per context; only the union of a prefix needs two.

    Writes ``candidates.parquet``, ``human_scores.parquet`` and, when the set has
    any, ``pairwise_labels.parquet`` and ``judgments.parquet`` under ``dst`` (a local
    path or an s3:// URI); one of those two left by an earlier import is removed
    when the set has none. ``skip_invalid`` leaves out invalid source records
    (importers with a ``skip_invalid`` parameter only; others refuse it).
    Returns the counts: contexts, candidates, human_scores, pairwise_labels,
    judgments, skipped (the messages of the records left out), and dst.
    """
    load = get_importer(name)
    if skip_invalid and not _skips_invalid(load):
        able = ", ".join(sorted(n for n, f in IMPORTERS.items() if _skips_invalid(f)))
        raise ValueError(f"importer {name!r} cannot skip invalid records; importers that can: {able}")
    source = Location.of(src)
    if not source.exists():
        raise FileNotFoundError(f"{src}: no such file or folder")
    if not source.is_dir():
        source = Location(source.fs, posixpath.dirname(source.path), posixpath.dirname(source.uri))
    imported = load(source, skip_invalid=True) if skip_invalid else load(source)
    if systems is not None or contexts is not None:
        imported = _slice(imported, name, systems, contexts)
    sliced = systems is not None
    out = Location.of(dst)
    tables = {
        "candidates": validate(imported.candidates, CANDIDATES, f"{name} candidates from {src}", part=sliced),
        "human_scores": validate(imported.human_scores, HUMAN_SCORES, f"{name} human_scores from {src}"),
        "pairwise_labels": validate(imported.pairwise_labels, PAIRWISE_LABELS, f"{name} pairwise_labels from {src}"),
        "judgments": validate(imported.judgments, JUDGMENTS, f"{name} judgments from {src}"),
    }
    for table_name, table in tables.items():
        target = out.join(f"{table_name}.parquet")
        remove_stale_temporaries(target)  # left by an import of the set that was killed
        if table.num_rows or table_name not in OPTIONAL_TABLES:
            target.write_parquet(table)
        elif target.exists():
            target.fs.delete_file(target.path)  # stale, from an earlier import
    return {
        "contexts": len(set(tables["candidates"].column("context_id").to_pylist())),
        **{table_name: table.num_rows for table_name, table in tables.items()},
        "skipped": list(imported.skipped),
        "dst": out.uri,
    }


def _skips_invalid(load: Callable[..., ImportedSet]) -> bool:
    return "skip_invalid" in inspect.signature(load).parameters


def _slice(imported: ImportedSet, name: str, systems: list[str] | None, contexts: int | None) -> ImportedSet:
    """The set restricted to ``systems`` on its first ``contexts`` contexts (by id)."""
    import dataclasses

    import pyarrow as pa
    import pyarrow.compute as pc

    cand = imported.candidates
    if systems is not None:
        known = sorted(set(cand.column("system").to_pylist()))
        unknown = sorted(set(systems) - set(known))
        if unknown:
            raise ValueError(f"--systems {unknown}: not systems of {name}; its systems: {', '.join(known)}")
        cand = cand.filter(pc.is_in(cand.column("system"), pa.array(systems, pa.string())))
    if contexts is not None:
        keep = sorted(set(cand.column("context_id").to_pylist()))[:contexts]
        cand = cand.filter(pc.is_in(cand.column("context_id"), pa.array(keep, pa.string())))
    ids = cand.column("candidate_id")

    def among(table: pa.Table, *columns: str) -> pa.Table:
        mask = None
        for column in columns:
            m = pc.is_in(table.column(column), ids)
            mask = m if mask is None else pc.and_(mask, m)
        return table.filter(mask)

    return dataclasses.replace(
        imported,
        candidates=cand,
        human_scores=among(imported.human_scores, "candidate_id"),
        pairwise_labels=among(imported.pairwise_labels, "candidate_a", "candidate_b"),
        judgments=among(imported.judgments, "candidate_a", "candidate_b"),
    )
