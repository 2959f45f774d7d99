"""The score step: rankings, Spearman against human scores, quantile-matched scores, position bias and
consistency."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.judging.adaptive import method_name
from pairank.jobs.pipeline.inputs import Inputs
from pairank.jobs.pipeline.judge import Judged
from pairank.jobs.schedulers import AdaptiveSettings, SchedulerSpec
from pairank.jobs.specs.job import JobSpec, QuantileSpec
from pairank.operators.judge_bias import judge_bias
from pairank.operators.reports import (
    position_bias,
    spearman_table,
)
from pairank.operators.scores import rank_table
from pairank.operators.style_control import style_control_section
from pairank.storage.schemas import JUDGMENTS


@dataclass
class Scored:
    """Rankings, Spearman against the human scores, position bias, and consistency sections of the report."""

    rankings: pa.Table
    spearman: pa.Table
    bias: pa.Table
    extra: dict[str, Any]


def score(spec: JobSpec, inputs: Inputs, judged: Judged) -> Scored:
    """Win-ratio rankings (after batch calibration, if asked) next to the scheduler's own, Spearman,
    quantile-matched scores, position bias, transitivity and the judge-bias figures."""
    from pairank.operators.transitivity import intransitive_triads

    streamed = judged.scores
    if streamed is not None:  # scored block by block: the fits read a sample (see jobs/judging/block_scoring.py)
        table, ranked, triads, bias = streamed.sample, [streamed.rankings], streamed.triads, streamed.position
        biases, fit, texts = streamed.judge_bias, streamed.fit_note(), streamed.candidates
        extra: dict[str, Any] = {"fit_sample": fit} if fit is not None else {}
    else:
        table, extra, texts = judged.judgments, dict[str, Any](), inputs.candidates
        scored = table
        if spec.scoring.calibration == "batch":
            from pairank.operators.calibration import calibrate_table

            scored = calibrate_table(table, by=("aspect",)).select(JUDGMENTS.names)
        ranked = [
            rank_table(scored, inputs.candidates, mode, spec.judging.decisive_weight) for mode in spec.scoring.verdicts
        ]
        triads, bias, biases = intransitive_triads(table), position_bias(table), judge_bias(table, inputs.candidates)
    rankings = pa.concat_tables(judged.rankings + ranked)
    spearman = spearman_table(rankings, inputs.human, spec.report.bootstrap, spec.report.seed)
    if spec.scoring.quantile is not None:
        rankings = pa.concat_tables([rankings, quantile_rankings(rankings, inputs.human, spec.scoring.quantile)])
    extra = {
        **consistency_sections(triads, spearman, spec.scheduler),
        "judge_bias": biases,
        "style_control": style_control_section(table, texts, spec.baseline, tuple(spec.report.compat)),
        **extra,
    }
    return Scored(rankings, spearman, bias, extra)


def quantile_rankings(rankings: pa.Table, human: pa.Table, target_spec: QuantileSpec) -> pa.Table:
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


def consistency_sections(triads: pa.Table, spearman: pa.Table, sched: SchedulerSpec) -> dict[str, Any]:
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
    if isinstance(sched, AdaptiveSettings) and sched.repeats > 1:
        methods = {method_name(sched, s) for s in range(sched.seed, sched.seed + sched.repeats)}
        groups: dict[tuple[str, str], list[float]] = {}
        for r in spearman.to_pylist():
            if r["method"] in methods and r["rho"] is not None:
                groups.setdefault((r["aspect"], r["level"]), []).append(r["rho"])
        for (aspect, level), values in sorted(groups.items()):
            seeds.append({"aspect": aspect, "level": level, "method": sched.name, **seed_spread(values)})
    return {"transitivity": transitivity, "seeds": seeds}
