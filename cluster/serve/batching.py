"""Batches for a busy worker, and group commit: what a judge replica of ``pairank serve`` does with requests.

:class:`Batches` feeds one worker (the engine) one batch at a time: the items
submitted while it works on a batch form the next one (at most ``max_size``), so
the slower the worker, the larger its batches. A worker that was idle waits
``wait_s`` for more items to come with the first. (Ray Serve's ``serve.batch``
cuts a batch ``batch_wait_timeout_s`` after its first item and queues it behind the
busy worker, Ray 2.60: behind a slow engine, requests that come over a second make
a hundred small batches, judged one after another.)

:class:`GroupCommit` is the same for the store: every batch judged while the last
commit ran goes into the next commit, on a thread of its own, so the engine goes on
while a commit runs. The replica answers a batch's requests only once its commit is
done: an answer given is in the store. Under a steady load the store sees about one
commit per commit's duration, however many requests come; an idle server commits
each batch at once.

:class:`Forwarding` is the HTTP ingress's side: the requests of a few milliseconds
go to a judge replica in one call, many calls in flight.

Free of Ray (the deployments in :mod:`pairank.cluster.serve.deployments` carry them), so they
are tested on a plain event loop.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Batches(Generic[T, R]):
    """``await submit(item)``: the result of ``item`` from ``work(batch) -> results`` (one per item, in order).

    ``work`` runs one batch at a time; a batch is what was submitted while the last one ran (at
    most ``max_size``, oldest first), or, after an idle spell, what comes within ``wait_s`` of
    the first item. A batch whose ``work`` raises fails each of its items with that error.

    >>> async def demo():
    ...     sizes = []
    ...     async def work(items):
    ...         sizes.append(len(items))
    ...         await asyncio.sleep(0.05)  # a busy engine
    ...         return [x * 10 for x in items]
    ...     batches = Batches(work, max_size=4)
    ...     first = asyncio.ensure_future(batches.submit(0))
    ...     await asyncio.sleep(0.01)  # the first batch is being worked on: the next nine wait
    ...     rest = await asyncio.gather(*(batches.submit(i) for i in range(1, 10)))
    ...     return await first, rest, sizes
    >>> asyncio.run(demo())
    (0, [10, 20, 30, 40, 50, 60, 70, 80, 90], [1, 4, 4, 1])
    """

    def __init__(self, work: Callable[[list[T]], Awaitable[list[R]]], max_size: int | None = None, wait_s: float = 0):
        self.work, self.max_size, self.wait_s = work, max_size, wait_s
        self._waiting: list[tuple[T, asyncio.Future]] = []
        self._worker: asyncio.Task | None = None

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._waiting.append((item, done))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._run())
        return await done

    async def _run(self) -> None:
        if self.wait_s and (self.max_size is None or len(self._waiting) < self.max_size):
            await asyncio.sleep(self.wait_s)  # idle until now: let the ones that come together go together
        while self._waiting:
            size = len(self._waiting) if self.max_size is None else self.max_size
            batch, self._waiting = self._waiting[:size], self._waiting[size:]
            try:
                results = await self.work([item for item, _ in batch])
            except Exception as exc:
                for _, done in batch:
                    if not done.done():
                        done.set_exception(exc)
                continue
            for (_, done), result in zip(batch, results, strict=True):
                if not done.done():
                    done.set_result(result)


class Forwarding(Generic[T, R]):
    """``await submit(item)``: the result of ``item`` from ``send(items) -> results`` (one per item, in order),
    for the items submitted within ``wait_s`` of the first of them (at most ``max_size``); many sends in flight.

    What a ``send`` returns for an item may be an exception instance: it is that item's answer to
    raise. A ``send`` that raises fails each of its items with that error.

    >>> async def demo():
    ...     sent = []
    ...     async def send(items):
    ...         sent.append(list(items))
    ...         return [ValueError(x) if x < 0 else x * 10 for x in items]
    ...     forwarding = Forwarding(send, max_size=3, wait_s=0.01)
    ...     out = await asyncio.gather(*(forwarding.submit(x) for x in (1, 2, 3, 4, -5)), return_exceptions=True)
    ...     return sent, out
    >>> asyncio.run(demo())
    ([[1, 2, 3], [4, -5]], [10, 20, 30, 40, ValueError(-5)])
    """

    def __init__(self, send: Callable[[list[T]], Awaitable[list[R]]], max_size: int, wait_s: float):
        self.send, self.max_size, self.wait_s = send, max_size, wait_s
        self._open: list[tuple[T, asyncio.Future]] = []
        self._timer: asyncio.TimerHandle | None = None
        self._sending: set[asyncio.Task] = set()

    async def submit(self, item: T) -> R:
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        self._open.append((item, done))
        if len(self._open) >= self.max_size:
            self._flush()
        elif self._timer is None:
            self._timer = loop.call_later(self.wait_s, self._flush)
        result = await done
        if isinstance(result, Exception):
            raise result
        return result

    def _flush(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        group, self._open = self._open, []
        if group:
            task = asyncio.get_running_loop().create_task(self._send(group))
            self._sending.add(task)  # held until done (the loop keeps only weak references to tasks)
            task.add_done_callback(self._sending.discard)

    async def _send(self, group: list[tuple[T, asyncio.Future]]) -> None:
        try:
            results = await self.send([item for item, _ in group])
        except Exception as exc:
            for _, done in group:
                if not done.done():
                    done.set_exception(exc)
            return
        for (_, done), result in zip(group, results, strict=True):
            if not done.done():
                done.set_result(result)


class NotStored(RuntimeError):
    """A judged batch whose commit failed: its requests must not be answered as judged."""


class GroupCommit(Generic[T]):
    """``commit(items) -> counters`` for every group of items submitted while the previous commit ran.

    ``commit`` runs on a thread of its own. ``counters`` (a dict) is what the store side wants
    shown in the replica's ``info()``; the last one returned is kept in :attr:`store`. Counted
    here: ``commits``, ``batches_committed`` and ``failed_commits``.

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
        self._batches: Batches[T, None] = Batches(self._commit_group)
        self.stats: Counter = Counter()
        self.store: dict = {}

    def submit(self, item: T) -> asyncio.Future:
        """A future that is done once ``item`` is committed (or fails with :class:`NotStored`)."""
        return asyncio.ensure_future(self._submit(item))

    async def _submit(self, item: T) -> None:
        try:
            await self._batches.submit(item)
        except Exception as exc:
            raise NotStored(f"the judgments could not be stored: {type(exc).__name__}: {exc}") from exc

    async def _commit_group(self, items: list[T]) -> list[None]:
        loop = asyncio.get_running_loop()
        try:
            counters = await loop.run_in_executor(self._thread, self._commit, items)
        except Exception:
            self.stats["failed_commits"] += 1
            raise
        self.stats["commits"] += 1
        self.stats["batches_committed"] += len(items)
        self.store = dict(counters or {})
        return [None] * len(items)
