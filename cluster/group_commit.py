"""Group commit: one store commit for every batch judged while the previous commit ran.

A judge replica of ``pairank serve`` hands each judged batch to :meth:`GroupCommit.submit`
and answers the batch's requests only once the future it gets back is done, so an
answer given is in the store. Commits run one at a time on their own thread (the
engine's thread goes on with the next batch meanwhile); the batches submitted while a
commit runs wait for the next one, which takes them all. Under a steady load the store
sees about one commit per commit's duration, however many requests come; an idle
server commits each batch at once.

Free of Ray (the replica in :mod:`pairank.cluster.deployments` carries it), so it is
tested on a plain event loop.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")


class NotStored(RuntimeError):
    """A judged batch whose commit failed: its requests must not be answered as judged."""


class GroupCommit(Generic[T]):
    """``commit(items) -> counters`` for every group of items submitted while the previous commit ran.

    ``counters`` (a dict) is what the store side wants shown in the replica's ``info()``; the last one
    returned is kept in :attr:`store`. Counted here: ``commits``, ``batches_committed`` and
    ``failed_commits``.

    >>> async def demo():
    ...     calls = []
    ...     def commit(items):
    ...         calls.append(list(items))
    ...         return {"rows": sum(map(len, sum(calls, [])))}
    ...     group = GroupCommit(commit)
    ...     first = group.submit("a")      # starts a commit at once
    ...     await asyncio.sleep(0)
    ...     rest = [group.submit(x) for x in ("bc", "d")]   # submitted while it runs: one commit for both
    ...     await asyncio.gather(first, *rest)
    ...     return calls, dict(group.stats), group.store
    >>> asyncio.run(demo())
    ([['a'], ['bc', 'd']], {'commits': 2, 'batches_committed': 3}, {'rows': 4})
    """

    def __init__(self, commit: Callable[[list[T]], dict]):
        self._commit = commit
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pairank-commit")
        self._waiting: list[tuple[T, asyncio.Future]] = []
        self._running: asyncio.Task | None = None
        self.stats: Counter = Counter()
        self.store: dict = {}

    def submit(self, item: T) -> asyncio.Future:
        """A future that is done once ``item`` is committed (or fails with :class:`NotStored`)."""
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._waiting.append((item, done))
        if self._running is None or self._running.done():
            self._running = loop.create_task(self._drain())
        return done

    async def _drain(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            group, self._waiting = self._waiting, []
            try:
                counters = await loop.run_in_executor(self._thread, self._commit, [item for item, _ in group])
            except Exception as exc:
                self.stats["failed_commits"] += 1
                failure = NotStored(f"the judgments could not be stored: {type(exc).__name__}: {exc}")
                for _, done in group:
                    if not done.done():
                        done.set_exception(failure)
                continue
            self.stats["commits"] += 1
            self.stats["batches_committed"] += len(group)
            self.store = dict(counters or {})
            for _, done in group:
                if not done.done():
                    done.set_result(None)
