"""Long-lived judge pools: engines start once and serve every round of a job.

A judge engine is slow to start (about 20 s for the CPU build of vLLM, minutes
for a large model on GPUs), and adaptive schedulers judge in many short rounds.
So the engines live in long-lived Ray actors (:class:`JudgeActor`), a fixed set
or between a least and a most number (:mod:`pairank.cluster.scaling`), and each
round streams its requests through a Ray Data pipeline whose map stage only
forwards batches to those actors, the way Ray Data LLM forwards batches to a
Serve deployment. Rebuilding the pipeline per round costs about a second;
rebuilding engines would cost a start each.

Routing: the round's requests arrive in prefix order (all pairs of a context
together), are cut into blocks of ``pool.batch_size`` and the blocks are dealt
to the live actors in contiguous runs (block i of n goes to actor ``i * size // n``),
so each engine sees whole contexts and its prefix cache stays warm, and every
actor gets the same number of blocks, give or take one. The forwarders ask the
:class:`PoolMonitor` for each call's actor: in a pool that grows, a call whose
actor is full goes to a less busy one (a new actor takes over part of the work).

Several batches in flight: an actor runs up to ``batches_in_flight`` calls at once
(Ray's ``max_concurrency``, one thread each), for an engine that takes batches from
several threads and keeps them in flight together (vLLM's async engine), so it
never waits for the driver or for Ray Data between batches; the forwarders keep
one more call per actor queued behind them.

The forwarding tasks reserve no CPU (``num_cpus=0``): the actors hold the
node's CPUs, and a forwarder that waited for a CPU would wait for ever.

The pool knows nothing of judges: it receives what to run as a factory (a
picklable callable that builds, in the actor, an object with ``run(stage, batch)``
and ``info()``; :func:`pairank.jobs.pipeline.steps.judge_factory`), where to run it as
:class:`PoolResources`, and what to answer for requests no engine could judge
(``on_failure``).

Lost engines. The actors are Ray actors with ``max_restarts``: when an engine's
process dies (SIGKILL, out of memory, a lost node, or an engine that ends its own
process because it is unusable), Ray starts a new one, and the forwarding task sends
again what that engine was judging (:func:`_forward`; :class:`PoolMonitor` tells a
call that was running from one that only waited). A call sent again after its engine
died under it runs alone in the engine (the actor lets the calls in flight finish
and starts no other until it is done), so that with several batches in flight a
second death is its own. A batch that keeps killing its
engine is split into single rows, and a row that kills it ``retries`` times is
answered by ``on_failure`` (error rows naming the reason); the rest of the job goes on.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
import uuid
import warnings
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)
# A dataset made elsewhere may bring fewer blocks than the forwarding tasks allowed; Ray Data warns each time.
warnings.filterwarnings("ignore", message="The maximum number of concurrent tasks", category=UserWarning)

#: Column that tells a forwarder which actor judges a row (dropped before judging).
SLOT = "__judge_slot"


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


@dataclass(frozen=True)
class PoolResources:
    """Where a pool runs: how many actors, what each reserves, the rows sent per batch, and how losses are borne."""

    #: Actors the pool starts with and keeps; it grows to ``max_size`` when ``max_size`` is larger (see
    #: :mod:`pairank.cluster.scaling`).
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

    def __post_init__(self) -> None:
        if not 1 <= self.min_size <= self.max_size:
            raise ValueError(f"pool resources: expected 1 <= min_size <= max_size, found {self.min_size} and "
                             f"{self.max_size}")  # fmt: skip

    @property
    def fixed(self) -> bool:
        return self.min_size == self.max_size


class PoolMonitor:
    """Which actors serve the pool, which calls each one holds, and what the pool lost: the facts a forwarder
    needs to choose an actor, and after an error to decide what to send again.

    The pool adds an actor (:meth:`joined`) once its engine is up and takes one out
    (:meth:`leave`) before stopping it. A forwarder asks :meth:`route` for the actor
    of each call. An actor reports its start (:meth:`arrived`, a restart when its slot
    was seen before) before it runs anything, and the start and end of every call
    (:meth:`started`, :meth:`finished`).
    A forwarder whose call failed asks :meth:`was_running`: a call that was running
    when its engine died (one of several, with batches in flight) counts against its
    batch; a call that only waited behind them is sent again for free.

    ``balance``: a call whose actor holds ``capacity`` calls or more goes to a live
    actor that holds fewer (a pool that grows: a new actor takes over the work
    dealt to the busy ones); otherwise a call goes to the actor its slot names.
    """

    def __init__(self, balance: bool = False, capacity: int = 1) -> None:
        self.balance, self.capacity = balance, capacity
        self.actors: dict[int, object] = {}  # the actors calls may be sent to, by slot
        self.current: dict[int, set[str]] = {}  # calls running in each actor's engine
        self.waiting: dict[int, set[str]] = {}  # calls sent to an actor, not yet in its engine
        self.idle_since: dict[int, float] = {}
        self.died_running: set[str] = set()
        self.restarts: list[dict] = []
        self.dead: set[int] = set()
        self.counts = {"batches_retried": 0, "rows_split": 0, "rows_failed": 0}

    def joined(self, slot: int, actor) -> None:
        self.actors[slot] = actor
        self.idle_since[slot] = time.monotonic()

    def leave(self, slot: int) -> bool:
        """Take ``slot`` out of the pool if it holds no call (then no call is sent to it again)."""
        if slot not in self.actors or self.current.get(slot) or self.waiting.get(slot):
            return False
        del self.actors[slot]
        return True

    def slots(self) -> list[int]:
        return sorted(self.actors)

    def route(self, slot: int, call: str, deaths: int = 0) -> tuple[int, object] | None:
        """The slot and actor ``call`` goes to: ``slot``'s, or when that actor is gone the live one at ``deaths``
        modulo their number, or with ``balance`` a less busy one; None when no actor is live."""
        live = sorted(self.actors)
        if not live:
            return None
        if slot not in self.actors:
            slot = live[deaths % len(live)]
        elif self.balance:
            load = {s: len(self.current.get(s, ())) + len(self.waiting.get(s, ())) for s in live}
            least = min(live, key=load.__getitem__)
            if load[slot] >= self.capacity and load[least] < load[slot]:
                slot = least
        self.waiting.setdefault(slot, set()).add(call)
        self.idle_since.pop(slot, None)
        return slot, self.actors[slot]

    def started(self, slot: int, call: str) -> None:
        self.waiting.get(slot, set()).discard(call)
        self.current.setdefault(slot, set()).add(call)

    def finished(self, slot: int, call: str) -> None:
        self.current.get(slot, set()).discard(call)
        if not self.current.get(slot) and not self.waiting.get(slot):
            self.idle_since[slot] = time.monotonic()

    def arrived(self, slot: int, pid: int) -> None:
        """An actor's engine is starting; for a slot seen before, that is a restart after a loss."""
        if slot in self.current:
            self.died_running |= self.current[slot]
            self.restarts.append({"slot": slot, "pid": pid, "at": time.time()})
        self.current[slot], self.waiting[slot] = set(), set()  # the calls it held failed; their senders resend
        self.idle_since[slot] = time.monotonic()

    def was_running(self, slot: int, call: str) -> bool:
        return call in self.died_running or call in self.current.get(slot, ())

    def forget(self, slot: int, call: str) -> None:
        """A call that failed holds its actor no longer."""
        self.waiting.get(slot, set()).discard(call)
        if slot in self.actors and not self.current.get(slot) and not self.waiting.get(slot):
            self.idle_since.setdefault(slot, time.monotonic())

    def mark_dead(self, slot: int) -> None:
        self.dead.add(slot)
        self.actors.pop(slot, None)
        self.current[slot], self.waiting[slot] = set(), set()

    def count(self, what: str, n: int = 1) -> None:
        self.counts[what] += n

    def loads(self) -> dict[int, tuple[int, int, float | None]]:
        """Per live actor: calls running, calls waiting, and seconds since it last had nothing to do (None while
        it has something)."""
        now = time.monotonic()
        return {s: (len(self.current.get(s, ())), len(self.waiting.get(s, ())),
                    None if s not in self.idle_since else now - self.idle_since[s]) for s in self.actors}  # fmt: skip

    def summary(self) -> dict:
        """``lost``: engines that died (restarted, or dead for good); ``restarted``; ``dead`` slots; counters."""
        return {"lost": len(self.restarts) + len(self.dead), "restarted": len(self.restarts),
                "dead": sorted(self.dead), **self.counts}  # fmt: skip


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


