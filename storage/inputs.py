"""An input folder, as ``pairank import`` writes it: the tables a job or command reads, validated.

::

    <input>/candidates.parquet        CANDIDATES (required)
    <input>/human_scores.parquet      HUMAN_SCORES (optional)
    <input>/pairwise_labels.parquet   PAIRWISE_LABELS (optional)
    <input>/style_features.parquet    STYLE_FEATURES (optional: style counts given with the outputs)

A nightly job reads an input *prefix* instead (:func:`read_prefix`): the union of
the input folders under it, one per drop of new outputs.
"""

from __future__ import annotations

import pyarrow as pa

from pairank.storage.fs import Location
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, PAIRWISE_LABELS, STYLE_FEATURES
from pairank.storage.validation import CandidatesCheck, TableError, check_one_score, conform, first_null, validate


def candidates_file(folder: Location) -> Location:
    """``<folder>/candidates.parquet``; a missing table says how to make one."""
    cand = folder.join("candidates.parquet")
    if not cand.exists():
        raise FileNotFoundError(f"{cand.uri}: no candidates table (import a data set with `pairank import`)")
    return cand


def read_candidates(folder: Location) -> pa.Table:
    """The folder's candidates, validated (:func:`candidates_file`)."""
    cand = candidates_file(folder)
    return validate(cand.read_parquet(), CANDIDATES, cand.uri)


def iter_candidates(folder: Location, rows: int = 8192):
    """The folder's candidates in validated parts of at most ``rows`` rows, in table order: each part is conformed
    and checked as it is read, the rules that span parts (unique ids, one text per context, two candidates per
    context) by one :class:`~pairank.storage.validation.CandidatesCheck`, so a large table is never held whole.
    An error names the file, the row in the whole table and the column; the last one can come after the last part,
    so a caller keeps nothing it read until the iterator is exhausted."""
    cand = candidates_file(folder)
    check = CandidatesCheck(cand.uri)
    for part in cand.iter_parquet(rows):
        try:
            part = conform(part, CANDIDATES, cand.uri)
            hit = first_null(part, CANDIDATES)
            if hit is not None:
                raise TableError(cand.uri, hit[0], hit[1], "a value", "null")
        except TableError as exc:  # a row of the part: the row of the whole table
            raise TableError(
                exc.source, None if exc.row is None else check.rows + exc.row, exc.column, exc.expected, exc.found
            ) from None
        check.add(part)
        yield part
    check.finish()


#: The candidates' columns a run reads on its driver when tasks read the texts (:func:`read_candidate_ids`).
ID_COLUMNS = ("context_id", "candidate_id", "system")


def read_candidate_ids(folder: Location) -> pa.Table:
    """The folder's candidates without their texts: the :data:`ID_COLUMNS`, read by column projection (the texts'
    pages are never fetched). For a driver whose tasks read the whole table (:func:`read_candidates`, which
    validates all of it) and cut it into blocks (:mod:`pairank.jobs.judging.streamed`)."""
    cand = candidates_file(folder)
    schema = pa.schema([CANDIDATES.field(c) for c in ID_COLUMNS])
    ids = validate(cand.read_columns(list(ID_COLUMNS)), schema, cand.uri)  # their columns and types, no nulls
    if ids.num_rows == 0:  # as read_candidates says it, before a task is asked to cut nothing into blocks
        raise TableError(cand.uri, None, "candidate_id", "at least one candidate", "an empty table")
    return ids


def read_optional(folder: Location, name: str, schema: pa.Schema) -> pa.Table:
    """``<folder>/<name>.parquet`` validated against ``schema``, or an empty table when there is none."""
    loc = folder.join(f"{name}.parquet")
    return validate(loc.read_parquet(), schema, loc.uri) if loc.exists() else schema.empty_table()


def read_human_scores(folder: Location) -> pa.Table:
    """The folder's human scores, one per (candidate, aspect); conflicting duplicates are an error."""
    table = read_optional(folder, "human_scores", HUMAN_SCORES)
    check_one_score(table, folder.join("human_scores.parquet").uri)
    return table


