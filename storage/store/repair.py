"""Repairs of a damaged Delta table (``pairank store verify --quarantine``): what cannot be read is moved aside,
never deleted, and what the table no longer holds is counted, so that the next run asks exactly that again.

- **A data file that is gone** (:class:`~pairank.storage.store.damage.MissingFile`): one commit removes it from the
  table (delta-rs' ``repair``, Delta's FSCK). Its rows are lost; the log's statistics of the file count them and
  give their partition and the range of their keys (the keys themselves were in the file).
- **A commit that does not read** (:class:`~pairank.storage.store.damage.CorruptLog`): it and every versioned file of
  ``_delta_log`` after it (commits, checkpoints) move to ``<root>/quarantine/<store>/_delta_log/<time>/``, so the
  table reads as of the version before it: the last readable version, replayed from the newest checkpoint before
  it (or, for a bad first commit, a new empty table). Where it was the newest commit that is all. Otherwise the
  actions of the commits after it that read (the data files they added and removed, as they were written) are
  committed again as one new commit, so the table holds what they added. What the table then does not hold is
  counted: the rows of the data files under the table's folder that it does not list (those the bad commit
  added, and any a failed commit left) whose keys it holds in no file. Those files stay where they are
  (``pairank store vacuum`` deletes them).

Repair while nothing writes to the store: a writer that committed between the move and the new commit is not
lost (the new commit takes the next free version), but a run that reads during the repair may see the table
without the commits being carried over.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import posixpath
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage import delta
from pairank.storage.errors import CorruptFile, StorageUnavailable, reduced
from pairank.storage.fs import Location
from pairank.storage.store.cache import PARTITIONS, JudgmentCache, writer_name
from pairank.storage.store.damage import (
    LOG,
    CorruptLog,
    actions,
    commit_name,
    commit_problem,
    log_files,
    store_root,
    verify_hint,
)

#: Keys of lost rows a report lists at most (the count is always whole).
SHOWN_KEYS = 10


@dataclass(frozen=True)
class Listed:
    """What the table's log says of one of its data files (its statistics)."""

    rows: int | None
    partition: str  # "aspect=coherence, bucket=3"
    first_key: str | None
    last_key: str | None

    def __str__(self) -> str:
        keys = f"keys {self.first_key}..{self.last_key}" if self.first_key is not None else "keys unknown"
        rows = "an unknown number of rows" if self.rows is None else f"{self.rows} rows"
        return f"{rows} ({self.partition}; {keys})"


def listed_files(cache: JudgmentCache) -> dict[str, Listed]:
    """The table's data files (paths as :meth:`JudgmentCache.files` gives them) with the log's statistics."""
    table = pa.table(delta.open_table(cache.folder).get_add_actions(flatten=True))
    parts = [c for c in table.column_names if c.startswith("partition.")]
    out = {}
    for row in table.to_pylist():
        partition = ", ".join(f"{c.removeprefix('partition.')}={row[c]}" for c in parts)
        out[row["path"]] = Listed(row.get("num_records"), partition, row.get("min.key"), row.get("max.key"))
    return out


def drop_gone(cache: JudgmentCache) -> int:
    """Commit a version of the table without the data files that are gone (moved aside, or lost); returns it."""
    table = delta.open_table(cache.folder)
    cache.folder._retrying("commit the table without the files that are gone", lambda: table.repair(dry_run=False))
    return table.version()


@dataclass
class Carried:
    """The net actions of the commits after an unreadable one: files added (and not removed again), files removed
    (that they did not add), the newest metadata and protocol."""

    adds: dict = field(default_factory=dict)  # path -> action
    removes: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)  # "metaData" / "protocol" -> action

    def take(self, commit: list[dict]) -> None:
        for action in commit:
            ((kind, body),) = action.items()
            if kind == "add":
                self.adds[body["path"]] = action
                self.removes.pop(body["path"], None)
            elif kind == "remove":
                if self.adds.pop(body["path"], None) is None:
                    self.removes[body["path"]] = action
            elif kind in ("metaData", "protocol"):
                self.meta[kind] = action

    def __bool__(self) -> bool:
        return bool(self.adds or self.removes or self.meta)

    def lines(self, info: dict) -> bytes:
        """The commit's text: its commitInfo, protocol and metadata, the removes, then the adds."""
        commit_info = {"commitInfo": {"timestamp": int(dt.datetime.now(dt.UTC).timestamp() * 1000), **info}}
        ordered = [commit_info, *(self.meta[k] for k in ("protocol", "metaData") if k in self.meta)]
        ordered += [*self.removes.values(), *self.adds.values()]
        return "".join(json.dumps(a, separators=(",", ":")) + "\n" for a in ordered).encode("utf-8")


