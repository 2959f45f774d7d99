"""A streamed static run scored block by block: the driver never holds the run's judgments.

Once a static run is judged (:mod:`pairank.jobs.judging.streamed`), its judgments are
in the store. One task per planning block (whole contexts) reads back the block's
judgments, one row per key of its comparisons, cached or new, and scores them where
they are (:func:`score_block`):

- **per context, exactly**: the win-ratio rankings of each verdict mode
  (:func:`~pairank.operators.scores.rank_table`), the intransitive triads, and the
  judge-bias section's flips (pairs in both slot orders are in one context);
- **counts that add up over blocks**: position bias, the report's totals (rows,
  verdicts, tokens, engine seconds, failures), the judge-bias counts (length shares,
  self-preference);
- **a sample for the fits over the whole run** (the style-controlled Bradley-Terry
  strengths, the length-controlled win rates and the judge-bias length slope): the
  comparisons of the contexts whose id hashes below ``fit_share`` (:func:`sampled`), a
  seeded sample of whole contexts holding about :data:`FIT_ROWS` comparisons, all of
  them in a run that has no more; with the candidates of those contexts (their texts
  are what the fits read), so the driver needs no other texts;
- **for win rates**, with a ``winrate`` section: the comparisons with a candidate of
  the baseline system, all the votes the win rates read.

The driver adds the parts up (:func:`score_streamed`): what it holds grows with the
candidates (the rankings have a row per candidate), not with the comparisons, and
holds no candidate's text outside the sample. The blocks' rankings and triads are
joined without a copy, block after block (each block's rows ordered by context and
aspect), so their buffers stay in Ray's object store until the run writes them.

A run whose scoring needs every judgment at once reads them back whole instead
(:meth:`~pairank.jobs.judging.streamed.Streamed.read_back`): ``scoring.calibration:
batch`` estimates each aspect's prior from all of its verdicts.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.cluster import executor
from pairank.cluster.executor import Stage
from pairank.jobs.judging.streamed import PLANNING, StaticPlan, Streamed, blocks_text, collect_judgments
from pairank.operators.judge_bias import judge_bias, merge_sections
from pairank.operators.reports import add_counts, judgment_totals, position_counts, position_table
from pairank.operators.scores import rank_table
from pairank.operators.transitivity import TRIADS, intransitive_triads
from pairank.storage.schemas import CANDIDATES, RANKINGS

#: The whole-run fits (style control, the length slope) read the comparisons of a sample of contexts holding about
#: this many comparisons of a full matrix (all of a run with no more).
FIT_ROWS = 100_000


@dataclass(frozen=True)
class ScoreSettings:
    """What a block's scoring needs besides its judgments (pickled into the tasks)."""

    plan: StaticPlan  # the run's comparisons and the store
    modes: tuple[str, ...]  # scoring.verdicts
    decisive_weight: float
    fit_share: float = 1.0  # the share of comparisons kept for the whole-run fits
    baseline: str | None = None  # keep the comparisons with a candidate of this system (win rates)

    @classmethod
    def of(
        cls, plan: StaticPlan, candidates: pa.Table, modes: Sequence[str], decisive_weight: float, baseline: str | None
    ) -> ScoreSettings:
        """The settings of ``plan``'s run: the fits' share from the most comparisons its candidates make (every
        ordered pair of each context, per aspect and prompt variant), so that it does not depend on what was
        cached (a schedule that asks fewer pairs has a smaller sample)."""
        pairs = sum(n * (n - 1) for n in pc.value_counts(candidates.column("context_id")).field("counts").to_pylist())
        most = pairs * sum(len(plan.variants[aspect]) for aspect in plan.aspects)
        return cls(plan, tuple(modes), decisive_weight, min(1.0, FIT_ROWS / max(most, 1)), baseline)


@dataclass
class BlockScores:
    """One block's scores (see the module docstring)."""

    comparisons: int
    rankings: dict[str, pa.Table]  # per verdict mode
    triads: pa.Table
    counts: dict[str, Any]  # {"position": position_counts, "totals": judgment_totals}
    bias: dict[str, Any]  # the block's judge_bias section
    sample: pa.Table  # judgments kept for the whole-run fits
    candidates: pa.Table  # the candidates of the sample's contexts (with their texts)
    kept: pa.Table  # judgments with a candidate of the baseline system


