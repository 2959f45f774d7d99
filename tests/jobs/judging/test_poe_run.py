"""A PoE run end to end: pairank.run on local Ray with the SIMULATED judge.

It must end within its per-context budget, never ask a comparison twice, and a
run stopped by the run budget must resume from the judgment cache without
judging anything again.
"""

from __future__ import annotations

from collections import Counter

import pytest

import pairank
from pairank.jobs.specs.job import parse_spec
from pairank.judges.engines.simulated_judge import latent_quality
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import spec_for, write_input

#: 4 articles x 8 summaries; a soft, noisy simulated judge (p well inside (0, 1)).
JUDGE = {"engine": "simulated", "noise": 0.5, "seed": 7, "scale": 1.0, "position_bias": 0.8}


@pytest.fixture
def eight_input(tmp_path, summeval_tables):
    return write_input(tmp_path / "input", summeval_tables, 4, 8)


def cache_rows(out) -> list[dict]:
    return JudgmentCache(Location.of(str(out / "tables" / "judgments"))).read().to_pylist()


@pytest.mark.parametrize("scheduler", [{"symmetric": True}, {"symmetric": False, "expert": "bt"}])
def test_poe_run_keeps_its_budget_asks_nothing_twice_and_resumes(ray_local, eight_input, tmp_path, scheduler):
    out = tmp_path / "out"
    sched = {"name": "poe", "comparisons": 24, "patience": 3, "pairs_per_round": 4, **scheduler}
    first = parse_spec(spec_for(eight_input, out, judge=JUDGE, scheduler={**sched, "budget": 60}), "test")
    stopped = pairank.run(first, progress=lambda m: None)
    assert stopped.report["adaptive"]["stopped"] == "budget" and stopped.requests <= 60
    assert stopped.judged == stopped.requests > 0

    spec = parse_spec(spec_for(eight_input, out, judge=JUDGE, scheduler=sched), "test")
    result = pairank.run(spec, progress=lambda m: None)
    assert result.report["adaptive"]["stopped"] == "done"
    assert result.cached == stopped.judged  # the stopped run's judgments are reused, not judged again
    rows = cache_rows(out)
    keys = [r["key"] for r in rows]
    assert len(keys) == len(set(keys)) == result.requests
    ordered = Counter((r["context_id"], r["candidate_a"], r["candidate_b"]) for r in rows)
    assert max(ordered.values()) == 1  # no ordered pair asked twice
    per_context = Counter(r["context_id"] for r in rows)
    assert len(per_context) == 4 and max(per_context.values()) <= 24
    if sched["symmetric"]:
        assert all((c, b, a) in ordered for c, a, b in ordered)

    rankings = [r for r in result.layout.rankings.read_parquet().to_pylist() if r["method"] == "poe"]
    assert len(rankings) == 32
    # The judge is noisy and slot-biased, but the ranking still follows the latent quality on the whole.
    by_ctx: dict[str, list[tuple[int, str]]] = {}
    for r in rankings:
        by_ctx.setdefault(r["context_id"], []).append((r["rank"], r["candidate_id"]))
    agree = []
    for ctx, ranked in by_ctx.items():
        order = [c for _, c in sorted(ranked)]
        q = [latent_quality(JUDGE["seed"], ctx, c) for c in order]
        agree.append(sum(q[i] > q[j] for i in range(8) for j in range(i + 1, 8)) / 28)
    assert sum(agree) / len(agree) > 0.7

    again = pairank.run(spec, progress=lambda m: None)
    assert again.judged == 0 and again.cached == result.requests
    rerank = [r for r in again.layout.rankings.read_parquet().to_pylist() if r["method"] == "poe"]
    assert sorted((r["context_id"], r["rank"], r["candidate_id"]) for r in rerank) == sorted(
        (r["context_id"], r["rank"], r["candidate_id"]) for r in rankings
    )