@dataclass(frozen=True)
class Restored:
    """What restoring a table past an unreadable commit did."""

    moved: list[str]  # the log's files moved aside
    carried: list[int]  # versions whose actions were committed again
    unreadable: list[int]  # versions whose actions are lost: the bad commit's, and any later one that does not read
    recommitted: int | None  # the version that holds the carried actions (None: nothing was carried)
    version: int  # the table's newest version now
    lost_rows: int  # rows the table no longer holds
    lost_keys: list[str]  # their keys

    def __str__(self) -> str:
        carried = ""
        if self.recommitted is not None:
            span = f"s {self.carried[0]}..{self.carried[-1]}" if len(self.carried) > 1 else f" {self.carried[0]}"
            carried = f"; version{span} committed again as version {self.recommitted}"
        also = ", ".join(map(str, self.unreadable[1:]))
        lost_also = f"; version{'s' * (len(self.unreadable) > 2)} {also} did not read either" if also else ""
        return (
            f"moved to {posixpath.dirname(self.moved[0])}/{carried}{lost_also}; the table is at version "
            f"{self.version}; {self.lost_rows} rows lost ({len(self.lost_keys)} keys)"
        )


#: A step of a repair, as :func:`restore` and :func:`pairank.storage.store.verify.verify_store` report them to
#: ``on_step`` (for tests that stop a repair there).
Step = Callable[[str], None]


def no_step(step: str) -> None:
    """The default ``on_step``: nothing."""


@dataclass(frozen=True)
class Plan:
    """What a restore past an unreadable commit will do, written before it does any of it
    (``<root>/quarantine/<store>/_delta_log/repair.json``), so that a repair stopped part-way is finished by the
    next one from the same plan: the carried commit's text is fixed here, with its repair id.

    - ``moves``: the log's files from the bad commit on, by name, with the sha256 of their bytes (a file of that
      name in the log with other bytes is another writer's and stays);
    - ``folder``: the name of the folder of ``aside`` they go to;
    - ``commit``: the carried commit's text (None: nothing to carry), whose ``pairank.repair`` is ``repair``.
    """

    bad: dict  # the CorruptLog's uri, version, newest, reason
    moves: list[tuple[str, str]]
    folder: str
    carried: list[int]
    unreadable: list[int]
    commit: str | None
    repair: str

    @property
    def error(self) -> CorruptLog:
        return CorruptLog(**self.bad)

    @staticmethod
    def location(aside: Location) -> Location:
        return aside.join("repair.json")

    @classmethod
    def read(cls, aside: Location) -> Plan | None:
        """The plan of a repair that did not finish; None when there is none."""
        where = cls.location(aside)
        if not where.exists():
            return None
        data = where.read_json()
        return cls(**{**data, "moves": [tuple(m) for m in data["moves"]]})

    def write(self, aside: Location) -> None:
        self.location(aside).write_json(dataclasses.asdict(self))


class UnfinishedRepair(ValueError):
    """A store whose repair was stopped part-way: until it is finished, the table holds less than it will (the
    carried commits may be aside), and a run would ask comparisons already paid for."""

    def __init__(self, uri: str, plan: str):
        super().__init__(
            f"{uri}: a repair of this table (`pairank store verify --quarantine`) was stopped part-way ({plan} is its "
            f"plan); {verify_hint(Location.of(uri), 'finishes it') or 'run it again to finish it'}"
        )
        self.uri, self.plan = uri, plan

    __reduce__ = reduced


def quarantine_folder(root: Location, name: str) -> Location:
    """Where the repairs of store ``name`` under ``root`` put what they move aside (and a restore its plan)."""
    return root.join("quarantine", name)


def refuse_unfinished_repair(table: Location) -> None:
    """:class:`UnfinishedRepair` for a store's table whose repair left its plan; nothing for any other."""
    root = store_root(table)
    if root is None:
        return
    plan = Plan.location(quarantine_folder(root, posixpath.basename(table.path.rstrip("/"))).join(LOG))
    if plan.exists():
        raise UnfinishedRepair(table.uri, plan.uri)


def plan_restore(cache: JudgmentCache, bad: CorruptLog) -> Plan:
    """The plan of restoring ``cache``'s table past ``bad`` (see :class:`Plan`)."""
    later = [f for f in log_files(cache.folder) if f.version >= bad.version]
    carried, unreadable, net = [], [bad.version], Carried()
    moves = []
    for f in later:
        data = f.loc.read_bytes()
        moves.append((f.name, hashlib.sha256(data).hexdigest()))
        if not f.is_commit or f.version == bad.version:
            continue
        if commit_problem(data) is None:
            net.take(actions(data))
            carried.append(f.version)
        else:
            unreadable.append(f.version)
    repair = uuid.uuid4().hex
    text = None
    if net:
        info = {
            "operation": "pairank repair",
            "operationParameters": {"carried": carried, "unreadable": unreadable},
            "pairank.writer": writer_name(),
            "pairank.job": "store verify --quarantine",
            "pairank.repair": repair,  # the commit's bytes are this repair's own (create_exclusive), and name it
        }
        text = net.lines(info).decode("utf-8")
    bad_fields = {"uri": bad.uri, "version": bad.version, "newest": bad.newest, "reason": bad.reason}
    folder = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%fZ")
    return Plan(bad_fields, moves, folder, carried, unreadable, text, repair)


