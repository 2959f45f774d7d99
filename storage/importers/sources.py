"""Records of outside files, streamed: JSON lines, JSON arrays, CSV and Parquet, each record with where it is.

A file is never read whole: JSON lines and CSV go line by line through a buffer of
:data:`CHUNK` bytes, a JSON array is decoded record by record from the same buffer,
and Parquet by record batches. Each record comes with its place, told the way the
file's format counts: the 1-based line of a text file (the line a JSON array's
record starts on, and its 0-based index in the array), the 0-based row of a Parquet
file. An error names the file, that place and the field (:class:`Where` makes them);
a line that is not JSON names its line and column, and a value nested deeper than
Python's JSON parser goes (about 1,000 levels) names the field it is in and how
deep it goes (:func:`deepest`).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "a.jsonl")
    >>> _ = open(path, "w").write('{"x": 1}\\n\\n{"x": 2}\\n')
    >>> [(w.place, r) for w, r in records(Location.of(path))]
    [('line 1', {'x': 1}), ('line 3', {'x': 2})]
"""

from __future__ import annotations

import codecs
import csv
import json
import posixpath
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pairank.storage.errors import CorruptFile, is_transient
from pairank.storage.fs import Location
from pairank.storage.validation import TableError

#: Bytes read at a time.
CHUNK = 4 << 20
#: The formats by file suffix.
SUFFIXES = {".jsonl": "jsonl", ".json": "json", ".csv": "csv", ".parquet": "parquet"}


@dataclass(frozen=True)
class Where:
    """A record's place: its file and its line (text files) or row (Parquet); in a JSON array also its index.

    >>> Where("a.json", line=1, index=7).place, Where("a.jsonl", line=3).place, Where("a.parquet", row=0).place
    ('line 1, array index 7', 'line 3', 'row 0')
    """

    uri: str
    line: int | None = None
    row: int | None = None
    index: int | None = None

    @property
    def place(self) -> str:
        if self.line is None:
            return f"row {self.row}"
        return f"line {self.line}" if self.index is None else f"line {self.line}, array index {self.index}"

    def fail(self, field: str | None, expected: str, found: str) -> TableError:
        """A :class:`TableError` naming the file, the line (or row) and the field (to raise)."""
        return TableError(f"{self.uri} {self.place}", None, field, expected, found)


#: A JSON text's strings (with their escapes) and the marks that open, close and key its containers.
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}:]')


def deepest(text: str, start: int = 0) -> tuple[str | None, int]:
    """Where the JSON value at ``text[start:]`` nests deepest: the field (object keys from the value's top, dotted,
    at most 3; None when the value itself is the deep list) and how many levels deep it goes.

    Read without recursion, for a value too deep for :mod:`json` (which raises ``RecursionError``).

    >>> deepest('{"a": 1, "meta": {"n": [[[2]]]}, "b": {}}')
    ('meta.n', 5)
    >>> deepest("[" * 5000 + "]" * 5000)
    (None, 5000)
    """
    frames: list[list] = []  # per open container: [is an object, the key being filled]
    last: str | None = None  # the last string seen (a key when ':' follows)
    depth, field = 0, None
    for m in _TOKENS.finditer(text, start):
        token = m.group()
        if token[0] == '"':
            last = token
        elif token == ":":
            if frames and frames[-1][0]:
                frames[-1][1] = last
        elif token in "[{":
            frames.append([token == "{", None])
            if len(frames) > depth:
                depth, keys = len(frames), []
                for is_object, key in frames[: min(3, len(frames) - 1)]:
                    if not is_object or key is None:
                        break
                    keys.append(json.loads(key))
                field = ".".join(keys) or None
        else:
            frames.pop() if frames else None
            if not frames:
                break
    return field, depth


def nesting(text: str, start: int = 0) -> tuple[str | None, str, str]:
    """The field, what was expected and what was found, for a value :mod:`json` could not read for its nesting."""
    field, depth = deepest(text, start)
    return field, f"JSON nested fewer than about {sys.getrecursionlimit():,} levels deep", f"{depth:,} levels"


