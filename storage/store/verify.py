"""``pairank store verify``: find what of a storage root's tables cannot be read, and repair it.

A data file of the judgment table (``tables/judgments``) or of the first-pass table (``tables/passes``) that is
truncated, empty, not Parquet, of another schema or gone, and a commit of a table's ``_delta_log`` that does not
read, stop every run and leaderboard that reads the table, with a message naming the file. This check reads each
table's log (the commits after its newest checkpoint) and every data file of its newest version, and lists what
is bad. With ``quarantine`` it repairs the table (:mod:`pairank.storage.store.repair`):

- a bad commit and the log's files after it move to ``<root>/quarantine/<store>/_delta_log/<time>/``; the table
  is restored as of the version before it, with the readable commits after it committed again;
- a data file that does not read moves to ``<root>/quarantine/<store>/<path>``, where no reader looks;
- a data file that is gone is dropped;

and a version without those files is committed (Delta's repair: the log forgets files that are gone). Nothing is
deleted: what the table no longer holds is counted, and the next run asks those comparisons again.
"""

from __future__ import annotations

from dataclasses import dataclass

from pairank.storage.errors import CorruptFile
from pairank.storage.fs import Location
from pairank.storage.store.damage import LOG, CorruptLog, MissingFile, damaged_commit
from pairank.storage.store.maintenance import STORES, store
from pairank.storage.store.repair import (
    Listed,
    Plan,
    Restored,
    Step,
    drop_gone,
    listed_files,
    no_step,
    quarantine_folder,
    restore,
)
from pairank.storage.validation import TableError


@dataclass(frozen=True)
class BadPart:
    """A data file of a table's newest version that does not read, or is gone."""

    uri: str
    reason: str
    moved_to: str | None = None  # where ``quarantine`` moved it
    dropped: bool = False  # a file that is gone, which ``quarantine`` dropped from the table
    listed: Listed | None = None  # what the log says of it (for a file that is gone: the rows lost)

    @property
    def repaired(self) -> bool:
        return self.moved_to is not None or self.dropped


@dataclass(frozen=True)
class BadCommit:
    """A commit of a table's log that does not read (its data files were then not read), or the repair of one that
    was stopped part-way (``interrupted``: its plan is in the quarantine folder)."""

    store: str
    error: CorruptLog
    restored: Restored | None = None  # what ``quarantine`` did
    interrupted: bool = False

    @property
    def repaired(self) -> bool:
        return self.restored is not None


@dataclass(frozen=True)
class Verified:
    parts: int
    bad: list[BadPart]
    commits: list[BadCommit]

    @property
    def left(self) -> list[BadPart | BadCommit]:
        """What is still bad in the tables."""
        found: list[BadPart | BadCommit] = [*self.commits, *self.bad]
        return [b for b in found if not b.repaired]


def verify_store(root: str | Location, quarantine: bool = False, on_step: Step = no_step) -> Verified:
    """Check the root's tables' logs and read every data file; list what is bad and, with ``quarantine``,
    repair it (see the module docstring). A repair that was stopped part-way is finished first, from its plan.
    ``on_step`` hears each step of a repair as it is done (:mod:`pairank.storage.store.repair`)."""
    root = root if isinstance(root, Location) else Location.of(root)
    if not root.is_dir():
        raise FileNotFoundError(f"--root {root.uri}: no such folder; expected a storage root (local or s3://)")
    checked, bad, commits = 0, [], []
    for name in STORES:
        cache = store(root, name)
        aside = quarantine_folder(root, name).join(LOG)
        pending = Plan.read(aside)
        if pending is not None:
            if not quarantine:  # the table is part-way through a repair: it holds less than it will
                commits.append(BadCommit(name, pending.error, interrupted=True))
                continue
            commits.append(BadCommit(name, pending.error, restore(cache, None, aside, on_step), interrupted=True))
        if not cache.exists():
            continue
        damaged = damaged_commit(cache.folder)
        if damaged is not None:
            if not quarantine:  # the table does not open past it: its data files cannot be listed
                commits.append(BadCommit(name, damaged))
                continue
            commits.append(BadCommit(name, damaged, restore(cache, damaged, aside, on_step)))
        listed = listed_files(cache)
        repair = False
        for path in cache.files():
            checked += 1
            loc = cache.folder.join(path)
            try:
                cache.read_files([path])
                continue
            except MissingFile:
                gone = "missing: the table lists it, the storage has no such file"
                bad.append(BadPart(loc.uri, gone, dropped=quarantine, listed=listed.get(path)))
                repair = repair or quarantine
                continue
            except CorruptFile as exc:
                reason = f"not a readable Parquet file ({exc.reason})"
            except TableError as exc:
                reason = str(exc).removeprefix(f"{loc.uri}: ")
            moved = None
            if quarantine:
                target = quarantine_folder(root, name).join(path)
                loc.move_to(target)  # stopped after this, the next repair finds the file gone and drops it
                on_step(f"moved {path}")
                moved, repair = target.uri, True
            bad.append(BadPart(loc.uri, reason, moved, listed=listed.get(path)))
        if repair:
            drop_gone(cache)
            on_step("dropped")
    return Verified(checked, bad, commits)
