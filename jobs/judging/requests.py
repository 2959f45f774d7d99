"""Turning candidates and a schedule into keyed, prefix-friendly comparison requests."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.schedulers import StaticSettings, parse_scheduler
from pairank.judges.prompts import PromptTemplate
from pairank.operators.conversations import candidate_texts, context_texts
from pairank.storage.keys import canonical_json, key_of, text_hash
from pairank.storage.schemas import REQUESTS


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


def prefix_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Sort so all pairs of a context are adjacent and both orders of a pair sit together.

    Requests of one context share the context as a prompt prefix, so an engine with
    prefix caching computes it once.

    >>> rows = [dict(context_id="c", aspect="x", candidate_a=a, candidate_b=b) for a, b in
    ...         [("q", "p"), ("r", "p"), ("p", "q")]]
    >>> [(r["candidate_a"], r["candidate_b"]) for r in prefix_order(rows)]
    [('p', 'q'), ('q', 'p'), ('r', 'p')]
    """

    return sorted(rows, key=lambda r: prefix_key(r["aspect"], r["context_id"], r["candidate_a"], r["candidate_b"]))


def prefix_key(aspect: str, ctx: str, a: str, b: str) -> tuple[Any, ...]:
    """The sort key of :func:`prefix_order`: context, the unordered pair, aspect, slot A."""
    return (ctx, min(a, b), max(a, b), aspect, a)


@dataclass(frozen=True)
class Variant:
    """One prompt variant of an aspect: the verdict template, and the first pass's template where the mode has one.

    Its ``hash`` is the prompt hash of the judgments: the verdict template's, the
    first pass's (pointwise), or a hash of both (PRePair), so changing either
    template changes the keys.
    """

    verdict: PromptTemplate | None
    first: PromptTemplate | None = None

    @property
    def hash(self) -> str:
        if self.first is None:
            return self.template.hash
        if self.verdict is None:
            return self.first.hash
        return text_hash(f"{self.first.hash}+{self.verdict.hash}")

    @property
    def template(self) -> PromptTemplate:
        """The verdict template (every mode with a pairwise pass has one)."""
        if self.verdict is None:
            raise ValueError("this prompt variant has no verdict template (a pointwise mode judges no pairs)")
        return self.verdict


def as_variants(prompts: dict[str, Any]) -> dict[str, list[Variant]]:
    """Per aspect, its variants: a template, a list of templates, or a list of :class:`Variant`."""
    out = {}
    for aspect, value in prompts.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        out[aspect] = [v if isinstance(v, Variant) else Variant(v) for v in items]
    return out


