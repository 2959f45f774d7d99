"""Long-lived judge pools: engines start once and serve every round of a job.

A judge engine is slow to start (about 20 s for the CPU build of vLLM, minutes
for a large model on GPUs), and adaptive schedulers judge in many short rounds.
So the engines live in long-lived Ray actors (:class:`JudgeActor`), a fixed set
or between a least and a most number (:mod:`pairank.cluster.pools.scaling`), and each
round's requests (a static run's Ray Data stream, a round's render tasks in the
cluster, or a table the driver holds) are forwarded to those actors in batches by
threads of the driver (:func:`~pairank.cluster.pools.forwarding.forward_all`). Rebuilding engines would
cost a start each.

Forwarding from the driver, not in a Ray Data map stage after the stream (as Ray
Data LLM forwards batches to a Serve deployment, and as pairank did until
2026-11-27): a forwarder only waits on actors, and as Ray Data tasks the
forwarders were a worker process each, ``(batches_in_flight + 1) x max_size`` per
job and on every node the stream reached, started again each round where idle
workers are ended within a second (a head of no CPUs); a node lost with them
also lost the calls they held. The driver already takes every result (it commits
them), so a batch now crosses the object store as often as before.

Routing: the round's requests arrive in prefix order (all pairs of a context
together), are cut into blocks of ``pool.batch_size`` and the blocks are dealt
to the live actors in contiguous runs (block i of n goes to actor ``i * size // n``),
so each engine sees whole contexts and its prefix cache stays warm, and every
actor gets the same number of blocks, give or take one. A stream's batches of
``pool.batch_size`` go to the actor their context's id hashes to. The forwarders ask the
:class:`PoolMonitor` for each call's actor: in a pool that grows, a call whose
actor is full goes to a less busy one (a new actor takes over part of the work).

Several batches in flight: an actor runs up to ``batches_in_flight`` calls at once
(Ray's ``max_concurrency``, one thread each), for an engine that takes batches from
several threads and keeps them in flight together (vLLM's async engine), so it
never waits for the driver or for Ray Data between batches; the forwarders keep
one more call per actor queued behind them.

The pool knows nothing of judges: it receives what to run as a factory (a
picklable callable that builds, in the actor, an object with ``run(judging_pass, batch)``
and ``info()``; :func:`pairank.jobs.judging.pool_wiring.judge_factory`), where to run it as
:class:`PoolResources`, what to answer for requests no engine could judge
(``on_failure``), and what every call tells the runner to run (``mode``: the job's
judging settings). A started pool may serve the next job of the same driver process
(:mod:`pairank.cluster.pools.warm`): :meth:`JudgePool.renew` gives it that job's mode, failures
and metrics, and counts what it does from 0.

Lost engines. The actors are Ray actors with ``max_restarts``: when an engine's
process dies (SIGKILL, out of memory, a lost node, or an engine that ends its own
process because it is unusable), Ray starts a new one, and the forwarder sends
again what that engine was judging (:func:`forward`; :class:`PoolMonitor` tells a
call that was running from one that only waited). A call sent again after its engine
died under it runs alone in the engine (the actor lets the calls in flight finish
and starts no other until it is done), so that with several batches in flight a
second death is its own. A batch that keeps killing its
engine is split into single rows, and a row that kills it ``retries`` times is
answered by ``on_failure`` (error rows naming the reason); the rest of the job goes on.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from pairank.cluster.bookkeeping import keep
from pairank.cluster.executor import Stream, Tasks
from pairank.cluster.metrics import Meter
from pairank.cluster.pools.forwarding import SLOT, deal_blocks, forward_all
from pairank.cluster.pools.judge_actor import JudgeActor, Runner
from pairank.cluster.pools.monitor import PoolMonitor
from pairank.cluster.pools.placement import Placement, avoided_head

if TYPE_CHECKING:
    from ray import ObjectRef

    from pairank.cluster.pools.scaling import Scaler

log = logging.getLogger(__name__)


class EngineStartError(RuntimeError):
    """An engine's constructor failed: no engine of the pool judges anything."""

    def __init__(self, cause: BaseException):
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", line).strip() for line in str(cause).splitlines()]
        said = [line for line in lines if line]
        errors = [i for i, line in enumerate(said) if re.match(r"^[\w.]*(Error|Exception)\b", line)]
        if errors:  # the innermost exception of the engine's traceback, and the line after it
            why = " ".join(said[errors[-1] : errors[-1] + 2])
        else:
            why = said[0] if said else type(cause).__name__
        super().__init__(f"a judge engine failed to start: {why}")