def too_deep(where: Where, text: str, start: int = 0) -> TableError:
    """The error naming ``where`` for a value too deep for :mod:`json` (see :func:`deepest`), to raise."""
    return where.fail(*nesting(text, start))


def kind_of(loc: Location, given: str | None = None) -> str:
    """The format of ``loc``: ``given``, else by its suffix (an unknown one lists the known)."""
    if given:
        return given
    suffix = posixpath.splitext(loc.path)[1].lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"{loc.uri}: cannot tell the format from the suffix {suffix!r}; known: {sorted(SUFFIXES)}")
    return SUFFIXES[suffix]


def records(loc: Location, kind: str | None = None) -> Iterator[tuple[Where, Any]]:
    """``(where, record)`` of every record of ``loc``, streamed (see the module docstring)."""
    kind = kind_of(loc, kind)
    if not loc.exists():
        raise FileNotFoundError(f"{loc.uri}: no such file")
    if kind == "jsonl":
        return _jsonl(loc)
    if kind == "json":
        return _json_array(loc)
    if kind == "csv":
        return _csv(loc)
    if kind == "parquet":
        return _parquet(loc)
    raise ValueError(f"{loc.uri}: unknown format {kind!r}; known: {sorted(set(SUFFIXES.values()))}")


def _chunks(loc: Location) -> Iterator[str]:
    """The file's text, :data:`CHUNK` bytes at a time; bytes that are not UTF-8 name their line and byte."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    read = lines = 0  # bytes read before this chunk, line ends among them
    line_start = 0  # where the line being read began (a byte offset)
    with loc.fs.open_input_stream(loc.path) as f:
        while True:
            data = f.read(CHUNK)
            pending = len(decoder.getstate()[0])  # the end of the last chunk: a character's first bytes, no line end
            try:
                text = decoder.decode(data, final=not data)
            except UnicodeDecodeError as exc:
                raise _not_utf8(loc, exc, read - pending, lines, line_start) from None
            lines += data.count(b"\n")
            if (end := data.rfind(b"\n")) >= 0:
                line_start = read + end + 1
            read += len(data)
            if text:
                yield text
            if not data:
                return


def _not_utf8(loc: Location, exc: UnicodeDecodeError, offset: int, lines: int, line_start: int) -> TableError:
    """The error for ``exc``, met in bytes that begin at ``offset`` of the file, after ``lines`` line ends (the
    last line began at byte ``line_start``): its line, its byte in that line and in the file, the bytes."""
    data, at = exc.object, exc.start
    if (end := data.rfind(b"\n", 0, at)) >= 0:
        line_start = offset + end + 1
    line = lines + data.count(b"\n", 0, at) + 1
    bad = " ".join(f"0x{b:02x}" for b in data[at : exc.end])
    return Where(loc.uri, line=line).fail(
        None,
        "UTF-8 text",
        f"{bad} ({exc.reason}) at byte {offset + at - line_start + 1} of the line (file offset {offset + at:,})",
    )


def lines_with_ends(loc: Location) -> Iterator[str]:
    """The lines of a text file, each with its end as the file has it (``\\n`` or ``\\r\\n``; none on a last line
    without one): what :mod:`csv` reads, so a line break inside a quoted field keeps its bytes."""
    rest = ""
    for text in _chunks(loc):
        parts = (rest + text).split("\n")
        rest = parts.pop()
        for part in parts:
            yield part + "\n"
    if rest:
        yield rest


def lines(loc: Location) -> Iterator[tuple[int, str]]:
    """``(1-based line number, line)`` of a text file, without the line ends."""
    for number, line in enumerate(lines_with_ends(loc), 1):
        yield number, line.removesuffix("\n").rstrip("\r")


def _jsonl(loc: Location) -> Iterator[tuple[Where, Any]]:
    for number, line in lines(loc):
        if not line.strip():
            continue
        where = Where(loc.uri, line=number)
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise where.fail(None, "a JSON object on the line", f"{exc.msg} at column {exc.colno}") from None
        except RecursionError:
            raise too_deep(where, line) from None
        yield where, value


def _json_array(loc: Location) -> Iterator[tuple[Where, Any]]:
    """The records of a JSON array, decoded one at a time from a moving buffer."""
    decoder = json.JSONDecoder()
    chunks = _chunks(loc)
    buf, pos, line, started, index = "", 0, 1, False, 0

    def more() -> bool:
        nonlocal buf, pos
        text = next(chunks, None)
        if text is None:
            return False
        buf, pos = buf[pos:] + text, 0
        return True

    def skip_space() -> bool:
        nonlocal pos, line
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                line += buf[pos] == "\n"
                pos += 1
            if pos < len(buf) or not more():
                return pos < len(buf)

    def fail(expected: str, found: str) -> TableError:
        return Where(loc.uri, line=line).fail(None, expected, found)

    if not skip_space() or buf[pos] != "[":
        raise fail("a JSON array of records", "no array" if pos >= len(buf) else repr(buf[pos : pos + 20]))
    pos += 1
    while True:
        if not skip_space():
            raise fail("']' closing the array", "the end of the file")
        if buf[pos] == "]":
            pos += 1
            if skip_space():
                raise fail("nothing after the array", repr(buf[pos : pos + 20]))
            return
        if started:
            if buf[pos] != ",":
                raise fail("',' or ']' after a record", repr(buf[pos : pos + 20]))
            pos += 1
            if not skip_space():
                raise fail("a record after ','", "the end of the file")
        while True:
            try:
                value, end = decoder.raw_decode(buf, pos)
                if end == len(buf) and more():  # a number may go on in the next chunk
                    continue
                break
            except json.JSONDecodeError as exc:
                cut = exc.msg.startswith("Unterminated") or exc.pos >= len(buf) - 1  # the record goes on
                if cut and more():
                    continue
                at = line + buf.count("\n", pos, exc.pos)
                raise Where(loc.uri, line=at, index=index).fail(None, "a JSON record", exc.msg) from None
            except RecursionError:
                raise too_deep(Where(loc.uri, line=line, index=index), buf, pos) from None
        yield Where(loc.uri, line=line, index=index), value
        line += buf.count("\n", pos, end)
        pos, started, index = end, True, index + 1


def _csv(loc: Location) -> Iterator[tuple[Where, Any]]:
    # the lines as the file has them (as open(..., newline="") gives them): a quoted field's CRLF stays CRLF
    reader = csv.reader(lines_with_ends(loc))
    try:
        header = next(reader)
    except StopIteration:
        raise Where(loc.uri, line=1).fail(None, "a header line naming the columns", "an empty file") from None
    start = reader.line_num + 1
    for values in reader:
        if not values:
            start = reader.line_num + 1
            continue
        where = Where(loc.uri, line=start)
        if len(values) != len(header):
            raise where.fail(None, f"{len(header)} fields as in the header", f"{len(values)} fields")
        yield where, dict(zip(header, values))
        start = reader.line_num + 1


def parquet_batches(loc: Location, batch_size: int = 4096) -> Iterator[Any]:
    """The record batches of a Parquet file, streamed; a file that does not decode (truncated, garbage, a corrupt
    page) raises :class:`~pairank.storage.fs.CorruptFile` naming it, its size and the row reached."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = 0
    with loc.fs.open_input_file(loc.path) as f:
        try:
            for batch in pq.ParquetFile(f).iter_batches(batch_size=batch_size):
                yield batch
                row += batch.num_rows
        except (pa.ArrowInvalid, OSError) as exc:
            if isinstance(exc, OSError) and (exc.errno is not None or is_transient(exc)):
                raise  # the storage failed, not the file
            at = f"reading from row {row}: " if row else ""
            raise CorruptFile(loc.uri, f"{f.size()} bytes, {at}{exc}") from None


def _parquet(loc: Location) -> Iterator[tuple[Where, Any]]:
    row = 0
    for batch in parquet_batches(loc):
        for record in batch.to_pylist():
            yield Where(loc.uri, row=row), record
            row += 1
