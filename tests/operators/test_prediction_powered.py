"""Prediction-powered rank-sets and win rates (operators.prediction_powered) on a seeded world and small tables."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pairank.operators.prediction_powered import (
    covers,
    human_keys,
    judged_keys,
    ppi_estimate,
    prediction_powered,
    rank_sets,
)
from pairank.storage.validation import TableError
from tests.operators import ppr_world as W

#: Fewer seeds than the bench's 100 (bench/prediction_powered.py), enough to tell 0.9 from 0.
SEEDS = 30


def test_rank_sets_cover_the_human_order_where_the_judge_only_board_does_not():
    """The judge prefers length and the two weakest systems write long answers: its own board is confidently
    wrong, the prediction-powered rank-sets (300 human labels of 5,000 judged keys) hold the true order."""
    got = W.run(SEEDS, judged=5000, labels=300, bias=1.0)
    print(
        f"\ncoverage of the true order over {SEEDS} seeds: prediction-powered {got['pp_coverage']:.2f} "
        f"(mean rank-set size {got['pp_rank_set_size']}), judge-only bootstrap {got['judge_coverage']:.2f} "
        f"(size {got['judge_rank_set_size']}); win-rate intervals {got['pp_interval_coverage']:.3f}"
    )
    assert got["pp_coverage"] >= 0.9
    assert got["judge_coverage"] <= 0.1
    assert 0.8 <= got["pp_interval_coverage"] <= 0.98  # marginal intervals at 90%, near their level


def test_an_unbiased_judge_is_covered_both_ways_and_more_labels_narrow_the_rank_sets():
    fair = W.run(10, judged=5000, labels=300, bias=0.0)
    assert fair["pp_coverage"] == 1.0 and fair["judge_coverage"] == 1.0
    few, many = (W.run(10, judged=5000, labels=n)["pp_rank_set_size"] for n in (100, 1000))
    assert many < few


def test_labels_on_every_key_with_an_exact_judge_give_the_human_win_rates():
    keys, human = W.world(0, judged=2000, labels=2000, bias=0.0)
    exact = keys.set_column(3, "judge", human.column("human"))  # the same keys in the same order
    t = prediction_powered(exact.sort_by("context_id"), human, n_boot=0).table
    rates = {r["system"]: r["win_rate"] for r in t.to_pylist()}
    for system, rate in rates.items():
        sub = [
            h
            for h, a, b in zip(*(human.column(c).to_pylist() for c in ("human", "system_a", "system_b")))
            if system in (a, b)
            for h in [h if a == system else 1 - h]
        ]
        assert rate == pytest.approx(float(np.mean(sub)))


def test_power_tuning_never_widens_the_interval_of_plain_ppi():
    keys, human = W.world(3, judged=3000, labels=200)
    t = prediction_powered(keys, human, n_boot=0).table
    assert all(0.0 <= r["power"] <= 1.0 for r in t.to_pylist())
    rng = np.random.default_rng(1)
    d = np.ones((50, 2))
    wj = rng.random((50, 2))
    wh = (rng.random((50, 2)) < 0.5).astype(float)
    lab = np.arange(50) < 20
    _, tuned, _ = ppi_estimate(d, wj, wh, lab)
    _, plain, lam = ppi_estimate(d, wj, wh, lab, power_tuning=False)
    assert (np.diag(tuned) <= np.diag(plain) + 1e-15).all() and (lam == 1).all()


def test_rank_sets_are_intervals_holding_the_point_ranks():
    rng = np.random.default_rng(5)
    theta = rng.random(6)
    low, high = rank_sets(theta, np.eye(6) * 0.01, 0.1)
    point = np.argsort(np.argsort(-theta)) + 1
    assert ((low <= point) & (point <= high)).all()


def test_a_system_without_labels_gets_the_whole_rank_range():
    keys = pa.table(
        {
            "context_id": ["c1", "c2", "c3"],
            "system_a": ["x", "x", "y"],
            "system_b": ["y", "z", "z"],
            "judge": [0.9, 0.8, 0.6],
        }
    )
    human = pa.table({"context_id": ["c1"], "system_a": ["x"], "system_b": ["y"], "human": [1.0]})
    rows = {r["system"]: r for r in prediction_powered(keys, human, n_boot=20).table.to_pylist()}
    assert rows["z"]["win_rate"] is None and (rows["z"]["rank_low"], rows["z"]["rank_high"]) == (1, 3)
    assert rows["x"]["n_human"] == 1 and rows["x"]["n_judged"] == 2


def test_bad_inputs_name_the_row_and_field():
    cands = pa.table({"candidate_id": ["c/x", "c/y", "d/x"], "system": ["x", "y", "x"], "context_id": ["c", "c", "d"]})
    judged = pa.table({"context_id": ["c"], "system_a": ["x"], "system_b": ["y"], "judge": [0.7]})

    def labels(ctx, a, b):
        return pa.table(
            {"context_id": ["c", ctx], "candidate_a": ["c/x", a], "candidate_b": ["c/y", b], "preferred": ["A", "B"]}
        )

    cases = [
        (labels("c", "c/x", "c/q"), "candidate_b", "row 1", "its system is known"),
        (labels("c", "c/x", "c/x"), "candidate_b", "row 1", "a system other than"),
        (labels("c", "d/x", "c/y"), "candidate_a", "row 1", "a candidate of context 'c'"),
        (labels("d", "d/x", "d/x"), "candidate_b", "row 1", "a system other than"),
    ]
    for table, field, row, expected in cases:
        with pytest.raises(TableError) as err:
            human_keys(table, cands, judged, "h.parquet")
        assert f"column `{field}` in h.parquet {row}" in str(err.value) and expected in str(err.value)
    judged_xz = pa.table({"context_id": ["c"], "system_a": ["x"], "system_b": ["z"], "judge": [0.7]})
    with pytest.raises(TableError, match=r"column `context_id` in h.parquet row 0: .*no judgment there compares"):
        human_keys(labels("c", "c/x", "c/y"), cands, judged_xz, "h.parquet")
    with pytest.raises(ValueError, match="alpha"):
        prediction_powered(
            judged, pa.table({"context_id": ["c"], "system_a": ["x"], "system_b": ["y"], "human": [1.0]}), alpha=1.5
        )


def test_judged_keys_pool_both_orders_and_skip_errors():
    j = pa.table(
        {
            "context_id": ["c"] * 4,
            "candidate_a": ["c/y", "c/x", "c/x", "c/x"],
            "candidate_b": ["c/x", "c/y", "c/y", "c/q"],
            "p_a": [0.2, 0.6, None, 0.9],
        }
    )
    cands = pa.table({"candidate_id": ["c/x", "c/y"], "system": ["x", "y"]})
    assert judged_keys(j, cands).to_pylist() == [
        {"context_id": "c", "system_a": "x", "system_b": "y", "judge": 0.7, "n_verdicts": 2}
    ]


def test_covers_is_the_simultaneous_event():
    t = pa.table({"system": ["x", "y", "z"], "rank_low": [1, 1, 3], "rank_high": [2, 2, 3]})
    assert covers(t, {"x": 1, "y": 2, "z": 3}) and not covers(t, {"x": 1, "y": 3, "z": 2})
