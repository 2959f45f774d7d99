"""A damaged Delta table, named: a data file its log lists that the storage lacks, a commit that does not read.

delta-rs says of a commit in ``_delta_log`` that is not JSON only "Kernel error: Json error: ..." (and, with
``RUST_BACKTRACE`` set, a Rust backtrace), naming no file; of a data file that is gone, the storage's "No such
file". Both stop every run, leaderboard and server that reads the table. After such a failure,
:func:`damaged_commit` reads the log's commits itself and names the first one that does not read
(:class:`CorruptLog`), and a read that met a file that is gone names it (:class:`MissingFile`); both say how to
repair the table (``pairank store verify --quarantine``, :mod:`pairank.storage.store.repair`).

Only the commits a reader of the newest version needs are checked: those after the newest checkpoint (a
checkpoint holds the table's state at its version; older commits are read only by time travel and ``pairank
store history``, which checks the whole log kept).
"""

from __future__ import annotations

import json
import posixpath
import re
from dataclasses import dataclass

from pairank.storage.errors import CorruptFile, reduced
from pairank.storage.fs import Location

LOG = "_delta_log"
#: Fields a reader needs in each kind of Delta action (the Delta protocol's required fields), with their JSON types.
REQUIRED: dict[str, dict[str, type]] = {
    "add": {"path": str, "partitionValues": dict, "size": int, "modificationTime": int, "dataChange": bool},
    "remove": {"path": str, "dataChange": bool},
    "metaData": {"id": str, "format": dict, "schemaString": str, "partitionColumns": list},
    "protocol": {"minReaderVersion": int, "minWriterVersion": int},
}
JSON_TYPES: dict[type, str] = {str: "text", dict: "an object", int: "an integer", bool: "true or false", list: "a list"}


def store_root(table: Location) -> Location | None:
    """The storage root of a store's table at ``<root>/tables/<name>``; None for a table elsewhere."""
    parent = posixpath.dirname(table.path.rstrip("/"))
    if posixpath.basename(parent) != "tables":
        return None
    return Location.of(table.uri.rstrip("/").rsplit("/", 2)[0])


def verify_hint(table: Location, does: str) -> str:
    """``pairank store verify --root R --quarantine`` and what it ``does``, for a store's table (else nothing)."""
    root = store_root(table)
    return f"`pairank store verify --root {root.uri} --quarantine` {does}" if root is not None else ""


class MissingFile(CorruptFile):
    """A data file that the table's newest version lists and the storage does not have (deleted by hand, or lost)."""

    def __init__(self, uri: str, hint: str = ""):
        ValueError.__init__(
            self,
            f"{uri}: missing: the Delta table lists this data file but the storage has no such file"
            + (f"; {hint}" if hint else ""),
        )
        self.uri, self.reason = uri, "missing"


class CorruptLog(ValueError):
    """A commit of a table's ``_delta_log`` that does not read (not JSON, not Delta actions), or that is missing
    between two that are there: the table cannot be read past it."""

    def __init__(self, uri: str, version: int, newest: int, reason: str, hint: str = ""):
        of = "its newest" if version == newest else f"of {newest}"
        super().__init__(
            f"{uri}: commit {version} ({of}) of the Delta table cannot be read: {reason}"
            + (f"; {hint}" if hint else "")
        )
        self.uri, self.version, self.newest, self.reason = uri, version, newest, reason

    __reduce__ = reduced


@dataclass(frozen=True)
class LogFile:
    """A file of ``_delta_log`` whose name starts with a version: a commit, a checkpoint (or a part of one)."""

    version: int
    loc: Location

    @property
    def name(self) -> str:
        return posixpath.basename(self.loc.path)

    @property
    def is_commit(self) -> bool:
        return self.name == commit_name(self.version)

    @property
    def is_checkpoint(self) -> bool:
        return ".checkpoint." in self.name


def commit_name(version: int) -> str:
    """The file name of a commit.

    >>> commit_name(3)
    '00000000000000000003.json'
    """
    return f"{version:020d}.json"


def log_files(table: Location) -> list[LogFile]:
    """The versioned files of the table's ``_delta_log`` (commits, checkpoints), by version."""
    folder = table.join(LOG)
    out = []
    for entry in folder._listing():
        name = posixpath.basename(entry.path)
        found = re.match(r"(\d{20})\.", name)
        if found and entry.is_file:
            out.append(LogFile(int(found.group(1)), folder.join(name)))
    return sorted(out, key=lambda f: (f.version, f.name))


