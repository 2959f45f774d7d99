"""``pairank store``: the upkeep of a storage root's Delta tables (judgments, first passes).

- :func:`migrate` copies a store of the former part-folder format into the Delta
  tables, checks row counts and keys before and after, and leaves the old folder
  as it was; likewise each nightly job's former ``commits/*.json`` log into its
  Delta log.
- :func:`compact` rewrites a table's small files (one or more per flush) into
  few large ones, as one commit; readers see the same rows before and after.
- :func:`vacuum` deletes files that no version newer than the retention period
  needs (removed by compaction, or written by a commit that failed). Files of
  the newest version are never deleted; time travel reaches back as far as the
  retention period.
- :func:`history` lists the versions with what wrote each.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage import delta
from pairank.storage.commits import NightlyLayout, migrate_log
from pairank.storage.errors import StorageError, delta_said
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import JUDGMENTS, PASSES
from pairank.storage.store.cache import PARTITIONS, JudgmentCache, latest_per_key
from pairank.storage.store.damage import CorruptLog, damaged_commit
from pairank.storage.store.legacy import PartFolder

#: The stores of a root: name -> schema (the tables live at ``<root>/tables/<name>``).
STORES = {"judgments": JUDGMENTS, "passes": PASSES}
#: Default retention of ``vacuum`` (Delta's own default: a week).
RETENTION_HOURS = 168


def store(root: Location, name: str) -> JudgmentCache:
    layout = RunLayout(root, "")
    return JudgmentCache(layout.judgments if name == "judgments" else layout.passes, STORES[name])


def _root(root: str | Location) -> Location:
    return root if isinstance(root, Location) else Location.of(root)


@dataclass(frozen=True)
class Migrated:
    store: str
    source: str
    target: str
    rows: int
    keys: int
    version: int | None


def migrate(root: str | Location, progress=print) -> list[Migrated]:
    """Copy ``<root>/judgments/`` and ``<root>/passes/`` (part folders) into the root's Delta tables.

    The target must not exist yet. After the copy, the table must hold every row of the
    parts (counted) and the same keys with the same merged rows; otherwise a ValueError says
    what differs. The part folders are not touched.
    """
    root = _root(root)
    out = []
    for name, schema in STORES.items():
        old = PartFolder(root.join(name), schema)
        parts = old.parts()
        if not parts:
            continue
        new = store(root, name)
        if new.exists():
            raise ValueError(
                f"{new.folder.uri}: a Delta table is already there (version {new.version()}); "
                f"migrate copies {old.folder.uri} only into a store that does not exist yet"
            )
        rows = old.rows()
        progress(f"{name}: {len(parts)} parts, {rows.num_rows} rows -> {new.folder.uri}")
        delta.ensure_table(new.folder, new.table_schema, PARTITIONS)  # the table exists: no former-store guard
        version = None
        for start in range(0, rows.num_rows, 500_000):
            version = new.append(rows.slice(start, 500_000))
        check_same(old.folder.uri, rows, new)
        out.append(
            Migrated(
                name, old.folder.uri, new.folder.uri, rows.num_rows, len(set(rows.column("key").to_pylist())), version
            )
        )
    for folder in root.join("nightly").folders():
        layout = NightlyLayout(root, folder.path.rsplit("/", 1)[-1])
        if layout.former_commits.files(suffix=".json") and not delta.is_table(layout.log):
            nights = migrate_log(layout)
            progress(f"nightly {layout.name}: {nights} commits -> {layout.log.uri}")
            out.append(
                Migrated(f"nightly/{layout.name}", layout.former_commits.uri, layout.log.uri, nights, nights, nights)
            )
    return out


def check_same(source: str, rows: pa.Table, new: JudgmentCache) -> None:
    """The table holds exactly ``rows`` (as many rows, the same keys, the same merged rows)."""
    copied = new.rows()
    if copied.num_rows != rows.num_rows:
        raise ValueError(f"{new.folder.uri}: {copied.num_rows} rows after the copy, {source} has {rows.num_rows}")
    merged_old, merged_new = (_sorted(latest_per_key(t)) for t in (rows, copied))
    if merged_old.column("key").to_pylist() != merged_new.column("key").to_pylist():
        raise ValueError(f"{new.folder.uri}: the keys differ from {source}'s after the copy")
    if not merged_old.equals(merged_new):
        raise ValueError(f"{new.folder.uri}: the merged rows differ from {source}'s after the copy")


def _sorted(table: pa.Table) -> pa.Table:
    return table.take(pc.sort_indices(table, sort_keys=[("key", "ascending")]))


def _tables(root: str | Location):
    """``(name, cache, DeltaTable)`` of each store of the root that has a table."""
    for name in STORES:
        cache = store(_root(root), name)
        if cache.exists():
            yield name, cache, delta.open_table(cache.folder)


def compact(root: str | Location, target_mb: int = 128) -> dict[str, dict]:
    """Merge each table's small files into files of about ``target_mb``; one commit a table. Metrics by store."""
    return {name: compact_table(cache, target_mb, table) for name, cache, table in _tables(root)}


