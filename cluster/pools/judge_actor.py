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
import pyarrow.compute as pc

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
    """What a pool's or a replica's factory builds (pairank.judges.modes.EngineModes): one engine, run
    in the mode a call names (``mode``: opaque here). A pool without a mode calls ``run(judging_pass, batch)`` and
    ``info()``, so a runner of one mode need not take one."""

    def run(self, judging_pass: str, batch: pa.Table, mode: Any = None) -> pa.Table:
        """The result rows of one judging pass's batch, in ``mode``."""
        ...

    def info(self, mode: Any = None) -> dict:
        """The counters of the engine in ``mode``: engine prompts per judging pass (``calls``)."""
        ...


class JudgeActor:
    """One engine in one Ray actor, for the life of the pool; it runs every judging pass it is sent, each in the
    mode its call names (the jobs of a warm pool may each have their own: :mod:`pairank.cluster.pools.warm`). Ray
    restarts a lost actor with the factory it was first given: the calls' modes still win.

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
        self.stats = {"pid": os.getpid(), "start_seconds": time.perf_counter() - started}
        self.counting = threading.Lock()
        # per mode (by its repr), engine prompts per judging pass, as told with the batches returned so far
        self.reported: dict[str, dict[str, int]] = {}

    def _run(self, judging_pass: str, batch: pa.Table, mode: Any = None) -> pa.Table:
        """The runner's rows of ``batch`` in ``mode``."""
        return self.runner.run(judging_pass, batch) if mode is None else self.runner.run(judging_pass, batch, mode)

    def counters(self, mode: Any = None) -> dict:
        """The runner's counters in ``mode`` (made ready on first use: an engine that cannot run it raises)."""
        return self.runner.info() if mode is None else self.runner.info(mode)

    def ready(self, mode: Any = None) -> None:
        """A new job on this engine (a warm pool's): its mode made ready (an engine that cannot run it raises here,
        not in a call), and the most batches in flight counted from 0 again."""
        self.counters(mode)
        with self.gate.cond:
            self.gate.most = 0

    def judge_batch(
        self,
        batch: pa.Table,
        judging_pass: str = "pairwise",
        call: str | None = None,
        alone: bool = False,
        mode: Any = None,
    ) -> tuple[pa.Table, dict]:
        """The result rows of ``batch`` in ``mode`` (None: the one the engine was built with), and what judging it
        cost (:func:`batch_cost`)."""
        import ray

        self.counters(mode)  # a mode the engine cannot run fails this call, not the engine
        self.gate.enter(alone)
        try:
            if self.monitor is not None and call is not None:
                ray.get(self.monitor.started.remote(self.slot, call))
            started = time.perf_counter()
            try:
                out = self._run(judging_pass, batch, mode)
            except BaseException as exc:
                log.error(
                    "judge actor %s: the engine failed (%s: %s); ending the process for a restart",
                    self.slot,
                    type(exc).__name__,
                    exc,
                )
                os._exit(70)
            seconds = time.perf_counter() - started
            if self.monitor is not None and call is not None:
                ray.get(self.monitor.finished.remote(self.slot, call))
            with self.counting:  # the mode's prompts counted since its last batch returned (several may run at once)
                calls = dict(self.counters(mode).get("calls", {}))
                told = self.reported.get(repr(mode), {})
                fresh = {k: n - told.get(k, 0) for k, n in calls.items() if n != told.get(k, 0)}
                self.reported[repr(mode)] = calls
        finally:
            self.gate.leave(alone)
        return out, batch_cost(judging_pass, out, fresh, seconds)

    def info(self) -> dict:
        """pid, engine start seconds (of this process: a restarted engine's), the most batches in flight at once,
        and where it runs (:func:`where_am_i`). What the engine judged is counted by the pool, not here: it would
        restart at 0 with the engine."""
        return {**self.stats, "most_in_flight": self.gate.most, **self.place}


def batch_cost(judging_pass: str, out: pa.Table, calls: dict[str, int], seconds: float) -> dict:
    """What one batch cost: its judging pass, rows, engine prompts per judging pass (``calls``), prompt and
    generated tokens (the rows' ``input_tokens`` and ``output_tokens``), and the engine's ``seconds``.

    >>> t = pa.table({"input_tokens": [10, 12], "output_tokens": [1, 1]})
    >>> cost = batch_cost("pairwise", t, {"pairwise": 2}, 0.5)
    >>> cost["judging_pass"], cost["rows"], cost["calls"]
    ('pairwise', 2, {'pairwise': 2})
    >>> cost["input_tokens"], cost["output_tokens"], cost["seconds"]
    (22, 2, 0.5)
    """
    tokens = {
        c: int(pc.sum(out.column(c)).as_py() or 0) if c in out.column_names else 0
        for c in ("input_tokens", "output_tokens")
    }
    return {"judging_pass": judging_pass, "rows": out.num_rows, "calls": calls, **tokens, "seconds": seconds}
