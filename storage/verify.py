"""``pairank store verify``: find the data files of a storage root's tables that cannot be read, and move them aside.

A data file of the judgment table (``tables/judgments``) or of the first-pass
table (``tables/passes``) that is truncated, empty, not Parquet or of another
schema stops every run and leaderboard that reads it, with a message naming it.
This check reads every file of both tables' newest versions and lists the bad
ones; with ``quarantine`` it moves each to ``<root>/quarantine/<store>/<path>``,
where no reader looks, and commits a version without them (Delta's repair: the
log forgets files that are gone). Nothing is deleted: what a moved file held is
simply not in the store any more, so the next run asks those comparisons again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pairank.storage import delta
from pairank.storage.fs import CorruptFile, Location
from pairank.storage.maintenance import STORES, store
from pairank.storage.validation import TableError


@dataclass(frozen=True)
class BadPart:
    uri: str
    reason: str
    moved_to: str | None = None


@dataclass(frozen=True)
class Verified:
    parts: int
    bad: list[BadPart]

    @property
    def left(self) -> list[BadPart]:
        """Bad files still in their table."""
        return [b for b in self.bad if b.moved_to is None]


def quarantine_folder(root: Location, name: str) -> Location:
    return root.join("quarantine", name)


def verify_store(root: str | Location, quarantine: bool = False) -> Verified:
    """Read every data file of the root's tables; list the unreadable ones and, with ``quarantine``, move them aside."""
    root = root if isinstance(root, Location) else Location.of(root)
    checked, bad = 0, []
    for name in STORES:
        cache = store(root, name)
        moved_any = False
        for path in cache.files():
            checked += 1
            uri = cache.folder.join(path).uri
            try:
                cache.read_files([path])
                continue
            except CorruptFile as exc:
                reason = f"not a readable Parquet file ({exc.reason})"
            except TableError as exc:
                reason = str(exc).removeprefix(f"{cache.folder.uri}: ")
            moved = None
            if quarantine:
                target = quarantine_folder(root, name).join(path)
                cache.folder.join(path).move_to(target)
                moved, moved_any = target.uri, True
            bad.append(BadPart(uri, reason, moved))
        if moved_any:
            table = delta.open_table(cache.folder)
            cache.folder._retrying(
                "commit the table without the moved files", lambda table=table: table.repair(dry_run=False)
            )
    return Verified(checked, bad)