class JudgeActor:
    """One engine in one Ray actor, for the life of the pool; it runs every stage it is sent.

    With ``max_concurrency`` k the actor runs up to k calls at once, each on its own
    thread; a call sent ``alone`` waits for the others to finish and runs by itself
    (:class:`Gate`). The monitor hears of a call when it enters the engine, not while it waits.

    An exception that escapes ``runner.run`` means the engine is unusable (the runner
    turns ordinary failures into rows): the actor then ends its process, so that Ray
    restarts it with a fresh engine and the batches it held are sent again.
    """

    def __init__(self, factory: Callable[[], object], slot: int = 0, monitor=None):
        import ray

        self.slot, self.monitor = slot, monitor
        if monitor is not None:
            ray.get(monitor.arrived.remote(slot, os.getpid()))  # before anything runs on this engine
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
            except BaseException as exc:  # noqa: BLE001 - the engine is gone: let Ray restart the process
                log.error("judge actor %s: the engine failed (%s: %s); ending the process for a restart",
                          self.slot, type(exc).__name__, exc)  # fmt: skip
                os._exit(70)
            if self.monitor is not None and call is not None:
                ray.get(self.monitor.finished.remote(self.slot, call))
            self.stats["batches"] += 1
            self.stats["rows"] += batch.num_rows
        finally:
            self.gate.leave(alone)
        return out

    def info(self) -> dict:
        """pid, engine start seconds, batches and rows so far, the most batches in flight at once, and engine
        prompts per stage (``calls``)."""
        return {**self.stats, "most_in_flight": self.gate.most, **self.runner.info()}


