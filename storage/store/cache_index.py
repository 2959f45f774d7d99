"""The answered rows of a judgment cache by key, kept current by following the table's log.

A long-lived reader (the online compare endpoint) cannot read the whole cache for
every lookup. It reads the table once, then follows its log: each version after the
one it is current with is one small JSON entry (``_delta_log/<version>.json``) naming
the data files it added and removed. A refresh reads that entry for each new version,
then only the files appended since (rows that may be new). A compaction (``OPTIMIZE``:
the same rows rewritten into fewer files) whose removed files were all read already
adds nothing to read: its new files are marked known unread, so a server that compacts
the table it writes does not read it all again. When the entries it needs are gone
(the log's older entries are removed after a checkpoint, 30 days by default) it
compares the newest version's files with the files it knows instead.

A refresh with nothing new costs one look-up of the next entry and one of
``_last_checkpoint``.

The rows it answers with are those :meth:`pairank.storage.store.cache.JudgmentCache.answered`
gives: a key with a verdict maps to its newest verdict; error rows are not
answers (they are asked again). A row whose key is already indexed with a row as new
is not kept twice.
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage import delta
from pairank.storage.errors import CorruptFile
from pairank.storage.store.cache import JudgmentCache


class CacheIndex:
    """``key -> newest answered row`` of one :class:`JudgmentCache`; see the module docstring.

    Rows are kept as Arrow tables (one per refresh that read something) plus a row
    number per key, so a large cache costs little more than its keys in memory.
    """

    def __init__(self, cache: JudgmentCache):
        self.cache = cache
        #: The table version the index is current with (None: not read yet, or no table yet).
        self.version: int | None = None
        #: Refreshes and data files read so far, for tests and diagnostics.
        self.refreshes = self.files_read = 0
        self._known: set[str] = set()  # data files whose rows are indexed (read, or rewritten from read ones)
        self._tables: list[pa.Table] = []
        self._where: dict[str, tuple[int, int, object]] = {}  # key -> (table, row, created_at)
        self._lock = threading.Lock()

    def refresh(self) -> int:
        """Bring the index up to the table's newest version; returns how many data files it read."""
        with self._lock:
            self.refreshes += 1
            if self.version is None:
                return self._resync()
            version, pending = self.version, set[str]()
            while (commit := delta.commit_at(self.cache.folder, version + 1)) is not None:
                self._follow(commit, pending)
                version += 1
            if version == self.version:
                checkpoint = delta.last_checkpoint(self.cache.folder)
                return self._resync() if checkpoint is not None and checkpoint > version else 0
            try:
                self._read(pending, version)
            except (FileNotFoundError, CorruptFile):  # a file appended since was compacted and vacuumed meanwhile
                return self._resync()  # (a file that is really corrupt fails here again, named)
            self.version = version
            return len(pending)

    def _follow(self, commit: delta.Commit, pending: set[str]) -> None:
        """Note what one version did: files whose rows may be new go to ``pending``."""
        if not commit.data_change and commit.removed and self._known.issuperset(commit.removed):
            self._known.update(commit.added)  # the same rows, rewritten: nothing to read
            return
        pending.difference_update(commit.removed)  # removed unread: their rows are in what the version added
        pending.update(commit.added)

    def _resync(self) -> int:
        """Read the newest version's files that are not known (the first read, or when the log cannot be
        followed)."""
        version = self.cache.version()
        if version is None:  # no table yet
            return 0
        files = set(self.cache.files(version))
        new = files - self._known
        self._read(new, version)
        self._known |= files
        self.version = version
        return len(new)

    def _read(self, paths: set[str], version: int) -> None:
        if paths:
            self.add(self.cache.read_files(paths, version))
            self._known |= paths
            self.files_read += len(paths)

    def add(self, table: pa.Table) -> None:
        """Index the answered rows of ``table`` that are newer than what their keys have."""
        table = table.filter(pc.is_null(table.column("error")))
        keep = []
        for row, (key, created) in enumerate(
            zip(table.column("key").to_pylist(), table.column("created_at").to_pylist())
        ):
            old = self._where.get(key)
            if old is None or created > old[2]:
                keep.append(row)
        if not keep:
            return
        if len(keep) < table.num_rows:
            table = table.take(pa.array(keep, pa.int64()))
        t = len(self._tables)
        self._tables.append(table)
        for row, (key, created) in enumerate(
            zip(table.column("key").to_pylist(), table.column("created_at").to_pylist())
        ):
            old = self._where.get(key)
            if old is None or created > old[2]:
                self._where[key] = (t, row, created)

    def get(self, key: str) -> dict | None:
        """The newest answered row of ``key`` as a dict, or None."""
        found = self._where.get(key)
        if found is None:
            return None
        t, row, _ = found
        return self._tables[t].slice(row, 1).to_pylist()[0]

    def __contains__(self, key: str) -> bool:
        return key in self._where

    def __len__(self) -> int:
        return len(self._where)
