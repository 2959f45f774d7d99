"""Every judging mode end to end on real parts: SummEval outputs judged by the vLLM CPU engine in a
Ray actor pool, each pass of a multi-pass mode a Ray Data stream on the same warm pool.

Gemma-3-270M is a base model: it rarely writes a verdict marker, so generate and
sample mostly give counted error rows. These tests check the path, not the quality."""

from __future__ import annotations

import json
from collections import Counter

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pairank.jobs.judging.requests import subset
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.fs import Location
from pairank.storage.keys import sampling_mode
from pairank.storage.schemas import PASSES
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import CPU_ENGINE_ENV, ROOT, SHORT_TEXT_WORDS, cut_words

pytestmark = pytest.mark.engine

LONG = "long-1"  # a candidate too long for the engine: its first pass fails


@pytest.fixture(autouse=True)
def on_the_warm_engine(warm_engine):
    """Every job of the module on one engine, shared with the other modules of WARM_ENGINE_MODULES
    (tests/conftest.py): one engine start for them all."""


@pytest.fixture(scope="module")
def small_input(summeval_tables, tmp_path_factory):
    """2 SummEval articles x 3 summaries, cut short (the modes' paths are the claim, not what the engine reads),
    plus an article whose second summary is too long to analyse."""
    candidates, human = summeval_tables
    small = cut_words(subset(candidates, 2, 3), SHORT_TEXT_WORDS)
    article = small.column("context")[0].as_py()
    extra = pa.table(
        {
            "context_id": ["long", "long"],
            "context": [article, article],
            "candidate_id": ["long-0", LONG],
            "system": ["M0", "M1"],
            "text": [small.column("text")[0].as_py(), " ".join(["word"] * 2100)],
        },
        schema=small.schema,
    )
    folder = Location.of(str(tmp_path_factory.mktemp("modes") / "input"))
    folder.join("candidates.parquet").write_parquet(pa.concat_tables([small, extra]))
    keep = pc.is_in(human.column("candidate_id"), small.column("candidate_id"))
    folder.join("human_scores.parquet").write_parquet(human.filter(keep))
    return folder.uri


def spec_for(small_input, out, name, mode, contexts=None, **over):
    data = {
        "name": name,
        "input": small_input,
        "output": str(out),
        "aspects": ["coherence"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": {"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV},
        "judging": {"mode": mode, "max_tokens": 8, "analysis_max_tokens": 8, "samples": 2},  # the path, not the text
        "pool": {"size": 1, "num_cpus": 2, "batch_size": 16},  # the warm engine's (WARM_ENGINE_MODULES)
        "report": {"bootstrap": 0},
        "subset": {"contexts": contexts},
    }
    for key, value in over.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    return parse_spec(data, f"{name}.yaml")


def calls(result) -> Counter:
    total: Counter = Counter()
    for actor in result.report.get("pool", []):
        total.update(actor["calls"])
    return total


def run_rows(result) -> list[dict]:
    table = JudgmentCache(result.layout.root.join("tables", "judgments")).read()
    mode = result.report["settings"]["judging"]["mode"]
    return [r for r in table.to_pylist() if (sampling_mode(r["sampling"]) or "logprob") == mode]


@pytest.mark.parametrize("mode", ["generate", "sample", "prepair_pairwise", "pointwise"])
def test_every_mode_runs_end_to_end_on_the_cpu_judge(ray_local, default_model, small_input, tmp_path, mode):
    result = run_job(spec_for(small_input, tmp_path / "store", f"cpu-{mode}", mode, contexts=2))
    assert result.requests == 12 and result.judged == 12  # 2 articles x 3 x 2 ordered pairs
    rows = run_rows(result)
    assert len(rows) == 12 and sum(r["error"] is not None for r in rows) == result.errors
    for r in rows:
        assert (r["error"] is None) == (r["label"] is not None) == (r["p_a"] is not None)
        assert json.loads(r["sampling"])["mode"] == mode
    made = calls(result)
    if mode == "pointwise":  # one score per output, verdicts on the driver
        assert made == {"score": 6} and result.errors == 0
        assert all(json.loads(r["raw_text"]).keys() == {"score_a", "score_b"} for r in rows)
    elif mode == "prepair_pairwise":  # PRePair^: each output analysed once per ordered pair, seeing both
        assert made["analysis_pairwise"] == 24 and made["pairwise"] == 12
        passes = JudgmentCache(result.layout.root.join("tables", "passes"), PASSES).read()
        assert passes.num_rows == 24 and set(passes.column("focus").to_pylist()) == {"A", "B"}
    else:
        assert made["pairwise"] == 12
    rankings = Location.of(result.layout.rankings.uri).read_parquet()
    assert rankings.num_rows > 0 or result.errors == 12  # nothing to rank only when no verdict came back
    report = result.layout.report_md.read_text()
    assert f"judging mode: {mode}" in report and "Embedded Gemma-3-270M" in report


def test_prepair_analyses_each_output_once_per_job_and_reuses_them_later(
    ray_local, default_model, small_input, tmp_path
):
    store = tmp_path / "store"
    first = run_job(spec_for(small_input, store, "prepair-full", "prepair"))
    made = calls(first)
    # 8 outputs (6 summaries + 2 in the long article), each analysed once although each is in 4 or 2 comparisons
    assert made["analysis"] == 8
    assert first.report["first_passes"] == {"kind": "analysis", "cached": 0, "run": 8, "errors": 1}
    # the long output's analysis failed: its comparisons are counted error rows that name it, never judged
    rows = run_rows(first)
    failed = [r for r in rows if r["error"] is not None]
    assert len(rows) == 14 and len(failed) == 2 == first.errors
    assert all(r["error"].startswith(f"analysis of {LONG} failed: prompt is") for r in failed)
    assert made["pairwise"] == 12  # the 2 failed comparisons never reached the engine

    # another job (adaptive, generated verdicts): new verdict keys, but every analysis comes from the cache
    second = run_job(
        spec_for(
            small_input,
            store,
            "prepair-greedy",
            "prepair",
            contexts=2,
            judging={"verdict": "generate"},
            scheduler={"name": "pairs_greedy"},
        )
    )
    assert calls(second)["analysis"] == 0 and calls(second)["pairwise"] == second.judged > 0
    assert second.report["first_passes"]["run"] == 0 and second.report["first_passes"]["cached"] >= 6

    # the first job again: verdicts from the cache; only the failed analysis is asked again (and fails again)
    again = run_job(spec_for(small_input, store, "prepair-full", "prepair"))
    assert again.cached == 12 and again.judged == 2 and calls(again) == {"analysis": 1}
    passes = JudgmentCache(Location.of(str(store / "tables" / "passes")), PASSES).read()
    assert passes.num_rows == 8 and Counter(passes.column("kind").to_pylist()) == {"analysis": 8}
