"""Prompt variants through a run on local Ray: every variant is its own judge (prompt hash, keys), and an
adaptive scheduler is answered the mean of the variants. The judge is the SIMULATED engine, which answers
from latent qualities, so a variant changes the keys but not the verdicts."""

from __future__ import annotations

from collections import Counter

import pytest

from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import spec_for, write_input

VARIANTS = ["v1", "v2", "v3"]


@pytest.fixture
def four_input(tmp_path, summeval_tables):
    return write_input(tmp_path / "input", summeval_tables, 2, 4)


def test_static_schedules_judge_every_pair_once_per_variant(ray_local, four_input, tmp_path):
    spec = parse_spec(
        spec_for(four_input, tmp_path / "out", scheduler={"name": "full"}, judging={"variants": VARIANTS}), "test"
    )
    result = run_job(spec, progress=lambda m: None)
    assert result.requests == result.judged == 3 * 2 * 12  # variants x contexts x ordered pairs
    table = JudgmentCache(result.layout.judgments).read()
    per_hash = Counter(table.column("prompt_hash").to_pylist())
    assert len(per_hash) == 3 and set(per_hash.values()) == {24}
    # the win ratios count every variant's verdict; ranking with one variant gives the same order here
    single = run_job(
        parse_spec(
            spec_for(
                four_input, tmp_path / "one", name="one", scheduler={"name": "full"}, judging={"variants": ["v2"]}
            ),
            "test",
        ),
        progress=lambda m: None,
    )
    assert single.judged == 24

    def ranks(r):
        return sorted(
            (x["context_id"], x["candidate_id"], x["rank"])
            for x in r.layout.rankings.read_parquet().to_pylist()
            if x["method"] == "win_ratio_hard"
        )

    assert ranks(result) == ranks(single)


def test_adaptive_machines_are_answered_the_mean_of_the_variants(ray_local, four_input, tmp_path):
    plain = run_job(
        parse_spec(spec_for(four_input, tmp_path / "a", judging={"variants": ["v1"]}), "t"), progress=lambda m: None
    )
    three = run_job(
        parse_spec(spec_for(four_input, tmp_path / "b", judging={"variants": VARIANTS}), "t"), progress=lambda m: None
    )
    assert three.requests == 3 * plain.requests  # each pair asked once per variant, in the same rounds
    assert len(three.report["adaptive"]["rounds"]) == len(plain.report["adaptive"]["rounds"])

    def order(r):
        return [
            x["candidate_id"]
            for x in sorted(
                r.layout.rankings.read_parquet().to_pylist(),
                key=lambda x: (x["context_id"], x["rank"]),
            )
            if x["method"] == "pairs_greedy"
        ]

    assert order(three) == order(plain)
