"""Judging keyed requests in the spec's mode: every pass is a Ray Data stream on the same warm pool.

The driver hands the pool request identities only: each pass's prompts are rendered
by a Ray Data stage before the pool's (:mod:`pairank.jobs.judging.render`). Single-pass modes
(``logprob``, ``generate``, ``sample``) send their requests through the pool's
``pairwise`` pass. Multi-pass modes first run a pass per output and cache it
(``<output>/passes/``, PASSES rows):

* ``prepair``: an ``analysis`` of each output, keyed by (judge, template, aspect,
  context, output): an output compared with many others is analysed once per
  job, and never again by a later job with the same judge and template;
* ``prepair_pairwise`` (PRePair^): an ``analysis_pairwise`` of each output of
  each ordered pair, written while seeing both (so no reuse across pairs);
* ``pointwise``: a ``score`` of each output; its verdicts need no engine.

then send the verdicts through the ``pairwise`` pass, their prompts rendered with
both analyses (PRePair: each verdict names its two first-pass rows by key), or
compare the two scores (pointwise: see
:func:`pairank.judges.modes.pair_scores_verdict`). A pair whose first pass
failed is an error row naming the output, retried on the next run like any
error row; a first pass that failed is asked again then too.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import Any

import pyarrow as pa

from pairank.cluster import executor
from pairank.cluster.executor import Handle, Stage, Tasks
from pairank.cluster.metrics import Meter
from pairank.cluster.pools.judge_pool import JudgePool
from pairank.jobs.judging.progress import PassProgress, Progress
from pairank.jobs.judging.render import (
    PASS_IDS,
    RENDERING,
    Texts,
    put_texts,
    render_passes,
    render_requests,
    rendered,
    request_ids,
)
from pairank.jobs.judging.requests import RequestMaker
from pairank.jobs.specs.job import JudgingSpec
from pairank.judges.modes import (
    describe_scores,
    judging_identity,
    pair_scores_verdict,
    pass_identity,
)
from pairank.storage.keys import judgment_key
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import JudgmentCache

log = logging.getLogger(__name__)

Request = tuple[Any, ...]  # (aspect, context_id, candidate_a, candidate_b[, variant])


def error_count(judgments: pa.Table) -> int:
    """Rows of a JUDGMENTS table that are errors (no verdict)."""
    return int(judgments.num_rows - judgments.column("error").null_count)


def judge_into_cache(
    pool: JudgePool,
    todo: pa.Table,
    cache: JudgmentCache,
    flush_rows: int,
    progress: Callable[[str], None],
    judging_pass: str = "pairwise",
    render: Callable[[pa.Table], Tasks] | None = None,
) -> pa.Table:
    """Judge ``todo`` in the pool's ``judging_pass``, appending a cache part every ``flush_rows``; returns the rows.

    ``render``: ``todo`` holds request identities, and ``render(todo)`` is the render tasks of their
    requests (:func:`pairank.jobs.judging.render.rendered`); without it, ``todo`` holds the requests.

    (A stream of requests made in Ray Data tasks uses :class:`CacheWriter` directly:
    :mod:`pairank.jobs.judging.streamed`.) Whatever the pool has returned is written before an error
    propagates (a failing stream flushes its buffer first), and a key is written once per call even if the
    pool returned it twice (a batch sent again after a lost engine).
    """
    writer = CacheWriter(
        cache,
        flush_rows,
        progress,
        judging_pass,
        getattr(pool, "losses", None),
        lambda: todo.num_rows,
        meter=getattr(pool, "meter", None),
    )
    writer.run(pool.judge(render(todo) if render is not None else todo, judging_pass))
    return writer.table()


#: Without ``keep``, a key is checked against the keys of this many previous batches (a batch the pool sent again
#: after a lost engine comes back within a few batches; reads take one row per key in any case).
SEEN_BATCHES = 256


class CacheWriter:
    """Appends a judging pass's judged batches to the cache, a commit every ``flush_rows``, each key once, with progress
    lines (done, errors, engines lost; rate and ETA while the total is known); with a ``meter``, the comparisons
    judged and errored as metrics (:mod:`pairank.cluster.metrics`)."""

    def __init__(
        self,
        cache: JudgmentCache,
        flush_rows: int,
        progress: Callable[[str], None],
        judging_pass: str,
        losses: Callable[[], dict[str, Any]] | None,
        total: Callable[[], int | None],
        keep: bool = True,
        meter: Meter | None = None,
    ):
        self.cache, self.flush_rows, self.progress, self.judging_pass, self.meter = (
            cache,
            flush_rows,
            progress,
            judging_pass,
            meter,
        )
        self.losses, self.total, self.keep = losses, total, keep
        self.buffer: list[pa.Table] = []
        self.out: list[pa.Table] = []
        self.seen: set[str] = set()  # keys written; without keep, those of the last SEEN_BATCHES batches only
        self.recent: deque[list[str]] = deque()
        self.buffered = self.judged = self.errors = 0
        self.started = time.perf_counter()

    def flush(self) -> None:
        part = pa.concat_tables(self.buffer)
        self.cache.append(part)
        if self.keep:
            self.out.append(part)
        self.judged += self.buffered
        self.buffer, self.buffered = [], 0

    def report(self, final: bool) -> None:
        total = self.total()
        n = self.losses()["lost"] if self.losses is not None else 0
        line = f"{self.judging_pass}: {self.judged}/{total if total is not None else '?'} ({self.errors} errors"
        line += f", {n} engine{'s' if n != 1 else ''} lost and replaced" if n else ""
        if not final and total is not None:
            rate = self.judged / max(time.perf_counter() - self.started, 1e-9)
            eta = (total - self.judged) / rate if rate > 0 else float("inf")
            line += f", {rate:.2f}/s, ETA {_clock(eta)}"
        elif not final:
            line += ", requests still being planned"
        self.progress(
            PassProgress(
                line + ")",
                judging_pass=self.judging_pass,
                done=self.judged,
                total=max(total or 0, self.judged),
                errors=self.errors,
                final=final,
            )
        )

    def run(self, batches: Iterable[pa.Table]) -> None:
        schema = self.cache.schema
        try:
            for batch in batches:
                batch = batch.select(schema.names).cast(schema)
                keys = batch.column("key").to_pylist()
                fresh = [i for i, k in enumerate(keys) if k not in self.seen]
                if len(fresh) < len(keys):
                    batch = batch.take(pa.array(fresh, pa.int64()))
                self.seen.update(keys)
                if not self.keep:  # a bounded memory: a batch sent again comes back soon after the first
                    self.recent.append(keys)
                    if len(self.recent) > SEEN_BATCHES:
                        self.seen.difference_update(self.recent.popleft())
                self.buffer.append(batch)
                self.buffered += batch.num_rows
                errors = error_count(batch)
                self.errors += errors
                if self.meter is not None:
                    self.meter.add("pairank_comparisons_judged_total", batch.num_rows, judging_pass=self.judging_pass)
                    self.meter.add("pairank_comparisons_errored_total", errors, judging_pass=self.judging_pass)
                if self.buffered >= self.flush_rows:
                    self.flush()
                    self.report(final=False)
        except BaseException:
            if self.buffered:  # what the pool returned is kept, whatever happens next
                self.flush()
                log.warning("%s: the stream failed after %d judgments; those are saved", self.judging_pass, self.judged)
            raise
        if self.buffer:
            self.flush()
        if self.judged or self.total():
            self.report(final=True)

    def table(self) -> pa.Table:
        return pa.concat_tables(self.out) if self.out else self.cache.schema.empty_table()


def _clock(seconds: float) -> str:
    """``1:02:03``, ``4:05`` or ``?`` (unknown).

    >>> _clock(3723.4), _clock(245), _clock(float("inf"))
    ('1:02:03', '4:05', '?')
    """
    if seconds != seconds or seconds == float("inf"):
        return "?"
    m, s = divmod(int(round(seconds)), 60)
    h, m = divmod(m, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


class Judging:
    """Judges ``{key: request}`` in the spec's mode on a pool; see the module docstring.

    ``stats`` counts first passes reused from the cache, run now, and failed.
    """

    def __init__(
        self,
        judging: JudgingSpec,
        maker: RequestMaker,
        engine_identity: dict[str, Any],
        passes: JudgmentCache | None,
        flush_rows: int,
    ):
        self.judging, self.maker, self.flush_rows = judging, maker, flush_rows
        self.identity = judging_identity(engine_identity, judging)
        self.kind = judging.passes[0] if len(judging.passes) > 1 or judging.mode == "pointwise" else None
        self.stats: Counter[str] = Counter(cached=0, run=0, errors=0)
        self.known: dict[str, dict[str, Any]] = {}
        self._texts: Texts | None = None  # the job's texts in the object store for the render tasks: once per pool
        self._texts_pool: weakref.ReferenceType[JudgePool] | None = None
        if self.kind is not None:
            if passes is None:
                raise ValueError(f"judging.mode {judging.mode!r} needs a cache for its first passes")
            self.passes = passes
            self.pass_identity = pass_identity(engine_identity, judging, self.kind)
            answered = passes.answered(aspects=list(maker.variants), contexts=list(maker.context))  # this job's scope
            self.known = {r["key"]: r for r in answered.to_pylist()}

    def judge(
        self, pool: JudgePool, wanted: dict[str, Request], cache: JudgmentCache, progress: Callable[[str], None]
    ) -> pa.Table:
        """Judgments of every request in ``wanted``, appended to ``cache`` as they come."""
        if not wanted:
            return JUDGMENTS.empty_table()
        if self.kind is None:
            return self._judge_ids(pool, request_ids(wanted), cache, progress)
        firsts = self._first_passes(pool, wanted, progress)
        if self.judging.mode == "pointwise":
            table = self._score_verdicts(wanted, firsts)
            cache.append(table)
            return table
        ready, failed = {}, {}
        for key, req in wanted.items():
            rows = firsts[key]
            bad = [r for r in rows if r.get("error") is not None]
            if bad:
                failed[key] = f"{self.kind} of {bad[0]['candidate_id']} failed: {bad[0]['error']}"
            else:
                ready[key] = req
        parts = []
        if failed:
            parts.append(self._error_rows({k: wanted[k] for k in failed}, failed))
            cache.append(parts[-1])
        if ready:
            analyses = {k: (firsts[k][0]["key"], firsts[k][1]["key"]) for k in ready}
            said = executor.put({r["key"]: r["text"] for k in ready for r in firsts[k]})  # once per call
            parts.append(self._judge_ids(pool, request_ids(ready, analyses), cache, progress, analyses=said))
        return pa.concat_tables(parts)

    def _judge_ids(
        self,
        pool: JudgePool,
        ids: pa.Table,
        cache: JudgmentCache,
        progress: Progress,
        judging_pass: str = "pairwise",
        analyses: Handle | None = None,
    ) -> pa.Table:
        """Judge REQUEST_IDS (PASS_IDS) rows on ``pool``, their prompts rendered by tasks in the cluster in front of
        the pool's forwarders; appended to ``cache`` as they come."""
        if self._texts is None or self._texts_pool is None or self._texts_pool() is not pool:
            self._texts, self._texts_pool = put_texts(self.maker), weakref.ref(pool)
        texts = self._texts
        if judging_pass == "pairwise":
            render = partial(rendered, stage=Stage(render_requests, texts, RENDERING), analyses=analyses)
        else:
            render = partial(rendered, stage=Stage(render_passes, texts, RENDERING))
        return judge_into_cache(pool, ids, cache, self.flush_rows, progress, judging_pass, render)

    # -- first passes --------------------------------------------------------------------------------------------

    def _pass_rows(self, req: Request) -> list[dict[str, Any]]:
        """The two first-pass requests a pairwise request needs, as PASS_IDS rows (slot A's output first; their
        prompts are rendered in the cluster: :func:`pairank.jobs.judging.render.pass_prompt`)."""
        aspect, ctx, a, b, *rest = req
        variant = rest[0] if rest else 0
        template = self.maker.variants[aspect][variant].first
        if template is None:
            raise ValueError(
                f"judging.mode {self.judging.mode!r}: prompt variant {variant} of {aspect!r} has no first pass"
            )
        context, ta, tb = self.maker.context[ctx], self.maker.text[a], self.maker.text[b]
        same = dict(context_id=ctx, aspect=aspect, kind=self.kind, variant=variant)
        if self.kind == "analysis_pairwise":
            return [
                dict(
                    key=judgment_key(
                        {**self.pass_identity, "focus": focus}, template.hash, aspect, ctx, context, a, ta, b, tb
                    ),
                    candidate_id=cid,
                    other_id=other,
                    focus=focus,
                    **same,
                )
                for focus, cid, other in (("A", a, b), ("B", b, a))
            ]
        return [
            dict(
                key=judgment_key(self.pass_identity, template.hash, aspect, ctx, context, cid, text, "", ""),
                candidate_id=cid,
                other_id="",
                focus="",
                **same,
            )
            for cid, text in ((a, ta), (b, tb))
        ]

    def _first_passes(
        self, pool: JudgePool, wanted: dict[str, Request], progress: Progress
    ) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
        """Per judgment key, its two first-pass rows; the missing ones are run on the pool first."""
        needs = {key: self._pass_rows(req) for key, req in wanted.items()}
        todo: dict[str, dict[str, Any]] = {}
        for rows in needs.values():
            for r in rows:
                if r["key"] not in self.known:
                    todo.setdefault(r["key"], r)
        self.stats["cached"] += len({r["key"] for rows in needs.values() for r in rows} - set(todo))
        if todo:
            progress(f"{self.kind}: {len(todo)} outputs to pass over ({self.stats['cached']} cached so far)")
            ordered = sorted(todo.values(), key=lambda r: (r["context_id"], r["aspect"], r["candidate_id"], r["focus"]))
            ids = pa.Table.from_pylist(ordered, schema=PASS_IDS)
            done = self._judge_ids(pool, ids, self.passes, progress, judging_pass=str(self.kind))
            rows = done.to_pylist()
            self.stats["run"] += len(rows)
            self.stats["errors"] += sum(r["error"] is not None for r in rows)
            fresh = {r["key"]: r for r in rows}
            self.known.update({k: r for k, r in fresh.items() if r["error"] is None})
        else:
            fresh = {}

        def found(r: dict[str, Any]) -> dict[str, Any]:
            got = self.known.get(r["key"]) or fresh.get(r["key"])
            return got if got is not None else {**r, "error": "the pool returned no row for this pass"}

        return {key: (found(rows[0]), found(rows[1])) for key, rows in needs.items()}

    # -- verdict rows without an engine ----------------------------------------------------------------------------

    def _request_table(self, wanted: dict[str, Request]) -> pa.Table:
        rows = []
        for key, (aspect, ctx, a, b, *rest) in wanted.items():
            v = self.maker.variants[aspect][rest[0] if rest else 0]
            rows.append(
                dict(
                    key=key, context_id=ctx, aspect=aspect, candidate_a=a, candidate_b=b, prompt="", prompt_hash=v.hash
                )
            )
        return pa.Table.from_pylist(rows)

    def _error_rows(self, wanted: dict[str, Request], errors: dict[str, str]) -> pa.Table:
        n = len(wanted)
        return judgment_table_of(
            self._request_table(wanted), self.identity, [None] * n, [None] * n, [None] * n, [errors[k] for k in wanted]
        )

    def _score_verdicts(
        self, wanted: dict[str, Request], firsts: dict[str, tuple[dict[str, Any], dict[str, Any]]]
    ) -> pa.Table:
        scale, margin = self.judging.scale, self.judging.tie_margin
        p_a: list[float | None] = []
        label: list[str | None] = []
        raw: list[str | None] = []
        error: list[str | None] = []
        for key in wanted:
            ra, rb = firsts[key]
            bad = ra if ra.get("error") is not None else rb if rb.get("error") is not None else None
            if bad is not None:
                p_a.append(None)
                label.append(None)
                raw.append(None)
                error.append(f"score of {bad['candidate_id']} failed: {bad['error']}")
                continue
            p, lab = pair_scores_verdict(ra["score"], rb["score"], scale, margin)
            p_a.append(p)
            label.append(lab)
            raw.append(describe_scores(ra["score"], rb["score"]))
            error.append(None)
        return judgment_table_of(self._request_table(wanted), self.identity, p_a, label, raw, error)


def judgment_table_of(
    requests: pa.Table,
    identity: dict[str, Any],
    p_a: Sequence[float | None],
    label: Sequence[str | None],
    raw_text: Sequence[str | None],
    error: Sequence[str | None],
) -> pa.Table:
    """JUDGMENTS rows made on the driver (no engine time or tokens)."""
    from pairank.judges.interface import judgment_table

    n = requests.num_rows
    return judgment_table(
        requests,
        identity,
        p_a=p_a,
        label=label,
        raw_text=raw_text,
        input_tokens=[0] * n,
        output_tokens=[0] * n,
        seconds=[0.0] * n,
        error=error,
    )
