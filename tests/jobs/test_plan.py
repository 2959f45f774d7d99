"""The plan: SIMULATED comparisons-versus-Spearman per scheduler, and measuring a judge."""

from __future__ import annotations

import itertools
import json

import pyarrow as pa
import pytest

from pairank.jobs import schedulers as adaptive
from pairank.jobs.cli.main import main
from pairank.jobs.plan import Point, measure_judge, plan, smallest_budget
from pairank.jobs.schedulers.static import SCHEDULERS
from pairank.judges.engines.simulated import SimulatedJudgeSpec
from pairank.judges.engines.simulated_judge import SimulatedJudge
from pairank.storage.fs import Location

SMALL = {"candidates": 8, "contexts": 20}


def by_name(result: dict) -> dict[str, dict]:
    return {e["scheduler"]: e for e in result["schedulers"]}


def test_noiseless_judge_full_matrix_and_pairs_reach_spearman_one():
    judge = SimulatedJudgeSpec(noise=0.0, position_bias=0.0, intransitivity=0.0)
    result = plan(judge, target=1.0, schedulers=["full", "pairs_greedy", "pairs_beam"], **SMALL)
    entries = by_name(result)
    for name in ("full", "pairs_greedy", "pairs_greedy (symmetric)"):
        assert entries[name]["spearman"] == pytest.approx(1.0) and entries[name]["reaches_target"], name
    assert entries["full"]["comparisons"] == 8 * 7
    assert entries["pairs_greedy"]["comparisons"] < 8 * 7 / 2
    # The beam ranks merge paths by the sum of log p, which can prefer a wrong
    # order even when every p is on the right side of 0.5 (see PairsBeam).
    assert entries["pairs_beam"]["spearman"] > 0.95
    assert result["simulated"] is True


def test_more_noise_needs_a_larger_random_budget():
    budgets = []
    for noise in (0.0, 2.0, 3.0):
        entry = by_name(plan(SimulatedJudgeSpec(noise=noise), target=0.8, schedulers=["random"], **SMALL))["random"]
        assert entry["reaches_target"] and entry["curve"]
        budgets.append(entry["budget"])
    assert budgets[0] < budgets[1] < budgets[2]


def test_smallest_budget_bisects_a_monotone_curve():
    calls = []

    def evaluate(r: int) -> Point:
        calls.append(r)
        return Point(r, r / 100, 0.0, 1)

    r, seen = smallest_budget(evaluate, 1, 100, 0.37)
    assert r == 37 and seen[37].spearman == 0.37 and len(calls) <= 9
    assert smallest_budget(evaluate, 1, 100, 1.5)[0] == 100  # not reached: the largest budget


def test_cli_plan_json_has_an_entry_per_scheduler(capsys):
    argv = ["plan", "--candidates", "8", "--contexts", "10", "--noise", "0.8", "--position-bias", "0.5"]
    argv += ["--time-budget", "0.5", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    names = {e["scheduler"].split(" ")[0] for e in result["schedulers"]}
    assert names == set(SCHEDULERS) | set(adaptive.ADAPTIVE)
    assert result["simulated"] and result["judge"]["noise"] == 0.8 and result["judge"]["position_bias"] == 0.5
    for e in result["schedulers"]:
        assert 0 < e["comparisons"] <= 2 * 8 * 7 and -1 <= e["spearman"] <= 1 and e["se"] >= 0


def test_time_budget_cuts_a_slow_adaptive_run_to_its_first_contexts():
    clock = iter(range(1000)).__next__  # 1 s per reading: each chunk of contexts "takes" 1 s
    result = plan(SimulatedJudgeSpec(), schedulers=["pairs_greedy"], time_budget=1.5, clock=clock, **SMALL)
    assert {e["contexts"] for e in result["schedulers"]} == {2}  # 2 contexts took 1 s; 4 would take 2 s > 1.5
    unlimited = plan(SimulatedJudgeSpec(), schedulers=["pairs_greedy"], time_budget=None, **SMALL)
    assert {e["contexts"] for e in unlimited["schedulers"]} == {20}


def test_cli_plan_table_says_simulated_first(capsys):
    assert main(["plan", "--candidates", "6", "--contexts", "5", "--schedulers", "full", "pairs_greedy"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("SIMULATED")
    assert any(line.startswith("pairs_greedy (symmetric)") for line in out)


def test_cli_plan_unknown_scheduler_lists_the_known_ones(capsys):
    assert main(["plan", "--schedulers", "fastest"]) == 2
    assert "pairs_greedy" in capsys.readouterr().err


def full_matrix(spec: SimulatedJudgeSpec, contexts: int = 40, n: int = 8) -> pa.Table:
    ids = [f"x{i}" for i in range(n)]
    pairs = [(f"ctx{c}", a, b) for c in range(contexts) for a, b in itertools.permutations(ids, 2)]
    reqs = pa.table(
        {
            "key": [f"{c}|{a}|{b}" for c, a, b in pairs],
            "context_id": [c for c, _, _ in pairs],
            "aspect": ["coherence"] * len(pairs),
            "candidate_a": [a for _, a, _ in pairs],
            "candidate_b": [b for _, _, b in pairs],
            "prompt": [""] * len(pairs),
            "prompt_hash": ["h"] * len(pairs),
        }
    )
    return SimulatedJudge(spec).judge(reqs)


@pytest.mark.parametrize("bias, noise, cyclic", [(0.7, 0.5, 0.0), (-0.4, 1.0, 1.5)])
def test_measuring_a_simulated_full_matrix_recovers_its_coefficients(bias, noise, cyclic):
    got = measure_judge(full_matrix(SimulatedJudgeSpec(seed=5, position_bias=bias, noise=noise, intransitivity=cyclic)))
    assert got["position_bias"] == pytest.approx(bias, abs=0.1)
    assert got["noise"] == pytest.approx(noise, abs=0.1)
    assert got["scale"] == pytest.approx(2.0, abs=0.3)
    assert got["intransitivity"] == pytest.approx(cyclic, abs=0.35)
    assert got["pairs_both_orders"] == 40 * 28 and got["candidates"] == 8


def test_measuring_needs_pairs_judged_in_both_orders():
    table = full_matrix(SimulatedJudgeSpec())
    one_order = table.filter(pa.compute.less(table.column("candidate_a"), table.column("candidate_b")))
    with pytest.raises(ValueError, match="both orders"):
        measure_judge(one_order)


def test_cli_plan_from_judgments_uses_the_measured_judge(tmp_path, capsys):
    path = tmp_path / "judgments.parquet"
    Location.of(str(path)).write_parquet(full_matrix(SimulatedJudgeSpec(position_bias=0.6, noise=0.4)))
    argv = ["plan", "--from-judgments", str(path), "--contexts", "10", "--schedulers", "full", "--json"]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["judge"]["position_bias"] == pytest.approx(0.6, abs=0.1)
    assert result["measured"]["source"] == str(path) and result["candidates"] == 8
