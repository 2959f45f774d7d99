"""The adaptive driver: one scheduler machine per (aspect, context, seed), advanced in lockstep rounds.

Each round the driver

1. collects :meth:`next_requests` from every unfinished machine and keys them
   (a pair asked by several machines, e.g. several seeds, is one request; with
   several prompt variants a pair is one request per variant, and the machine is
   answered their mean);
2. stops if the round would take the run past ``scheduler.budget`` comparisons
   (every distinct comparison the run uses counts, cached or judged, so a
   resumed run stops where the first would have);
3. answers what the judgment cache already holds and sends the rest through the
   judge pool, one Ray Data stream per pass of the judging mode (the driver hands
   over request identities; a render stage makes the prompts: :mod:`pairank.jobs.judging.render`; PRePair: the
   outputs not yet analysed, then the verdicts; see :mod:`pairank.jobs.judging.passes`); the pool
   is started on the first round that needs it and stays up (engines warm) until
   the last round. With the run's claims, it sends only what it claims; what another
   run on the store claimed is waited for in the cache (:mod:`pairank.jobs.judging.under_claims`);
4. appends the new judgments to the cache (atomic parts, every ``flush_rows``)
   before any machine sees them, so a driver killed at any point loses at most
   the batch in flight, and a re-run replays the finished rounds from the cache
   without asking for them again;
5. feeds each machine its answers with :meth:`observe`: p_a, or
   (p(a, b) + 1 - p(b, a)) / 2 inside symmetric machines. A comparison the judge
   failed on is answered 0.5 (no preference) and counted; it is retried on the
   next run. With ``scoring.calibration: batch`` the answers are first
   batch-calibrated per aspect (see :class:`RoundCalibration`).

Progress (round, contexts done, comparisons asked, cache hits, judged, errors,
driver and judge seconds) is shown after every round and kept in the report.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.judging.passes import Judging, error_count
from pairank.jobs.judging.pool_wiring import run_meter
from pairank.jobs.judging.requests import contexts_of
from pairank.jobs.judging.under_claims import WAIT_S, ClaimedJudging
from pairank.jobs.schedulers import AdaptiveScheduler, AdaptiveSettings
from pairank.jobs.specs.job import JobSpec
from pairank.storage.schemas import RANKINGS
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.claims import Claims

log = logging.getLogger(__name__)

#: What a failed comparison tells a machine: nothing either way.
NO_PREFERENCE = 0.5

Request = tuple[str, str, str, str, int]  # (aspect, context_id, candidate_a, candidate_b, prompt variant)


class RoundCalibration:
    """Batch-calibrates each round's answers per aspect.

    The positional prior P(A) of an aspect is the mean of every answer the run
    has had for that aspect so far, this round's included (a running sum), and is
    divided out (uniform prior). A round of a small run may hold one comparison,
    too few to estimate a prior from; with thousands of contexts in lockstep,
    each round alone is already a large batch.
    """

    def __init__(self) -> None:
        self._sum: dict[str, float] = defaultdict(float)
        self._count: dict[str, int] = defaultdict(int)

    def __call__(self, values: dict[str, float], aspect_of: dict[str, str]) -> dict[str, float]:
        from pairank.operators.calibration import batch_calibrate

        by_aspect: dict[str, list[str]] = defaultdict(list)
        for key in values:
            by_aspect[aspect_of[key]].append(key)
        out: dict[str, float] = {}
        for aspect, keys in by_aspect.items():
            ps = [values[k] for k in keys]
            self._sum[aspect] += sum(ps)
            self._count[aspect] += len(ps)
            calibrated, _ = batch_calibrate(ps, prior=self._sum[aspect] / self._count[aspect])
            out.update(zip(keys, map(float, calibrated)))
        return out


@dataclass
class Task:
    """One machine: an aspect, a context and a seed."""

    aspect: str
    context_id: str
    seed: int
    machine: AdaptiveScheduler
    pairs: set[tuple[str, str]] = field(default_factory=set)  # ordered pairs it was answered


@dataclass
class DriverResult:
    tasks: list[Task]
    rounds: list[dict[str, Any]]
    used_keys: set[str]
    stopped: str  # "done" or "budget"
    judgments: pa.Table  # one row per used key: the cache's verdicts and this run's new judgments
    judged: int
    errors: int
    cache_hits: int


class Driver:
    """Runs the spec's adaptive scheduler over ``candidates`` to completion or budget."""

    def __init__(
        self,
        spec: JobSpec,
        candidates: pa.Table,
        judging: Judging,
        cache: JudgmentCache,
        pool: Callable[[JobSpec], AbstractContextManager[Any]],
        progress: Callable[[str], None] = log.info,
        tasks: list[Task] | None = None,
        claims: Claims | None = None,
        wait_s: float = WAIT_S,
    ) -> None:
        """``tasks``: the machines to run (default: the spec's scheduler on every aspect, context and seed).
        ``claims``: the run's; each round judges what it claims and waits for what another run claimed
        (:class:`~pairank.jobs.judging.under_claims.ClaimedJudging`, looking every ``wait_s`` seconds)."""
        self.spec, self.judging, self.cache, self.pool, self.progress = spec, judging, cache, pool, progress
        self.claims, self.wait_s = claims, wait_s
        self.maker = judging.maker
        sched = spec.scheduler
        if not isinstance(sched, AdaptiveSettings):
            raise ValueError(f"scheduler {sched.name!r} is static: the lockstep driver runs adaptive schedulers")
        self.sched = sched
        self.tasks = tasks if tasks is not None else spec_tasks(spec.aspects, sched, candidates)

    def run(self) -> DriverResult:
        read_at = time.time()
        answered = self.cache.answered(
            aspects={t.aspect for t in self.tasks}, contexts={t.context_id for t in self.tasks}
        )
        known: dict[str, float | None] = dict(
            zip(answered.column("key").to_pylist(), answered.column("p_a").to_pylist())
        )
        claimed = ClaimedJudging(
            self.claims,
            self.cache,
            {t.aspect for t in self.tasks},
            {t.context_id for t in self.tasks},
            self.progress,
            read_at,
            self.wait_s,
        )
        calibrate = RoundCalibration()
        new_tables: list[pa.Table] = []
        found: list[pa.Table] = []  # other runs' verdicts this run waited for
        used: set[str] = set()
        rounds: list[dict[str, Any]] = []
        judged = errors = hits = 0
        stopped = "done"
        budget = self.sched.budget
        meter = run_meter(self.spec)
        with ExitStack() as stack:
            pool = None
            while True:
                t0 = time.perf_counter()
                active = [t for t in self.tasks if not t.machine.done]
                if not active:
                    break
                asks: list[tuple[Task, list[tuple[tuple[str, str], list[str]]]]] = []
                wanted: dict[str, Request] = {}
                for task in active:
                    pairs = []
                    for a, b in task.machine.next_requests():
                        keys = self.maker.keys(task.aspect, task.context_id, a, b)
                        for v, key in enumerate(keys):
                            wanted.setdefault(key, (task.aspect, task.context_id, a, b, v))
                        pairs.append(((a, b), keys))
                    asks.append((task, pairs))
                if not wanted:
                    stuck = sorted({t.context_id for t in active})[:10]
                    raise RuntimeError(f"adaptive driver: contexts not done but asking nothing: {stuck}")
                new = [k for k in wanted if k not in used]
                if budget is not None and len(used) + len(new) > budget:
                    stopped = "budget"
                    self.progress(
                        f"budget: round {len(rounds) + 1} needs {len(new)} more comparisons; "
                        f"{len(used)} of {budget} used; stopping"
                    )
                    break
                used.update(new)
                todo = {k: req for k, req in wanted.items() if k not in known}
                t_judge = time.perf_counter()

                def judge(requests: dict[str, Request]) -> pa.Table:
                    nonlocal pool
                    if pool is None:
                        pool = stack.enter_context(self.pool(self.spec))
                    return self.judging.judge(pool, requests, self.cache, log.debug)

                tables = claimed(todo, judge)
                for table in [*tables, *claimed.found]:
                    known.update(zip(table.column("key").to_pylist(), table.column("p_a").to_pylist()))
                new_tables.extend(tables)
                found.extend(claimed.found)
                claimed.found = []
                round_judged = sum(t.num_rows for t in tables)
                round_errors = sum(error_count(t) for t in tables)
                round_hits = len(wanted) - round_judged
                meter.add("pairank_comparisons_cached_total", round_hits)
                judge_seconds = time.perf_counter() - t_judge
                values = {k: NO_PREFERENCE if (p := known.get(k)) is None else p for k in wanted}
                if self.spec.scoring.calibration == "batch":
                    ok = {k: v for k, v in values.items() if known.get(k) is not None}
                    values.update(calibrate(ok, {k: wanted[k][0] for k in ok}))
                for task, pairs in asks:
                    if pairs:  # several prompt variants: the mean of their answers
                        task.machine.observe({pair: sum(values[k] for k in keys) / len(keys) for pair, keys in pairs})
                        task.pairs.update(pair for pair, _ in pairs)
                judged += round_judged
                errors += round_errors
                hits += round_hits
                stats = {
                    "round": len(rounds) + 1,
                    "requests": len(wanted),
                    "cache_hits": round_hits,
                    "judged": round_judged,
                    "errors": round_errors,
                    "contexts_done": sum(t.machine.done for t in self.tasks),
                    "asked_total": len(used),
                    "judge_seconds": round(judge_seconds, 3),
                    "driver_seconds": round(time.perf_counter() - t0 - judge_seconds, 3),
                }
                rounds.append(stats)
                self.progress(
                    f"round {stats['round']}: {stats['contexts_done']}/{len(self.tasks)} done, "
                    f"{len(wanted)} asked ({round_hits} cached, {round_judged} judged, {round_errors} errors), "
                    f"{len(used)} used in all; judge {judge_seconds:.1f}s, driver {stats['driver_seconds']:.2f}s"
                )
        answered = pa.concat_tables([answered, *found])
        reused = answered.filter(pc.is_in(answered.column("key"), pa.array(sorted(used), pa.string())))
        judgments = pa.concat_tables([reused, *new_tables])
        return DriverResult(self.tasks, rounds, used, stopped, judgments, judged, errors, hits)