def restore(cache: JudgmentCache, bad: CorruptLog | None, aside: Location, on_step: Step = no_step) -> Restored:
    """Restore ``cache``'s table past its unreadable commit ``bad`` (see the module docstring); the log's files
    from it on go to a folder of ``aside`` named for the time. With ``bad`` None, finish the repair whose plan is
    in ``aside`` (one stopped part-way).

    Every step is one a second run recognises: the plan is written first (``aside/repair.json``); a file is moved
    only if the log still holds it with the plan's bytes; the carried commit is written only if no commit of the
    log holds the plan's repair id; the plan goes last. A repair stopped anywhere and run again leaves the table
    as one that was not stopped."""
    table = cache.folder
    plan = Plan.read(aside)
    if plan is None:
        assert bad is not None, f"{aside.uri}: no repair to finish"
        plan = plan_restore(cache, bad)
        plan.write(aside)
        on_step("planned")
    folder = aside.join(plan.folder)
    moved = []
    for name, digest in plan.moves:
        source, target = table.join(LOG, name), folder.join(name)
        if source.exists() and hashlib.sha256(source.read_bytes()).hexdigest() == digest:
            source.move_to(target)  # on S3 a copy, then a delete: a copy done twice is the same file
            on_step(f"moved {name}")
        moved.append(target.uri)
    if not any(f.is_commit for f in log_files(table)):  # the first commit was bad: the table starts again
        delta.ensure_table(table, cache.table_schema, PARTITIONS, wait_s=0)
        on_step("created")
    recommitted = None
    if plan.commit is not None:
        recommitted = committed(table, plan.repair, since=plan.error.version)
        if recommitted is None:
            recommitted = commit(table, plan.commit.encode("utf-8"))
            on_step("committed")
    rows, keys = unheld_rows(cache)
    version = cache.version()
    assert version is not None, f"{table.uri}: no table after ensure_table"
    Plan.location(aside).fs.delete_file(Plan.location(aside).path)
    on_step("restored")
    return Restored(moved, plan.carried, plan.unreadable, recommitted, version, rows, keys)


def committed(table: Location, repair: str, since: int) -> int | None:
    """The version of the log's commit (from ``since`` on) that repair ``repair`` wrote; None if there is none."""
    mark = f'"pairank.repair":"{repair}"'.encode()
    for f in log_files(table):
        if f.is_commit and f.version >= since and mark in f.loc.read_bytes():
            return f.version
    return None


def commit(table: Location, text: bytes) -> int:
    """Write ``text`` as the log's next commit (a conditional create: a version another writer took first is
    left to it and the next one is tried); returns its version."""
    while True:
        newest = max((f.version for f in log_files(table) if f.is_commit), default=-1)
        if table.join(LOG, commit_name(newest + 1)).create_exclusive(text):
            return newest + 1


def unheld_rows(cache: JudgmentCache) -> tuple[int, list[str]]:
    """Rows in data files under the table's folder that the table does not list, whose keys it holds in no file;
    returns their number and their keys. A file that does not read is passed over (one the table lists is then
    the data files' check's to name)."""
    data = delta.dataset(cache.folder)
    listed = {frag.path: frag for frag in data.get_fragments()}
    unlisted = sorted(cache.stored_files() - set(listed))
    keys = [k for k in (_keys(cache.folder, path) for path in unlisted) if k is not None]
    if not keys:
        return 0, []
    keys = pa.concat_arrays(keys)
    held = [k for k in (_keys(cache.folder, path, frag) for path, frag in listed.items()) if k is not None]
    lost = keys.filter(pc.invert(pc.is_in(keys, value_set=pa.concat_arrays([pa.array([], pa.string()), *held]))))
    return len(lost), sorted(set(lost.to_pylist()))


def _keys(folder: Location, path: str, fragment=None) -> pa.Array | None:
    """The ``key`` column of one data file (of the table's ``fragment``, or read as a file); None if it does not
    read."""
    try:
        if fragment is not None:
            table = folder._retrying("read a data file", lambda: fragment.to_table(columns=["key"]))
        else:
            table = folder.join(path).read_columns(["key"])
    except (CorruptFile, OSError, pa.ArrowInvalid, KeyError) as exc:  # KeyError: a file without keys
        if isinstance(exc, StorageUnavailable):
            raise
        return None
    return table.column("key").combine_chunks().cast(pa.string())
