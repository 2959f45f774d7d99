"""One engine in one Ray actor, for the life of its pool; calls that share the engine and calls that run
alone in it."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import pyarrow as pa

log = logging.getLogger(__name__)


class Gate:
    """Calls that share the engine, and calls that run alone in it (a writer-preferring lock).

    ``enter(alone=False)`` waits while a call runs alone or waits to; ``enter(alone=True)``
    waits until no call runs, and holds every other call back until it leaves.
    ``most`` is the most calls that ran at once.
    """

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.running, self.alone_waiting, self.alone_running, self.most = 0, 0, False, 0

    def enter(self, alone: bool) -> None:
        with self.cond:
            if alone:
                self.alone_waiting += 1
                self.cond.wait_for(lambda: self.running == 0 and not self.alone_running)
                self.alone_waiting -= 1
                self.alone_running = True
            else:
                self.cond.wait_for(lambda: not self.alone_running and self.alone_waiting == 0)
            self.running += 1
            self.most = max(self.most, self.running)

    def leave(self, alone: bool) -> None:
        with self.cond:
            self.running -= 1
            self.alone_running = self.alone_running and not alone
            self.cond.notify_all()


class Runner(Protocol):
    """What a pool's or a replica's factory builds (pairank.operators.judges.modes.ModeRunner): one engine."""

    def run(self, stage: str, batch: pa.Table) -> pa.Table:
        """The result rows of one stage's batch."""
        ...

    def info(self) -> dict:
        """The engine's counters."""
        ...


class JudgeActor:
    """One engine in one Ray actor, for the life of the pool; it runs every stage it is sent.

    With ``max_concurrency`` k the actor runs up to k calls at once, each on its own
    thread; a call sent ``alone`` waits for the others to finish and runs by itself
    (:class:`Gate`). The monitor hears of a call when it enters the engine, not while it waits.

    An exception that escapes ``runner.run`` means the engine is unusable (the runner
    turns ordinary failures into rows): the actor then ends its process, so that Ray
    restarts it with a fresh engine and the batches it held are sent again.
    """

    def __init__(self, factory: Callable[[], Runner], slot: int = 0, monitor=None):
        import ray

        self.slot, self.monitor = slot, monitor
        if monitor is not None:
            ray.get(monitor.arrived.remote(slot, os.getpid()))  # before anything runs on this engine
        started = time.perf_counter()
        self.runner = factory()
        self.gate = Gate()
        self.stats: dict[str, Any] = {
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),  # the Ray node it ran on (the report's pool section)
            "start_seconds": time.perf_counter() - started,
            "batches": 0,
            "rows": 0,
        }

    def judge_batch(
        self, batch: pa.Table, stage: str = "pairwise", call: str | None = None, alone: bool = False
    ) -> pa.Table:
        import ray

        self.gate.enter(alone)
        try:
            if self.monitor is not None and call is not None:
                ray.get(self.monitor.started.remote(self.slot, call))
            try:
                out = self.runner.run(stage, batch)
            except BaseException as exc:
                log.error(
                    "judge actor %s: the engine failed (%s: %s); ending the process for a restart",
                    self.slot,
                    type(exc).__name__,
                    exc,
                )
                os._exit(70)
            if self.monitor is not None and call is not None:
                ray.get(self.monitor.finished.remote(self.slot, call))
            self.stats["batches"] += 1
            self.stats["rows"] += batch.num_rows
        finally:
            self.gate.leave(alone)
        return out

    def info(self) -> dict:
        """pid, Ray node id, engine start seconds, batches and rows so far, the most batches in flight at once, and
        engine prompts per stage (``calls``)."""
        return {**self.stats, "most_in_flight": self.gate.most, **self.runner.info()}
