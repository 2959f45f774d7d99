"""The run: candidates -> requests -> judge pool -> judgment cache -> operators -> report.

1. Read and validate the candidates (and human scores, if present) from the input.
2. The scheduler makes requests; each carries a key of everything that
   determines its outcome, and requests already answered in the cache are dropped.
3. The rest stream through Ray Data ``map_batches`` over a fixed pool of judge
   actors (one engine per actor, started once). Judgments come back to the
   driver and are appended to the cache as atomic Parquet parts every
   ``flush_rows`` rows, so a run killed midway keeps what it finished.
4. Rankings, Spearman and position-bias tables and the report are written under
   ``<output>/runs/<name>/``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from jobs.requests import build_requests, contexts_of, subset
from jobs.spec import JobSpec
from operators.judges import judge_identity
from operators.prompts import load_prompts
from operators.reports import build_report, position_bias, render_markdown, spearman_table
from operators.scores import rank_table
from storage.cache import JudgmentCache
from storage.fs import Location
from storage.layout import RunLayout
from storage.schemas import CANDIDATES, HUMAN_SCORES, JUDGMENTS, validate

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    layout: RunLayout
    requests: int
    cached: int
    judged: int
    errors: int
    report: dict = field(repr=False)


def read_inputs(spec: JobSpec) -> tuple[pa.Table, pa.Table]:
    folder = Location.of(spec.input)
    cand = folder.join("candidates.parquet")
    if not cand.exists():
        raise FileNotFoundError(f"{cand}: no candidates table (import a data set with `pairank import`)")
    candidates = validate(cand.read_parquet(), CANDIDATES, cand.uri)
    scores = folder.join("human_scores.parquet")
    human = validate(scores.read_parquet(), HUMAN_SCORES, scores.uri) if scores.exists() else HUMAN_SCORES.empty_table()
    return candidates, human


def judge_with_ray(
    todo: pa.Table, spec: JobSpec, cache: JudgmentCache, progress: Callable[[str], None]
) -> tuple[int, int]:
    """Judge ``todo`` on the actor pool, appending to ``cache``; returns (judged, errors)."""
    import ray

    from cluster.pools import judge_pool_args
    from cluster.runtime import ensure_ray
    from operators.judges.stage import JudgeStage

    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    size = spec.pool.batch_size
    blocks = [todo.slice(i, size) for i in range(0, todo.num_rows, size)]
    ds = ray.data.from_arrow(blocks).map_batches(
        JudgeStage, fn_constructor_kwargs={"judge_spec": spec.judge}, **judge_pool_args(spec.pool)
    )
    buffer: list[pa.Table] = []
    buffered = judged = errors = 0
    started = time.perf_counter()
    # prefetch_batches=0: take each batch as soon as its actor finishes it (with prefetching the
    # driver would see batch i only once batch i+1 exists, so a kill would lose one more batch).
    for batch in ds.iter_batches(batch_format="pyarrow", batch_size=None, prefetch_batches=0):
        batch = batch.select(JUDGMENTS.names).cast(JUDGMENTS)
        buffer.append(batch)
        buffered += batch.num_rows
        errors += batch.num_rows - pc.sum(pc.is_null(batch.column("error")).cast(pa.int64())).as_py()
        if buffered >= spec.flush_rows:
            cache.append(pa.concat_tables(buffer))
            judged += buffered
            buffer, buffered = [], 0
            rate = judged / max(time.perf_counter() - started, 1e-9)
            progress(f"judged {judged}/{todo.num_rows} ({errors} errors, {rate:.2f}/s)")
    if buffer:
        cache.append(pa.concat_tables(buffer))
        judged += buffered
        progress(f"judged {judged}/{todo.num_rows} ({errors} errors)")
    return judged, errors


def run_job(spec: JobSpec, progress: Callable[[str], None] = log.info) -> RunResult:
    wall = time.perf_counter()
    layout = RunLayout.of(spec.output, spec.name)
    candidates, human = read_inputs(spec)
    candidates = subset(candidates, spec.subset.contexts, spec.subset.candidates)
    prompts = load_prompts(Path(spec.prompts), spec.aspects)
    identity = judge_identity(spec.judge)
    requests = build_requests(
        candidates,
        spec.aspects,
        prompts,
        spec.scheduler.name,
        spec.scheduler.comparisons,
        spec.scheduler.seed,
        identity,
    )
    cache = JudgmentCache(layout.judgments)
    answered = cache.answered()
    have = pc.is_in(requests.column("key"), answered.column("key"))
    todo = requests.filter(pc.invert(have))
    cached = requests.num_rows - todo.num_rows
    n_ctx = len(contexts_of(candidates))
    progress(
        f"{spec.name}: {n_ctx} contexts, {candidates.num_rows} candidates, {len(spec.aspects)} aspects -> "
        f"{requests.num_rows} comparisons ({cached} cached, {todo.num_rows} to judge)"
    )
    manifest = {
        "name": spec.name,
        "state": "judging",
        "started_at": dt.datetime.now(dt.timezone.utc).isoformat(),
        "spec": spec.model_dump(mode="json"),
        "judge": identity,
        "requests": requests.num_rows,
        "cached": cached,
    }
    layout.manifest.write_json(manifest)
    judged = errors = 0
    if todo.num_rows:
        judged, errors = judge_with_ray(todo, spec, cache, progress)

    table = cache.read()
    table = table.filter(pc.is_in(table.column("key"), requests.column("key")))
    rankings = pa.concat_tables([rank_table(table, candidates, mode) for mode in spec.scoring.verdicts])
    spearman = spearman_table(rankings, human, spec.report.bootstrap, spec.report.seed)
    bias = position_bias(table)
    layout.rankings.write_parquet(rankings)
    layout.spearman.write_parquet(spearman)
    layout.position_bias.write_parquet(bias)
    report = build_report(
        spec.model_dump(mode="json"),
        identity,
        table,
        spearman,
        bias,
        counts={
            "contexts": n_ctx,
            "candidates": candidates.num_rows,
            "requests": requests.num_rows,
            "cached": cached,
            "judged_now": judged,
            "errors_now": errors,
        },
        wall_seconds=time.perf_counter() - wall,
    )
    layout.report_json.write_json(report)
    layout.report_md.write_text(render_markdown(report))
    layout.manifest.write_json(
        {**manifest, "state": "done", "finished_at": dt.datetime.now(dt.timezone.utc).isoformat(), "judged": judged}
    )
    progress(f"report: {layout.report_md.uri}")
    return RunResult(layout, requests.num_rows, cached, judged, errors, report)
