"""One engine in one Ray actor, for the life of its pool; calls that share the engine and calls that run
alone in it."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Protocol

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


def where_am_i() -> dict:
    """Where this actor runs: ``node_id`` (Ray's id of its node) and ``gpu_ids`` (the GPUs Ray gave it; the same id
    for actors sharing a GPU). An actor in a placement group of several GPU bundles (a parallel engine's) holds no
    GPU itself: ``group`` then gives each bundle's ``node_id`` and ``gpu_ids``, found by a task that reserves the
    bundle's GPUs, run in it before the engine starts."""
    import ray
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    place: dict = {
        "node_id": ray.get_runtime_context().get_node_id(),
        "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
    }
    group = ray.util.get_current_placement_group()
    if group is not None:
        probe = ray.remote(num_cpus=0)(_bundle_place)
        probes = [
            probe.options(
                num_gpus=spec.get("GPU", 0),
                scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i),
            ).remote()
            for i, spec in enumerate(group.bundle_specs)
        ]
        place["group"] = ray.get(probes)
    return place


def _bundle_place() -> dict:
    import ray

    return {"node_id": ray.get_runtime_context().get_node_id(), "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}


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
        self.place = where_am_i()  # before the engine starts (a parallel engine's workers take its group's GPUs)
        started = time.perf_counter()
        self.runner = factory()
        self.gate = Gate()
        self.stats = {"pid": os.getpid(), "start_seconds": time.perf_counter() - started, "batches": 0, "rows": 0}

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
        """pid, engine start seconds, batches and rows so far, the most batches in flight at once, where it runs
        (:func:`where_am_i`), and engine prompts per stage (``calls``)."""
        return {**self.stats, "most_in_flight": self.gate.most, **self.place, **self.runner.info()}
