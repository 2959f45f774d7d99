"""Helpers shared by the importers: a checked record reader and table building.

Every error names the source file, the row and the field. Rows are always the
0-based record index: the position in a JSON array (or among a JSON object's
keys), or the 0-based line index of a JSONL file (line number minus one); the
source text in the message says so. Errors are :class:`pairank.storage.validation.TableError`.

A record's expected shape is a mapping ``field -> kind`` where kind is
:data:`TEXT` (a non-blank string), :data:`NUMBER` (a finite number; a numeric
string is accepted and converted), :data:`ANY` (checked by the importer), or a
nested shape for a JSON object field (its fields are named ``outer.inner``).
"""

from __future__ import annotations

import json
import math
import posixpath
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import pyarrow as pa
from pyarrow.fs import FileSelector, FileType

from pairank.storage.fs import Location
from pairank.storage.importers.sources import nesting
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, JUDGMENTS, PAIRWISE_LABELS
from pairank.storage.validation import TableError, empty, validate

TEXT = "a non-empty text"
NUMBER = "a finite number"
ANY = "any value"

Shape = Mapping[str, Union[str, "Shape"]]


@dataclass(frozen=True)
class ImportedSet:
    """What an importer returns; a table a set does not have is empty (with its schema).

    ``judgments`` holds published LLM-judge verdicts where the set has them;
    ``skipped`` the messages of source records left out as invalid (when asked to).
    """

    candidates: pa.Table
    human_scores: pa.Table
    pairwise_labels: pa.Table
    judgments: pa.Table = field(default_factory=lambda: empty(JUDGMENTS))
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class Record:
    """One checked source record: where it came from and its (converted) fields."""

    source: str
    row: int
    data: dict[str, Any]

    def fail(self, column: str | None, expected: str, found: str) -> TableError:
        """A :class:`TableError` located at this record (to raise)."""
        return TableError(self.source, self.row, column, expected, found)


def source_name(loc: Location) -> str:
    """How messages name a source file, with the meaning of its rows."""
    return f"{loc.uri} (row = 0-based record index)"


def parse_json(loc: Location) -> Any:
    """The parsed JSON document at ``loc``; a syntax error names file, line and column."""
    text = loc.read_text()
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise TableError(loc.uri, None, None, "valid JSON", f"{e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise TableError(loc.uri, None, *nesting(text)) from None


def raw_records(loc: Location) -> list[tuple[int, Any]]:
    """(row, value) of each record of a JSON array or JSON-lines file (by suffix)."""
    if loc.path.endswith(".jsonl"):
        out = []
        for row, line in enumerate(loc.read_text().splitlines()):
            if not line.strip():
                continue
            try:
                out.append((row, json.loads(line)))
            except json.JSONDecodeError as e:
                raise TableError(source_name(loc), row, None, "a JSON object", f"{e.msg} at column {e.colno}") from None
            except RecursionError:
                raise TableError(source_name(loc), row, *nesting(line)) from None
        return out
    doc = parse_json(loc)
    if not isinstance(doc, list):
        raise TableError(loc.uri, None, None, "a JSON array of records", type(doc).__name__)
    return list(enumerate(doc))


def read_records(loc: Location, shape: Shape) -> list[Record]:
    """Read ``loc`` (JSON array or JSONL) and check every record against ``shape``."""
    source = source_name(loc)
    return [Record(source, row, check(value, shape, source, row)) for row, value in raw_records(loc)]


def check(value: Any, shape: Shape, source: str, row: int, prefix: str = "") -> dict[str, Any]:
    """``value`` checked against ``shape``: exactly its fields, each of its kind; numbers as float."""
    if not isinstance(value, dict):
        expected = f"a JSON object with fields {list(shape)}"
        raise TableError(source, row, prefix.rstrip(".") or None, expected, show(value))
    missing = [k for k in shape if k not in value]
    if missing:
        raise TableError(source, row, prefix + missing[0], f"fields {list(shape)}", f"no field {missing[0]!r}")
    extra = [k for k in value if k not in shape]
    if extra:
        raise TableError(source, row, prefix + extra[0], f"only fields {list(shape)}", f"unexpected field {extra[0]!r}")
    out: dict[str, Any] = {}
    for name, kind in shape.items():
        column, v = prefix + name, value[name]
        if isinstance(kind, Mapping):
            out[name] = check(v, kind, source, row, column + ".")
        elif kind == TEXT:
            if not isinstance(v, str) or not v.strip():
                raise TableError(source, row, column, TEXT, show(v))
            out[name] = v
        elif kind == NUMBER:
            out[name] = number(v, source, row, column)
        else:
            out[name] = v
    return out


def number(value: Any, source: str, row: int | None, column: str) -> float:
    """``value`` as a finite float (a numeric string is accepted), else a TableError."""
    if isinstance(value, (int, float, str)) and not isinstance(value, bool):
        try:
            x = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(x):
                return x
    raise TableError(source, row, column, NUMBER, show(value))


def check_unique(records: Iterable[Record], fields: Sequence[str]) -> None:
    """No two records share the values of ``fields`` (the source's ids)."""
    seen: dict[tuple, int] = {}
    for rec in records:
        key = tuple(rec.data[f] for f in fields)
        if key in seen:
            raise rec.fail(fields[-1], f"unique ({', '.join(fields)})", f"{key} (also in row {seen[key]})")
        seen[key] = rec.row


def grouped(records: Iterable[Record], key: str) -> dict[Any, list[Record]]:
    """Records grouped by ``data[key]``, groups and members in source order."""
    out: dict[Any, list[Record]] = {}
    for rec in records:
        out.setdefault(rec.data[key], []).append(rec)
    return out


def close(a: float, b: float) -> bool:
    """Scores equal up to the rounding of the published files (they keep >= 6 decimals)."""
    return abs(a - b) <= 1e-6


def table(rows: list[dict[str, Any]], schema: pa.Schema, origins: Sequence[tuple[str, int]]) -> pa.Table:
    """Build and :func:`validate` a table; an error is located at the source record of the bad row.

    ``origins[i]`` is the (source, row) the i-th table row was built from.
    """
    if not rows:
        return empty(schema)
    try:
        return validate(pa.Table.from_pylist(rows, schema=schema), schema, "table")
    except TableError as e:
        if e.row is None:
            raise
        source, row = origins[e.row]
        raise TableError(source, row, e.column, e.expected, e.found) from None


def scored_set(
    candidates: list[dict[str, Any]],
    scores: Sequence[Mapping[str, float]],
    origins: Sequence[tuple[str, int]],
) -> ImportedSet:
    """An :class:`ImportedSet` of candidates with per-aspect human scores and no pairwise labels.

    ``scores[i]`` holds the aspect -> score mapping of ``candidates[i]``.
    """
    score_rows, score_origins = [], []
    for cand, aspects, origin in zip(candidates, scores, origins):
        for aspect, score in aspects.items():
            score_rows.append({"candidate_id": cand["candidate_id"], "aspect": aspect, "score": score})
            score_origins.append(origin)
    return ImportedSet(
        candidates=table(candidates, CANDIDATES, origins),
        human_scores=table(score_rows, HUMAN_SCORES, score_origins),
        pairwise_labels=empty(PAIRWISE_LABELS),
    )


def subfolders(loc: Location) -> list[Location]:
    """Folders directly under ``loc``, sorted by name."""
    infos = loc.fs.get_file_info(FileSelector(loc.path, recursive=False))
    names = sorted(posixpath.basename(i.path) for i in infos if i.type == FileType.Directory)
    return [loc.join(n) for n in names]


def show(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
