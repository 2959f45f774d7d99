"""Turning candidates and a schedule into keyed, prefix-friendly comparison requests."""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from jobs.schedulers import schedule
from operators.prompts import PromptTemplate
from storage.keys import judgment_key
from storage.schemas import REQUESTS


def contexts_of(candidates: pa.Table) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for ctx, cid in zip(candidates.column("context_id").to_pylist(), candidates.column("candidate_id").to_pylist()):
        out[ctx].append(cid)
    return dict(out)


def subset(candidates: pa.Table, contexts: int | None, per_context: int | None) -> pa.Table:
    """The first ``contexts`` contexts and ``per_context`` candidates of each, by id (deterministic)."""
    if contexts is None and per_context is None:
        return candidates
    by = contexts_of(candidates)
    keep_ctx = sorted(by)[:contexts] if contexts else sorted(by)
    keep = {cid for ctx in keep_ctx for cid in sorted(by[ctx])[:per_context]}
    return candidates.filter(pc.is_in(candidates.column("candidate_id"), pa.array(sorted(keep))))


def prefix_order(rows: list[dict]) -> list[dict]:
    """Sort so all pairs of a context are adjacent and both orders of a pair sit together.

    Requests of one context share the context as a prompt prefix, so an engine with
    prefix caching computes it once.

    >>> rows = [dict(context_id="c", aspect="x", candidate_a=a, candidate_b=b) for a, b in
    ...         [("q", "p"), ("r", "p"), ("p", "q")]]
    >>> [(r["candidate_a"], r["candidate_b"]) for r in prefix_order(rows)]
    [('p', 'q'), ('q', 'p'), ('r', 'p')]
    """

    def key(r):
        a, b = r["candidate_a"], r["candidate_b"]
        return (r["context_id"], min(a, b), max(a, b), r["aspect"], a)

    return sorted(rows, key=key)


class RequestMaker:
    """Keys and renders requests ``(aspect, context_id, a, b)`` of one run.

    The key depends on the judge identity, the template, the aspect, the context
    and both candidates (ids and texts), so a key answered once is never paid again.
    """

    def __init__(self, candidates: pa.Table, prompts: dict[str, PromptTemplate], judge: dict) -> None:
        ids = candidates.column("candidate_id").to_pylist()
        self.text = dict(zip(ids, candidates.column("text").to_pylist()))
        self.context = dict(zip(candidates.column("context_id").to_pylist(), candidates.column("context").to_pylist()))
        self.prompts, self.judge = prompts, judge

    def key(self, aspect: str, ctx: str, a: str, b: str) -> str:
        template = self.prompts[aspect]
        return judgment_key(self.judge, template.hash, aspect, ctx, self.context[ctx], a, self.text[a], b, self.text[b])

    def row(self, aspect: str, ctx: str, a: str, b: str, key: str | None = None) -> dict:
        template = self.prompts[aspect]
        return {
            "key": key or self.key(aspect, ctx, a, b),
            "context_id": ctx,
            "aspect": aspect,
            "candidate_a": a,
            "candidate_b": b,
            "prompt": template.render(self.context[ctx], self.text[a], self.text[b]),
            "prompt_hash": template.hash,
        }

    def table(self, wanted: dict[str, tuple[str, str, str, str]]) -> pa.Table:
        """REQUESTS rows for ``{key: (aspect, ctx, a, b)}``, in prefix order."""
        rows = [self.row(*req, key=key) for key, req in wanted.items()]
        return pa.Table.from_pylist(prefix_order(rows), schema=REQUESTS)


def build_requests(
    candidates: pa.Table,
    aspects: list[str],
    prompts: dict[str, PromptTemplate],
    scheduler: str,
    comparisons: int | None,
    seed: int,
    judge: dict,
    baseline: str | None = None,
) -> pa.Table:
    """REQUESTS rows for every context, aspect and scheduled pair, in prefix order."""
    maker = RequestMaker(candidates, prompts, judge)
    systems = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    wanted = {}
    for aspect in aspects:
        pairs = schedule(scheduler, contexts_of(candidates), comparisons, seed, systems, baseline)
        for ctx, ctx_pairs in pairs.items():
            for a, b in ctx_pairs:
                wanted[maker.key(aspect, ctx, a, b)] = (aspect, ctx, a, b)
    return maker.table(wanted)
