"""Judge pools kept warm between the jobs of one driver process.

An engine takes seconds to minutes to start (about 15 s and 14 CPU seconds for vLLM's CPU build), and a job
starts its pool's engines on entry and stops them on exit. A process that runs several jobs one after another (a
notebook, a script calling :func:`pairank.run` in a loop, the tests) pays a start per job. Inside
:func:`warm_pools`, a job whose pool equals one an earlier job of the scope started (the same key: the engine's
builder and settings as placed, and the pool's resources) runs on that pool's engines instead of starting its
own; each call names the job's judging settings, so jobs of several judging modes share one engine
(:class:`pairank.cluster.pools.judge_actor.JudgeActor`). What a job did is its own: the pool is renewed for it
(:meth:`pairank.cluster.pools.judge_pool.JudgePool.renew`). On leaving the scope every pool it kept is stopped.

Kept: pools of a fixed size (a range pool grows and shrinks with its job: it is stopped as before), whose actors
are all live and idle when their job ends; a job that failed stops its pool. A kept pool holds its CPUs and GPUs
until the scope ends, even if no later job can use it, except when a new pool needs them: then the idle kept pools
are stopped, longest idle first, until Ray's free resources hold the new pool (so a scope never waits for ever on
its own engines). Pools of an earlier Ray (one stopped and started again in the scope) are forgotten.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from pairank.cluster.bookkeeping import driver_job
from pairank.cluster.pools.judge_pool import JudgePool, PoolResources
from pairank.cluster.pools.scaling import room_for

log = logging.getLogger(__name__)

#: How long :meth:`WarmPools.make_room` waits for Ray's view of free resources to catch up before it stops a pool.
ROOM_SETTLE_SECONDS = 3.0


@dataclass
class KeptPool:
    """A pool the scope keeps: what it runs (``key``: compared with ``==``), in which Ray, and whether a job holds
    it now."""

    key: Any
    ray: str
    pool: JudgePool
    busy: bool = True
    since: float = field(default_factory=time.monotonic)  # when its last job ended


class WarmPools:
    """The pools of one :func:`warm_pools` scope (the driver's thread and any other: a pool is held by one job at
    a time)."""

    def __init__(self) -> None:
        self.kept: list[KeptPool] = []
        self.lock = threading.Lock()
        self.closed = False

    def take(self, key: Any) -> JudgePool | None:
        """An idle kept pool of ``key`` in this Ray, now held by the caller; None if there is none."""
        here = driver_job()
        with self.lock:
            self.kept = [k for k in self.kept if k.ray == here]  # an earlier Ray's actors are gone with it
            for k in self.kept:
                if not k.busy and k.key == key:
                    k.busy = True
                    return k.pool
        return None

    def make_room(self, resources: PoolResources) -> None:
        """Stop idle kept pools, longest idle first, until Ray's free resources hold a new pool of ``resources``
        (its ``min_size`` actors) and leave Ray Data a CPU: a pool, or a Ray Data task, that waited for the CPUs
        of engines the scope kept would wait for ever."""
        import ray

        # Ray's view of what is free lags what was given back: the last job's Ray Data tasks and a pool stopped a
        # moment ago show as free only after the raylets report (a CI run stopped a kept pool the next job had room
        # beside). Wait that moment out before stopping an engine that takes seconds to start again.
        deadline = time.monotonic() + ROOM_SETTLE_SECONDS
        while True:
            free = ray.available_resources()
            with self.lock:
                stop = pools_to_stop(self.kept, free, resources)
            if not stop or time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        with self.lock:
            for k in stop:
                if k in self.kept and not k.busy:
                    self.kept.remove(k)
                    log.info("warm pools: stopping an idle kept pool to make room for a new one")
                    k.pool.stop()

    def keep(self, key: Any, pool: JudgePool) -> None:
        """A pool started for a job of the scope, held by that job until :meth:`release`."""
        with self.lock:
            self.kept.append(KeptPool(key, driver_job(), pool))

    def release(self, pool: JudgePool, failed: bool = False) -> None:
        """The job that held ``pool`` is done: kept for the next job when it can serve one (``failed`` false,
        :meth:`~pairank.cluster.pools.judge_pool.JudgePool.reusable`, the scope still open), else stopped."""
        try:
            usable = not failed and not self.closed and pool.reusable()
        except Exception:  # its Ray is gone
            usable = False
        with self.lock:
            kept = next((k for k in self.kept if k.pool is pool), None)
            if kept is not None and usable and not self.closed:
                kept.busy, kept.since = False, time.monotonic()
                return
            if kept is not None:
                self.kept.remove(kept)
        pool.stop()

    def close(self) -> None:
        """Stop every pool kept in this Ray (a pool held by a job is stopped as that job ends)."""
        here = driver_job() if ray_is_up() else None
        with self.lock:
            self.closed = True
            idle = [k for k in self.kept if not k.busy]
            self.kept = [k for k in self.kept if k.busy]
        for k in idle:
            if k.ray == here:
                k.pool.stop()


def ray_is_up() -> bool:
    import ray

    return ray.is_initialized()


#: The open scope of this process (nested scopes share the outermost).
_scope: WarmPools | None = None
_scope_lock = threading.Lock()


def warm_scope() -> WarmPools | None:
    """The open :func:`warm_pools` scope of this process, if any."""
    return _scope


@contextmanager
def warm_pools() -> Iterator[WarmPools]:
    """Keep the judge pools of the jobs run inside warm between them (see the module's docstring)::

        with pairank.warm_pools():
            for spec in specs:
                pairank.run(spec)  # the first job starts the engine; the others reuse it

    A scope opened inside another is the same scope: the outermost stops the pools as it ends. Outside a scope,
    each job starts and stops its own pool.
    """
    global _scope
    with _scope_lock:
        outer = _scope
        scope = outer if outer is not None else WarmPools()
        _scope = scope
    if outer is not None:
        yield outer
        return
    try:
        yield scope
    finally:
        with _scope_lock:
            _scope = None
        scope.close()


def pools_to_stop(kept: list[KeptPool], free: dict, resources: PoolResources) -> list[KeptPool]:
    """The idle pools of ``kept`` to stop, longest idle first, so that ``free`` (Ray's free resources) plus what
    they hold has room for ``min_size`` actors of ``resources`` and leaves Ray Data its CPU; all the idle ones if
    even that is not enough (the new pool then waits for resources the scope does not hold)."""
    r = resources
    cpus, gpus = free.get("CPU", 0.0), free.get("GPU", 0.0)
    stop: list[KeptPool] = []
    for k in sorted((k for k in kept if not k.busy), key=lambda k: k.since):
        if room_for({"CPU": cpus, "GPU": gpus}, r.min_size * r.num_cpus, r.min_size * r.num_gpus, ranks=r.ranks):
            break
        held = k.pool.resources
        cpus += len(k.pool.actors) * held.num_cpus
        gpus += len(k.pool.actors) * held.num_gpus * held.ranks
        stop.append(k)
    return stop
