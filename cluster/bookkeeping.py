"""The driver's bookkeeper: one actor per driver process and Ray job, on the driver's node, holding the small
objects that a job's tasks and actors consult (each judge pool's :class:`~pairank.cluster.pools.monitor.PoolMonitor`,
the static plan's :class:`~pairank.jobs.judging.plan_counter.PlanCounter`).

A Ray actor is a process of its own, which imports Ray and its object's module before it answers: about 0.6 CPU
seconds each. A run used to start one per object, and a process that runs many jobs (``pairank serve``, a
notebook, the tests) did so for every job. One actor now holds them all for the driver's life; :func:`keep` adds
an object under a name of its own and returns a :class:`Kept` handle, called as the object's own actor handle
would be (``kept.method.remote(*args)``, awaited with ``ray.get``), and :meth:`Kept.drop` removes it.

Where: the driver's node, like the objects' own actors before. The job cannot outlive that node, and there its
bookkeeping outlives the loss of any other node.

Calls run one at a time (one thread), in the order they arrive, not the order each caller sent them: a caller
that needs one call's effect seen by the next waits for the first (``ray.get``). Ray's in-order queue waits at
most 30 s for a call a caller numbered but that has not arrived, then cancels every call queued from that caller
(ActorUnavailableError, "Timed out waiting for seq_no"). A forwarder of a test run met that on a loaded 2-core
machine, and the job failed for a call that held nothing but a count.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

#: The bookkeeper of this process, by the driver's node and Ray job (a new Ray, or a new job, gets a new one).
_bookkeepers: dict[str, Any] = {}


class Bookkeeper:
    """Named objects, each called by name (a Ray actor: :func:`keep`)."""

    def __init__(self) -> None:
        self.objects: dict[str, Any] = {}

    def add(self, name: str, cls: type, args: tuple) -> None:
        self.objects[name] = cls(*args)

    def call(self, name: str, method: str, args: tuple) -> Any:
        return getattr(self.objects[name], method)(*args)

    def drop(self, name: str) -> None:
        self.objects.pop(name, None)

    def held(self) -> int:
        """How many objects it holds."""
        return len(self.objects)


@dataclass(frozen=True)
class Call:
    """One method of a kept object: ``remote(*args)`` calls it in the bookkeeper, returning Ray's object ref."""

    bookkeeper: Any
    name: str
    method: str

    def remote(self, *args: Any) -> Any:
        return self.bookkeeper.call.remote(self.name, self.method, args)


@dataclass(frozen=True)
class Kept:
    """An object held by the bookkeeper, called like an actor handle of its own: ``kept.method.remote(*args)``.
    Picklable: tasks and actors that receive it call the same object."""

    bookkeeper: Any
    name: str

    def __getattr__(self, method: str) -> Call:
        if method.startswith("__"):  # pickle and copy look these up: not the object's methods
            raise AttributeError(method)
        return Call(self.bookkeeper, self.name, method)

    def drop(self) -> None:
        """Remove the object (later calls fail); it is gone with the bookkeeper anyway."""
        self.bookkeeper.drop.remote(self.name)


def driver_node() -> dict[str, Any]:
    """Ray options that place an actor on the driver's node (it cannot outlive that node, so neither can the job)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=node, soft=False)}


def driver_job() -> str:
    """This driver's Ray job: its node and job id (job ids start again at 1 in a new Ray; node ids do not)."""
    import ray

    context = ray.get_runtime_context()
    return f"{context.get_node_id()}/{context.get_job_id()}"


def bookkeeper() -> Any:
    """This process's bookkeeper in the job's Ray, started on first use on the driver's node, reserving no CPU."""
    import ray

    job = driver_job()
    if job not in _bookkeepers:
        _bookkeepers.clear()  # a bookkeeper of an earlier Ray or job is gone with it
        options = {"num_cpus": 0, "allow_out_of_order_execution": True, **driver_node()}
        _bookkeepers[job] = ray.remote(Bookkeeper).options(**options).remote()
    return _bookkeepers[job]


def keep(cls: type, *args: Any) -> Kept:
    """``cls(*args)`` held by this process's bookkeeper."""
    import ray

    keeper = bookkeeper()
    kept = Kept(keeper, f"{cls.__name__}-{uuid.uuid4().hex[:12]}")
    ray.get(keeper.add.remote(kept.name, cls, args))  # made before any process that receives ``kept`` calls it
    return kept
