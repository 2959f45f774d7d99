"""The win-rate step: each system against the baseline, per aspect, with the judges' accuracies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.judging.progress import Progress
from pairank.jobs.pipeline.inputs import Inputs
from pairank.jobs.specs.job import WinRateSpec
from pairank.storage.fs import Location
from pairank.storage.inputs import read_labels
from pairank.storage.schemas import WINRATE_JUDGES, WINRATES


@dataclass
class WinRates:
    """WINRATES and WINRATE_JUDGES of every aspect and system against the baseline."""

    rates: pa.Table
    judges: pa.Table


def win_rates(
    winrate: WinRateSpec | None,
    baseline: str | None,
    aspects: Sequence[str],
    inputs: Inputs,
    judgments: pa.Table,
    progress: Progress,
) -> WinRates | None:
    """The spec's ``winrate`` section over ``judgments`` (None without one), against ``baseline`` per aspect
    (which the spec requires with a ``winrate`` section)."""
    if winrate is None or baseline is None:
        return None
    rates, judges = winrate_tables(
        winrate,
        baseline,
        list(aspects),
        judgments,
        inputs.candidates,
        inputs.human,
        inputs.labels(),
        progress,
    )
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
    ood = ood_accuracies(ws.ood, aspects, ws.seed) if ws.prior == "ood" and ws.ood is not None else {}
    pairs_of = {system: system_pairs(candidates, system, baseline) for system in systems}
    rows, judge_rows = [], []
    for aspect in aspects:
        mine = judgments.filter(pc.equal(judgments.column("aspect"), aspect))
        options = WinRateOptions(
            methods=tuple(ws.methods),
            prior=ws.prior,
            gold_fraction=ws.gold_fraction,
            ood=ood.get(aspect),
            draws=ws.draws,
            seed=ws.seed,
            mass=ws.mass,
            ds=ws.dawid_skene.model_dump(),
        )
        for system, pairs in pairs_of.items():
            votes = pair_votes(mine, pairs, human_truth(pairs, aspect, human, labels), ws.seed)
            progress(f"win rate of {system} against {baseline} ({aspect}): {votes.n_pairs} pairs")
            r, j = win_rates(votes, aspect, system, baseline, options)
            rows += r
            judge_rows += j
    return pa.Table.from_pylist(rows, schema=WINRATES), pa.Table.from_pylist(judge_rows, schema=WINRATE_JUDGES)


def ood_accuracies(folder: str, aspects: list[str], seed: int) -> dict[str, dict[str, Any]]:
    """Per aspect, each judge's accuracies on another labelled set: ``{aspect: {judge: Accuracy}}``.

    The set's pairwise labels give the truth (class 0: the candidate listed first is
    better); its judgments (``judgments.parquet`` or a ``judgments/`` cache) the votes.
    Judgments without an aspect of the job are not used.
    """
    from pairank.judges.engines.replay_judge import read_judgments
    from pairank.operators.votes import labelled_pairs, pair_votes
    from pairank.operators.winrate import accuracies

    loc = Location.of(folder)
    labels = read_labels(loc)
    if not labels.num_rows:
        raise ValueError(f"winrate.ood: {loc.join('pairwise_labels.parquet').uri} has no labelled pairs")
    found = [
        s for s in (loc.join("tables", "judgments"), loc.join("judgments"), loc.join("judgments.parquet")) if s.exists()
    ]
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
