"""Where a nightly job keeps its state, and the commit log that makes each night visible at once.

::

    <output>/nightly/<name>/commits/000001.json        one record per committed night (the log)
    <output>/nightly/<name>/nights/<night>-<id>/       what one attempt at a night wrote, before its commit:
        input/candidates.parquet, input/human_scores.parquet     the union of the input prefix that night
        state.parquet                                            NIGHTLY_STATE: every context's placements
        leaderboard.parquet, leaderboard.json                    the night's leaderboard snapshot
        position_bias.parquet, spearman.parquet                  the night's panels

Concurrency protocol: **manifest commit with a conditional create**. The judgment
cache needs none (its parts are immutable and uniquely named, so concurrent
writers add parts and never overwrite one). A night writes everything under its
own attempt folder (a fresh id, so nothing another writer reads is touched), then
commits by creating ``commits/<parent + 1>.json`` with
:meth:`pairank.storage.fs.Location.create_exclusive` (S3 ``If-None-Match: *``; locally a
hard link). Of two writers that started from the same parent exactly one
creates that name; the other gets :class:`CommitConflict` and commits nothing
(its judgments are in the cache, so a re-run on top of the new head judges only
what is still missing). Readers take the highest commit: an attempt folder no
commit names is never read. The latest view under ``<output>/leaderboard/`` is
derived from the highest commit and rewritten by whoever finds it stale (see
:func:`pairank.jobs.nightly.publish`).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass

from pairank.storage.fs import Location

_COMMIT = re.compile(r"^(\d{6,})\.json$")


class CommitConflict(RuntimeError):
    """Another writer committed the night this one meant to commit on top of."""


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
    def commits(self) -> Location:
        return self.folder.join("commits")

    def commit_file(self, seq: int) -> Location:
        return self.commits.join(f"{seq:06d}.json")

    def new_attempt(self, night: str) -> str:
        """A fresh attempt folder name for ``night`` (relative to :attr:`folder`)."""
        return f"nights/{night}-{uuid.uuid4().hex[:8]}"

    def attempt(self, folder: str) -> Location:
        return self.folder.join(folder)


class CommitLog:
    """The ordered commits of one nightly job."""

    def __init__(self, layout: NightlyLayout) -> None:
        self.layout = layout

    def commits(self) -> list[Commit]:
        """Every commit, oldest first; a record that is not a commit of this log is an error naming it."""
        out = []
        for loc in self.layout.commits.files(suffix=".json"):
            m = _COMMIT.match(loc.path.rsplit("/", 1)[-1])
            if not m:
                continue
            try:
                record = loc.read_json()
            except json.JSONDecodeError as exc:
                raise ValueError(f"{loc.uri}: not a nightly commit record ({exc})") from None
            if not isinstance(record, dict) or record.get("seq") != int(m.group(1)) or "folder" not in record:
                raise ValueError(f"{loc.uri}: expected a commit record with seq {int(m.group(1))} and a folder")
            out.append(Commit(int(m.group(1)), record))
        return out

    def head(self) -> Commit | None:
        commits = self.commits()
        return commits[-1] if commits else None

    def commit(self, parent: int, record: dict) -> Commit:
        """Commit ``record`` as ``parent + 1``; :class:`CommitConflict` if another writer took that number."""
        seq = parent + 1
        record = {**record, "seq": seq, "parent": parent}
        loc = self.layout.commit_file(seq)
        data = (json.dumps(record, indent=2, sort_keys=True, default=str) + "\n").encode("utf-8")
        if not loc.create_exclusive(data):
            other = Commit(seq, loc.read_json())
            raise CommitConflict(
                f"{loc.uri}: another writer committed night {other.night!r} as commit {seq} while night "
                f"{record.get('night')!r} ran on top of commit {parent}; nothing of this night was committed. "
                "Its judgments are in the cache: run it again to insert what is still new on top of the new head."
            )
        return Commit(seq, record)
