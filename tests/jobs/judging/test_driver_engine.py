"""PAIRS-beam end to end on the real CPU judge: SummEval subset, local Ray, rankings and report."""

from __future__ import annotations

import pytest

from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from tests.helpers import CPU_ENGINE_ENV, ROOT

pytestmark = pytest.mark.engine


def test_pairs_beam_with_the_cpu_judge_ranks_summeval_and_reports(warm_engine, default_model, tiny_input, tmp_path):
    """On the warm engine that the modules of WARM_ENGINE_MODULES (tests/conftest.py) share."""
    spec = parse_spec(
        {
            "name": "beam",
            "input": tiny_input.uri,
            "output": str(tmp_path / "out"),
            "aspects": ["coherence"],
            "prompts": str(ROOT / "configs/prompts/summarization"),
            "judge": {"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV},
            "scheduler": {"name": "pairs_beam", "symmetric": True, "beam": {"size": 8}},
            "pool": {"size": 1, "num_cpus": 2, "batch_size": 16},
            "report": {"bootstrap": 50},
        },
        "test",
    )
    lines: list[str] = []
    result = run_job(spec, progress=lines.append)

    assert result.errors == 0 and result.judged == result.requests > 0
    adaptive = result.report["adaptive"]
    assert adaptive["stopped"] == "done" and adaptive["unfinished_count"] == 0
    assert any(line.startswith("round 1:") for line in lines)
    # both orders of every comparison, and never more than the full matrix of 2 contexts x 3 candidates
    assert result.requests % 2 == 0 and result.requests <= 2 * 6
    rankings = result.layout.rankings.read_parquet().to_pylist()
    beam = [r for r in rankings if r["method"] == "pairs_beam"]
    by_ctx: dict[str, list[int]] = {}
    for r in beam:
        by_ctx.setdefault(r["context_id"], []).append(r["rank"])
    assert len(by_ctx) == 2 and all(sorted(v) == [1, 2, 3] for v in by_ctx.values())
    assert {r["method"] for r in result.report["spearman"]} >= {"pairs_beam", "win_ratio_hard"}
    text = result.layout.report_md.read_text()
    assert "## Adaptive rounds" in text and "pairs_beam" in text
