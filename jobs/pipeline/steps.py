"""The stages a job is made of, each a function from dataclasses to dataclasses.

::

    read_inputs -> prepare_judging -> judge_static | judge_adaptive -> score -> win_rates -> report -> write_run

:func:`pairank.jobs.run.run_job` composes them in that order.
:func:`pairank.jobs.nightly.run_nightly` composes the same stages and differs only
where a night differs: its input is a prefix of drops, its machines are planned
from the placements of the last committed night, its judgments are every verdict
of its judge between the prefix's outputs, and what it writes is committed under a
fresh attempt folder before the run's report is written.

Where the judging runs is the pool's business (:mod:`pairank.cluster.pools`): this
module hands it what to run (:func:`judge_factory`, a picklable factory of the
engine and its judging mode) and where (:class:`~pairank.cluster.pools.PoolResources`).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pairank.cluster.pools import JudgePool, PoolResources
from pairank.jobs.pipeline.driver import Driver, Task, method_name, ranking_rows
from pairank.jobs.pipeline.passes import Judging, error_count
from pairank.jobs.pipeline.static_stream import StaticPlan, judge_streamed, put_blocks
from pairank.jobs.pipeline.requests import (
    RequestMaker,
    Variant,
    scheduled_requests,
    subset,
)
from pairank.jobs.specs.job import JobSpec, WinRateSpec
from pairank.jobs.pipeline.block_scores import ScoreSettings, StreamScores, score_streamed
from pairank.operators.judge_bias import judge_bias
from pairank.operators.judges import judge_identity
from pairank.operators.judges.modes import build_runner, failure_rows, judging_identity
from pairank.operators.judges.vllm_judge import uses_async_engine
from pairank.operators.prompts import load_prompts
from pairank.operators.reports import (
    build_report,
    judgment_totals,
    position_bias,
    render_markdown,
    spearman_table,
)
from pairank.operators.scores import rank_table
from pairank.operators.style_control import style_control_section
from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidate_ids, read_candidates, read_human_scores, read_labels
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import JUDGMENTS, PASSES, WINRATE_JUDGES, WINRATES

Progress = Callable[[str], None]


# ---------------------------------------------------------------------------
# read inputs


@dataclass(frozen=True)
class Inputs:
    """What a job reads: the candidates (after any ``subset``), human scores, and where they came from."""

    candidates: pa.Table
    human: pa.Table
    source: Location  # the input folder, or a nightly job's prefix
    folders: tuple[str, ...] = ()  # a nightly prefix: the folders it read

    @property
    def contexts(self) -> int:
        return pc.count_distinct(self.candidates.column("context_id")).as_py()

    def labels(self) -> pa.Table:
        """The source's pairwise human labels (empty when it has none)."""
        return read_labels(self.source)


def read_inputs(spec: JobSpec, texts: bool = True) -> Inputs:
    """The spec's input folder, validated, with ``subset`` applied; ``texts=False``: the candidates' ids only, for
    a run whose tasks read (and validate) the texts (:func:`scored_in_tasks`)."""
    source = Location.of(spec.input)
    candidates = (read_candidates if texts else read_candidate_ids)(source)
    return Inputs(subset(candidates, spec.subset.contexts, spec.subset.candidates), read_human_scores(source), source)


def scored_in_tasks(spec: JobSpec) -> bool:
    """Whether a run of ``spec`` makes its requests and its scores in Ray tasks, block by block (a static schedule
    judged in one pass, scored without a batch calibration): its driver then needs the candidates' ids only."""
    j = spec.judging
    one_pass = len(j.passes) <= 1 and j.mode != "pointwise"
    return spec.nightly is None and not spec.scheduler.adaptive and one_pass and spec.scoring.calibration != "batch"


# ---------------------------------------------------------------------------
# prepare judging


