"""The pool's forwarding: each row group sent to the actor its slot names, and a lost engine borne there
(:func:`forward`), from the driver's threads (:func:`forward_all`; see :mod:`pairank.cluster.pools.judge_pool`)."""

from __future__ import annotations

import queue
import threading
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

#: Column that tells a forwarder which actor judges a row (dropped before judging).
SLOT = "__judge_slot"


@dataclass
class _Call:
    """One row group on its way to an engine: which actor, how often its engine died under it."""

    rows: pa.Table
    slot: int
    deaths: int = 0
    single: bool = False  # a row sent alone after its batch used up its retries
    after: list = field(default_factory=list)  # the group's next single rows, sent once this one is done
    id: str = ""


def forward(
    batch: pa.Table,
    judging_pass: str,
    monitor,
    retries: int = 2,
    on_failure: Callable[[str, pa.Table, str], pa.Table] | None = None,
    mode: Any = None,
) -> pa.Table:
    """Send each row group of ``batch`` to the actor the monitor routes its slot to, in the job's ``mode`` (what
    the actor's engine runs: the job's judging settings), wait, concatenate.

    A lost engine is borne here: a call whose engine died while running it is sent
    again (Ray restarts the actor), ``retries`` times in all; then its rows go one by
    one, and a row whose engine died ``retries`` times under it is answered by
    ``on_failure(judging_pass, rows, reason)``. A call that only waited behind a dying call
    is sent again without counting. An actor that is dead for good (its restarts used
    up) leaves the pool and the live ones take its calls; with none left, the rows fail.

    What each batch returned cost (prompts, tokens, seconds) is told to the monitor as it comes back
    (:meth:`~pairank.cluster.pools.monitor.PoolMonitor.tally`).
    """
    import ray
    from ray.exceptions import ActorDiedError, RayActorError

    if SLOT not in batch.column_names:  # a stream's batch: each context to the actor its id hashes to
        batch = context_slots(batch, ray.get(monitor.slots.remote()) or [0])
    slots = batch.column(SLOT)
    out: list[pa.Table] = []
    waiting: dict[object, _Call] = {}

    def fail(call: _Call, reason: str) -> None:
        monitor.count.remote("rows_failed", call.rows.num_rows)
        if on_failure is None:
            raise RuntimeError(f"judge pool: {reason}")
        out.append(on_failure(judging_pass, call.rows, reason))
        done(call)

    def send(call: _Call) -> None:
        call.id = uuid.uuid4().hex
        routed = ray.get(monitor.route.remote(call.slot, call.id, call.deaths))
        if routed is None:
            fail(call, "every engine of the pool is dead (Ray's restarts are used up)")
            return
        call.slot, actor = routed
        alone = call.deaths > 0 or call.single  # a second death is then its own, not a neighbour's
        waiting[actor.judge_batch.remote(call.rows, judging_pass, call.id, alone, mode)] = call

    def done(call: _Call) -> None:
        if call.after:  # one single row at a time, so that a row that kills the engine takes no other with it
            nxt = call.after[0]
            nxt.after = call.after[1:]
            send(nxt)

    for slot in pc.unique(slots).to_pylist():
        send(_Call(batch.filter(pc.equal(slots, slot)).drop_columns([SLOT]), slot))
    while waiting:
        (ref,), _ = ray.wait(list(waiting), num_returns=1)
        call = waiting.pop(ref)
        try:
            rows, cost = ray.get(ref)
        except RayActorError as exc:
            running = ray.get(monitor.was_running.remote(call.slot, call.id))
            told = [monitor.forget.remote(call.slot, call.id)]
            if isinstance(exc, ActorDiedError):
                told.append(monitor.mark_dead.remote(call.slot))
            ray.get(told)  # done before the call is routed again (the monitor runs calls in the order they arrive)
            call.deaths += int(running)
            if call.deaths < retries:
                if running:
                    monitor.count.remote("batches_retried")
                send(call)
            elif call.single or call.rows.num_rows == 1:
                fail(
                    call,
                    f"the engine died {call.deaths} times while judging this comparison "
                    f"({type(exc).__name__}); it is asked again on the next run",
                )
            else:  # which rows kill the engine? send them one at a time
                monitor.count.remote("rows_split", call.rows.num_rows)
                rows = [_Call(call.rows.slice(i, 1), call.slot, single=True) for i in range(call.rows.num_rows)]
                rows[0].after = rows[1:] + call.after
                send(rows[0])
            continue
        ray.get(monitor.tally.remote(call.slot, cost))  # a batch lost with its engine is not counted
        out.append(rows)
        done(call)
    return pa.concat_tables(out)


def forward_all(batches: Iterable[pa.Table], at_once: int, **kwargs: Any) -> Iterator[pa.Table]:
    """:func:`forward` each of ``batches`` (with ``kwargs``), ``at_once`` of them at a time, each in a thread of
    this process (a forwarder only waits on actors); each result is yielded as soon as it is back, in the order
    they come back. The next batch is taken from ``batches`` only when a forwarder is free, so a stream behind it
    runs no further ahead than its own buffers.

    The threads are daemons: a driver that fails or is stopped mid-run does not wait for the calls in flight
    (they were not committed, and are asked again by the next run). Closing the iterator early sends no more."""
    results: queue.Queue[tuple[pa.Table | None, BaseException | None]] = queue.Queue()

    def run(batch: pa.Table) -> None:
        try:
            results.put((forward(batch, **kwargs), None))
        except BaseException as exc:  # told to the generator, which raises it in the driver
            results.put((None, exc))

    pending = iter(batches)
    running, more = 0, True
    while True:
        while more and running < max(1, at_once):
            batch = next(pending, None)
            if batch is None:
                more = False
            elif batch.num_rows:
                threading.Thread(target=run, args=(batch,), name="pairank-forward", daemon=True).start()
                running += 1
        if not running:
            return
        table, exc = results.get()
        running -= 1
        if exc is not None:
            raise exc
        assert table is not None
        yield table


def deal_blocks(n_rows: int, batch_size: int, size: int) -> list[tuple[int, int, int]]:
    """``(offset, length, actor)`` per block: contiguous runs of blocks per actor.

    >>> deal_blocks(10, 3, 2)
    [(0, 3, 0), (3, 3, 0), (6, 3, 1), (9, 1, 1)]
    >>> [a for _, _, a in deal_blocks(5, 1, 3)]
    [0, 0, 1, 1, 2]
    """
    offsets = list(range(0, n_rows, batch_size))
    n = len(offsets)
    return [(off, min(batch_size, n_rows - off), i * size // n) for i, off in enumerate(offsets)]


def context_slots(batch: pa.Table, slots: list[int]) -> pa.Table:
    """``batch`` with the actor of each row, one of ``slots``: a hash of its ``context_id`` (stable across
    processes), so all of a context's requests meet one engine's prefix cache.

    >>> t = context_slots(pa.table({"context_id": ["a", "b", "a"]}), [0, 1, 2, 3])
    >>> t.column(SLOT).to_pylist()
    [3, 1, 3]
    >>> context_slots(pa.table({"context_id": ["a", "d", "a"]}), [5, 7]).column(SLOT).to_pylist()  # live slots
    [7, 5, 7]
    """
    contexts = pc.unique(batch.column("context_id")).to_pylist()
    slot_of = {c: slots[zlib.crc32(c.encode("utf-8")) % len(slots)] for c in contexts}
    slots = [slot_of[c] for c in batch.column("context_id").to_pylist()]
    return batch.append_column(SLOT, pa.array(slots, pa.int64()))
