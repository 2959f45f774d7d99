"""Growing and shrinking a judge pool whose size is a range (``pool.size: min..max``).

The pool starts ``min`` actors, and a :class:`Scaler` thread of the driver looks at
it every ``interval`` seconds (the monitor's loads: calls running and waiting per actor):

- **Grow.** While every actor runs its ``batches_in_flight`` calls and more calls
  wait than the one each actor keeps queued, the pool has a backlog
  (:func:`backlog`). It then adds one actor when Ray's free resources hold one
  and leave :data:`~pairank.cluster.runtime.RAY_DATA_CPUS` CPUs to Ray Data, and
  one node the pool may use holds it whole (its CPUs and all its ranks' GPUs; not
  the head unless ``on_head``: :mod:`pairank.cluster.pools.placement`) (:func:`room_for`),
  so a pool grows onto GPU nodes as they join; otherwise asks Ray's autoscaler for room for ``max``
  actors (``ray.autoscaler.sdk.request_resources``; a Ray without an autoscaler
  stores the request and nothing reads it). One actor starts at a time, and it
  takes calls once its engine is up; calls then go to the least busy actor when
  theirs is full (:class:`~pairank.cluster.pools.monitor.PoolMonitor`).
- **Shrink.** An actor above ``min`` that held no call for ``idle_seconds``
  (between adaptive rounds, at the end of a stream) leaves the pool, so that no
  call is sent to it again, and is stopped: its CPUs/GPUs go back to the cluster.
  What it did stays in the pool's report.

Ray Data's own autoscaling actor pools (``ActorPoolStrategy(min_size, max_size)``)
are not used: their actors live for one dataset, so every round of an adaptive job
would start its engines again, and they cannot send all of a context's pairs to one
engine, nor bear a lost engine the way :func:`~pairank.cluster.pools.forwarding.forward` does.
The pool stays plain Ray actors, and its own facts decide when it grows.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from pairank.cluster.pools.placement import Node, engine_needs, free_nodes, room_on_a_node
from pairank.cluster.runtime import RAY_DATA_CPUS

if TYPE_CHECKING:
    from ray import ObjectRef

log = logging.getLogger(__name__)

#: A live actor's load: calls running in its engine, calls waiting, seconds it has had nothing to do (None while
#: it holds a call). :meth:`~pairank.cluster.pools.monitor.PoolMonitor.loads` gives one per actor.
Load = tuple[int, int, "float | None"]


def backlog(loads: dict[int, Load], in_flight: int) -> bool:
    """Every actor runs ``in_flight`` calls, and more calls wait than one per actor.

    >>> backlog({0: (1, 3, None)}, 1), backlog({0: (1, 1, None), 1: (1, 1, None)}, 1)
    (True, False)
    >>> backlog({0: (2, 4, None), 1: (1, 0, None)}, 2)  # actor 1 has room for another call
    False
    """
    waiting = sum(w for _, w, _ in loads.values())
    return bool(loads) and all(r >= in_flight for r, _, _ in loads.values()) and waiting > len(loads)


def idle_slots(loads: dict[int, Load], idle_seconds: float, keep: int) -> list[int]:
    """The actors to stop: those with nothing to do for ``idle_seconds``, longest idle first, leaving ``keep``.

    >>> loads = {0: (0, 0, 9.0), 1: (0, 0, 12.0), 2: (1, 0, None), 3: (0, 0, 1.0)}
    >>> idle_slots(loads, 5, keep=1), idle_slots(loads, 5, keep=3), idle_slots(loads, 5, keep=4)
    ([1, 0], [1], [])
    """
    idle_for = {s: t for s, (_, _, t) in loads.items() if t is not None and t >= idle_seconds}
    idle = sorted(idle_for, key=lambda s: -idle_for[s])
    return idle[: max(0, len(loads) - keep)]


def room_for(
    available: dict,
    num_cpus: float,
    num_gpus: float,
    spare_cpus: float = RAY_DATA_CPUS,
    nodes: list[Node] | None = None,
    ranks: int = 1,
) -> bool:
    """Do Ray's free resources (``ray.available_resources()``) hold one more actor and leave ``spare_cpus``? With
    ``nodes`` (the free resources of each node the pool may use), one of them must hold the actor's CPUs and all
    its ``ranks``' GPUs.

    >>> room_for({"CPU": 2.0}, 1, 0), room_for({"CPU": 1.0}, 1, 0), room_for({"CPU": 8.0, "GPU": 0.5}, 1, 1)
    (True, False, False)
    >>> split = [("a", False, {"CPU": 4.0, "GPU": 1.0}), ("b", False, {"CPU": 4.0, "GPU": 1.0})]
    >>> room_for({"CPU": 8.0, "GPU": 2.0}, 1, 1, nodes=split), room_for({"CPU": 8.0, "GPU": 2.0}, 1, 1, 1, split, 2)
    (True, False)
    """
    if available.get("CPU", 0) - num_cpus < spare_cpus or available.get("GPU", 0) < num_gpus * ranks:
        return False
    return nodes is None or room_on_a_node(nodes, engine_needs(num_cpus, num_gpus, ranks))


class Scaler(threading.Thread):
    """The driver's thread that grows and shrinks ``pool`` (a :class:`~pairank.cluster.pools.judge_pool.JudgePool`,
    through its ``launch``, ``joined``, ``drop`` and ``retire``) between ``resources.min_size`` and ``max_size``."""

    def __init__(self, pool, interval: float = 0.5):
        super().__init__(daemon=True, name="pairank-pool-scaler")
        self.pool, self.interval = pool, interval
        self.halt = threading.Event()
        self.starting: tuple[int, ObjectRef] | None = None  # the slot and info() ref of an actor starting its engine
        self.asked = False  # the autoscaler holds a request of this pool
        self.broken: str | None = None  # why the pool grows no more (a new engine failed to start)

    def run(self) -> None:
        while not self.halt.wait(self.interval):
            try:
                self.step()
            except Exception as exc:
                log.warning("judge pool: scaling failed (%s: %s); the pool keeps its size", type(exc).__name__, exc)

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=30)
        self.withdraw()

    def step(self) -> None:
        import ray

        pool, r = self.pool, self.pool.resources
        if self.starting is not None:
            self.settle()
        loads = ray.get(pool.monitor.loads.remote())
        if (
            self.starting is None
            and self.broken is None
            and len(loads) < r.max_size
            and backlog(loads, r.batches_in_flight)
        ):
            nodes = free_nodes(pool.placement.avoid)
            if room_for(ray.available_resources(), r.num_cpus, r.num_gpus, nodes=nodes, ranks=r.ranks):
                self.starting = pool.launch()
                log.info("judge pool: every actor busy, calls waiting (%s); starting one more actor", loads)
            elif not self.asked:
                self.ask(pool.placement.bundles() * r.max_size)
            return
        stopped = [slot for slot in idle_slots(loads, r.idle_seconds, r.min_size) if pool.retire(slot)]
        if stopped:
            self.withdraw()

    def settle(self) -> None:
        """The starting actor joins the pool once its engine is up, or is dropped if its engine failed to start
        (a start still under way, say waiting for a node, holds back more growth, not shrinking)."""
        import ray

        if self.starting is None:
            return
        slot, ready = self.starting
        if not ray.wait([ready], timeout=0)[0]:
            return
        self.starting = None
        try:
            ray.get(ready)
        except Exception as exc:
            self.broken = f"{type(exc).__name__}: {exc}".splitlines()[0]
            log.warning("judge pool: a new engine failed to start (%s); the pool grows no more", self.broken)
            self.pool.drop(slot)
            return
        self.pool.joined(slot)
        log.info("judge pool: the new actor of slot %s is up and takes calls", slot)

    def ask(self, bundles: list[dict]) -> None:
        """Ask Ray's autoscaler for room for ``bundles`` (the request stands until withdrawn)."""
        from ray.autoscaler.sdk import request_resources

        request_resources(bundles=bundles)
        self.asked = True

    def withdraw(self) -> None:
        if self.asked:
            from ray.autoscaler.sdk import request_resources

            request_resources(bundles=[])
            self.asked = False
