"""The judge step: a static schedule streamed through the pool, or an adaptive one in lockstep rounds."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.judging.adaptive import Driver, Task, ranking_rows
from pairank.jobs.judging.block_scoring import ScoreSettings, StreamScores, score_streamed
from pairank.jobs.judging.passes import error_count
from pairank.jobs.judging.pool_wiring import PoolRecord, join_cluster, judge_pool, run_meter
from pairank.jobs.judging.progress import Progress
from pairank.jobs.judging.requests import scheduled_requests
from pairank.jobs.judging.streamed import StaticPlan, judge_streamed, put_blocks
from pairank.jobs.judging.under_claims import ClaimedJudging
from pairank.jobs.pipeline.inputs import Inputs
from pairank.jobs.pipeline.setup import JudgingSetup
from pairank.jobs.schedulers import StaticSettings, board_line, board_summaries
from pairank.jobs.specs.job import JobSpec
from pairank.operators.reports import judgment_totals
from pairank.storage.schemas import JUDGMENTS


def static_scheduler(spec: JobSpec) -> StaticSettings:
    """The spec's scheduler, which must be a static one here."""
    if not isinstance(spec.scheduler, StaticSettings):
        raise ValueError(f"scheduler {spec.scheduler.name!r} is adaptive: judge it with judge_adaptive")
    return spec.scheduler


@dataclass(frozen=True)
class Counts:
    """How many comparisons a job used, found in the cache, judged now, and got errors for."""

    requests: int
    cached: int
    judged_now: int
    errors_now: int


@dataclass
class Judged:
    """The judge step's result."""

    #: one row per comparison the job used (cached verdicts and new judgments); for a run scored block by block
    #: (``scores``), only the comparisons its win rates read
    judgments: pa.Table
    counts: Counts
    rankings: list[pa.Table] = field(default_factory=list)  # the adaptive scheduler's own rankings
    extra: dict[str, Any] = field(default_factory=dict)  # report sections: pool, adaptive rounds, first passes
    scores: StreamScores | None = None  # a streamed static run scored where its judgments are

    @property
    def totals(self) -> dict[str, Any]:
        """The report's totals of the judgments the job used (rows, verdicts, tokens, failures)."""
        return self.scores.totals if self.scores is not None else judgment_totals(self.judgments)


def judge(spec: JobSpec, inputs: Inputs, setup: JudgingSetup, progress: Progress) -> Judged:
    """The judge step: the one place that chooses how a run judges.

    - an adaptive scheduler: the driver's lockstep rounds over one warm pool (:func:`judge_adaptive`);
    - a static schedule in a one-pass mode: requests made in Ray Data tasks and streamed through the pool
      (:func:`judge_one_pass`, :mod:`pairank.jobs.judging.streamed`);
    - a static schedule in a mode of several passes: requests keyed on the driver, each pass judged in one stream
      after the one it reads, prompts rendered in a Ray Data stage (:func:`judge_in_passes`).
    """
    if spec.scheduler.adaptive:
        return judge_adaptive(spec, inputs, setup, progress)
    if setup.judging.kind is None:
        return judge_one_pass(spec, inputs, setup, progress)
    return judge_in_passes(spec, inputs, setup, progress)


def judge_in_passes(spec: JobSpec, inputs: Inputs, setup: JudgingSetup, progress: Progress) -> Judged:
    """A static schedule in a mode of several passes: every request known up front, keyed on the driver."""
    wanted = scheduled_requests(setup.maker, inputs.candidates, spec.aspects, static_scheduler(spec))
    read_at = time.time()
    answered = setup.cache.answered(aspects=spec.aspects, contexts=list(setup.maker.context), keys=wanted)
    done = set(answered.column("key").to_pylist())
    todo = {k: req for k, req in wanted.items() if k not in done}
    progress(f"{len(wanted)} comparisons ({len(wanted) - len(todo)} cached, {len(todo)} to judge)")
    run_meter(spec).add("pairank_comparisons_cached_total", len(wanted) - len(todo))
    record = PoolRecord()
    contexts = set(setup.maker.context)
    claimed = ClaimedJudging(setup.claims, setup.cache, set(spec.aspects), contexts, progress, read_at)
    with ExitStack() as stack:
        pools: list[Any] = []

        def judge(requests: dict[str, Any]) -> pa.Table:
            if not pools:  # entered when this run first has something of its own to ask
                pools.append(stack.enter_context(judge_pool(spec, record, progress)))
            return setup.judging.judge(pools[0], requests, setup.cache, progress)

        tables = claimed(todo, judge)
    new = pa.concat_tables(tables) if tables else JUDGMENTS.empty_table()
    return Judged(
        pa.concat_tables([answered, *claimed.found, new]),
        Counts(len(wanted), len(wanted) - new.num_rows, new.num_rows, error_count(new)),
        extra=_with_passes(record.sections(), setup),
    )