def mode_prompts(spec: JobSpec) -> dict[str, list[Variant]]:
    """Per aspect, the prompt variants of the spec's judging mode (see ``JudgingSpec.variants``)."""
    from pairank.operators.prompts import Domain, load_mode_prompts

    j = spec.judging
    if j.mode == "logprob" and j.variants is None:
        return {aspect: [Variant(t)] for aspect, t in load_prompts(Path(spec.prompts), spec.aspects).items()}
    folder = Path(spec.prompts)
    templates = Path(j.templates) if j.templates else folder.parent
    Domain.load(folder)  # a clear error for a prompts folder without domain.yaml
    variants = j.variants or ["v1"]
    kinds = {
        "logprob": (None, "logprob"),
        "generate": (None, "generate5" if j.verdict_scale == 5 else "generate"),
        "sample": (None, "generate"),
        "prepair": ("analysis", "prepair" if j.verdict == "logprob" else "prepair_generate"),
        "prepair_pairwise": ("analysis_pairwise", "prepair" if j.verdict == "logprob" else "prepair_generate"),
        "pointwise": ("pointwise", None),
    }[j.mode]
    loaded = [
        load_mode_prompts(templates, folder, kind, spec.aspects, variants, tuple(j.scale)) if kind else None
        for kind in kinds
    ]
    first, verdict = loaded
    return {
        aspect: [
            Variant(verdict[aspect][i] if verdict else None, first[aspect][i] if first else None)
            for i in range(len(variants))
        ]
        for aspect in spec.aspects
    }


@dataclass
class JudgingSetup:
    """The keyed request maker, the judging of the spec's mode, and the judgment cache under the root."""

    maker: RequestMaker
    judging: Judging
    cache: JudgmentCache

    @property
    def identity(self) -> dict:
        return self.judging.identity


def prepare_judging(spec: JobSpec, candidates: pa.Table, layout: RunLayout) -> JudgingSetup:
    """Prompts, keys and caches for ``candidates``; nothing is judged and no engine starts."""
    engine = judge_identity(spec.judge)
    maker = RequestMaker(candidates, mode_prompts(spec), judging_identity(engine, spec.judging))
    writer = f"run:{layout.name}"  # recorded in each commit (`pairank store history`)
    judging = Judging(spec.judging, maker, engine, JudgmentCache(layout.passes, PASSES, writer), spec.flush_rows)
    return JudgingSetup(maker, judging, JudgmentCache(layout.judgments, writer=writer))


# ---------------------------------------------------------------------------
# judge


#: Batches in flight per actor on vLLM's async engine when pool.max_batches_in_flight is unset.
ASYNC_BATCHES_IN_FLIGHT = 4


def engine_spec(spec: JobSpec):
    """The judge spec as the pool's actors run it: a vLLM judge's ``async_engine: auto`` decided by the GPUs the
    pool reserves."""
    if spec.judge.engine != "vllm":
        return spec.judge
    return spec.judge.model_copy(update={"async_engine": uses_async_engine(spec.judge, spec.pool.num_gpus)})


def batches_in_flight(spec: JobSpec) -> int:
    """Calls each actor runs at once: ``pool.max_batches_in_flight``; unset, 4 on vLLM's async engine and 1
    otherwise; always 1 on vLLM's synchronous engine.

    >>> from pairank.jobs.specs.job import parse_spec
    >>> base = {"name": "n", "input": "i", "output": "o", "aspects": ["a"], "prompts": "p"}
    >>> batches_in_flight(parse_spec({**base, "judge": {"engine": "vllm", "async_engine": True}}, "doc"))
    4
    >>> batches_in_flight(parse_spec({**base, "judge": {"engine": "vllm", "async_engine": False}}, "doc"))
    1
    >>> batches_in_flight(parse_spec({**base, "judge": {"engine": "simulated"}, "pool": {"max_batches_in_flight": 3}},
    ...                              "doc"))
    3
    """
    asked = spec.pool.max_batches_in_flight
    if spec.judge.engine != "vllm":
        return asked or 1
    if not engine_spec(spec).async_engine:
        return 1
    return asked or ASYNC_BATCHES_IN_FLIGHT


def judge_factory(spec: JobSpec) -> Callable[[], object]:
    """What a pool runs: a picklable factory of the spec's engine in its judging mode."""
    return partial(build_runner, engine_spec(spec), spec.judging)