def compact_table(cache: JudgmentCache, target_mb: int = 128, table=None) -> dict:
    """Merge one store's small files into files of about ``target_mb`` (one commit; none when nothing is
    small): files removed and added, and the version after. ``table``: the store's open DeltaTable, if at hand.

    Appends may commit meanwhile (a compaction rewrites only files that exist when it starts, and Delta lets
    blind appends and a compaction commit side by side).
    """
    table = delta.open_table(cache.folder) if table is None else table
    metrics = cache.folder._retrying(
        "compact the Delta table", lambda: table.optimize.compact(target_size=target_mb * 2**20)
    )
    return {
        "files_removed": metrics.get("numFilesRemoved", 0),
        "files_added": metrics.get("numFilesAdded", 0),
        "version": table.version(),
    }


def vacuum(root: str | Location, retention_hours: int = RETENTION_HOURS, dry_run: bool = False) -> dict[str, list]:
    """Delete the files no version of the last ``retention_hours`` needs; by store, the files (to be) deleted."""
    if retention_hours < 0:
        raise ValueError(f"vacuum: retention of {retention_hours} hours: expected 0 or more")
    out = {}
    for name, cache, table in _tables(root):
        out[name] = cache.folder._retrying(
            "vacuum the Delta table",
            lambda table=table: table.vacuum(
                retention_hours=retention_hours, dry_run=dry_run, enforce_retention_duration=False
            ),
        )
    return out


def history(root: str | Location, name: str = "judgments", limit: int | None = None) -> list[dict]:
    """The versions of one store, newest first: when, what operation, who wrote it, how many rows it added."""
    cache = store(_root(root), name)
    if not cache.exists():
        return []
    table = delta.open_table(cache.folder)
    try:
        versions = table.history(limit)
    except Exception as exc:  # delta-rs reads every commit the history reaches, older checkpoints or not
        bad = damaged_commit(cache.folder, history=True)
        if bad is None:
            raise StorageError(cache.folder.uri, "read its history", RuntimeError(delta_said(exc))) from exc
        raise CorruptLog(
            bad.uri,
            bad.version,
            bad.newest,
            bad.reason,
            "the table reads (from a checkpoint after it), but its history does not reach past it: "
            f"`--limit {bad.newest - bad.version}` lists the versions after it",
        ) from exc
    out = []
    for h in versions:
        metrics = h.get("operationMetrics") or {}
        out.append(
            {
                "version": h.get("version"),
                "time": dt.datetime.fromtimestamp(h["timestamp"] / 1000, dt.UTC).isoformat(timespec="seconds"),
                "operation": h.get("operation"),
                "writer": h.get("pairank.writer", ""),
                "job": h.get("pairank.job", ""),
                "rows_added": metrics.get("num_added_rows"),
                "files_added": metrics.get("num_added_files", metrics.get("numFilesAdded")),
                "files_removed": metrics.get("num_removed_files", metrics.get("numFilesRemoved")),
            }
        )
    return out