class RequestMaker:
    """Keys and renders requests ``(aspect, context_id, a, b[, variant])`` of one run.

    The key depends on the judge identity, the template (variant), the aspect,
    the context and both candidates (ids and texts), so a key answered once is
    never paid again. With several prompt variants a pair has one key per variant.

    The text maps (``text``, ``context``) are made on first use: a streamed static
    run makes its requests in tasks, each from its own block, and its driver never
    builds them.
    """

    def __init__(self, candidates: pa.Table, prompts: dict[str, Any], judge: dict[str, Any]) -> None:
        self.candidates = candidates
        self.variants = as_variants(prompts)
        self.judge = judge

    @cached_property
    def text(self) -> dict[str, str]:
        """``candidate_id -> text`` as the judge sees it (with its earlier replies to a conversation, where the
        table has them: :func:`pairank.operators.conversations.candidate_texts`)."""
        return candidate_texts(self.candidates)

    @cached_property
    def context(self) -> dict[str, str]:
        """``context_id -> context`` as the judge sees it (a conversation turn by turn, a reference answer:
        :func:`pairank.operators.conversations.context_texts`)."""
        return context_texts(self.candidates)

    @classmethod
    def of_texts(
        cls, text: dict[str, str], context: dict[str, str], prompts: dict[str, Any], judge: dict[str, Any]
    ) -> RequestMaker:
        """A maker over texts by candidate id and contexts by context id (a render task's:
        :mod:`pairank.jobs.judging.render`)."""
        maker = cls.__new__(cls)
        maker.text, maker.context, maker.variants, maker.judge = text, context, as_variants(prompts), judge
        return maker

    @cached_property
    def judge_json(self) -> str:
        """The judge identity as the keys hold it (:func:`pairank.storage.keys.canonical_json`), made once."""
        return canonical_json(self.judge)

    def key(self, aspect: str, ctx: str, a: str, b: str, variant: int = 0) -> str:
        h = self.variants[aspect][variant].hash
        return key_of(self.judge_json, h, aspect, ctx, self.context[ctx], a, self.text[a], b, self.text[b])

    def keys(self, aspect: str, ctx: str, a: str, b: str) -> list[str]:
        """One key per prompt variant of the aspect."""
        return [self.key(aspect, ctx, a, b, v) for v in range(len(self.variants[aspect]))]

    def row(
        self,
        aspect: str,
        ctx: str,
        a: str,
        b: str,
        variant: int = 0,
        key: str | None = None,
        analyses: tuple[str, str] | None = None,
    ) -> dict[str, Any]:
        v = self.variants[aspect][variant]
        context, ta, tb = self.context[ctx], self.text[a], self.text[b]
        if analyses is None:
            prompt = v.template.render(context, ta, tb)
        else:
            prompt = v.template.fill(
                context=context, candidate_a=ta, candidate_b=tb, analysis_a=analyses[0], analysis_b=analyses[1]
            )
        return {
            "key": key or self.key(aspect, ctx, a, b, variant),
            "context_id": ctx,
            "aspect": aspect,
            "candidate_a": a,
            "candidate_b": b,
            "prompt": prompt,
            "prompt_hash": v.hash,
        }

    def table(self, wanted: dict[str, tuple[Any, ...]], analyses: dict[str, tuple[str, str]] | None = None) -> pa.Table:
        """REQUESTS rows for ``{key: (aspect, ctx, a, b[, variant])}``, in prefix order.

        ``analyses`` gives the two analyses of each key (multi-pass modes).
        """
        rows = [
            self.row(
                req[0],
                req[1],
                req[2],
                req[3],
                req[4] if len(req) > 4 else 0,
                key,
                analyses[key] if analyses is not None else None,
            )
            for key, req in wanted.items()
        ]
        return pa.Table.from_pylist(prefix_order(rows), schema=REQUESTS)


def build_requests(
    candidates: pa.Table,
    aspects: list[str],
    prompts: dict[str, PromptTemplate],
    scheduler: str,
    comparisons: int | None,
    seed: int,
    judge: dict[str, Any],
    baseline: str | None = None,
) -> pa.Table:
    """REQUESTS rows for every context, aspect and pair of the static ``scheduler``, in prefix order."""
    settings = {"name": scheduler, "seed": seed, "comparisons": comparisons, "baseline": baseline}
    static = parse_scheduler({k: v for k, v in settings.items() if v is not None})
    if not isinstance(static, StaticSettings):
        raise ValueError(f"scheduler {scheduler!r} is adaptive; build_requests makes a static schedule's requests")
    maker = RequestMaker(candidates, prompts, judge)
    return maker.table(scheduled_requests(maker, candidates, aspects, static))


def scheduled_requests(
    maker: RequestMaker,
    candidates: pa.Table,
    aspects: list[str],
    scheduler: StaticSettings,
) -> dict[str, tuple[str, str, str, str, int]]:
    """``{key: (aspect, ctx, a, b, variant)}`` of every pair the static ``scheduler`` makes, per prompt variant."""
    systems = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    wanted = {}
    contexts: dict[str, Sequence[str]] = dict(contexts_of(candidates))
    for aspect in aspects:
        pairs = scheduler.pairs(contexts, systems)
        for ctx, ctx_pairs in pairs.items():
            for a, b in ctx_pairs:
                for v, key in enumerate(maker.keys(aspect, ctx, a, b)):
                    wanted[key] = (aspect, ctx, a, b, v)
    return wanted
