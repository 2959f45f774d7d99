"""The run: candidates -> requests -> judge pool -> judgment cache -> operators -> report.

1. Read and validate the candidates (and human scores, if present) from the input.
2. The scheduler makes requests; each carries a key of everything that
   determines its outcome, and requests already answered in the cache are dropped.
3. The rest stream through Ray Data to a fixed pool of long-lived judge actors
   (one engine per actor, started once; see :mod:`pairank.cluster.pools.judge_pool`). Judgments come back to the
   driver and are appended to the cache as atomic Parquet parts every
   ``flush_rows`` rows, so a run killed midway keeps what it finished.
4. Rankings, Spearman and position-bias tables and the report are written under
   ``<output>/runs/<name>/``.

A run holds the lease of its name under the root while it goes
(:mod:`pairank.storage.store.lease`): a second run of that name is refused, not paid twice. Under that
lease it claims the comparisons it asks (:mod:`pairank.storage.store.claims`): a run of another name
that wants them too waits for their verdicts instead of asking them again.
A run that fails after it started judging says so in its manifest (``state: failed``).

Each step is a function of :mod:`pairank.jobs.pipeline` (a module per step); a nightly job
(:mod:`pairank.jobs.nightly`) is made of the same steps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pairank.cluster.runtime import raised_in_task
from pairank.jobs.judging.pool_wiring import join_cluster
from pairank.jobs.nightly import NightlyResult, run_nightly
from pairank.jobs.pipeline.inputs import read_inputs, scored_in_tasks
from pairank.jobs.pipeline.judge import judge
from pairank.jobs.pipeline.report import report, utc_now, write_run
from pairank.jobs.pipeline.score import score
from pairank.jobs.pipeline.setup import prepare_judging
from pairank.jobs.pipeline.winrates import win_rates
from pairank.jobs.specs.job import JobSpec, load_spec
from pairank.storage.errors import StorageUnavailable
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.store.claims import Claims, Holder
from pairank.storage.store.lease import take

log = logging.getLogger(__name__)


@dataclass
class RunResult:
    layout: RunLayout
    requests: int
    cached: int
    judged: int
    errors: int
    report: dict = field(repr=False)


def run_job(spec: JobSpec, progress: Callable[[str], None] = log.info, claims: Claims | None = None) -> RunResult:
    """Run a (non-nightly) job spec: read, judge what the cache lacks, score, write under ``runs/<name>/``.

    ``claims``: the run's claims under its lease (:func:`run` passes them): a comparison another run on the store
    is asking is waited for, not asked again."""
    started = time.perf_counter()
    layout = RunLayout.of(spec.output, spec.name)
    inputs = read_inputs(spec.input, spec.subset, texts=not scored_in_tasks(spec))
    setup = prepare_judging(spec, inputs.candidates, layout, claims)
    sizes = {"context": inputs.contexts, "candidate": inputs.candidates.num_rows, "aspect": len(spec.aspects)}
    progress(f"{spec.name}: " + ", ".join(f"{n} {noun}{'s' * (n != 1)}" for noun, n in sizes.items()))
    for line in spec.judge_choices:
        progress(f"judge: {line}")
    manifest: dict[str, Any] = {
        "name": spec.name,
        "state": "judging",
        "started_at": utc_now().isoformat(),
        "spec": spec.model_dump(mode="json"),
        "judge": setup.identity,
    }
    layout.manifest.write_json(manifest)
    try:
        judged = judge(spec, inputs, setup, progress)
    except BaseException as exc:
        own = raised_in_task(exc)  # a corrupt file met in a Ray task: the run fails with its error, naming it
        mark_failed(layout, manifest, own)
        if own is not exc:
            raise own from exc
        raise
    scored = score(spec, inputs, judged)
    rates = win_rates(spec.winrate, spec.baseline, spec.aspects, inputs, judged.judgments, progress)
    counts = {"contexts": inputs.contexts, "candidates": inputs.candidates.num_rows, **asdict(judged.counts)}
    extra = {**judged.extra, "judge_choices": spec.judge_choices}
    rep = report(manifest["spec"], setup.identity, judged.totals, scored, rates, counts, started, extra)
    write_run(
        layout,
        scored,
        rates,
        rep,
        {**manifest, "state": "done", "finished_at": utc_now().isoformat(), "counts": counts},
    )
    progress(f"report: {layout.report_md.uri}")
    c = judged.counts
    return RunResult(layout, c.requests, c.cached, c.judged_now, c.errors_now, rep)


def mark_failed(layout: RunLayout, manifest: dict, exc: BaseException) -> None:
    """Best effort: the manifest says the run failed and why (what it judged is in the store already)."""
    if isinstance(exc, StorageUnavailable):
        return  # the write would wait out the retry window again, and fail
    try:
        error = f"{type(exc).__name__}: {' '.join(str(exc).split())[:500]}"
        layout.manifest.write_json(
            {**manifest, "state": "failed", "finished_at": utc_now().isoformat(), "error": error}
        )
    except Exception as write_error:
        log.warning("%s: could not mark the run failed: %s", layout.manifest.uri, write_error)


def run(
    spec: JobSpec | str | Path, overrides: Sequence[str] = (), progress: Callable[[str], None] = log.info
) -> RunResult | NightlyResult:
    """Run a job: a :class:`~pairank.jobs.specs.job.JobSpec`, or a YAML spec file with ``--set``-style ``overrides``.

    A spec with a ``nightly`` section runs one night (:func:`pairank.jobs.nightly.run_nightly`) and
    returns its :class:`~pairank.jobs.nightly.NightlyResult`.
    """
    if not isinstance(spec, JobSpec):
        spec = load_spec(spec, list(overrides), note=lambda line: progress(f"note: {line}"))
    elif overrides:
        raise ValueError("overrides apply to a spec file; change a JobSpec with model_copy(update=...)")
    root = Location.of(spec.output).not_a_file("output")
    if spec.cluster.address:  # a cluster is joined first: a local input or output on several nodes is refused here
        join_cluster(spec)
    with take(root, spec.name) as lease:  # one run of a name under a root at a time
        claims = Claims(root, Holder.of(lease))  # and of each comparison it asks
        if spec.nightly is not None:
            return run_nightly(spec, progress=progress, claims=claims)
        return run_job(spec, progress=progress, claims=claims)