def pool_resources(spec: JobSpec) -> PoolResources:
    """Where a pool runs: the spec's ``pool`` section."""
    p = spec.pool
    low, high = p.sizes
    return PoolResources(min_size=low, max_size=high, num_cpus=p.num_cpus, num_gpus=p.num_gpus,
                         batch_size=p.batch_size, retries=p.retries, max_restarts=p.max_restarts,
                         batches_in_flight=batches_in_flight(spec), idle_seconds=p.idle_seconds)  # fmt: skip


def failure_factory(spec: JobSpec) -> Callable[[str, pa.Table, str], pa.Table]:
    """What a pool answers for requests no engine could judge: error rows naming the reason."""
    return partial(failure_rows, judge_identity(spec.judge), spec.judging)


@dataclass
class PoolRecord:
    """What the job's pools did: each actor's counters (stopped ones too), the engines lost and replaced, and how
    many actors the pools had at most and at the end."""

    actors: list[dict] = field(default_factory=list)
    engines: dict = field(default_factory=dict)

    def add(self, actors: list[dict], losses: dict, sizes: dict | None = None) -> None:
        self.actors.extend(actors)
        for k, v in losses.items():
            self.engines[k] = self.engines.get(k, [] if isinstance(v, list) else 0) + v  # counts add, slots append
        if sizes:
            self.engines["actors_most"] = max(self.engines.get("actors_most", 0), sizes["actors_most"])
            self.engines["actors_end"] = sizes["actors_end"]  # the last pool's
            self.engines["actors_stopped"] = self.engines.get("actors_stopped", 0) + sizes["actors_stopped"]

    def sections(self) -> dict:
        """The report's ``pool`` (per actor) and ``engines`` (losses) sections."""
        return {"pool": self.actors, "engines": self.engines}


@contextmanager
def judge_pool(spec: JobSpec, record: PoolRecord | None = None) -> Iterator[JudgePool]:
    """The job's judge pool on the job's Ray: engines start once, on entry.

    On exit, each actor's counters (engine prompts per stage) and the engines lost
    are added to ``record``.
    """
    from pairank.cluster.runtime import ensure_ray

    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    with JudgePool(judge_factory(spec), pool_resources(spec), failure_factory(spec)) as pool:
        try:
            yield pool
        finally:
            if record is not None:
                record.add(pool.info(), pool.losses(), pool.sizes())


@dataclass(frozen=True)
class Counts:
    """How many comparisons a job used, found in the cache, judged now, and got errors for."""

    requests: int
    cached: int
    judged_now: int
    errors_now: int


@dataclass
class Judged:
    """The judge stage's result."""

    #: one row per comparison the job used (cached verdicts and new judgments); for a run scored block by block
    #: (``scores``), only the comparisons its win rates read
    judgments: pa.Table
    counts: Counts
    rankings: list[pa.Table] = field(default_factory=list)  # the adaptive scheduler's own rankings
    extra: dict = field(default_factory=dict)  # report sections: pool, adaptive rounds, first passes
    scores: StreamScores | None = None  # a streamed static run scored where its judgments are

    @property
    def totals(self) -> dict:
        """The report's totals of the judgments the job used (rows, verdicts, tokens, failures)."""
        return self.scores.totals if self.scores is not None else judgment_totals(self.judgments)


def judge_static(spec: JobSpec, inputs: Inputs, setup: JudgingSetup, progress: Progress) -> Judged:
    """A static schedule: every request known up front, each stage of the mode judged in one stream. Single-pass
    modes make their requests in Ray Data tasks (:mod:`pairank.jobs.pipeline.static_stream`); multi-pass modes key them on
    the driver and render their prompts in a Ray Data stage (:mod:`pairank.jobs.pipeline.render`)."""
    if setup.judging.kind is None:
        return _judge_static_streamed(spec, inputs, setup, progress)
    wanted = scheduled_requests(setup.maker, inputs.candidates, spec.aspects, spec.scheduler)
    answered = setup.cache.answered(aspects=spec.aspects, contexts=list(setup.maker.context), keys=wanted)
    done = set(answered.column("key").to_pylist())
    todo = {k: req for k, req in wanted.items() if k not in done}
    cached = len(wanted) - len(todo)
    progress(f"{len(wanted)} comparisons ({cached} cached, {len(todo)} to judge)")
    new = JUDGMENTS.empty_table()
    record = PoolRecord()
    if todo:
        with judge_pool(spec, record) as pool:
            new = setup.judging.judge(pool, todo, setup.cache, progress)
    return Judged(
        pa.concat_tables([answered, new]), Counts(len(wanted), cached, new.num_rows, error_count(new)),
        extra=_with_passes(record.sections(), setup),
    )  # fmt: skip