def commit_problem(data: bytes) -> str | None:
    """Why a commit's bytes are not Delta actions, one JSON object a line; None when they are.

    >>> commit_problem(b'{"commitInfo": {"timestamp": 1}}\\n{"remove": {"path": "a.parquet", "dataChange": true}}\\n')
    >>> commit_problem(b'{"commitInfo": {"timestamp": 1}}\\n{"add": garbage')
    'line 2: not JSON (Expecting value: line 1 column 9 (char 8))'
    >>> commit_problem(b'{"add": {"path": "a.parquet", "size": 3}}')
    'line 1: an add action without partitionValues, modificationTime, dataChange'
    >>> commit_problem(b'{"protocol": {"minReaderVersion": "1", "minWriterVersion": 2}}')
    "line 1: a protocol action whose minReaderVersion is '1'; expected an integer"
    >>> commit_problem(b"")
    'empty (0 bytes): a commit holds at least its commitInfo'
    """
    if not data.strip():
        return f"empty ({len(data)} bytes): a commit holds at least its commitInfo"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return f"not UTF-8 text (byte 0x{data[exc.start]:02x} at byte {exc.start})"
    for number, line in enumerate(text.splitlines(), 1):
        _, problem = _action(line)
        if problem is not None:
            return f"line {number}: {problem}"
    return None


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def actions(data: bytes) -> list[dict]:
    """The Delta actions of a commit's bytes that read (the lines that do not are left out)."""
    read = (_action(line) for line in data.decode("utf-8", "replace").splitlines())
    return [action for action, problem in read if action is not None and problem is None]


def _action(line: str) -> tuple[dict | None, str | None]:
    """One line of a commit: its action, or why it is not one (a blank line is neither)."""
    if not line.strip():
        return None, None
    try:
        action = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc})"
    if not isinstance(action, dict) or len(action) != 1:
        return None, f"expected a Delta action (a JSON object of one key), found {line[:80]!r}"
    ((kind, body),) = action.items()
    required = REQUIRED.get(kind)
    if required is None:
        return action, None  # commitInfo, txn, cdc, domainMetadata ...: free-form, or not read here
    if not isinstance(body, dict):
        return None, f"expected the {kind} action to be an object, found {line[:80]!r}"
    missing = [f for f in required if f not in body]
    if missing:
        return None, f"{article(kind)} {kind} action without {', '.join(missing)}"
    for field, type_ in required.items():
        if not isinstance(body[field], type_) or (type_ is int and isinstance(body[field], bool)):
            return None, f"{article(kind)} {kind} action whose {field} is {body[field]!r}; expected {JSON_TYPES[type_]}"
    return action, None


def damaged_commit(table: Location, history: bool = False) -> CorruptLog | None:
    """The first commit after the newest checkpoint (with ``history``: of the whole log kept) that does not read
    or is missing; None when all read."""
    files = log_files(table)
    checkpoint = -1 if history else max((f.version for f in files if f.is_checkpoint), default=-1)
    commits = {f.version: f for f in files if f.is_commit and f.version > checkpoint}
    if not commits:
        return None
    newest = max(f.version for f in files if f.is_commit)
    for version in range(min(commits) if history else checkpoint + 1, newest + 1):
        found = commits.get(version)
        if found is None:
            uri = table.join(LOG, commit_name(version)).uri
            return corrupt_log(table, uri, version, newest, f"missing: the log has commits up to {newest}")
        problem = commit_problem(found.loc.read_bytes())
        if problem is not None:
            return corrupt_log(table, found.loc.uri, version, newest, problem)
    return None


def corrupt_log(table: Location, uri: str, version: int, newest: int, reason: str) -> CorruptLog:
    """A :class:`CorruptLog` saying what ``pairank store verify --quarantine`` would do about it."""
    if version == newest:
        does = "moves it aside; the comparisons it held are asked again"
    else:
        later = f"{version + 1}" if version + 1 == newest else f"{version + 1}..{newest}"
        base = f"as of version {version - 1}" if version else "anew"
        does = (
            f"moves it aside and restores the table {base} with the commits after it ({later}) committed again; "
            f"the comparisons commit {version} held are asked again"
        )
    return CorruptLog(uri, version, newest, reason, verify_hint(table, does))