def judge_one_pass(spec: JobSpec, inputs: Inputs, setup: JudgingSetup, progress: Progress) -> Judged:
    """A static schedule in a one-pass mode: requests made, judged and scored block by block in the cluster."""
    systems = {s: s for s in pc.unique(inputs.candidates.column("system")).to_pylist()}  # one entry a system
    scheduler = static_scheduler(spec)
    scheduler.pairs({}, systems)  # the scheduler's checks on the run as a whole (one_vs_n: its baseline)
    join_cluster(spec)
    plan = StaticPlan.now(
        setup.maker.variants, setup.maker.judge, scheduler, tuple(spec.aspects), setup.cache, setup.claims
    )
    record = PoolRecord()
    blocks = put_blocks(inputs.candidates, inputs.source)
    run = judge_streamed(
        plan, blocks, partial(judge_pool, spec, record, progress), spec.flush_rows, progress, meter=run_meter(spec)
    )
    if spec.scoring.calibration == "batch":  # each aspect's prior is estimated from all of its verdicts at once
        scores, judgments = None, run.read_back(progress)
        comparisons = judgments.num_rows
    else:
        settings = ScoreSettings.of(
            plan,
            inputs.candidates,
            spec.scoring.verdicts,
            spec.judging.decisive_weight,
            spec.baseline if spec.winrate is not None else None,
        )
        scores = score_streamed(run, settings, progress)
        judgments, comparisons = scores.kept, scores.comparisons
    n = run.counted(comparisons, progress)
    counts = Counts(n.requests, n.cached, n.judged, n.errors)
    return Judged(judgments, counts, extra=_with_passes(record.sections(), setup), scores=scores)


def judge_adaptive(
    spec: JobSpec, inputs: Inputs, setup: JudgingSetup, progress: Progress, tasks: list[Task] | None = None
) -> Judged:
    """An adaptive schedule: lockstep rounds of the driver over one warm pool.

    ``tasks``: the machines to run (default: the spec's scheduler on every aspect, context and seed).
    """
    record = PoolRecord()
    driver = Driver(
        spec,
        inputs.candidates,
        setup.judging,
        setup.cache,
        partial(judge_pool, record=record, progress=progress),
        progress,
        tasks,
        setup.claims,
    )
    progress(f"{spec.scheduler.name}: {len(driver.tasks)} machines (aspect x context x seed) in lockstep rounds")
    result = driver.run()
    c = inputs.candidates
    system = dict(zip(c.column("candidate_id").to_pylist(), c.column("system").to_pylist()))
    unfinished = sorted({(t.aspect, t.context_id) for t in result.tasks if not t.machine.done})
    adaptive = {
        "stopped": result.stopped,
        "rounds": result.rounds,
        "machines": len(result.tasks),
        "unfinished": [list(u) for u in unfinished[:50]],
        "unfinished_count": len(unfinished),
        "driver_seconds": round(sum(r["driver_seconds"] for r in result.rounds), 3),
        "judge_seconds": round(sum(r["judge_seconds"] for r in result.rounds), 3),
    }
    for board in board_summaries([t.machine for t in result.tasks]):  # a board says which rule stopped it
        line = f"{board_line(board)}; order: {', '.join(r['system'] for r in board['order'])}"
        adaptive.setdefault("boards", []).append(board)
        adaptive.setdefault("board_lines", []).append(line)
        progress(line)
    return Judged(
        result.judgments,
        Counts(len(result.used_keys), result.cache_hits, result.judged, result.errors),
        [ranking_rows(result.tasks, driver.sched, system)],
        _with_passes({"adaptive": adaptive, **record.sections()}, setup),
    )


def _with_passes(extra: dict[str, Any], setup: JudgingSetup) -> dict[str, Any]:
    """The report's first-pass counts, for a multi-pass mode."""
    if setup.judging.kind is not None:
        extra["first_passes"] = {"kind": setup.judging.kind, **setup.judging.stats}
    return extra