def _judge_static_streamed(spec: JobSpec, inputs: Inputs, setup: JudgingSetup, progress: Progress) -> Judged:
    from pairank.cluster.runtime import ensure_ray

    systems = {s: s for s in pc.unique(inputs.candidates.column("system")).to_pylist()}  # one entry a system
    spec.scheduler.pairs({}, systems)  # the scheduler's checks on the run as a whole (one_vs_n: its baseline)
    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    plan = StaticPlan(setup.maker.variants, setup.maker.judge, spec.scheduler, tuple(spec.aspects), setup.cache)
    record = PoolRecord()
    blocks = put_blocks(inputs.candidates, inputs.source)
    run = judge_streamed(plan, blocks, lambda: judge_pool(spec, record), spec.flush_rows, progress)
    if spec.scoring.calibration == "batch":  # each aspect's prior is estimated from all of its verdicts at once
        scores, judgments = None, run.read_back(progress)
        comparisons = judgments.num_rows
    else:
        settings = ScoreSettings.of(plan, inputs.candidates, spec.scoring.verdicts, spec.judging.decisive_weight,
                                    spec.baseline if spec.winrate is not None else None)  # fmt: skip
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
        spec, inputs.candidates, setup.judging, setup.cache, partial(judge_pool, record=record), progress, tasks
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
    return Judged(
        result.judgments, Counts(len(result.used_keys), result.cache_hits, result.judged, result.errors),
        [ranking_rows(result.tasks, spec.scheduler, system)],
        _with_passes({"adaptive": adaptive, **record.sections()}, setup),
    )  # fmt: skip


def _with_passes(extra: dict, setup: JudgingSetup) -> dict:
    """The report's first-pass counts, for a multi-pass mode."""
    if setup.judging.kind is not None:
        extra["first_passes"] = {"kind": setup.judging.kind, **setup.judging.stats}
    return extra


# ---------------------------------------------------------------------------
# score


@dataclass
class Scored:
    """Rankings, Spearman against the human scores, position bias, and consistency sections of the report."""

    rankings: pa.Table
    spearman: pa.Table
    bias: pa.Table
    extra: dict


def score(spec: JobSpec, inputs: Inputs, judged: Judged) -> Scored:
    """Win-ratio rankings (after batch calibration, if asked) next to the scheduler's own, Spearman,
    quantile-matched scores, position bias, transitivity and the judge-bias figures."""
    from pairank.operators.transitivity import intransitive_triads

    streamed = judged.scores
    if streamed is not None:  # scored block by block: the fits read a sample (see jobs/pipeline/block_scores.py)
        table, ranked, triads, bias = streamed.sample, [streamed.rankings], streamed.triads, streamed.position
        biases, fit, texts = streamed.judge_bias, streamed.fit_note(), streamed.candidates
        extra = {"fit_sample": fit} if fit is not None else {}
    else:
        table, extra, texts = judged.judgments, {}, inputs.candidates
        scored = table
        if spec.scoring.calibration == "batch":
            from pairank.operators.calibration import calibrate_table

            scored = calibrate_table(table, by=("aspect",)).select(JUDGMENTS.names)
        ranked = [rank_table(scored, inputs.candidates, mode, spec.judging.decisive_weight)
                  for mode in spec.scoring.verdicts]  # fmt: skip
        triads, bias, biases = intransitive_triads(table), position_bias(table), judge_bias(table, inputs.candidates)
    rankings = pa.concat_tables(judged.rankings + ranked)
    spearman = spearman_table(rankings, inputs.human, spec.report.bootstrap, spec.report.seed)
    if spec.scoring.quantile is not None:
        rankings = pa.concat_tables([rankings, quantile_rankings(rankings, inputs.human, spec.scoring.quantile)])
    extra = {**consistency_sections(triads, spearman, spec), "judge_bias": biases,
             "style_control": style_control_section(table, texts, spec.baseline), **extra}  # fmt: skip
    return Scored(rankings, spearman, bias, extra)


