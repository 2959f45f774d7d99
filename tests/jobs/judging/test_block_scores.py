"""A streamed static run scored block by block (issue 13, driver memory): the scores added up over the blocks are
the ones the whole judgment table gives, and a run bigger than the fits' sample fits on the same keys every time.
Real local Ray, the SIMULATED judge, a local Delta store."""

from __future__ import annotations

import json
import math
import zlib

import pyarrow.compute as pc
import pytest

import pairank.jobs.judging.block_scoring as ss
import pairank.jobs.judging.streamed as rs
from pairank.jobs.pipeline.inputs import read_inputs
from pairank.jobs.pipeline.judge import Counts, Judged
from pairank.jobs.pipeline.score import score
from pairank.jobs.pipeline.winrates import winrate_tables
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import SubsetSpec, parse_spec
from pairank.operators.reports import judgment_totals
from pairank.storage.layout import RunLayout
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import spec_for, write_input

pytestmark = pytest.mark.usefixtures("ray_local")

CONTEXTS, CANDIDATES, ASPECTS = 8, 4, ["coherence", "fluency"]
COMPARISONS = CONTEXTS * CANDIDATES * (CANDIDATES - 1) * len(ASPECTS)


def quiet(message: str) -> None:
    pass


def rounded(value):
    """``value`` with every float rounded to 9 places (sums taken in another order differ in the last bits)."""
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 9)
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    return value


def in_order(rankings) -> list[dict]:
    """The rows sorted by method, aspect, context and candidate."""
    keys = [(c, "ascending") for c in ("method", "aspect", "context_id", "candidate_id")]
    return rankings.take(pc.sort_indices(rankings, keys)).to_pylist()


@pytest.fixture
def streamed_spec(tmp_path, summeval_tables, monkeypatch):
    monkeypatch.setattr(rs, "CONTEXTS_PER_TASK", 2)  # several blocks, each scored by its own task
    folder = write_input(tmp_path / "input", summeval_tables, CONTEXTS, CANDIDATES)
    systems = sorted(set(read_inputs(str(folder), SubsetSpec()).candidates.column("system").to_pylist()))
    spec = spec_for(
        folder,
        tmp_path / "store",
        name="full",
        scheduler={"name": "full"},
        aspects=ASPECTS,
        judge={"noise": 1.0, "scale": 2.0, "position_bias": 0.5},  # flips and intransitive triads
        scoring={"verdicts": ["hard", "soft"]},
        pool={"num_cpus": 2},
        winrate={"baseline": systems[0], "methods": ["observed"]},
    )
    return parse_spec(spec, "test")


def whole_table(spec):
    return JudgmentCache(RunLayout.of(spec.output, "").judgments).rows()


def test_scores_added_up_over_blocks_are_the_whole_tables_scores(streamed_spec):
    spec = streamed_spec
    assert len(rs.plan_blocks(read_inputs(spec.input, spec.subset, texts=False).candidates)) >= 4
    result = run_job(spec, progress=quiet)
    assert result.requests == result.judged == COMPARISONS
    table = whole_table(spec)  # this run's judgments: the store holds nothing else
    assert table.num_rows == COMPARISONS
    inputs = read_inputs(spec.input, spec.subset)
    whole = score(spec, inputs, Judged(table, Counts(COMPARISONS, 0, COMPARISONS, 0)))
    layout = RunLayout.of(spec.output, spec.name)
    report = json.loads(layout.report_json.read_text())

    # the same rows (soft scores sum in the order the rows were read), block after block, each by context
    written = layout.rankings.read_parquet()
    assert rounded(in_order(written)) == rounded(in_order(whole.rankings))
    assert rounded(layout.position_bias.read_parquet().to_pylist()) == rounded(whole.bias.to_pylist())
    assert report["transitivity"] == whole.extra["transitivity"]
    assert report["transitivity"][0]["triads"] == CONTEXTS * math.comb(CANDIDATES, 3)
    assert rounded(report["judge_bias"]) == rounded(whole.extra["judge_bias"])
    assert sum(r["n_pairs"] for r in report["judge_bias"]["flips"]) == COMPARISONS // 2  # every pair, both orders
    assert rounded(report["style_control"]) == rounded(whole.extra["style_control"]) != []
    assert "fit_sample" not in report  # a run this small: the fits read every comparison
    totals = judgment_totals(table)
    assert (report["counts"]["judgments"], report["counts"]["with_verdict"]) == (COMPARISONS, COMPARISONS)
    assert rounded({k: report["cost"][k] for k in ("input_tokens", "output_tokens", "engine_seconds")}) == rounded(
        {k: totals[k] for k in ("input_tokens", "output_tokens", "engine_seconds")}
    )
    # win rates read the comparisons with a baseline candidate only, and give what the whole table gives
    rates, _ = winrate_tables(
        spec.winrate, spec.baseline, spec.aspects, table, inputs.candidates, inputs.human, inputs.labels(), quiet
    )
    assert rounded(layout.winrates.read_parquet().to_pylist()) == rounded(rates.to_pylist()) != []


