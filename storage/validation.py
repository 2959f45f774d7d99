"""Tables read from outside, held against their schemas: every bad row named by file, row and column."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage.conversations import ConversationError, open_turns, parse_messages, parse_replies
from pairank.storage.schemas import (
    CANDIDATE_OPTIONAL,
    CANDIDATES,
    CATEGORY,
    CONVERSATION,
    HUMAN_SCORES,
    JUDGMENTS,
    LABELS,
    LEADERBOARD,
    NIGHTLY_ROLES,
    NIGHTLY_STATE,
    PAIRWISE_LABELS,
    PASS_KINDS,
    PASSES,
    PRIOR_REPLIES,
    REFERENCE,
    STYLE_COLUMNS,
)


@dataclass(eq=False)  # not frozen: Python (and contextlib) set __traceback__ on an exception as it propagates
class TableError(ValueError):
    """A value in a table read from outside is not what its schema expects."""

    source: str
    row: int | None
    column: str | None
    expected: str
    found: str

    def __str__(self) -> str:
        where = self.source
        if self.column is not None:
            where = f"column `{self.column}` in {where}"
        if self.row is not None:
            where += f" row {self.row}"
        return f"{where}: expected {self.expected}, found {self.found}"

    def __reduce__(self):
        """Pickled by its fields (Ray sends a task's error to the driver pickled), however it was made."""
        return type(self), (self.source, self.row, self.column, self.expected, self.found)


def later_fields(schema: pa.Schema) -> tuple[pa.Field, ...]:
    """The columns added to ``schema`` after files were written without them (LEADERBOARD's style-controlled
    columns): a table lacking them is read with nulls there, so former boards and nightly snapshots still validate.

    >>> [f.name for f in later_fields(LEADERBOARD)][:2], later_fields(CANDIDATES)
    (['style_strength', 'style_low'], ())
    """
    return tuple(STYLE_COLUMNS) if schema.equals(LEADERBOARD) else ()


def optional_fields(schema: pa.Schema) -> tuple[pa.Field, ...]:
    """The columns a table of ``schema`` may also carry, or not: CANDIDATES' ``category``, ``conversation``,
    ``prior_replies`` and ``reference``; none elsewhere.

    >>> [f.name for f in optional_fields(CANDIDATES)], optional_fields(HUMAN_SCORES)
    (['category', 'conversation', 'prior_replies', 'reference'], ())
    """
    return CANDIDATE_OPTIONAL if schema.equals(CANDIDATES) else ()


def conform(table: pa.Table, schema: pa.Schema, source: str) -> pa.Table:
    """Check the column set, then cast ``table`` to ``schema`` (column order too).

    Extra and missing columns are errors that list what was expected. The schema's
    optional columns (:func:`optional_fields`) the table has are kept, cast, after
    the schema's own; those it lacks stay absent. Columns added later
    (:func:`later_fields`) that the table lacks are filled with nulls.
    """
    for f in later_fields(schema):
        if f.name not in table.column_names:
            table = table.append_column(f, pa.nulls(table.num_rows, f.type))
    have = list(table.column_names)
    want = list(schema.names)
    allowed = [f.name for f in optional_fields(schema)]
    optional = [f for f in optional_fields(schema) if f.name in have]
    missing = [c for c in want if c not in have]
    extra = [c for c in have if c not in want and c not in allowed]
    expected = f"columns {want}" + (f" (optional: {allowed})" if allowed else "")
    if missing:
        raise TableError(source, None, missing[0], expected, f"columns {have} (missing {missing})")
    if extra:
        raise TableError(source, None, extra[0], expected, f"unexpected columns {extra}")
    schema = pa.schema([*schema, *optional])
    columns = []
    for field in schema:
        col = table.column(field.name)
        if pa.types.is_string(field.type) and not (
            pa.types.is_string(col.type)
            or pa.types.is_large_string(col.type)
            or pa.types.is_null(col.type)
            or pa.types.is_dictionary(col.type)
        ):  # numbers are not silently made text ("0", "1", ...)
            raise TableError(
                source,
                0 if table.num_rows else None,
                field.name,
                f"a column of type {field.type}",
                f"a column of type {col.type}",
            )
        if not col.type.equals(field.type):
            try:
                col = col.cast(field.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                row = _first_uncastable(col, field.type)
                value = col[row].as_py() if row is not None else col.type
                raise TableError(source, row, field.name, f"a value of type {field.type}", repr(value)) from None
        if pa.types.is_string(field.type):
            check_utf8(col, source, field.name)
        columns.append(col)
    return pa.Table.from_arrays(columns, schema=schema)


def check_utf8(col: pa.ChunkedArray, source: str, column: str) -> None:
    """The values of a text column are UTF-8. Parquet does not check it on reading, and a bad byte would
    otherwise fail later, in whatever decodes the value first, naming no file, row or column.

    >>> check_utf8(pa.chunked_array([pa.array([b"ok", b"caf\\xe9"]).view(pa.string())]), "c.parquet", "text")
    Traceback (most recent call last):
    ...
    pairank.storage.validation.TableError: column `text` in c.parquet row 1: expected UTF-8 text, found byte 0xe9 ...
    """
    offset = 0
    for chunk in col.chunks:
        try:
            chunk.validate(full=True)
        except pa.ArrowInvalid:
            for i, value in enumerate(chunk.view(pa.binary()).to_pylist()):
                try:
                    (value or b"").decode("utf-8")
                except UnicodeDecodeError as exc:
                    around = value[max(0, exc.start - 40) : exc.start + 20]
                    found = f"byte 0x{value[exc.start]:02x} at byte {exc.start} of {around!r}"
                    raise TableError(source, offset + i, column, "UTF-8 text", found) from None
            raise
        offset += len(chunk)


def _first_uncastable(col: pa.ChunkedArray, type_: pa.DataType) -> int | None:
    for i, value in enumerate(col.to_pylist()):
        try:
            pa.array([value]).cast(type_)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return i
    return None


def first_null(table: pa.Table, schema: pa.Schema) -> tuple[int, str] | None:
    """(row, column) of the first null in a non-nullable column, or None."""
    for field in schema:
        if field.nullable:
            continue
        col = table.column(field.name)
        if col.null_count:
            mask = pc.is_null(col)
            return int(pc.index(mask, True).as_py()), field.name
    return None


def validate(table: pa.Table, schema: pa.Schema, source: str, part: bool = False) -> pa.Table:
    """Conform ``table`` to ``schema`` and check the value rules of that table.

    ``part``: the table is one part of a larger one (a drop of a nightly input
    prefix), so rules about the whole (at least 2 candidates per context) are left
    to the caller. Raises :class:`TableError` naming source, row and column.
    """
    table = conform(table, schema, source)
    hit = first_null(table, schema)
    if hit is not None:
        raise TableError(source, hit[0], hit[1], "a value", "null")
    if schema.equals(CANDIDATES):
        _check_candidates(table, source, 1 if part else 2)
    elif schema.equals(NIGHTLY_STATE):
        _check_in(table, "role", NIGHTLY_ROLES, source)
        _check_finite(table, "mean_p", source)
    elif schema.equals(HUMAN_SCORES):
        _check_finite(table, "score", source)
    elif schema.equals(PAIRWISE_LABELS):
        _check_in(table, "preferred", LABELS, source)
    elif schema.equals(JUDGMENTS):
        _check_judgments(table, source)
    elif schema.equals(PASSES):
        _check_in(table, "kind", PASS_KINDS, source)
        _check_finite(table, "score", source)
    elif schema.equals(LEADERBOARD):
        _check_leaderboard(table, source)
    return table


def check_one_score(table: pa.Table, source: str) -> None:
    """A job's human scores: a (candidate, aspect) scored twice must have one score (the same value twice is kept).

    (A SIMULATED judge's ``quality`` source may hold one row per annotator: it averages them.)
    """
    seen: dict[tuple[str, str], tuple[int, float]] = {}
    cols = (table.column(c).to_pylist() for c in ("candidate_id", "aspect", "score"))
    for row, (cid, aspect, score) in enumerate(zip(*cols)):
        first = seen.setdefault((cid, aspect), (row, score))
        if first[1] != score:
            raise TableError(
                source,
                row,
                "score",
                f"one score of candidate {cid!r} for {aspect!r} (row {first[0]} has {first[1]!r})",
                repr(score),
            )


def _check_candidates(table: pa.Table, source: str, per_context: int = 2) -> None:
    check = CandidatesCheck(source, per_context)
    check.add(table)
    check.finish()


def _digest(text: str | None) -> bytes | None:
    return None if text is None else hashlib.blake2b(text.encode("utf-8"), digest_size=16).digest()


class CandidatesCheck:
    """The CANDIDATES rules over a table read in parts (row groups, batches): :meth:`add` each conformed part in
    table order, then :meth:`finish`. What spans parts is kept small: each candidate id's row, and per context its
    first row, candidate count and a 16-byte digest of its text (and of its conversation and reference), never the
    texts; errors name the row in the whole table."""

    def __init__(self, source: str, per_context: int = 2) -> None:
        self.source, self.per_context, self.rows = source, per_context, 0
        self.ids: dict[str, int] = {}
        #: context id -> [first row, candidates, text digest, category, conversation digest, reference digest]
        self.contexts: dict[str, list] = {}
        self.largest = 0  # the most rows one part held (a streaming read's bound)

    def add(self, table: pa.Table) -> None:
        """Check one part (conformed to CANDIDATES, no nulls where none are allowed)."""
        source, offset, n = self.source, self.rows, table.num_rows
        self.largest = max(self.largest, n)
        for i, cid in enumerate(table.column("candidate_id").to_pylist()):
            if cid in self.ids:
                raise TableError(
                    source,
                    offset + i,
                    "candidate_id",
                    "a unique candidate id",
                    f"{cid!r} (also in row {self.ids[cid]})",
                )
            self.ids[cid] = offset + i
        for column in ("context_id", "candidate_id", "text", "context"):
            for i, value in enumerate(table.column(column).to_pylist()):
                if not value.strip():
                    raise TableError(source, offset + i, column, "a non-empty text", repr(value))
        if CONVERSATION.name in table.column_names or PRIOR_REPLIES.name in table.column_names:
            _check_conversations(table, source, offset)
        none = [None] * n
        cols = [table.column(c).to_pylist() if c in table.column_names else none for c in PER_CONTEXT]
        for i, (ctx, text, category, conversation, reference) in enumerate(zip(*cols)):
            row = offset + i
            for column, value in (("category", category), ("conversation", conversation), ("reference", reference)):
                if value is not None and not value.strip():
                    raise TableError(source, row, column, "a non-empty text or null", repr(value))
            mine = [row, 1, _digest(text), category, _digest(conversation), _digest(reference)]
            first = self.contexts.setdefault(ctx, mine)
            if first is mine:
                continue
            first[1] += 1
            if first[3] != category:
                raise TableError(
                    source,
                    row,
                    "category",
                    f"the category of context {ctx!r} in row {first[0]} ({first[3]!r}; one category per context)",
                    repr(category),
                )
            for k, column in ((4, "conversation"), (5, "reference")):
                if first[k] != mine[k]:
                    raise TableError(
                        source,
                        row,
                        column,
                        f"the {column} of context {ctx!r} in row {first[0]} (one per context)",
                        "another",
                    )
            if first[2] != mine[2]:
                raise TableError(
                    source,
                    row,
                    "context",
                    f"the text of context {ctx!r} in row {first[0]}",
                    "a different text (a context id names one input)",
                )
        self.rows += n

    def finish(self) -> None:
        """The rules about the whole: at least one candidate, at least ``per_context`` per context."""
        if self.rows == 0:
            raise TableError(self.source, None, "candidate_id", "at least one candidate", "an empty table")
        for ctx, (row, count, *_) in self.contexts.items():
            if count < self.per_context:
                raise TableError(
                    self.source, row, "context_id", "at least 2 candidates per context", f"{ctx!r} with 1 candidate"
                )


#: The columns checked per context (context id first): the text, and the optional one-per-context columns.
PER_CONTEXT = ("context_id", "context", CATEGORY.name, CONVERSATION.name, REFERENCE.name)


def _check_conversations(table: pa.Table, source: str, offset: int = 0) -> None:
    """A conversation parses (storage.conversations), and a candidate's prior replies answer its earlier turns."""
    n = table.num_rows
    convs = table.column(CONVERSATION.name).to_pylist() if CONVERSATION.name in table.column_names else [None] * n
    replies = table.column(PRIOR_REPLIES.name).to_pylist() if PRIOR_REPLIES.name in table.column_names else [None] * n
    turns: dict[str, int] = {}
    for row, (conv, prior) in enumerate(zip(convs, replies)):
        column = CONVERSATION.name
        try:
            if conv is not None and conv not in turns:
                turns[conv] = open_turns(parse_messages(conv))
            earlier = turns[conv] - 1 if conv is not None else 0
            column = PRIOR_REPLIES.name
            if prior is not None:
                parse_replies(prior, earlier)
            elif earlier:
                raise ConversationError(
                    f"{earlier} earlier replies (the conversation has {earlier + 1} open user turns)"
                )
        except ConversationError as exc:
            raise TableError(
                source, offset + row, column, "a conversation as storage.conversations describes", str(exc)
            ) from None


def _check_finite(table: pa.Table, column: str, source: str) -> None:
    for row, value in enumerate(table.column(column).to_pylist()):
        if value is not None and not math.isfinite(value):
            raise TableError(source, row, column, "a finite number", repr(value))


def _check_in(table: pa.Table, column: str, allowed: tuple[str, ...], source: str) -> None:
    for row, value in enumerate(table.column(column).to_pylist()):
        if value is not None and value not in allowed:
            raise TableError(source, row, column, f"one of {list(allowed)}", repr(value))


def _check_judgments(table: pa.Table, source: str) -> None:
    _check_in(table, "label", LABELS, source)
    for row, (p, err) in enumerate(zip(table.column("p_a").to_pylist(), table.column("error").to_pylist())):
        if err is None and (p is None or not 0.0 <= p <= 1.0 or math.isnan(p)):
            raise TableError(source, row, "p_a", "a float in [0, 1]", repr(p))


def empty(schema: pa.Schema) -> pa.Table:
    """An empty table of ``schema``."""
    return schema.empty_table()


def _check_leaderboard(table: pa.Table, source: str) -> None:
    for column in ("strength", "strength_low", "strength_high", "elo", "elo_low", "elo_high"):
        _check_finite(table, column, source)
    for column in ("win_ratio", "winrate_estimate", "winrate_low", "winrate_high"):
        for row, value in enumerate(table.column(column).to_pylist()):
            if value is not None and not 0.0 <= value <= 1.0:
                raise TableError(source, row, column, "a value in [0, 1]", repr(value))
    for row, (low, high) in enumerate(
        zip(table.column("strength_low").to_pylist(), table.column("strength_high").to_pylist())
    ):
        if low is not None and high is not None and not low <= high:
            raise TableError(source, row, "strength_low", f"at most strength_high ({high!r})", repr(low))
    seen: dict[tuple[str, str], int] = {}
    for row, key in enumerate(zip(table.column("aspect").to_pylist(), table.column("system").to_pylist())):
        if key in seen:
            raise TableError(source, row, "system", "one row per (aspect, system)", f"{key} (also in row {seen[key]})")
        seen[key] = row
