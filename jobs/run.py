"""The run: candidates -> requests -> judge pool -> judgment cache -> operators -> report.

1. Read and validate the candidates (and human scores, if present) from the input.
2. The scheduler makes requests; each carries a key of everything that
   determines its outcome, and requests already answered in the cache are dropped.
3. The rest stream through Ray Data to a fixed pool of long-lived judge actors
   (one engine per actor, started once; see :mod:`pairank.cluster.pools`). Judgments come back to the
   driver and are appended to the cache as atomic Parquet parts every
   ``flush_rows`` rows, so a run killed midway keeps what it finished.
4. Rankings, Spearman and position-bias tables and the report are written under
   ``<output>/runs/<name>/``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from pairank.cluster.pools import JudgePool
from pairank.jobs.passes import Judging
from pairank.jobs.requests import RequestMaker, Variant, contexts_of, scheduled_requests, subset
from pairank.jobs.spec import JobSpec, WinRateSpec
from pairank.operators.judges import judge_identity
from pairank.operators.judges.modes import judging_identity
from pairank.operators.prompts import load_prompts
from pairank.operators.reports import build_report, position_bias, render_markdown, spearman_table
from pairank.operators.scores import rank_table
from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidates, read_human_scores, read_labels
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import JUDGMENTS, PASSES, WINRATE_JUDGES, WINRATES

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    layout: RunLayout
    requests: int
    cached: int
    judged: int
    errors: int
    report: dict = field(repr=False)


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
        "generate": (None, "generate"),
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


def read_inputs(spec: JobSpec) -> tuple[pa.Table, pa.Table]:
    return read_input_folder(Location.of(spec.input))


def read_input_folder(folder: Location) -> tuple[pa.Table, pa.Table]:
    """The folder's candidates and human scores (empty when it has none), validated."""
    return read_candidates(folder), read_human_scores(folder)


@contextmanager
def judge_pool(spec: JobSpec, info: list | None = None) -> Iterator[JudgePool]:
    """The job's judge pool on the job's Ray: engines start once, on entry.

    On exit, each actor's counters (engine prompts per stage) are added to ``info``.
    """
    from pairank.cluster.runtime import ensure_ray

    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    with JudgePool(spec.judge, spec.pool, spec.judging) as pool:
        try:
            yield pool
        finally:
            if info is not None:
                info.extend(pool.info())


def error_count(judgments: pa.Table) -> int:
    return judgments.num_rows - judgments.column("error").null_count


def judge_static(
    spec: JobSpec, candidates: pa.Table, judging: Judging, cache: JudgmentCache, progress: Callable[[str], None]
) -> dict:
    """A static schedule: every request known up front, each stage of the mode judged in one stream."""
    sched = spec.scheduler
    wanted = scheduled_requests(
        judging.maker, candidates, spec.aspects, sched.name, sched.comparisons, sched.seed, sched.baseline
    )
    answered = cache.answered()
    answered = answered.filter(pc.is_in(answered.column("key"), pa.array(list(wanted), pa.string())))
    done = set(answered.column("key").to_pylist())
    todo = {k: req for k, req in wanted.items() if k not in done}
    cached = len(wanted) - len(todo)
    progress(f"{len(wanted)} comparisons ({cached} cached, {len(todo)} to judge)")
    new = JUDGMENTS.empty_table()
    pool_info: list[dict] = []
    if todo:
        with judge_pool(spec, pool_info) as pool:
            new = judging.judge(pool, todo, cache, progress)
    judged, errors = new.num_rows, error_count(new)
    return {
        "judgments": pa.concat_tables([answered, new]),
        "counts": {"requests": len(wanted), "cached": cached, "judged_now": judged, "errors_now": errors},
        "rankings": [],
        "extra": {"pool": pool_info},
    }


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
    source = loc.join("judgments") if loc.join("judgments").is_dir() else loc.join("judgments.parquet")
    if not source.exists():
        raise ValueError(f"winrate.ood: {loc.uri} has neither judgments.parquet nor a judgments/ folder")
    table = read_judgments(source.uri)
    pairs, truth = labelled_pairs(labels)
    out = {}
    for aspect in aspects:
        mine = table.filter(pc.equal(table.column("aspect"), aspect))
        votes = pair_votes(mine, pairs, truth, seed)
        out[aspect] = {name: accuracies(votes.votes[:, j], truth) for j, name in enumerate(votes.judges)}
    return out


def judge_adaptive(
    spec: JobSpec, candidates: pa.Table, judging: Judging, cache: JudgmentCache, progress: Callable[[str], None]
) -> dict:
    """An adaptive schedule: lockstep rounds of the driver over one warm pool."""
    from pairank.jobs.driver import Driver, ranking_rows

    pool_info: list[dict] = []
    driver = Driver(spec, candidates, judging, cache, partial(judge_pool, info=pool_info), progress)
    progress(f"{spec.scheduler.name}: {len(driver.tasks)} machines (aspect x context x seed) in lockstep rounds")
    result = driver.run()
    system = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    unfinished = sorted({(t.aspect, t.context_id) for t in result.tasks if not t.machine.done})
    return {
        "judgments": result.judgments,
        "counts": {
            "requests": len(result.used_keys),
            "cached": result.cache_hits,
            "judged_now": result.judged,
            "errors_now": result.errors,
        },
        "rankings": [ranking_rows(result.tasks, spec.scheduler, system)],
        "extra": {
            "adaptive": {
                "stopped": result.stopped,
                "rounds": result.rounds,
                "machines": len(result.tasks),
                "unfinished": [list(u) for u in unfinished[:50]],
                "unfinished_count": len(unfinished),
                "driver_seconds": round(sum(r["driver_seconds"] for r in result.rounds), 3),
                "judge_seconds": round(sum(r["judge_seconds"] for r in result.rounds), 3),
            },
            "pool": pool_info,
        },
    }


