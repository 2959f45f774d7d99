"""Prompts, keys and caches of a job's judging: everything known before an engine starts."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from pairank.jobs.judging.passes import Judging
from pairank.jobs.judging.requests import (
    RequestMaker,
    Variant,
)
from pairank.jobs.specs.job import JobSpec, JudgingSpec
from pairank.judges import judge_identity
from pairank.judges.modes import judging_identity
from pairank.judges.prompts import load_prompts
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import PASSES
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.claims import Claims
from pairank.storage.store.repair import refuse_unfinished_repair


def mode_prompts(judging: JudgingSpec, prompts: str, aspects: Sequence[str]) -> dict[str, list[Variant]]:
    """Per aspect, the prompt variants of a judging mode (the spec's ``judging`` section; see
    ``JudgingSpec.variants``) from the spec's ``prompts`` folder."""
    from pairank.judges.prompts import Domain, load_mode_prompts

    j = judging
    if j.mode == "logprob" and j.variants is None:
        return {aspect: [Variant(t)] for aspect, t in load_prompts(Path(prompts), list(aspects)).items()}
    folder = Path(prompts)
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
        load_mode_prompts(templates, folder, kind, list(aspects), variants, j.scale) if kind else None for kind in kinds
    ]
    first, verdict = loaded
    return {
        aspect: [
            Variant(verdict[aspect][i] if verdict else None, first[aspect][i] if first else None)
            for i in range(len(variants))
        ]
        for aspect in aspects
    }


@dataclass
class JudgingSetup:
    """The keyed request maker, the judging of the spec's mode, and the judgment cache under the root."""

    maker: RequestMaker
    judging: Judging
    cache: JudgmentCache
    claims: Claims | None = None  # the run's claims on the comparisons it asks (see pairank.storage.store.claims)

    @property
    def identity(self) -> dict[str, Any]:
        return self.judging.identity


def prepare_judging(
    spec: JobSpec, candidates: pa.Table, layout: RunLayout, claims: Claims | None = None
) -> JudgingSetup:
    """Prompts, keys and caches for ``candidates``; nothing is judged and no engine starts. ``claims``: the run's,
    from its lease (a run without them asks what another run on the store may be asking too)."""
    for table in (layout.judgments, layout.passes):
        refuse_unfinished_repair(table)
    engine = judge_identity(spec.placed_judge)
    maker = RequestMaker(
        candidates, mode_prompts(spec.judging, spec.prompts, spec.aspects), judging_identity(engine, spec.judging)
    )
    writer = f"run:{layout.name}"  # recorded in each commit (`pairank store history`)
    judging = Judging(spec.judging, maker, engine, JudgmentCache(layout.passes, PASSES, writer), spec.flush_rows)
    return JudgingSetup(maker, judging, JudgmentCache(layout.judgments, writer=writer), claims)