@dataclass
class _Call:
    """One row group on its way to an engine: which actor, how often its engine died under it."""

    rows: pa.Table
    slot: int
    deaths: int = 0
    single: bool = False  # a row sent alone after its batch used up its retries
    after: list = field(default_factory=list)  # the group's next single rows, sent once this one is done
    id: str = ""


def _forward(
    batch: pa.Table, stage: str, monitor, retries: int = 2,
    on_failure: Callable[[str, pa.Table, str], pa.Table] | None = None,
) -> pa.Table:  # fmt: skip
    """Ray Data map stage: send each row group to the actor the monitor routes its slot to, wait, concatenate.

    A lost engine is borne here: a call whose engine died while running it is sent
    again (Ray restarts the actor), ``retries`` times in all; then its rows go one by
    one, and a row whose engine died ``retries`` times under it is answered by
    ``on_failure(stage, rows, reason)``. A call that only waited behind a dying call
    is sent again without counting. An actor that is dead for good (its restarts used
    up) leaves the pool and the live ones take its calls; with none left, the rows fail.
    """
    import ray
    from ray.exceptions import ActorDiedError, RayActorError

    if SLOT not in batch.column_names:  # a dataset made elsewhere: each context to the actor its id hashes to
        batch = context_slots(batch, ray.get(monitor.slots.remote()) or [0])
    slots = batch.column(SLOT)
    out: list[pa.Table] = []
    waiting: dict[object, _Call] = {}

    def fail(call: _Call, reason: str) -> None:
        monitor.count.remote("rows_failed", call.rows.num_rows)
        if on_failure is None:
            raise RuntimeError(f"judge pool: {reason}")
        out.append(on_failure(stage, call.rows, reason))
        done(call)

    def send(call: _Call) -> None:
        call.id = uuid.uuid4().hex
        routed = ray.get(monitor.route.remote(call.slot, call.id, call.deaths))
        if routed is None:
            fail(call, "every engine of the pool is dead (Ray's restarts are used up)")
            return
        call.slot, actor = routed
        alone = call.deaths > 0 or call.single  # a second death is then its own, not a neighbour's
        waiting[actor.judge_batch.remote(call.rows, stage, call.id, alone)] = call

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
            out.append(ray.get(ref))
        except RayActorError as exc:
            running = ray.get(monitor.was_running.remote(call.slot, call.id))
            monitor.forget.remote(call.slot, call.id)
            if isinstance(exc, ActorDiedError):
                monitor.mark_dead.remote(call.slot)  # before the call is routed again (one caller: in order)
            call.deaths += int(running)
            if call.deaths < retries:
                if running:
                    monitor.count.remote("batches_retried")
                send(call)
            elif call.single or call.rows.num_rows == 1:
                fail(call, f"the engine died {call.deaths} times while judging this comparison "
                           f"({type(exc).__name__}); it is asked again on the next run")  # fmt: skip
            else:  # which rows kill the engine? send them one at a time
                monitor.count.remote("rows_split", call.rows.num_rows)
                rows = [_Call(call.rows.slice(i, 1), call.slot, single=True) for i in range(call.rows.num_rows)]
                rows[0].after = rows[1:] + call.after
                send(rows[0])
            continue
        done(call)
    return pa.concat_tables(out)


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


