"""Where a nightly job keeps its state, and the commit log that makes each night visible at once.

::

    <output>/nightly/<name>/log/                       the commit log: a Delta table, one row per committed night
    <output>/nightly/<name>/history/, state/            every committed night's leaderboard rows and placements
                                                       (Delta tables derived from the log by the publisher:
                                                       NightlyTable)
    <output>/nightly/<name>/nights/<night>-<id>/       what one attempt at a night wrote, before its commit:
        input/candidates.parquet, input/human_scores.parquet     the union of the input prefix that night
        state.parquet                                            NIGHTLY_STATE: every context's placements
        leaderboard.parquet, leaderboard.json                    the night's leaderboard snapshot
        position_bias.parquet, spearman.parquet                  the night's panels

Concurrency protocol: **one night is one Delta commit.** The judgment table needs
none beyond Delta's own (blind appends never conflict). A night writes everything
under its own attempt folder (a fresh id, so nothing another writer reads is
touched), then commits one row to the log, from the snapshot of the log it started
from, as Delta's *application transaction* ``pairank-nightly:<name>`` at version
``seq``. Of two writers that started from the same head, both commit that
transaction's next version, and Delta lets only the first through: the other gets
Delta's concurrent-transaction conflict, raised here as :class:`CommitConflict`
(exit 4), and commits nothing (its judgments are in the cache, so a re-run on top
of the new head judges only what is still missing). Readers take the highest
``seq`` of the log: an attempt folder no row names is never read. The log's Delta
versions are its history (``pairank store history``), and a past night's
leaderboard is rebuilt from the attempt folder its row names (``pairank leaderboard
--nightly NAME --as-of NIGHT``). The latest view under ``<output>/leaderboard/`` is
derived from the highest commit and rewritten by whoever finds it stale (see
:func:`pairank.jobs.nightly.publish`).

Logs written before the Delta log were ``commits/<seq>.json`` records made with a
conditional create; ``pairank store migrate`` copies them into the log.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.dataset as pads

from pairank.storage import delta
from pairank.storage.fs import Location

if TYPE_CHECKING:
    from deltalake import DeltaTable

#: One row per committed night; ``record`` holds the whole commit record as JSON.
LOG = pa.schema(
    [
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("parent", pa.int64(), nullable=False),
        pa.field("night", pa.string(), nullable=False),
        pa.field("folder", pa.string(), nullable=False),
        pa.field("committed_at", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("record", pa.string(), nullable=False),
    ]
)


class CommitConflict(RuntimeError):
    """Another writer committed the night this one meant to commit on top of."""


class FormerLog(ValueError):
    """A nightly job whose log is still in the former format (``commits/*.json``)."""


@dataclass(frozen=True)
class Commit:
    """One committed night: its record as written."""

    seq: int
    record: dict

    @property
    def night(self) -> str:
        return self.record["night"]

    @property
    def folder(self) -> str:
        """The attempt folder (relative to the nightly folder) holding the night's tables."""
        return self.record["folder"]


@dataclass(frozen=True)
class NightlyLayout:
    root: Location
    name: str

    @property
    def folder(self) -> Location:
        return self.root.join("nightly", self.name)

    @property
    def log(self) -> Location:
        return self.folder.join("log")

    @property
    def former_commits(self) -> Location:
        """The log of the former format: ``commits/<seq>.json``."""
        return self.folder.join("commits")

    @property
    def app_id(self) -> str:
        """The Delta application transaction a night commits as."""
        return f"pairank-nightly:{self.name}"

    def new_attempt(self, night: str) -> str:
        """A fresh attempt folder name for ``night`` (relative to :attr:`folder`)."""
        return f"nights/{night}-{uuid.uuid4().hex[:8]}"

    def attempt(self, folder: str) -> Location:
        return self.folder.join(folder)


class CommitLog:
    """The ordered commits of one nightly job.

    :meth:`commits` remembers the snapshot of the log it read; :meth:`commit` commits from
    it, so any night committed since that read is a conflict.
    """

    def __init__(self, layout: NightlyLayout) -> None:
        self.layout = layout
        self._snapshot: DeltaTable | None = None

    def commits(self) -> list[Commit]:
        """Every commit, oldest first."""
        if not delta.is_table(self.layout.log):
            self._check_not_former()
            self._snapshot = None
            return []
        self._snapshot = delta.open_table(self.layout.log)
        return rows_to_commits(self.layout.log, self._snapshot.to_pyarrow_table())

    def head(self) -> Commit | None:
        commits = self.commits()
        return commits[-1] if commits else None

    def commit(self, parent: int, record: dict) -> Commit:
        """Commit ``record`` as ``parent + 1``; :class:`CommitConflict` if another writer took that number."""
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        seq = parent + 1
        record = {**record, "seq": seq, "parent": parent}
        if self._snapshot is None:
            self._check_not_former()
            delta.ensure_table(self.layout.log, LOG, [])
            self._snapshot = delta.open_table(self.layout.log)
        table = self._snapshot
        if (table.transaction_version(self.layout.app_id) or 0) != parent:
            raise self._conflict(seq, record)
        now = dt.datetime.now(dt.UTC)
        row = pa.Table.from_pylist(
            [
                {
                    "seq": seq,
                    "parent": parent,
                    "night": record["night"],
                    "folder": record["folder"],
                    "committed_at": now,
                    "record": json.dumps(record, sort_keys=True, default=str),
                }
            ],
            schema=LOG,
        )
        props = CommitProperties(
            app_transactions=[Transaction(self.layout.app_id, seq)],
            custom_metadata={"pairank.job": f"nightly:{self.layout.name}", "pairank.night": str(record["night"])},
        )
        for _ in range(20):
            try:
                self.layout.log._retrying(
                    "commit the night", lambda t=table: write_deltalake(t, row, mode="append", commit_properties=props)
                )
                break
            except CommitFailedError as exc:
                table = delta.open_table(self.layout.log)
                if (table.transaction_version(self.layout.app_id) or 0) != parent:
                    raise self._conflict(seq, record) from exc
                # no night was committed since: another change to the log's table (its creation); try again
        else:
            raise self._conflict(seq, record)
        self._snapshot = None
        return Commit(seq, record)

    def _conflict(self, seq: int, record: dict) -> CommitConflict:
        taken = {c.seq: c for c in CommitLog(self.layout).commits()}.get(seq)
        by = f"night {taken.night!r}" if taken else "another night"
        return CommitConflict(
            f"{self.layout.log.uri}: another writer committed {by} as commit {seq} while night "
            f"{record.get('night')!r} ran on top of commit {record['parent']}; nothing of this night was committed. "
            "Its judgments are in the cache: run it again to insert what is still new on top of the new head."
        )

    def _check_not_former(self) -> None:
        if self.layout.former_commits.files(suffix=".json"):
            raise FormerLog(
                f"{self.layout.former_commits.uri} holds nightly {self.layout.name!r}'s commits in the former format "
                f"and {self.layout.log.uri} has no Delta log yet: `pairank store migrate --root "
                f"{self.layout.root.uri}` copies them there (the records are left as they are)"
            )


def rows_to_commits(where: Location, table: pa.Table) -> list[Commit]:
    out = []
    for row in sorted(table.to_pylist(), key=lambda r: r["seq"]):
        try:
            record = json.loads(row["record"])
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where.uri}: commit {row['seq']} is not a nightly commit record ({exc})") from None
        out.append(Commit(row["seq"], record))
    return out


def migrate_log(layout: NightlyLayout) -> int:
    """Copy a former ``commits/<seq>.json`` log into the Delta log (one commit per night, in order); returns how
    many. The records are checked (consecutive seq, each with a folder) and left as they are."""
    records: list[dict] = []
    for loc in layout.former_commits.files(suffix=".json"):
        try:
            record = loc.read_json()
        except json.JSONDecodeError as exc:
            raise ValueError(f"{loc.uri}: not a nightly commit record ({exc})") from None
        if not isinstance(record, dict) or "folder" not in record or record.get("seq") != len(records) + 1:
            raise ValueError(f"{loc.uri}: expected a commit record with seq {len(records) + 1} and a folder")
        records.append(record)
    if not records:
        return 0
    if delta.is_table(layout.log):
        raise ValueError(
            f"{layout.log.uri}: a Delta log is already there; migrate copies "
            f"{layout.former_commits.uri} only into a log that does not exist yet"
        )
    delta.ensure_table(layout.log, LOG, [])
    log = CommitLog(layout)
    for record in records:
        log.commits()
        log.commit(record["seq"] - 1, {k: v for k, v in record.items() if k not in ("seq", "parent")})
    if [c.record for c in log.commits()] != records:
        raise ValueError(f"{layout.log.uri}: the copied commits differ from {layout.former_commits.uri}'s")
    return len(records)


class NightlyTable:
    """Every committed night's rows of one snapshot (``history``: the leaderboard; ``state``: the placements), as
    a Delta table ``<nightly>/<table>`` other tools can query.

    It is derived from the log: whoever publishes the latest view first appends the
    snapshot of each commit not yet in it, one Delta commit per night as the
    application transaction ``pairank-<table>:<name>`` at version ``seq``, so two
    publishers cannot add one night twice. Columns: the snapshot's schema, the committed
    night (``night_column``) and ``seq``; columns added to the snapshot's schema later are
    merged into the table's schema by the next append (older nights read null there). The
    nights are appended without the fields' descriptions (the table keeps those it was made
    with; :meth:`read` gives the schema's own), so a description reworded later does not
    stop the appends (delta-rs refuses to merge two values of one field's metadata key).
    """

    def __init__(
        self,
        layout: NightlyLayout,
        table: str,
        schema: pa.Schema,
        night_column: str = "night",
        order: tuple[str, ...] = ("aspect", "rank", "system"),
    ):
        self.layout, self.table, self.night_column, self.order = layout, table, night_column, order
        self.schema = schema.append(pa.field(night_column, pa.string(), nullable=False)).append(
            pa.field("seq", pa.int64(), nullable=False)
        )

    @property
    def folder(self) -> Location:
        return self.layout.folder.join(self.table)

    @property
    def _appended(self) -> pa.Schema:
        """The schema of the rows appended: the table's, without the fields' metadata (see the class docstring)."""
        return pa.schema([f.remove_metadata() for f in self.schema])

    @property
    def app_id(self) -> str:
        return f"pairank-{self.table}:{self.layout.name}"

    def catch_up(self, commits: list[Commit], snapshot) -> int:
        """Append the nights of ``commits`` the table lacks; ``snapshot(commit)`` gives a night's rows.
        Returns how many nights were appended here."""
        from deltalake import CommitProperties, Transaction, write_deltalake
        from deltalake.exceptions import CommitFailedError

        delta.ensure_table(self.folder, self.schema, [])
        added = 0
        for commit in commits:
            rows = None
            for _ in range(20):  # until this night is in the table, by this publisher or another
                table = delta.open_table(self.folder)
                if (table.transaction_version(self.app_id) or 0) >= commit.seq:
                    break
                if rows is None:
                    rows = snapshot(commit)
                    rows = rows.append_column(
                        self.schema.field(self.night_column), pa.array([commit.night] * rows.num_rows, pa.string())
                    )
                    rows = rows.append_column(
                        self.schema.field("seq"), pa.array([commit.seq] * rows.num_rows, pa.int64())
                    )
                props = CommitProperties(app_transactions=[Transaction(self.app_id, commit.seq)])
                try:
                    self.folder._retrying(
                        "append a night to the history",
                        lambda t=table, r=rows, props=props: write_deltalake(
                            t, r.cast(self._appended), mode="append", schema_mode="merge", commit_properties=props
                        ),
                    )
                    added += 1
                    break
                except CommitFailedError:  # another publisher got there first (this night, or the table's creation)
                    continue
            else:
                raise CommitConflict(f"{self.folder.uri}: could not append night {commit.night!r} in 20 attempts")
        return added

    def read(self, upto: int) -> pa.Table:
        """The rows of the nights up to commit ``upto``, oldest night first."""
        data = delta.dataset(self.folder)
        table = self.folder._retrying(f"read the {self.table}", lambda: data.to_table(filter=pads.field("seq") <= upto))
        for f in self.schema:  # columns added to the snapshot's schema after this table was made (schema_mode merge)
            if f.name not in table.column_names:
                table = table.append_column(f, pa.nulls(table.num_rows, f.type))
        table = table.select(self.schema.names).cast(self.schema)
        return table.sort_by([("seq", "ascending")] + [(c, "ascending") for c in self.order])
