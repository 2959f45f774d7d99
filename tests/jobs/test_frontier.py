"""The cost-quality frontier (jobs.frontier) and `pairank plan --recommend`.

The judge fit is checked both ways: the model's predicted verdict shares against
verdicts actually drawn from the simulated judge, and the fit against shares it
predicts; the LLMBar statistics against the flip count of operators.judge_bias.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main
from pairank.jobs.frontier import (
    Arm,
    VerdictStats,
    arms,
    budget_grid,
    comparisons_for,
    curves,
    fit_judge,
    human_world,
    predicted_stats,
    recommend,
    run_arm,
    sweep,
    synthetic_world,
    value_at,
    verdict_stats,
    win_ratio_scores,
)
from pairank.jobs.recommend import COLUMNS, TABLE, carried, read_frontier_table, recommend_from_table
from pairank.judges.engines.simulated import SimulatedJudgeSpec
from pairank.operators.judge_bias import slot_flips
from tests.helpers import ROOT

LLMBAR = ROOT / "data" / "llmbar-natural"


@pytest.mark.parametrize("scale,bias", [(0.5, 0.0), (1.2, 0.5), (5.5, -0.3)])
def test_fit_recovers_the_judge_whose_shares_it_is_given(scale, bias) -> None:
    acc, slot_a, flip = predicted_stats(scale, bias)
    fit = fit_judge(VerdictStats("x", 10_000, acc, slot_a, flip))
    assert fit["scale"] == pytest.approx(scale, rel=1e-3) and fit["position_bias"] == pytest.approx(bias, abs=1e-3)
    assert fit["noise"] == 1.0 and fit["fitted"]["flip"] == pytest.approx(flip, abs=1e-4)


def test_predicted_shares_are_those_of_verdicts_drawn_from_the_simulated_judge() -> None:
    """Contexts of 2 candidates: the better one's verdicts in both orders, as LLMBar's pairs are judged."""
    model = {"scale": 1.3, "noise": 1.0, "position_bias": 0.4}
    world = synthetic_world(2, 20_000, 5)
    p = world.judge(model, 5, verdict="hard")
    better = world.q[:, 0] > world.q[:, 1]
    first_wins = p[:, 0, 1] == 1.0  # 0 in slot A
    second_wins = p[:, 1, 0] == 1.0  # 1 in slot A
    accuracy = (
        np.where(better, first_wins, ~first_wins).mean() + np.where(better, ~second_wins, second_wins).mean()
    ) / 2
    slot_a = (first_wins.mean() + second_wins.mean()) / 2
    flip = (first_wins == second_wins).mean()
    # z-scored pairs of 2 have a gap of exactly 2; the prediction integrates over |q1 - q2|, so compare at gap 2:
    from scipy.special import ndtr

    up, down = ndtr(1.3 * 2 + 0.4), ndtr(-1.3 * 2 + 0.4)
    assert accuracy == pytest.approx((up + 1 - down) / 2, abs=0.01)
    assert slot_a == pytest.approx((up + down) / 2, abs=0.01)
    assert flip == pytest.approx(up * down + (1 - up) * (1 - down), abs=0.01)


def test_llmbar_verdict_stats_agree_with_the_flip_operator() -> None:
    judgments = pq.read_table(LLMBAR / "judgments.parquet")
    labels = pq.read_table(LLMBAR / "pairwise_labels.parquet")
    stats = verdict_stats(judgments, labels, "GPT-4", "Vanilla")
    assert stats.pairs == 100 and 0.9 < stats.accuracy <= 1 and 0.4 < stats.slot_a < 0.6
    flips = [
        r for r in slot_flips(judgments).to_pylist() if r["judge"].startswith("GPT-4") and 'Vanilla"' in r["judge"]
    ]
    if flips:  # the operator names a judge by its identity; the Vanilla mode's row where it is told apart
        assert stats.flip == pytest.approx(flips[0]["flip_rate"])
    assert stats.flip == pytest.approx(0.05)
    with pytest.raises(ValueError, match="no labelled pair"):
        verdict_stats(judgments, labels, "GPT-4", "NoSuchMode")
    weak = fit_judge(verdict_stats(judgments, labels, "LLaMA2", "Vanilla"))
    assert weak["scale"] < fit_judge(stats)["scale"]


def test_human_world_of_summeval() -> None:
    world = human_world(
        "SummEval",
        pq.read_table(ROOT / "data/summeval/candidates.parquet"),
        pq.read_table(ROOT / "data/summeval/human_scores.parquet"),
    )
    assert world.n == 16 and 300 < len(world.contexts) <= 400 and len(set(world.contexts)) == len(world.contexts)
    assert np.allclose(world.q.mean(axis=1), 0) and np.allclose(world.q.std(axis=1), 1)
    small = world.take([0, 5])
    assert small.contexts == [world.contexts[0], world.contexts[5]]
    p = small.judge({"scale": 2.0, "noise": 0.5, "position_bias": 0.0}, 0)
    assert p.shape == (2, 16, 16) and np.all(np.diagonal(p, axis1=1, axis2=2) == 0.5)
    # the same draws as the engine's judge would make for those candidates (seeded by the real ids)
    again = small.judge({"scale": 2.0, "noise": 0.5, "position_bias": 0.0}, 0)
    assert np.array_equal(p, again)


def test_arms_runs_and_records() -> None:
    n = 8
    grid = budget_grid(n)
    assert grid == sorted(grid) and all(n <= r < n * (n - 1) and r % 2 == 0 for r in grid)
    every = arms(n)
    assert {a.family for a in every} >= {"full", "random", "symmetric", "pairs_greedy", "pairs_beam", "poe"}
    world = synthetic_world(n, 6, 1)
    p = world.judge({"scale": 1.0, "noise": 1.0, "position_bias": 0.3}, 1)
    used, scores = run_arm(world, p, Arm("full", {"name": "full"}), 1)
    assert np.all(used == n * (n - 1)) and np.allclose(scores, win_ratio_scores(p, np.ones_like(p) - np.eye(n)))
    used, scores = run_arm(world, p, Arm("poe", {"name": "poe", "comparisons": 20}), 1)
    assert np.all(used == 20) and scores.shape == (6, n)
    records = sweep(world, {"scale": 1.0, "noise": 1.0, "position_bias": 0.3}, [1, 2], every[:3] + every[-2:])
    assert len(records) == 2 * 5
    full = [r for r in records if r["family"] == "full"]
    assert all(r["full_matrix"] == pytest.approx(1.0) and -1 <= r["human"] <= 1 for r in full)
    cv = curves(records)
    assert cv["full"][0]["human"]["n"] == 2 and cv["full"][0]["comparisons"]["mean"] == n * (n - 1)


def test_interpolation_and_recommendation() -> None:
    def point(cmp, rho, label):
        spread = {"mean": rho, "sd": 0.01, "se": 0.005, "n": 20}
        return {"label": label, "scheduler": {"name": label}, "comparisons": {"mean": cmp}, "human": spread}

    frontier = {
        "a": [point(10, 0.5, "a"), point(40, 0.9, "a")],
        "b": [point(30, 0.85, "b")],
        "c": [point(20, 0.95, "c")],
    }
    assert value_at(frontier["a"], 20) == pytest.approx(0.7)  # halfway in log comparisons
    assert value_at(frontier["a"], 50) is None and value_at(frontier["a"], 5) is None
    assert comparisons_for(frontier["a"], 0.7) == pytest.approx(20.0)
    assert comparisons_for(frontier["a"], 0.99) is None
    rec = recommend(frontier, 0.85)
    assert rec["choice"]["label"] == "c" and [o["family"] for o in rec["options"]] == ["c", "b", "a"]
    none = recommend(frontier, 0.99)
    assert none["choice"] is None and none["best"]["label"] == "c"


def test_cli_plan_recommend_simulate(capsys) -> None:
    argv = ["plan", "--recommend", "--simulate", "--candidates", "8", "--contexts", "4", "--seeds", "1"]
    argv += ["--noise", "0.5"]
    assert main([*argv, "--target-spearman", "0.7", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["simulated"] and result["candidates"] == 8 and result["judge"]["noise"] == 0.5
    choice = result["recommendation"]["choice"]
    assert choice["human"]["mean"] >= 0.7
    assert choice["comparisons"]["mean"] == min(o["comparisons"]["mean"] for o in result["recommendation"]["options"])
    assert main([*argv, "--target-spearman", "0.7"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("SIMULATED") and "recommended: scheduler:" in text
    assert main([*argv, "--target-spearman", "1.5"]) == 0
    assert "no scheduler reaches 1.5" in capsys.readouterr().out


def _table(path, rows) -> None:
    header = list(COLUMNS)
    lines = [",".join(header)]
    for r in rows:
        full = {"position_bias": 0.0, "seeds": 20, "human_sd": 0.01, "full_matrix": 0.9, "full_matrix_sd": 0.01} | r
        full["share"] = full["comparisons"] / (full["n"] * (full["n"] - 1))
        full["scheduler"] = '"' + json.dumps(full["scheduler"]).replace('"', '""') + '"'
        lines.append(",".join(str(full[c]) for c in header))
    path.write_text("\n".join(lines) + "\n")


def test_recommend_from_a_table_picks_the_nearest_judge_and_n_and_the_cheapest_point(tmp_path, capsys) -> None:
    def row(judge, scale, n, family, scheduler, comparisons, human):
        s = "set-" + str(n)
        return dict(
            set=s,
            n=n,
            judge=judge,
            scale=scale,
            noise=1.0,
            family=family,
            scheduler=scheduler,
            comparisons=comparisons,
            human=human,
        )

    strong, weak = ("strong", 5.0), ("weak", 1.0)
    rows = [
        row(*strong, 16, "full", {"name": "full"}, 240, 0.95),
        row(*strong, 16, "poe", {"name": "poe", "comparisons": 30}, 30, 0.80),
        row(*strong, 16, "poe", {"name": "poe", "comparisons": 60}, 60, 0.91),
        row(*strong, 16, "pairs_greedy", {"name": "pairs_greedy"}, 90, 0.92),
        row(*strong, 200, "poe", {"name": "poe", "comparisons": 400}, 400, 0.99),
        row(*weak, 16, "poe", {"name": "poe", "comparisons": 60}, 60, 0.5),
        row(*weak, 16, "full", {"name": "full"}, 240, 0.7),
    ]
    path = tmp_path / "frontier.csv"
    _table(path, rows)
    judge = SimulatedJudgeSpec(scale=2.0, noise=0.5)  # signal to noise 4: nearer 5 than 1
    got = recommend_from_table(judge, candidates=20, target=0.9, path=path)
    assert got["measured_at"]["judge"] == "strong" and got["measured_at"]["n"] == 16  # log 20 nearer log 16
    choice = got["recommendation"]["choice"]
    assert choice["scheduler"] == {"name": "poe", "comparisons": 60}
    assert choice["at_candidates"]["scheduler"] == {"name": "poe", "comparisons": 96}  # 60 x 380/240, even
    assert [o["family"] for o in got["recommendation"]["options"]] == ["poe", "pairs_greedy", "full"]
    weak_judge = recommend_from_table(SimulatedJudgeSpec(scale=1.0, noise=1.2), candidates=16, target=0.9, path=path)
    assert weak_judge["measured_at"]["judge"] == "weak" and weak_judge["recommendation"]["choice"] is None
    argv = ["plan", "--recommend", "--frontier-table", str(path), "--candidates", "150", "--target-spearman", "0.95"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith("SIMULATED") and 'recommended: scheduler: {"name": "poe", "comparisons": 224}' in text
    bad = tmp_path / "bad.csv"
    bad.write_text(path.read_text().replace(",0.95,", ",high,", 1))
    assert main(["plan", "--recommend", "--frontier-table", str(bad)]) == 2
    assert f"{bad} row 2 column human: expected float" in capsys.readouterr().err
    assert main(["plan", "--frontier-table", str(path)]) == 2


def test_carried_budgets_keep_their_share_and_their_unit() -> None:
    assert carried({"name": "symmetric", "comparisons": 24}, 16, 16) == {"name": "symmetric", "comparisons": 24}
    assert carried({"name": "random", "comparisons": 25}, 16, 32) == {"name": "random", "comparisons": 103}
    assert carried({"name": "adaptive_symmetric", "sampling": {"budget": 60}}, 16, 8) == {
        "name": "adaptive_symmetric",
        "sampling": {"budget": 14},
    }
    assert carried({"name": "pairs_greedy"}, 16, 1000) == {"name": "pairs_greedy"}


def test_the_packaged_frontier_table_covers_every_set_and_scheduler() -> None:
    """What bench/frontier.py wrote: every set at >= 20 seeds, every scheduler family, settings a spec accepts."""
    from pairank.jobs.schedulers import parse_scheduler

    rows = read_frontier_table(TABLE)
    assert {r["set"] for r in rows} >= {"SummEval", "HANNA", "TopicalChat", "synthetic N=50", "synthetic N=200"}
    assert {r["n"] for r in rows} >= {16, 11, 6, 50, 200}
    assert all(r["seeds"] >= 20 for r in rows)
    families = {r["family"] for r in rows}
    for name in ("full", "random", "symmetric", "pairs_greedy", "pairs_beam", "pairs_anchors", "poe"):
        assert name in families
    assert {"adaptive_symmetric", "adaptive_symmetric (d_optimal)"} <= families
    for r in rows:
        parse_scheduler(r["scheduler"])
        assert r["share"] == pytest.approx(r["comparisons"] / (r["n"] * (r["n"] - 1)), rel=1e-3, abs=1e-6)
        if r["family"] == "full":
            assert r["share"] == 1 and r["full_matrix"] == 1
    got = recommend_from_table(SimulatedJudgeSpec(), candidates=16, target=0.8)
    assert got["measured_at"]["n"] == 16 and got["recommendation"]["choice"]["human"]["mean"] >= 0.8