def spec_tasks(aspects: Iterable[str], sched: AdaptiveSettings, candidates: pa.Table) -> list[Task]:
    """The scheduler's machines on every aspect, context and seed (in that order); each (aspect, seed)'s are built
    together (:meth:`~pairank.jobs.schedulers.AdaptiveSettings.machines`: a board shares one state among them)."""
    contexts = dict(sorted(contexts_of(candidates).items()))
    system = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    seeds = range(sched.seed, sched.seed + sched.repeats)
    tasks: list[Task] = []
    for aspect in aspects:
        built = {seed: dict(zip(contexts, sched.machines(contexts, system, seed))) for seed in seeds}
        tasks.extend(Task(aspect, ctx, seed, built[seed][ctx]) for ctx in contexts for seed in seeds)
    return tasks


def method_name(scheduler: AdaptiveSettings, seed: int) -> str:
    """The rankings method of a scheduler run: its name, plus the seed for repeats."""
    return scheduler.name if seed == scheduler.seed else f"{scheduler.name}@seed{seed}"


def ranking_rows(tasks: Iterable[Task], scheduler: AdaptiveSettings, system: dict[str, str]) -> pa.Table:
    """RANKINGS rows of every finished machine: rank = position, score = 1 - position / (N - 1)."""
    rows = []
    for task in tasks:
        if not task.machine.done:
            continue
        order = task.machine.ranking()
        count: dict[str, int] = defaultdict(int)
        for a, b in task.pairs:
            count[a] += 1
            count[b] += 1
        n = len(order)
        for pos, cid in enumerate(order):
            rows.append(
                {
                    "context_id": task.context_id,
                    "aspect": task.aspect,
                    "candidate_id": cid,
                    "system": system.get(cid, ""),
                    "method": method_name(scheduler, task.seed),
                    "score": 1.0 - pos / (n - 1) if n > 1 else 1.0,
                    "rank": pos + 1,
                    "n_comparisons": count[cid],
                }
            )
    return pa.Table.from_pylist(rows, schema=RANKINGS)