class JudgePool:
    """``resources.min_size`` actors, each running ``factory()``, started on entry and stopped on exit; up to
    ``max_size`` while there is a backlog (:mod:`pairank.cluster.scaling`).

    ``judge(requests, stage)`` streams one stage of one round through Ray Data and
    yields result batches as the actors finish them; call it as often as needed:
    every stage of a multi-pass mode (analyses, then verdicts) and every round of
    an adaptive schedule runs on the same warm engines.
    """

    def __init__(
        self, factory: Callable[[], object], resources: PoolResources,
        on_failure: Callable[[str, pa.Table, str], pa.Table] | None = None,
    ):  # fmt: skip
        """``on_failure(stage, rows, reason)``: the result rows of requests no engine could judge (error rows)."""
        self.factory, self.resources, self.on_failure = factory, resources, on_failure
        self.actors: dict[int, object] = {}  # by slot: every actor started and not stopped (dead ones too)
        self.monitor = None
        self.scaler = None
        self.stopped: list[dict] = []  # what the actors stopped when idle did
        self.most = self.made = 0

    def __enter__(self) -> JudgePool:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        import ray

        from pairank.cluster.scaling import Scaler

        r = self.resources
        # Ray restarts a dead actor (a killed process, a lost node, an engine that ended its process) up to
        # max_restarts times; calls are not retried by Ray (max_task_retries=0): _forward decides what to resend.
        options = {"num_cpus": r.num_cpus, "max_concurrency": r.batches_in_flight, "max_restarts": r.max_restarts,
                   "max_task_retries": 0}  # fmt: skip
        if r.num_gpus:
            options["num_gpus"] = r.num_gpus
        self.actor_class = ray.remote(JudgeActor).options(**options)
        self.monitor = ray.remote(PoolMonitor).options(num_cpus=0).remote(not r.fixed, r.batches_in_flight + 1)
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

    def launch(self) -> tuple[int, object]:
        """Start one more actor in a new slot; returns the slot and a ref ready once its engine is up."""
        slot, self.made = self.made, self.made + 1
        self.actors[slot] = self.actor_class.remote(self.factory, slot, self.monitor)
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

    def retire(self, slot: int) -> bool:
        """Stop the actor of ``slot`` if it holds no call, keeping what it did; False if it holds one."""
        import ray
        from ray.exceptions import RayActorError

        if not ray.get(self.monitor.leave.remote(slot)):
            return False
        actor = self.actors.pop(slot)
        try:
            self.stopped.append(ray.get(actor.info.remote()))
        except RayActorError:
            self.stopped.append({})  # it died as it left: nothing to count
        ray.kill(actor, no_restart=True)
        log.info("judge pool: stopped the actor of slot %s after %.0f s with nothing to do", slot,
                 self.resources.idle_seconds)  # fmt: skip
        return True

    def stop(self) -> None:
        import ray

        if self.scaler is not None:
            self.scaler.stop()
        for a in self.actors.values():
            ray.kill(a, no_restart=True)
        if self.monitor is not None:
            ray.kill(self.monitor)
        self.actors, self.monitor, self.scaler = {}, None, None

    def info(self) -> list[dict]:
        """Per actor, live or stopped when idle: pid, engine start seconds, batches and rows since its last
        (re)start, engine prompts per stage."""
        import ray
        from ray.exceptions import RayActorError

        out = []
        for a in list(self.actors.values()):
            try:
                out.append(ray.get(a.info.remote()))
            except RayActorError:
                continue  # dead for good (counted in losses()), or killed as its engine failed to start
        return out + [i for i in self.stopped if i]

    def losses(self) -> dict:
        """Engines lost so far (restarted or dead), batches sent again, rows sent one by one and rows failed."""
        import ray

        return ray.get(self.monitor.summary.remote()) if self.monitor is not None else PoolMonitor().summary()

    def sizes(self) -> dict:
        """Actors the pool had at most and has now, and how many it stopped when they had nothing to do."""
        import ray

        now = len(ray.get(self.monitor.slots.remote())) if self.monitor is not None else 0
        return {"actors_most": self.most, "actors_end": now, "actors_stopped": len(self.stopped)}

    def judge(self, requests, stage: str = "pairwise") -> Iterator[pa.Table]:
        """Judge ``requests``: a table the driver holds (dealt to the live actors in contiguous runs of blocks), or
        a Ray Data dataset made elsewhere in the cluster (each context's rows go to the actor its id hashes to, so
        an engine still sees whole contexts); result batches are yielded as the actors finish them."""
        import ray

        if not self.actors:
            raise RuntimeError("judge pool is not started")
        live = ray.get(self.monitor.slots.remote()) or [0]  # none live: the forwarders fail the rows
        # in each engine, one call queued behind; a pool that grows has forwarders for its largest size
        in_flight = (self.resources.batches_in_flight + 1) * self.resources.max_size
        kwargs = {"stage": stage, "monitor": self.monitor, "retries": self.resources.retries,
                  "on_failure": self.on_failure}  # fmt: skip
        if isinstance(requests, pa.Table):
            if requests.num_rows == 0:
                return
            blocks = [
                requests.slice(off, length).append_column(SLOT, pa.array([live[actor]] * length, pa.int64()))
                for off, length, actor in deal_blocks(requests.num_rows, self.resources.batch_size, len(live))
            ]
            ds, tasks = ray.data.from_arrow(blocks), min(in_flight, len(blocks))
        else:
            # one block per batch, one batch per forwarding task (which gives each context its actor: see
            # context_slots): a task's results would otherwise reach the driver as one block, and a kill would
            # lose more than the batch in flight
            ds = requests.repartition(target_num_rows_per_block=self.resources.batch_size)
            # Ray Data has no arguments for it: its tasks would reserve a CPU, which the actors hold, so they
            # reserve none; one at a time (slicing is cheap), which also keeps it from fusing with the stages
            # before and after it (a fused forwarder would hand on a whole planned block at once)
            repartition = ds._logical_plan.dag
            repartition.ray_remote_args["num_cpus"] = 0
            object.__setattr__(repartition, "compute", ray.data.TaskPoolStrategy(size=1))
            tasks = in_flight
        ds = ds.map_batches(
            _forward, fn_kwargs=kwargs, batch_size=None, batch_format="pyarrow", zero_copy_batch=True, num_cpus=0,
            concurrency=tasks)  # fmt: skip
        # prefetch_batches=0: hand each batch over as soon as it is judged, so a kill loses the least.
        yield from ds.iter_batches(batch_format="pyarrow", batch_size=None, prefetch_batches=0)