#: What an actor that judged nothing did.
EMPTY_TOTALS: dict[str, Any] = {"batches": 0, "rows": 0, "calls": {}, "input_tokens": 0, "output_tokens": 0}


@dataclass(frozen=True)
class PoolResources:
    """Where a pool runs: how many actors, what each reserves, the rows sent per batch, and how losses are borne."""

    #: Actors the pool starts with and keeps; it grows to ``max_size`` when ``max_size`` is larger (see
    #: :mod:`pairank.cluster.pools.scaling`).
    min_size: int = 1
    max_size: int = 1
    num_cpus: float = 1
    num_gpus: float = 0
    batch_size: int = 64
    #: A batch whose engine died while judging it is sent again this many times in all; then its rows are
    #: sent one by one, and a row that kills its engine this many times is failed (``on_failure``).
    retries: int = 2
    #: Restarts Ray grants each actor over the pool's life (-1: no limit); past it the actor is dead and
    #: its batches go to the others.
    max_restarts: int = 8
    #: Calls each actor runs at once (its engine must take batches from several threads).
    batches_in_flight: int = 1
    #: A pool that grows: an actor above ``min_size`` with nothing to do for this long is stopped.
    idle_seconds: float = 60
    #: Processes one engine spans (tensor x pipeline parallel); with GPUs, each actor gets a placement group of
    #: that many one-GPU bundles on one node (:mod:`pairank.cluster.pools.placement`).
    ranks: int = 1
    #: Whether actors may go on the head node of a cluster of several nodes.
    on_head: bool = False

    def __post_init__(self) -> None:
        if not 1 <= self.min_size <= self.max_size:
            raise ValueError(
                f"pool resources: expected 1 <= min_size <= max_size, found {self.min_size} and {self.max_size}"
            )

    @property
    def fixed(self) -> bool:
        return self.min_size == self.max_size