def test_a_run_bigger_than_the_sample_fits_on_the_same_contexts_every_time(streamed_spec, monkeypatch):
    monkeypatch.setattr(ss, "FIT_ROWS", 60)
    spec = streamed_spec
    first = run_job(spec, progress=quiet).report
    share = 60 / COMPARISONS  # every ordered pair of the full matrix is asked
    contexts = whole_table(spec).column("context_id").to_pylist()
    sample = sum(zlib.crc32(c.encode()) < int(share * 2**32) for c in contexts)  # whole contexts
    assert 0 < sample < COMPARISONS and sample % (CANDIDATES * (CANDIDATES - 1) * len(ASPECTS)) == 0
    assert first["fit_sample"] == {"sample": sample, "comparisons": COMPARISONS}
    length = first["judge_bias"]["length"]
    assert sum(r["n_decisive"] for r in length) > sum(r["n_fit"] for r in length)  # counts over all, fits a sample
    assert sum(r["n_fit"] for r in length) <= sample
    md = RunLayout.of(spec.output, spec.name).report_md.read_text()
    assert f"a sample of whole contexts, {sample} of the {COMPARISONS} comparisons" in md
    again = run_job(spec, progress=quiet)  # every comparison cached: no engine, the same sample
    assert (again.cached, again.judged) == (COMPARISONS, 0)
    assert again.report["fit_sample"] == first["fit_sample"]
    assert rounded(again.report["style_control"]) == rounded(first["style_control"])
    assert rounded(again.report["judge_bias"]) == rounded(first["judge_bias"])


def test_batch_calibration_reads_the_judgments_back_whole_and_scores_them_on_the_driver(streamed_spec):
    batch = streamed_spec.scoring.model_copy(update={"calibration": "batch"})
    spec = streamed_spec.model_copy(update={"scoring": batch})
    lines = []
    result = run_job(spec, progress=lines.append)
    assert result.requests == result.judged == COMPARISONS
    assert any(line.startswith("reading the run's judgments back from the store") for line in lines)
    assert not any(line.startswith("scoring the run's judgments") for line in lines)
    table = whole_table(spec)
    whole = score(spec, read_inputs(spec.input, spec.subset), Judged(table, Counts(COMPARISONS, 0, COMPARISONS, 0)))
    layout = RunLayout.of(spec.output, spec.name)
    assert rounded(layout.rankings.read_parquet().to_pylist()) == rounded(whole.rankings.to_pylist())
    lines.clear()
    again = run_job(spec, progress=lines.append)  # every comparison cached: counted from what was read back
    assert (again.requests, again.cached, again.judged) == (COMPARISONS, COMPARISONS, 0)
    assert f"{COMPARISONS} comparisons ({COMPARISONS} cached, 0 to judge)" in lines
    assert again.report["counts"]["judgments"] == COMPARISONS