def quantile_rankings(rankings: pa.Table, human: pa.Table, target_spec) -> pa.Table:
    """Every ranking's scores mapped onto the target distribution (methods suffixed ``_quantile``)."""
    from pairank.operators.quantile import (
        quantile_table,
        target_from_percentages,
        target_from_scores,
    )

    if target_spec.percentages is not None:
        return quantile_table(rankings, target_from_percentages(target_spec.percentages))
    parts = []
    for aspect in sorted(set(rankings.column("aspect").to_pylist())):
        scores = human.filter(pc.equal(human.column("aspect"), aspect)).column("score").to_pylist()
        if not scores:
            raise ValueError(f"scoring.quantile.reference: the input has no human scores for aspect {aspect!r}")
        mine = rankings.filter(pc.equal(rankings.column("aspect"), aspect))
        parts.append(quantile_table(mine, target_from_scores(scores)))
    return pa.concat_tables(parts)


def consistency_sections(triads: pa.Table, spearman: pa.Table, spec: JobSpec) -> dict:
    """Intransitive triads of any full matrices judged (TRIADS rows), and the Spearman spread across seeds."""
    from pairank.operators.transitivity import seed_spread

    triads = triads.to_pylist()
    transitivity = []
    for aspect in sorted({r["aspect"] for r in triads}):
        rows = [r for r in triads if r["aspect"] == aspect]
        total, bad = sum(r["triads"] for r in rows), sum(r["intransitive"] for r in rows)
        transitivity.append(
            {
                "aspect": aspect,
                "contexts": len(rows),
                "triads": total,
                "intransitive": bad,
                "fraction": bad / total if total else None,
            }
        )
    seeds = []
    sched = spec.scheduler
    if sched.adaptive and sched.repeats > 1:
        methods = {method_name(sched, s) for s in range(sched.seed, sched.seed + sched.repeats)}
        groups: dict[tuple[str, str], list[float]] = {}
        for r in spearman.to_pylist():
            if r["method"] in methods and r["rho"] is not None:
                groups.setdefault((r["aspect"], r["level"]), []).append(r["rho"])
        for (aspect, level), values in sorted(groups.items()):
            seeds.append({"aspect": aspect, "level": level, "method": sched.name, **seed_spread(values)})
    return {"transitivity": transitivity, "seeds": seeds}


# ---------------------------------------------------------------------------
# win rates


@dataclass
class WinRates:
    """WINRATES and WINRATE_JUDGES of every aspect and system against the baseline."""

    rates: pa.Table
    judges: pa.Table


def win_rates(spec: JobSpec, inputs: Inputs, judgments: pa.Table, progress: Progress) -> WinRates | None:
    """The spec's ``winrate`` section over ``judgments`` (None without one)."""
    if spec.winrate is None:
        return None
    rates, judges = winrate_tables(
        spec.winrate, spec.baseline, spec.aspects, judgments, inputs.candidates, inputs.human, inputs.labels(),
        progress,
    )  # fmt: skip
    return WinRates(rates, judges)