class JudgePool:
    """``resources.min_size`` actors, each running ``factory()``, started on entry and stopped on exit; up to
    ``max_size`` while there is a backlog (:mod:`pairank.cluster.pools.scaling`).

    ``judge(requests, judging_pass)`` streams one pass of one round through Ray Data and
    yields result batches as the actors finish them; call it as often as needed:
    every pass of a multi-pass mode (analyses, then verdicts) and every round of
    an adaptive schedule runs on the same warm engines.
    """

    def __init__(
        self,
        factory: Callable[[], Runner],
        resources: PoolResources,
        on_failure: Callable[[str, pa.Table, str], pa.Table] | None = None,
        meter: Meter | None = None,
        mode: Any = None,
    ):
        """``on_failure(judging_pass, rows, reason)``: the result rows of requests no engine could judge (error rows);
        ``meter``: the run's metrics (:mod:`pairank.cluster.metrics`), recorded by the pool's monitor; ``mode``: what
        every call tells the runner to run (the job's judging settings; None: what the factory built)."""
        self.factory, self.resources, self.on_failure, self.meter = factory, resources, on_failure, meter
        self.mode = mode
        self.actors: dict[int, Any] = {}  # by slot: every actor started and not stopped (dead ones too)
        self.monitor: Any = None  # the PoolMonitor (held by the driver's bookkeeper), while started
        self.placement = Placement(resources.num_cpus, resources.num_gpus, resources.ranks)  # where its actors go
        self.scaler: Scaler | None = None
        self.stopped: dict[int, dict] = {}  # by slot: the actors stopped when idle
        self.most = self.made = 0
        self.warm: dict[int, int] = {}  # by slot: the pid of an engine up before the job began (a reused pool)

    def __enter__(self) -> JudgePool:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        import ray

        from pairank.cluster.pools.scaling import Scaler

        r = self.resources
        # Ray restarts a dead actor (a killed process, a lost node, an engine that ended its process) up to
        # max_restarts times; calls are not retried by Ray (max_task_retries=0): forward decides what to resend.
        self.options = {"max_concurrency": r.batches_in_flight, "max_restarts": r.max_restarts, "max_task_retries": 0}
        self.placement.avoid = avoided_head(r.on_head)  # on a cluster of several nodes, the head's id
        # the pool's bookkeeping lives on the driver's node: the job cannot outlive that node, but outlives others
        self.monitor = keep(PoolMonitor, not r.fixed, r.batches_in_flight + 1, self.meter)
        starting = [self.launch() for _ in range(r.min_size)]
        try:
            ray.get([ready for _, ready in starting])  # engines are up once their constructors return
        except Exception as exc:
            self.stop()
            raise EngineStartError(exc) from exc
        for slot, _ in starting:
            self.joined(slot)
        if not r.fixed:
            self.scaler = Scaler(self)
            self.scaler.start()

    def launch(self) -> tuple[int, ObjectRef]:
        """Start one more actor in a new slot; returns the slot and a ref ready once its engine is up."""
        import ray

        slot, self.made = self.made, self.made + 1
        options = {**self.options, **self.placement.options(slot)}
        self.actors[slot] = ray.remote(JudgeActor).options(**options).remote(self.factory, slot, self.monitor)
        return slot, self.actors[slot].info.remote()

    def joined(self, slot: int) -> None:
        """The actor of ``slot`` is up: calls may go to it."""
        import ray

        ray.get(self.monitor.joined.remote(slot, self.actors[slot]))
        self.most = max(self.most, len(ray.get(self.monitor.slots.remote())))

    def drop(self, slot: int) -> None:
        """Stop the actor of ``slot``, which never took a call (its engine failed to start)."""
        import ray

        ray.kill(self.actors.pop(slot), no_restart=True)
        self.placement.release(slot)

    def retire(self, slot: int) -> bool:
        """Stop the actor of ``slot`` if it holds no call, keeping what it did; False if it holds one."""
        import ray
        from ray.exceptions import RayActorError

        if not ray.get(self.monitor.leave.remote(slot)):
            return False
        actor = self.actors.pop(slot)
        try:
            self.stopped[slot] = ray.get(actor.info.remote())
        except RayActorError:
            self.stopped[slot] = {}  # it died as it left: what it judged is counted all the same
        ray.kill(actor, no_restart=True)
        self.placement.release(slot)
        log.info(
            "judge pool: stopped the actor of slot %s after %.0f s with nothing to do",
            slot,
            self.resources.idle_seconds,
        )
        return True

    def reusable(self) -> bool:
        """Whether another job may run on this pool as it is: started, of a fixed size, every actor live (none dead
        for good) and no call running or waiting."""
        import ray

        if self.monitor is None or not self.resources.fixed:
            return False
        return ray.get(self.monitor.slots.remote()) == sorted(self.actors) and not ray.get(self.monitor.busy.remote())

    def renew(
        self, on_failure: Callable[[str, pa.Table, str], pa.Table] | None, meter: Meter | None, mode: Any
    ) -> bool:
        """This started pool, for a new job (:mod:`pairank.cluster.pools.warm`): its calls carry the job's ``mode``, its
        failures and metrics are the job's, and what it judged, lost, stopped and held at most is counted from 0.

        Each actor makes the mode ready first, waiting for an engine Ray restarts after a loss between jobs;
        False, and nothing renewed, when an actor is dead for good (the pool cannot serve the job as it is). An
        engine that cannot run the mode raises :class:`EngineStartError`, as a pool started for the job would."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        for actor in self.actors.values():
            while True:
                try:
                    ray.get(actor.ready.remote(mode))
                    break
                except ActorUnavailableError:  # restarting: its engine is starting again
                    time.sleep(0.5)
                except RayActorError:
                    return False
                except Exception as exc:
                    raise EngineStartError(exc) from exc
        self.on_failure, self.meter, self.mode = on_failure, meter, mode
        ray.get(self.monitor.renew.remote(meter))
        self.stopped, self.most = {}, len(self.actors)
        self.warm = {slot: ray.get(a.info.remote())["pid"] for slot, a in self.actors.items()}
        return True

    def stop(self) -> None:
        import ray

        if self.scaler is not None:
            self.scaler.stop()
        for a in self.actors.values():
            ray.kill(a, no_restart=True)
        self.placement.release_all()
        if self.monitor is not None:
            self.monitor.drop()
        self.actors, self.monitor, self.scaler, self.warm = {}, None, None, {}

    def info(self) -> list[dict]:
        """Per actor, live or stopped when idle (or dead for good, if it judged anything): its ``slot``, the pid
        and engine start seconds of its last engine, whether that engine was up before the job began (``warm``: a
        reused pool's; its start was paid by an earlier job), and what all its engines judged (restarts included):
        batches, rows, engine prompts per judging pass (``calls``), ``input_tokens`` and ``output_tokens``."""
        import ray
        from ray.exceptions import RayActorError

        totals = ray.get(self.monitor.totals.remote()) if self.monitor is not None else {}
        out: list[dict] = []
        for slot, a in sorted({**self.actors, **self.stopped}.items()):
            try:
                info = ray.get(a.info.remote()) if slot in self.actors else a
            except RayActorError:  # dead for good (counted in losses()), or killed as its engine failed to start
                info = {}
            if info or slot in totals:
                warm = bool(info) and info.get("pid") == self.warm.get(slot)
                out.append({"slot": slot, **info, "warm": warm, **totals.get(slot, EMPTY_TOTALS)})
        return out

    def losses(self) -> dict:
        """Engines lost so far (restarted or dead), batches sent again, rows sent one by one and rows failed."""
        import ray

        return ray.get(self.monitor.summary.remote()) if self.monitor is not None else PoolMonitor().summary()

    def sizes(self) -> dict:
        """Actors the pool had at most and has now, how many it stopped when they had nothing to do, and how many
        it began the job with, their engines up already (``actors_warm``: a reused pool's)."""
        import ray

        now = len(ray.get(self.monitor.slots.remote())) if self.monitor is not None else 0
        sizes = {"actors_most": self.most, "actors_end": now, "actors_stopped": len(self.stopped)}
        return {**sizes, "actors_warm": len(self.warm)}

    def judge(self, requests, judging_pass: str = "pairwise") -> Iterator[pa.Table]:
        """Judge ``requests``: a table the driver holds (dealt to the live actors in contiguous runs of blocks), or
        rows made elsewhere in the cluster, a Ray Data dataset or :class:`~pairank.cluster.executor.Stream` or the
        tasks of :func:`~pairank.cluster.executor.each` (each context's rows go to the actor its id hashes to, so
        an engine still sees whole contexts); result batches are yielded as the actors finish them."""
        import ray

        if not self.actors:
            raise RuntimeError("judge pool is not started")
        live = ray.get(self.monitor.slots.remote()) or [0]  # none live: the forwarders fail the rows
        # in each engine, one call queued behind; a pool that grows has forwarders for its largest size
        in_flight = (self.resources.batches_in_flight + 1) * self.resources.max_size
        kwargs = {
            "judging_pass": judging_pass,
            "monitor": self.monitor,
            "retries": self.resources.retries,
            "on_failure": self.on_failure,
            "mode": self.mode,
        }
        if isinstance(requests, pa.Table):
            if requests.num_rows == 0:
                return
            blocks = [
                requests.slice(off, length).append_column(SLOT, pa.array([live[actor]] * length, pa.int64()))
                for off, length, actor in deal_blocks(requests.num_rows, self.resources.batch_size, len(live))
            ]
            yield from forward_all(blocks, min(in_flight, len(blocks)), **kwargs)
            return
        # a stream, cut into batches of batch_size rows as it comes (each context to the actor its id hashes to:
        # see context_slots); the driver's threads forward them, so nothing of the forwarding is lost with a
        # worker node but the calls in flight, which forward() sends again
        stream = requests if isinstance(requests, (Stream, Tasks)) else Stream(requests)
        yield from forward_all(stream.tables(self.resources.batch_size), in_flight, **kwargs)