def sampled(table: pa.Table, share: float) -> pa.Table:
    """The rows whose ``context_id`` hashes (crc32) below ``share`` of the hash range: whole contexts, the same on
    every run.

    >>> t = pa.table({"context_id": [f"c{i // 2}" for i in range(2000)]})
    >>> s = sampled(t, 0.1)
    >>> sampled(t, 1.0).num_rows, 60 < s.num_rows / 2 < 140, set(pc.value_counts(s["context_id"]).field(1).to_pylist())
    (2000, True, {2})
    """
    if share >= 1.0:
        return table
    cut = int(share * 2**32)
    contexts = pc.unique(table.column("context_id")).to_pylist()  # each context hashed once, not once a row
    chosen = pa.array([c for c in contexts if zlib.crc32(c.encode("utf-8")) < cut], pa.string())
    return table.filter(pc.is_in(table.column("context_id"), chosen))


def with_system(judgments: pa.Table, candidates: pa.Table, system: str | None) -> pa.Table:
    """The rows with a candidate of ``system`` in either slot (none without a system)."""
    if system is None:
        return judgments.slice(0, 0)
    mine = candidates.filter(pc.equal(candidates.column("system"), system)).column("candidate_id")
    return judgments.filter(
        pc.or_(pc.is_in(judgments.column("candidate_a"), mine), pc.is_in(judgments.column("candidate_b"), mine))
    )


def score_block(block: pa.Table, settings: ScoreSettings) -> BlockScores:
    """Stage: the scores of ``block``'s contexts from their judgments in the store."""
    judgments = collect_judgments(block, settings.plan)
    return BlockScores(
        comparisons=judgments.num_rows,
        rankings={
            mode: _sorted(rank_table(judgments, block, mode, settings.decisive_weight)) for mode in settings.modes
        },
        triads=_sorted(intransitive_triads(judgments)),
        counts={"position": position_counts(judgments), "totals": judgment_totals(judgments)},
        bias=judge_bias(judgments, block),
        sample=sampled(judgments, settings.fit_share),
        candidates=sampled(block, settings.fit_share),
        kept=with_system(judgments, block, settings.baseline),
    )


@dataclass
class StreamScores:
    """A streamed run's scores, added up over its blocks."""

    comparisons: int
    rankings: pa.Table  # each verdict mode in turn, block by block (a block's rows by context and aspect)
    triads: pa.Table  # block by block, as the rankings
    position: pa.Table  # POSITION_BIAS
    totals: dict[str, Any]  # judgment_totals
    judge_bias: dict[str, Any]
    sample: pa.Table  # the comparisons the whole-run fits read
    candidates: pa.Table  # the candidates of the sample's contexts, with their texts
    kept: pa.Table  # the comparisons win rates read

    def fit_note(self) -> dict[str, Any] | None:
        """The report's ``fit_sample`` section where the fits read a sample: rows read, of how many."""
        if self.sample.num_rows == self.comparisons:
            return None
        return {"sample": self.sample.num_rows, "comparisons": self.comparisons}


def _sorted(table: pa.Table) -> pa.Table:
    """A block's table ordered by context and aspect (stable: each context's rows keep their order)."""
    return table.take(pc.sort_indices(table, [("context_id", "ascending"), ("aspect", "ascending")]))


def _joined(tables: list[pa.Table], schema: pa.Schema) -> pa.Table:
    """The blocks' tables as one, block after block (no copy: the blocks' buffers stay where Ray put them)."""
    return pa.concat_tables(tables) if tables else schema.empty_table()


def score_streamed(run: Streamed, settings: ScoreSettings, progress: Callable[[str], None]) -> StreamScores:
    """Score ``run`` block by block in tasks (:data:`~pairank.jobs.judging.streamed.TASKS` at a time) and
    add the blocks' scores up; the judge-bias length slopes are fitted on the sample here."""
    progress(f"scoring the run's judgments where they are ({blocks_text(run.blocks)})")
    parts = executor.run_each(Stage(score_block, settings, PLANNING), run.blocks)  # in block order
    counts: dict[str, Any] = {}
    for part in parts:
        add_counts(counts, part.counts)
    sample = pa.concat_tables([p.sample for p in parts]) if parts else run.plan.cache.schema.empty_table()
    kept = pa.concat_tables([p.kept for p in parts]) if parts else run.plan.cache.schema.empty_table()
    candidates = (
        pa.concat_tables([p.candidates for p in parts], promote_options="default")
        if parts
        else CANDIDATES.empty_table()
    )
    empty = judgment_totals(run.plan.cache.schema.empty_table())
    return StreamScores(
        comparisons=sum(p.comparisons for p in parts),
        rankings=pa.concat_tables([_joined([p.rankings[m] for p in parts], RANKINGS) for m in settings.modes]),
        triads=_joined([p.triads for p in parts], TRIADS),
        position=position_table(counts.get("position", {})),
        totals=counts.get("totals", empty),
        judge_bias=merge_sections([p.bias for p in parts], judge_bias(sample, candidates)),
        sample=sample,
        candidates=candidates,
        kept=kept,
    )