def read_style_features(folder: Location) -> pa.Table | None:
    """``<folder>/style_features.parquet`` (style counts an import brought: ``pairank import battles``), or None."""
    loc = folder.join("style_features.parquet")
    return validate(loc.read_parquet(), STYLE_FEATURES, loc.uri) if loc.exists() else None


def read_labels(folder: Location) -> pa.Table:
    return read_optional(folder, "pairwise_labels", PAIRWISE_LABELS)


def prefix_folders(prefix: Location) -> list[Location]:
    """The input folders of a nightly prefix: the prefix itself and its sub-folders that hold candidates.parquet."""
    return [f for f in [prefix, *prefix.folders()] if f.join("candidates.parquet").exists()]


def read_prefix(prefix: Location) -> tuple[pa.Table, pa.Table, list[str]]:
    """The union of a nightly input prefix: candidates, human scores and the folders read.

    Every folder (see :func:`prefix_folders`) is one drop: a new system's outputs, new
    prompts, or both. A drop may hold one candidate of a context (the context's other
    candidates come from other drops); the union needs at least two per context. A
    candidate or context in two drops must be the same in both, and so must a human score.
    """
    folders = prefix_folders(prefix)
    if not folders:
        raise FileNotFoundError(
            f"{prefix.uri}: no candidates.parquet in the input prefix or its sub-folders "
            "(each night's new outputs go into a folder under the prefix, as `pairank import` writes them)"
        )
    first: dict[str, tuple[str, int, dict]] = {}  # candidate id -> (file, row, row values)
    contexts: dict[str, tuple[str, int, str]] = {}  # context id -> (file, row, context text)
    tables, scores = [], []
    for folder in folders:
        loc = folder.join("candidates.parquet")
        table = validate(loc.read_parquet(), CANDIDATES, loc.uri, part=True)
        keep = []
        for row, r in enumerate(table.to_pylist()):
            seen = contexts.setdefault(r["context_id"], (loc.uri, row, r["context"]))
            if seen[2] != r["context"]:
                raise TableError(
                    loc.uri,
                    row,
                    "context",
                    f"the text of context {r['context_id']!r} in {seen[0]} row {seen[1]}",
                    "a different text (a context id must name one input in every drop)",
                )
            if r["candidate_id"] in first:
                where, at, other = first[r["candidate_id"]]
                differs = [c for c in ("context_id", "system", "text") if other[c] != r[c]]
                if differs:
                    raise TableError(
                        loc.uri,
                        row,
                        differs[0],
                        f"the {differs[0]} of candidate {r['candidate_id']!r} in {where} row {at}",
                        "a different value (an output that changed needs a new candidate_id)",
                    )
                continue
            first[r["candidate_id"]] = (loc.uri, row, r)
            keep.append(row)
        tables.append(table.take(pa.array(keep, type=pa.int64())))
        scores.append(read_human_scores(folder))
    candidates = pa.concat_tables(tables, promote_options="default")  # drops with and without `category`
    per_context: dict[str, int] = {}
    for ctx in candidates.column("context_id").to_pylist():
        per_context[ctx] = per_context.get(ctx, 0) + 1
    for ctx, n in sorted(per_context.items()):
        if n < 2:
            where, row, _ = contexts[ctx]
            raise TableError(
                where,
                row,
                "context_id",
                "at least 2 candidates per context over all drops",
                f"{ctx!r} with 1 candidate in {prefix.uri}",
            )
    return candidates, _union_scores(scores, folders), [f.uri for f in folders]


def _union_scores(tables: list[pa.Table], folders: list[Location]) -> pa.Table:
    seen: dict[tuple[str, str], tuple[float, str]] = {}
    rows = []
    for table, folder in zip(tables, folders):
        where = folder.join("human_scores.parquet").uri
        for row, r in enumerate(table.to_pylist()):
            key = (r["candidate_id"], r["aspect"])
            if key in seen:
                if seen[key][0] != r["score"]:
                    raise TableError(where, row, "score", f"{seen[key][0]!r} as in {seen[key][1]}", repr(r["score"]))
                continue
            seen[key] = (r["score"], where)
            rows.append(r)
    return pa.Table.from_pylist(rows, schema=HUMAN_SCORES)