def winrate_tables(
    ws: WinRateSpec,
    baseline: str,
    aspects: list[str],
    judgments: pa.Table,
    candidates: pa.Table,
    human: pa.Table,
    labels: pa.Table,
    progress: Callable[[str], None],
) -> tuple[pa.Table, pa.Table]:
    """WINRATES and WINRATE_JUDGES for every aspect and system against ``baseline``.

    Every judge identity in ``judgments`` is a judge; the truth comes from
    ``labels`` (pairwise) or ``human`` (scores) of the input.
    """
    from pairank.operators.votes import human_truth, pair_votes, system_pairs
    from pairank.operators.winrate_table import WinRateOptions, win_rates

    present = sorted(set(candidates.column("system").to_pylist()))
    if baseline not in present:
        raise ValueError(f"winrate.baseline {baseline!r} is not a system of the input; systems: {', '.join(present)}")
    systems = ws.systems or [s for s in present if s != baseline]
    unknown = [s for s in systems if s not in present]
    if unknown:
        raise ValueError(f"winrate.systems {unknown} are not systems of the input; systems: {', '.join(present)}")
    ood = ood_accuracies(ws.ood, aspects, ws.seed) if ws.prior == "ood" else {}
    pairs_of = {system: system_pairs(candidates, system, baseline) for system in systems}
    rows, judge_rows = [], []
    for aspect in aspects:
        mine = judgments.filter(pc.equal(judgments.column("aspect"), aspect))
        options = WinRateOptions(
            methods=tuple(ws.methods), prior=ws.prior, gold_fraction=ws.gold_fraction, ood=ood.get(aspect),
            draws=ws.draws, seed=ws.seed, mass=ws.mass, ds=ws.dawid_skene.model_dump(),
        )
        for system, pairs in pairs_of.items():
            votes = pair_votes(mine, pairs, human_truth(pairs, aspect, human, labels), ws.seed)
            progress(f"win rate of {system} against {baseline} ({aspect}): {votes.n_pairs} pairs")
            r, j = win_rates(votes, aspect, system, baseline, options)
            rows += r
            judge_rows += j
    return pa.Table.from_pylist(rows, schema=WINRATES), pa.Table.from_pylist(judge_rows, schema=WINRATE_JUDGES)


def ood_accuracies(folder: str, aspects: list[str], seed: int) -> dict[str, dict]:
    """Per aspect, each judge's accuracies on another labelled set: ``{aspect: {judge: Accuracy}}``.

    The set's pairwise labels give the truth (class 0: the candidate listed first is
    better); its judgments (``judgments.parquet`` or a ``judgments/`` cache) the votes.
    Judgments without an aspect of the job are not used.
    """
    from pairank.operators.judges.replay_judge import read_judgments
    from pairank.operators.votes import labelled_pairs, pair_votes
    from pairank.operators.winrate import accuracies

    loc = Location.of(folder)
    labels = read_labels(loc)
    if not labels.num_rows:
        raise ValueError(f"winrate.ood: {loc.join('pairwise_labels.parquet').uri} has no labelled pairs")
    found = [s for s in (loc.join("tables", "judgments"), loc.join("judgments"), loc.join("judgments.parquet"))
             if s.exists()]  # fmt: skip
    if not found:
        raise ValueError(f"winrate.ood: {loc.uri} has no judgments.parquet, judgment table or judgments/ folder")
    source = found[0]
    table = read_judgments(source.uri)
    pairs, truth = labelled_pairs(labels)
    out = {}
    for aspect in aspects:
        mine = table.filter(pc.equal(table.column("aspect"), aspect))
        votes = pair_votes(mine, pairs, truth, seed)
        out[aspect] = {name: accuracies(votes.votes[:, j], truth) for j, name in enumerate(votes.judges)}
    return out


# ---------------------------------------------------------------------------
# report and write


def report(
    spec: dict, identity: dict, totals: dict, scored: Scored, winrates: WinRates | None, counts: dict,
    started: float, extra: dict,
) -> dict:  # fmt: skip
    """The report (Markdown and JSON are rendered from it); ``totals``: the judgments' (``Judged.totals``);
    ``started`` is the job's ``perf_counter``."""
    extra = {**extra, **scored.extra}
    if winrates is not None:
        extra["winrates"], extra["winrate_judges"] = winrates.rates.to_pylist(), winrates.judges.to_pylist()
    return build_report(
        spec, identity, totals, scored.spearman, scored.bias, counts=counts,
        wall_seconds=time.perf_counter() - started, extra=extra,
    )  # fmt: skip


def write_run(layout: RunLayout, scored: Scored, winrates: WinRates | None, report: dict, manifest: dict) -> None:
    """The run's tables and report under ``runs/<name>/``; the (finished) manifest last."""
    if winrates is not None:
        layout.winrates.write_parquet(winrates.rates)
        layout.winrate_judges.write_parquet(winrates.judges)
    layout.rankings.write_parquet(scored.rankings)
    layout.spearman.write_parquet(scored.spearman)
    layout.position_bias.write_parquet(scored.bias)
    layout.report_json.write_json(report)
    layout.report_md.write_text(render_markdown(report))
    layout.manifest.write_json(manifest)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)
