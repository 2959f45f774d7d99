"""The two-night acceptance scenario on real parts: SummEval outputs in a SeaweedFS S3 input prefix, judged by
the vLLM CPU engine in a Ray actor pool, the judgment cache, state and leaderboard under an S3 root.

Night 1 ranks systems S1..S4 on three prompts. Night 2 adds S5's outputs for those prompts and two new prompts
with all five systems: it asks only comparisons that involve a new output (counted against the cache), and the
leaderboard's history holds both nights. Gemma-3-270M is a base model: this checks the path, not the quality."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pairank.jobs.nightly import run_nightly
from pairank.jobs.specs.job import parse_spec
from pairank.operators.leaderboard import OVERALL
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.browser import check_screenshot, render
from tests.helpers import CPU_ENGINE_ENV, ROOT, SHORT_TEXT_WORDS, cut_words

pytestmark = [pytest.mark.engine, pytest.mark.s3, pytest.mark.browser]

PREFIX = "s3://pairank/nightly-accept/inputs"
ROOT_URI = "s3://pairank/nightly-accept/store"
S1_S4 = ["M0", "M1", "M10", "M11"]
S5 = "M12"


@pytest.fixture(autouse=True)
def on_the_warm_engine(warm_engine):
    """Both nights on one engine, shared with the other modules of WARM_ENGINE_MODULES (tests/conftest.py)."""


def drop(name, tables, contexts, systems) -> set[str]:
    candidates, human = tables
    mask = pc.and_(
        pc.is_in(candidates.column("context_id"), pa.array(contexts)),
        pc.is_in(candidates.column("system"), pa.array(systems)),
    )
    small = cut_words(candidates.filter(mask), SHORT_TEXT_WORDS)
    folder = Location.of(PREFIX).join(name)
    folder.join("candidates.parquet").write_parquet(small)
    folder.join("human_scores.parquet").write_parquet(
        human.filter(pc.is_in(human.column("candidate_id"), small.column("candidate_id")))
    )
    return set(small.column("candidate_id").to_pylist())


def night(label: str):
    spec = {
        "name": "nightly",
        "input": PREFIX,
        "output": ROOT_URI,
        "aspects": ["coherence"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": {"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV},
        "scheduler": {"name": "pairs_anchors"},
        "pool": {"size": 1, "num_cpus": 2, "batch_size": 16},
        "report": {"bootstrap": 20},
        "nightly": {"night": label, "n_boot": 50},
        "flush_rows": 16,
    }
    return run_nightly(parse_spec(spec, "nightly-accept.yaml"), progress=lambda m: None)


def cached() -> dict[str, dict]:
    table = JudgmentCache(Location.of(ROOT_URI).join("tables", "judgments")).read()
    return {r["key"]: r for r in table.to_pylist()}


def test_two_nights_on_s3_with_the_cpu_judge(tmp_path, summeval_tables, s3_server, ray_local, default_model):
    contexts = sorted(set(summeval_tables[0].column("context_id").to_pylist()))[:5]
    drop("2026-11-20", summeval_tables, contexts[:3], S1_S4)
    first = night("2026-11-20")
    assert first.commit.seq == 1 and first.counts["contexts_new"] == 3
    assert first.counts["judged_now"] == first.counts["requests"] == len(cached()) > 0
    night1 = cached()

    new = drop("2026-11-21-s5", summeval_tables, contexts[:3], [S5])
    new |= drop("2026-11-21-prompts", summeval_tables, contexts[3:], S1_S4 + [S5])
    second = night("2026-11-21")
    c = second.counts
    assert (c["contexts_new"], c["contexts_extended"], c["contexts_unchanged"]) == (2, 3, 0)
    asked = {k: r for k, r in cached().items() if k not in night1}
    assert len(asked) == c["judged_now"] == c["requests"] - c["cached"] > 0
    assert all({r["candidate_a"], r["candidate_b"]} & new for r in asked.values())  # only new outputs
    for ctx in contexts[:3]:  # S5 binary-inserted among 4 sorted anchors, both orders: at most 2 x 3 comparisons
        assert 0 < sum(r["context_id"] == ctx for r in asked.values()) <= 2 * math.ceil(math.log2(5))
    full_matrix_night2 = 3 * 5 * 4 + 2 * 5 * 4  # what re-running the full matrices would have asked
    assert c["judged_now"] < full_matrix_night2

    board = Location.of(ROOT_URI).join("leaderboard")
    history = board.join("history.parquet").read_parquet().to_pylist()
    nights = {
        n: sorted(r["system"] for r in history if r["night"] == n and r["aspect"] == OVERALL)
        for n in ("2026-11-20", "2026-11-21")
    }
    assert nights == {"2026-11-20": sorted(S1_S4), "2026-11-21": sorted(S1_S4 + [S5])}
    doc = board.join("leaderboard.json").read_json()
    assert doc["nightly"]["nights"] == ["2026-11-20", "2026-11-21"]
    rows = [r for r in doc["rows"] if r["aspect"] == OVERALL]
    assert sorted(r["system"] for r in rows) == sorted(S1_S4 + [S5])
    assert all(r["strength_low"] <= r["strength"] <= r["strength_high"] for r in rows)
    assert json.loads(second.run.report_json.read_text())["counts"]["judged_now"] == c["judged_now"]

    page = tmp_path / "index.html"
    page.write_text(board.join("index.html").read_text())
    dom, shot = render(page, tmp_path / "chromium")
    assert all(r["system"] in dom for r in rows) and "2026-11-21" in dom
    check_screenshot(shot)