def quantile_rankings(rankings: pa.Table, human: pa.Table, target_spec) -> pa.Table:
    """Every ranking's scores mapped onto the target distribution (methods suffixed ``_quantile``)."""
    from pairank.operators.quantile import quantile_table, target_from_percentages, target_from_scores

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


def consistency_sections(judgments: pa.Table, spearman: pa.Table, spec: JobSpec) -> dict:
    """Intransitive triads of any full matrices judged, and the Spearman spread across seeds."""
    from pairank.jobs.driver import method_name
    from pairank.operators.transitivity import intransitive_triads, seed_spread

    triads = intransitive_triads(judgments).to_pylist()
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


def run_job(spec: JobSpec, progress: Callable[[str], None] = log.info) -> RunResult:
    wall = time.perf_counter()
    layout = RunLayout.of(spec.output, spec.name)
    candidates, human = read_inputs(spec)
    candidates = subset(candidates, spec.subset.contexts, spec.subset.candidates)
    engine = judge_identity(spec.judge)
    maker = RequestMaker(candidates, mode_prompts(spec), judging_identity(engine, spec.judging))
    judging = Judging(spec.judging, maker, engine, JudgmentCache(layout.passes, PASSES), spec.flush_rows)
    identity = judging.identity
    cache = JudgmentCache(layout.judgments)
    n_ctx = len(contexts_of(candidates))
    progress(f"{spec.name}: {n_ctx} contexts, {candidates.num_rows} candidates, {len(spec.aspects)} aspects")
    manifest = {
        "name": spec.name,
        "state": "judging",
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "spec": spec.model_dump(mode="json"),
        "judge": identity,
    }
    layout.manifest.write_json(manifest)
    judged_run = (judge_adaptive if spec.scheduler.adaptive else judge_static)(
        spec, candidates, judging, cache, progress
    )
    if judging.kind is not None:
        judged_run["extra"]["first_passes"] = {"kind": judging.kind, **judging.stats}

    table = judged_run["judgments"]  # one row per comparison the run used: no second read of the cache
    scored = table
    if spec.scoring.calibration == "batch":
        from pairank.operators.calibration import calibrate_table

        scored = calibrate_table(table, by=("aspect",)).select(JUDGMENTS.names)
    rankings = pa.concat_tables(
        judged_run["rankings"] + [rank_table(scored, candidates, mode) for mode in spec.scoring.verdicts]
    )
    spearman = spearman_table(rankings, human, spec.report.bootstrap, spec.report.seed)
    if spec.scoring.quantile is not None:
        rankings = pa.concat_tables([rankings, quantile_rankings(rankings, human, spec.scoring.quantile)])
    bias = position_bias(table)
    extra = {**judged_run["extra"], **consistency_sections(table, spearman, spec)}
    if spec.winrate is not None:
        baseline = spec.winrate.baseline or spec.scheduler.baseline
        labels = read_labels(Location.of(spec.input))
        winrates, winrate_judges = winrate_tables(
            spec.winrate, baseline, spec.aspects, table, candidates, human, labels, progress
        )
        layout.winrates.write_parquet(winrates)
        layout.winrate_judges.write_parquet(winrate_judges)
        extra["winrates"] = winrates.to_pylist()
        extra["winrate_judges"] = winrate_judges.to_pylist()
    layout.rankings.write_parquet(rankings)
    layout.spearman.write_parquet(spearman)
    layout.position_bias.write_parquet(bias)
    counts = {"contexts": n_ctx, "candidates": candidates.num_rows, **judged_run["counts"]}
    report = build_report(
        spec.model_dump(mode="json"),
        identity,
        table,
        spearman,
        bias,
        counts=counts,
        wall_seconds=time.perf_counter() - wall,
        extra=extra,
    )
    layout.report_json.write_json(report)
    layout.report_md.write_text(render_markdown(report))
    layout.manifest.write_json(
        {
            **manifest,
            "state": "done",
            "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(),
            "counts": counts,
        }
    )
    progress(f"report: {layout.report_md.uri}")
    return RunResult(layout, counts["requests"], counts["cached"], counts["judged_now"], counts["errors_now"], report)


def run(
    spec: JobSpec | str | Path, overrides: list[str] = (), progress: Callable[[str], None] = log.info
) -> RunResult:
    """Run a job: a :class:`~pairank.jobs.spec.JobSpec`, or a YAML spec file with ``--set``-style ``overrides``.

    A spec with a ``nightly`` section runs one night (:func:`pairank.jobs.nightly.run_nightly`) and
    returns its :class:`~pairank.jobs.nightly.NightlyResult`.
    """
    from pairank.jobs.spec import load_spec

    if not isinstance(spec, JobSpec):
        spec = load_spec(spec, list(overrides))
    elif overrides:
        raise ValueError("overrides apply to a spec file; change a JobSpec with model_copy(update=...)")
    if spec.nightly is not None:
        from pairank.jobs.nightly import run_nightly

        return run_nightly(spec, progress=progress)
    return run_job(spec, progress=progress)
