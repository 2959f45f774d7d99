"""Prompts rendered in the cluster: the driver hands the judge pool request identities, never prompt text.

A request's prompt holds its context and both candidates' texts (and, for a verdict of a
multi-pass mode, both analyses): it is by far the biggest part of a request, and an
adaptive round or a pass of a multi-pass mode knows its requests by far less. So
:class:`pairank.jobs.judging.passes.Judging` hands the pool a small Arrow table of identities, and
tasks in the cluster render them before the pool's forwarders send them on:

1. **Identities** (made on the driver, in prefix order: :func:`request_ids`,
   :data:`REQUEST_IDS`; first passes :data:`PASS_IDS`): the key, aspect, context,
   candidates and prompt variant of each request; a verdict of a multi-pass mode names
   its two first-pass rows by key (``analysis_a``, ``analysis_b``).
2. **Texts** (:func:`put_texts`): the job's candidate texts and contexts go to Ray's
   object store once per judge pool, not per round; a verdict pass's analyses (the texts its
   verdicts name) once per call.
3. **Render** (a Ray task per block of :data:`ROWS_PER_TASK` identities,
   :func:`render_requests` and :func:`render_passes`, run by :func:`pairank.cluster.executor.each`:
   a round is a few blocks, for which a Ray Data execution cost more to start than the tasks):
   REQUESTS (PASS_REQUESTS) rows, prompt for prompt what
   :meth:`pairank.jobs.judging.requests.RequestMaker.table` renders, in the block's order.
   A worker process builds its
   :class:`~pairank.jobs.judging.requests.RequestMaker` from the texts once and keeps it for
   the job's later rounds (:func:`maker_of`). The tasks reserve no CPU: the judge
   actors hold the CPUs, and a task that waited for one would wait for ever.

The pool then sends each context to the actor its id hashes to
(:meth:`pairank.cluster.pools.judge_pool.JudgePool.judge` given the tasks), so an engine still sees
a context's requests together, in prefix order. A round of a few requests goes the same
way (one render task): one path.

Static single-pass runs make their requests, keys included, in planning tasks instead
(:mod:`pairank.jobs.judging.streamed`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pairank.cluster import executor
from pairank.cluster.executor import Handle, Resources, Stage
from pairank.jobs.judging.requests import RequestMaker, prefix_key
from pairank.storage.schemas import PASS_REQUESTS, REQUESTS

#: A request as the driver knows it: the key, what is compared, the prompt variant, and for a verdict of a
#: multi-pass mode the keys of its two first-pass rows (null otherwise). Rendered into :data:`REQUESTS` rows.
REQUEST_IDS = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("context_id", pa.string()),
        pa.field("aspect", pa.string()),
        pa.field("candidate_a", pa.string()),
        pa.field("candidate_b", pa.string()),
        pa.field("variant", pa.int32()),
        pa.field("analysis_a", pa.string()),
        pa.field("analysis_b", pa.string()),
    ]
)
#: A first pass as the driver knows it: :data:`PASS_REQUESTS` without the prompt, with the prompt variant.
PASS_IDS = pa.schema(
    [*(f for f in PASS_REQUESTS if f.name not in ("prompt", "prompt_hash")), pa.field("variant", pa.int32())]
)

#: Identities per render task (the pool re-batches the rendered rows by ``pool.batch_size``).
ROWS_PER_TASK = 4096
#: Render tasks at once. They reserve no CPU: the judge actors hold the CPUs.
TASKS = 2
#: The render stages' resources.
RENDERING = Resources(concurrency=TASKS)
#: Request makers a worker process keeps (one per pool's texts; a job has one pool at a time).
KEPT_MAKERS = 2


@dataclass(frozen=True)
class Texts:
    """What a render task needs: the job's texts in Ray's object store, the prompt variants and the judging
    identity (pickled into the task)."""

    ref: Handle  # (candidate_id/text table, context_id/context table), in the object store
    variants: dict[str, Any]
    judge: dict[str, Any]


def put_texts(maker: RequestMaker) -> Texts:
    """``maker``'s candidate texts and contexts, put in Ray's object store (the driver's copy stays with it)."""
    texts = pa.table({"candidate_id": list(maker.text), "text": list(maker.text.values())})
    contexts = pa.table({"context_id": list(maker.context), "context": list(maker.context.values())})
    return Texts(executor.put((texts, contexts)), maker.variants, maker.judge)


_MAKERS: OrderedDict[str, RequestMaker] = OrderedDict()  # per worker process, by the texts' object id


def maker_of(texts: Texts) -> RequestMaker:
    """The request maker over ``texts``, built once per worker process (later rounds reuse it)."""
    name = texts.ref.id
    if name not in _MAKERS:
        cands, contexts = executor.get(texts.ref)
        text = dict(zip(cands.column("candidate_id").to_pylist(), cands.column("text").to_pylist()))
        context = dict(zip(contexts.column("context_id").to_pylist(), contexts.column("context").to_pylist()))
        _MAKERS[name] = RequestMaker.of_texts(text, context, texts.variants, texts.judge)
        while len(_MAKERS) > KEPT_MAKERS:
            _MAKERS.popitem(last=False)
    _MAKERS.move_to_end(name)
    return _MAKERS[name]


def request_ids(wanted: dict[str, tuple[Any, ...]], analyses: dict[str, tuple[str, str]] | None = None) -> pa.Table:
    """REQUEST_IDS rows for ``{key: (aspect, ctx, a, b[, variant])}`` in prefix order (the order of
    :meth:`RequestMaker.table <pairank.jobs.judging.requests.RequestMaker.table>`); ``analyses``: the keys of each
    request's two first-pass rows.

    >>> t = request_ids({"k1": ("x", "c", "q", "p"), "k2": ("x", "c", "p", "q", 1)},
    ...                 {"k1": ("s", "t"), "k2": ("u", "v")})
    >>> t.column("key").to_pylist(), t.column("variant").to_pylist(), t.column("analysis_a").to_pylist()
    (['k2', 'k1'], [1, 0], ['u', 's'])
    """
    order = sorted(wanted, key=lambda k: prefix_key(*wanted[k][:4]))
    reqs = [wanted[k] for k in order]
    pairs = [analyses[k] for k in order] if analyses is not None else [(None, None)] * len(order)
    columns = [
        order,
        *([r[i] for r in reqs] for i in (1, 0, 2, 3)),
        [r[4] if len(r) > 4 else 0 for r in reqs],
        [p[0] for p in pairs],
        [p[1] for p in pairs],
    ]
    return pa.Table.from_arrays([pa.array(c, f.type) for c, f in zip(columns, REQUEST_IDS)], schema=REQUEST_IDS)


def render_requests(batch: pa.Table, texts: Texts, analyses: Handle | None = None) -> pa.Table:
    """Stage: the REQUESTS rows of a block of REQUEST_IDS rows, in its order. ``analyses``: ``{first-pass key:
    text}`` in the object store, for the verdicts of a multi-pass mode."""
    maker = maker_of(texts)
    said = executor.get(analyses) if analyses is not None else {}
    rows = [
        maker.row(
            r["aspect"],
            r["context_id"],
            r["candidate_a"],
            r["candidate_b"],
            r["variant"],
            key=r["key"],
            analyses=None if r["analysis_a"] is None else (said[r["analysis_a"]], said[r["analysis_b"]]),
        )
        for r in batch.to_pylist()
    ]
    return pa.Table.from_pylist(rows, schema=REQUESTS)


def pass_prompt(maker: RequestMaker, row: dict[str, Any]) -> str:
    """The first-pass prompt of a PASS_IDS row: one output (analysis, score), or the pair's two with the
    analysed one's slot (analysis_pairwise: slot A shows the pair's candidate A whichever is analysed)."""
    template = maker.variants[row["aspect"]][row["variant"]].first
    if template is None:
        raise ValueError(f"prompt variant {row['variant']} of {row['aspect']!r} has no first-pass template")
    context = maker.context[row["context_id"]]
    if row["kind"] == "analysis_pairwise":
        cid, other = row["candidate_id"], row["other_id"]
        a, b = (cid, other) if row["focus"] == "A" else (other, cid)
        return str(
            template.fill(context=context, candidate_a=maker.text[a], candidate_b=maker.text[b], focus=row["focus"])
        )
    return str(template.fill(context=context, candidate=maker.text[row["candidate_id"]]))


def render_passes(batch: pa.Table, texts: Texts) -> pa.Table:
    """Stage: the PASS_REQUESTS rows of a block of PASS_IDS rows, in its order."""
    maker = maker_of(texts)
    rows = [
        {**r, "prompt": pass_prompt(maker, r), "prompt_hash": maker.variants[r["aspect"]][r["variant"]].first.hash}
        for r in batch.to_pylist()
    ]
    return pa.Table.from_pylist(rows, schema=PASS_REQUESTS)


def rendered(ids: pa.Table, stage: Stage[Texts], **extra: Any) -> executor.Tasks:
    """``ids`` (blocks of :data:`ROWS_PER_TASK`, in order) through a render ``stage`` (:func:`render_requests` or
    :func:`render_passes` over the job's :class:`Texts`), a task per block; lazy, for the pool to take."""
    blocks = [ids.slice(off, ROWS_PER_TASK) for off in range(0, ids.num_rows, ROWS_PER_TASK)]
    return executor.each(blocks, stage, **extra)
