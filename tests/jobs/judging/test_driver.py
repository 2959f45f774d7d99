"""The adaptive driver on local Ray: lockstep rounds over one warm judge pool.

The judge here is the SIMULATED engine (latent quality per candidate, seeded
noise) in real Ray actors, so the true order is known; the real CPU judge runs
the same driver in test_driver_engine.py.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest

from pairank.jobs.judging.adaptive import Driver, RoundCalibration
from pairank.jobs.judging.passes import Judging
from pairank.jobs.judging.pool_wiring import judge_pool
from pairank.jobs.judging.requests import RequestMaker, contexts_of
from pairank.jobs.pipeline.inputs import read_inputs
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import load_spec, parse_spec
from pairank.judges import judge_identity
from pairank.judges.engines.simulated_judge import latent_quality
from pairank.judges.prompts import load_prompts
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import ROOT, Gate, joining, run_killed_at_gate, spec_for, wait_for_free, write_input, write_spec


@pytest.fixture
def six_input(tmp_path, summeval_tables):
    """3 SummEval articles x 6 summaries, with human scores."""
    return write_input(tmp_path / "input", summeval_tables, 3, 6)


def true_order(spec, candidates, ctx) -> list[str]:
    ids = contexts_of(candidates)[ctx]
    return sorted(ids, key=lambda c: -latent_quality(spec.judge.seed, ctx, c))


class RecordingPool:
    """judge_pool, remembering each pool it opened and what its actors did."""

    def __init__(self):
        self.opened: list[list[dict]] = []

    @contextmanager
    def __call__(self, spec):
        with judge_pool(spec) as pool:
            yield pool
            self.opened.append(pool.info())


def driver_for(spec, pools, progress=lambda m: None):
    candidates = read_inputs(spec.input, spec.subset).candidates
    prompts = load_prompts(Path(spec.prompts), spec.aspects)
    maker = RequestMaker(candidates, prompts, judge_identity(spec.judge))
    cache = JudgmentCache(Location.of(spec.output).join("tables", "judgments"))
    judging = Judging(spec.judging, maker, judge_identity(spec.judge), None, spec.flush_rows)
    return Driver(spec, candidates, judging, cache, pools, progress), candidates, cache


@pytest.mark.parametrize("name", ["pairs_greedy", "pairs_beam"])
def test_rounds_share_one_warm_pool_and_recover_the_true_order(ray_local, six_input, tmp_path, name):
    spec = parse_spec(spec_for(six_input, tmp_path / "out", scheduler={"name": name}), "test")
    pools, lines = RecordingPool(), []
    driver, candidates, cache = driver_for(spec, pools, lines.append)
    result = driver.run()

    assert result.stopped == "done" and len(result.rounds) > 3
    assert len(pools.opened) == 1  # one pool for every round: engines are not rebuilt
    (actor,) = pools.opened[0]
    assert actor["batches"] >= len(result.rounds)  # every round went to the same actor
    assert actor["rows"] == result.judged == len(result.used_keys)
    for task in result.tasks:
        assert task.machine.ranking() == true_order(spec, candidates, task.context_id)
    judged = cache.read()
    assert Counter(judged.column("key").to_pylist()).most_common(1)[0][1] == 1
    assert sum(r["judged"] for r in result.rounds) == judged.num_rows
    assert lines[0].startswith("round 1: 0/3 done") and "3/3 done" in lines[-1]

    # the same run again: every round is answered from the cache and no pool is started
    again, _, _ = driver_for(spec, pools)
    second = again.run()
    assert len(pools.opened) == 1 and second.judged == 0
    assert second.cache_hits == len(second.used_keys) == len(result.used_keys)
    assert [t.machine.ranking() for t in second.tasks] == [t.machine.ranking() for t in result.tasks]


def test_symmetric_machines_ask_both_orders_and_repeats_share_judgments(ray_local, six_input, tmp_path):
    spec = parse_spec(
        spec_for(six_input, tmp_path / "out", scheduler={"name": "pairs_greedy", "symmetric": True, "repeats": 3}),
        "test",
    )
    pools = RecordingPool()
    driver, candidates, cache = driver_for(spec, pools)
    result = driver.run()
    assert len(result.tasks) == 3 * 3
    rows = cache.read().to_pylist()
    ordered = {(r["context_id"], r["candidate_a"], r["candidate_b"]) for r in rows}
    assert all((c, b, a) in ordered for c, a, b in ordered)  # each comparison in both orders
    asked_by_machines = sum(len(t.pairs) for t in result.tasks)
    assert len(rows) < asked_by_machines  # seeds asking the same pair share one judgment
    for task in result.tasks:
        assert task.machine.ranking() == true_order(spec, candidates, task.context_id)


def test_budget_stops_before_a_round_and_a_bigger_budget_resumes(ray_local, six_input, tmp_path):
    out = tmp_path / "out"
    small = parse_spec(spec_for(six_input, out, scheduler={"name": "pairs_beam", "budget": 20}), "test")
    result = run_job(small, progress=lambda m: None)
    adaptive = result.report["adaptive"]
    assert adaptive["stopped"] == "budget" and adaptive["unfinished_count"] > 0
    assert result.requests <= 20
    methods = set(result.layout.rankings.read_parquet().column("method").to_pylist())
    assert "win_ratio_hard" in methods  # unfinished contexts are still ranked by win ratio

    big = parse_spec(spec_for(six_input, out, scheduler={"name": "pairs_beam"}), "test")
    second = run_job(big, progress=lambda m: None)
    assert second.report["adaptive"]["stopped"] == "done"
    assert second.cached == result.judged  # everything the first run judged is reused
    keys = JudgmentCache(Location.of(str(out / "tables" / "judgments"))).read().column("key").to_pylist()
    assert len(keys) == len(set(keys)) == second.requests


def test_batch_calibration_removes_the_slot_prior_of_each_aspect():
    calibrate = RoundCalibration()
    values = {"k1": 0.9, "k2": 0.7, "k3": 0.6, "k4": 0.3}
    out = calibrate(values, dict.fromkeys(values, "x"))
    assert abs(sum(out.values()) / len(out) - 0.5) < 0.05 < abs(sum(values.values()) / 4 - 0.5)
    assert sorted(out, key=out.get) == sorted(values, key=values.get)  # order kept
    # later rounds use the aspect's whole history, so one lone comparison is not forced to 0.5
    lone = calibrate({"k5": 0.8}, {"k5": "x"})
    assert lone["k5"] > 0.6


def test_calibrated_one_order_run_beats_a_position_biased_judge(ray_local, six_input, tmp_path):
    """A judge with a strong slot-A bias and little signal: calibration takes the bias out."""
    judge = {"engine": "simulated", "noise": 0.3, "seed": 5, "position_bias": 2.5, "scale": 1.0}
    ranks = {}
    for calibration in ("none", "batch"):
        spec = parse_spec(
            spec_for(
                six_input,
                tmp_path / calibration,
                judge=judge,
                scheduler={"name": "pairs_greedy", "symmetric": False},
                scoring={"calibration": calibration},
                subset={"contexts": 3},
            ),
            "test",
        )
        result = run_job(spec, progress=lambda m: None)
        rankings = result.layout.rankings.read_parquet().to_pylist()
        candidates = read_inputs(spec.input, spec.subset).candidates
        agree = []
        for ctx in contexts_of(candidates):
            got = [
                r["candidate_id"]
                for r in sorted(rankings, key=lambda r: r["rank"])
                if r["context_id"] == ctx and r["method"] == "pairs_greedy"
            ]
            truth = true_order(spec, candidates, ctx)
            agree.append(sum(got.index(a) < got.index(b) for i, a in enumerate(truth) for b in truth[i + 1 :]))
        ranks[calibration] = sum(agree)
    assert ranks["batch"] > ranks["none"]


def test_driver_killed_between_rounds_resumes_without_asking_twice(ray_address, six_input, tmp_path):
    """Killed between rounds 3 and 4, held there by the SIMULATED judge's gate: an uninterrupted run first
    counts its batches up to its round 3 line, and the killed run holds the next one (round 4's first)."""
    judge = {"engine": "simulated", "noise": 0.5, "seed": 3}
    scheduler = {"name": "pairs_beam", "seed": 2}
    counted, at_round_3 = Gate(tmp_path / "counted"), []

    def progress(line: str) -> None:
        if line.startswith("round 3:"):
            at_round_3.append(counted.arrived())

    # the uninterrupted run, its batches numbered at a gate that holds none
    uninterrupted = {"judge": {**judge, **counted.judge(hold_from=10**6)}, "scheduler": scheduler}
    clean = run_job(load_spec(write_spec(tmp_path, six_input, tmp_path / "clean", **uninterrupted)), progress=progress)
    (rounds_1_to_3,) = at_round_3

    gate = Gate(tmp_path / "gate")
    held = {"judge": {**judge, **gate.judge(hold_from=rounds_1_to_3)}, "scheduler": scheduler}
    spec = write_spec(tmp_path, six_input, tmp_path / "killed", **held)
    said = run_killed_at_gate(spec, ray_address, gate, rounds_1_to_3 + 1, tmp_path / "run1.log")  # round 4's first held
    assert "round 3:" in said and "round 4:" not in said, said[-3000:]  # between rounds
    cache = JudgmentCache(Location.of(str(tmp_path / "killed" / "tables" / "judgments")))
    before = {r["key"]: r["created_at"] for r in cache.rows().to_pylist()}
    assert before, "nothing was judged before the kill"

    wait_for_free(Location.of(str(tmp_path / "killed")), "adaptive")  # the killed run holds its name until then
    gate.release()  # the second run judges freely
    second = subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(spec), *joining(ray_address)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    rows = list(cache.rows().to_pylist())
    counts = Counter(r["key"] for r in rows)
    assert max(counts.values()) == 1  # no comparison asked twice
    assert all(r["created_at"] == before[r["key"]] for r in rows if r["key"] in before)

    # the resumed run ends exactly where an uninterrupted run does
    resumed = Location.of(str(tmp_path / "killed" / "runs" / "adaptive" / "rankings.parquet")).read_parquet()
    assert resumed.to_pylist() == clean.layout.rankings.read_parquet().to_pylist()
    assert len(rows) == clean.requests


def test_report_has_transitivity_seed_spread_and_quantile_scores(ray_local, six_input, tmp_path):
    judge = {"engine": "simulated", "noise": 0.3, "seed": 4, "scale": 0.5, "intransitivity": 3.0}
    full = run_job(
        parse_spec(spec_for(six_input, tmp_path / "out", judge=judge, scheduler={"name": "full"}), "test"),
        progress=lambda m: None,
    )
    (tri,) = full.report["transitivity"]
    assert tri["contexts"] == 3 and tri["triads"] == 3 * 20 and tri["intransitive"] > 0

    spec = spec_for(
        six_input,
        tmp_path / "out",
        judge=judge,
        name="seeds",
        scheduler={"name": "pairs_beam", "repeats": 3},
        scoring={"quantile": {"percentages": {1: 0.5, 5: 0.5}}},
    )
    result = run_job(parse_spec(spec, "test"), progress=lambda m: None)
    assert result.judged == 0  # the full matrix already holds every comparison
    seeds = {r["level"]: r for r in result.report["seeds"]}
    assert seeds["sample"]["n"] == 3 and seeds["sample"]["se"] is not None
    rankings = result.layout.rankings.read_parquet().to_pylist()
    methods = {r["method"] for r in rankings}
    assert {"pairs_beam", "pairs_beam@seed2", "pairs_beam@seed3", "pairs_beam_quantile"} <= methods  # seeds 1, 2, 3
    quantile = [r for r in rankings if r["method"] == "pairs_beam_quantile"]
    assert sorted(r["score"] for r in quantile) == [1.0] * 9 + [5.0] * 9
    assert all(r["score"] == 5.0 for r in quantile if r["rank"] <= 3)
    text = result.layout.report_md.read_text()
    assert "## Spread across seeds" in text and "SIMULATED" in text
