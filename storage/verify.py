"""``pairank store verify``: find the parts of a storage root's stores that cannot be read, and move them aside.

A part of the judgment store (``judgments/``) or of the first-pass store
(``passes/``) that is truncated, empty, not Parquet or of another schema stops
every run and leaderboard on the root, with a message naming it. This check
reads every part of both stores and lists the bad ones; with ``quarantine`` it
moves each to ``<root>/quarantine/<store>/<part name>``, where no reader looks.
Nothing is deleted: what a moved part held is simply not in the store any more,
so the next run asks those comparisons again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import CorruptFile, Location
from pairank.storage.schemas import JUDGMENTS, PASSES, TableError

#: The stores checked, by folder name under the root.
STORES = {"judgments": JUDGMENTS, "passes": PASSES}


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
        """Bad parts still in their store."""
        return [b for b in self.bad if b.moved_to is None]


def quarantine_folder(root: Location, store: str) -> Location:
    return root.join("quarantine", store)


def verify_store(root: str | Location, quarantine: bool = False) -> Verified:
    """Read every part of the root's stores; list the unreadable ones and, with ``quarantine``, move them aside."""
    root = root if isinstance(root, Location) else Location.of(root)
    checked, bad = 0, []
    for store, schema in STORES.items():
        cache = JudgmentCache(root.join(store), schema)
        for part in cache.parts():
            checked += 1
            try:
                cache.read_part(part)
                continue
            except CorruptFile as exc:
                reason = f"not a readable Parquet file ({exc.reason})"
            except TableError as exc:
                reason = str(exc).removeprefix(f"{part.uri}: ")
            moved = None
            if quarantine:
                target = quarantine_folder(root, store).join(part.uri.rsplit("/", 1)[-1])
                part.move_to(target)
                moved = target.uri
            bad.append(BadPart(part.uri, reason, moved))
    return Verified(checked, bad)
