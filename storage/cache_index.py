"""The answered rows of a judgment cache by key, kept current by reading only new parts.

A long-lived reader (the online compare endpoint) cannot read the whole cache for
every lookup. The data files of a Delta table are never rewritten (a compaction
writes new files with the same rows), so a reader that remembers which files it
has read stays exact by reading only the files of the newest version it has not
read: one look at the log per refresh, and each file read once.

The rows it answers with are those :meth:`pairank.storage.cache.JudgmentCache.answered`
gives: a key with a verdict maps to its newest verdict; error rows are not
answers (they are asked again).
"""

from __future__ import annotations

import threading

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage.cache import JudgmentCache


class CacheIndex:
    """``key -> newest answered row`` of one :class:`JudgmentCache`; see the module docstring.

    Rows are kept as Arrow tables (one per part read) plus a row number per key,
    so a large cache costs little more than its keys in memory.
    """

    def __init__(self, cache: JudgmentCache):
        self.cache = cache
        self._seen: set[str] = set()
        self._tables: list[pa.Table] = []
        self._where: dict[str, tuple[int, int, object]] = {}  # key -> (table, row, created_at)
        self._lock = threading.Lock()

    def refresh(self) -> int:
        """Read the data files not read before; returns how many there were."""
        with self._lock:
            new = [path for path in self.cache.files() if path not in self._seen]
            if new:
                self.add(self.cache.read_files(new))
                self._seen.update(new)
            return len(new)

    def add(self, table: pa.Table) -> None:
        """Index the answered rows of ``table`` (files read, or rows this process appended itself)."""
        table = table.filter(pc.is_null(table.column("error")))
        if table.num_rows == 0:
            return
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
