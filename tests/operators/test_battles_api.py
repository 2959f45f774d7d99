"""The battles API (operators/battles.py): scores, intervals and replicates from (model_a, model_b, winner),
style from given columns or from texts, named errors, the interval kind stated."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pairank.judges.engines.replay_judge import read_judgments
from pairank.operators.battles import FEATURES, bradley_terry, style_controlled, win_rate_against
from pairank.operators.leaderboard import LeaderboardOptions, leaderboard
from pairank.operators.style_control import style_features
from pairank.storage.fs import Location
from pairank.storage.importers.battles import import_battles
from pairank.storage.inputs import read_candidates
from tests import formats as F

TRUE = {"a": 1.0, "b": 0.4, "c": 0.0, "d": -0.8}


def simulate(n: int, seed: int = 0, length_bias: float = 0.0, verbose: str | None = None) -> dict:
    """Battles drawn from TRUE strengths; with ``length_bias``, the judge also prefers longer texts and the
    ``verbose`` system writes three times longer ones."""
    rng = np.random.default_rng(seed)
    names = list(TRUE)
    out = {k: [] for k in ("model_a", "model_b", "winner", "context", "text_a", "text_b")}
    for i in range(n):
        x, y = rng.choice(names, size=2, replace=False)
        la, lb = (
            (300 if x == verbose else 100) + rng.integers(0, 50),
            (300 if y == verbose else 100) + rng.integers(0, 50),
        )
        logit = TRUE[x] - TRUE[y] + length_bias * np.log(la / lb)
        u = rng.random()
        winner = "tie" if u < 0.08 else "model_a" if rng.random() < 1 / (1 + np.exp(-logit)) else "model_b"
        out["model_a"].append(str(x))
        out["model_b"].append(str(y))
        out["winner"].append(winner)
        out["context"].append(f"p{i // 2}")
        out["text_a"].append("w " * int(la // 2))
        out["text_b"].append("w " * int(lb // 2))
    return out


def test_bradley_terry_recovers_the_order_with_replicates_and_says_its_interval():
    t = simulate(3000)
    board = bradley_terry(t, n_boot=50, seed=2)
    rows = board.table.to_pylist()
    assert [r["system"] for r in rows] == ["a", "b", "c", "d"]
    assert board.replicates.shape == (50, 4) and board.systems == ["a", "b", "c", "d"]
    truth = np.array([TRUE[s] for s in board.systems]) - np.mean(list(TRUE.values()))
    for r in rows:
        assert r["strength_low"] < r["strength"] < r["strength_high"]
        assert r["strength_low"] - 0.1 < truth[board.systems.index(r["system"])] < r["strength_high"] + 0.1
    assert board.interval.startswith("bootstrap percentile") and "contexts" in board.interval
    no_context = {k: v for k, v in t.items() if k != "context"}
    assert "over battles" in bradley_terry(no_context, n_boot=5).interval
    assert bradley_terry(t, n_boot=0).interval == "none (n_boot 0)"


def test_the_same_points_as_the_leaderboard(tmp_path):
    log = F.battles(tmp_path, n=120, seed=4)
    import_battles([str(log)], str(tmp_path / "in"))
    folder = Location.of(str(tmp_path / "in"))
    judgments, cands = read_judgments(folder.join("judgments.parquet").uri), read_candidates(folder)
    board = leaderboard(judgments, cands, None, LeaderboardOptions(n_boot=0))
    want = {r["system"]: r["strength"] for r in board.table.to_pylist() if r["aspect"] == "overall"}
    system = dict(zip(cands.column("candidate_id").to_pylist(), cands.column("system").to_pylist()))
    labels = {"A": "model_a", "B": "model_b", "tie": "tie"}
    t = {
        "model_a": [system[c] for c in judgments.column("candidate_a").to_pylist()],
        "model_b": [system[c] for c in judgments.column("candidate_b").to_pylist()],
        "winner": [labels[x] for x in judgments.column("label").to_pylist()],
    }
    got = {r["system"]: r["strength"] for r in bradley_terry(t, n_boot=0).table.to_pylist()}
    assert got == pytest.approx(want, abs=1e-9)


def test_style_control_sees_through_a_length_bias_given_or_counted():
    t = simulate(4000, seed=1, length_bias=1.5, verbose="d")
    raw = [r["system"] for r in bradley_terry(t, n_boot=0).table.to_pylist()]
    counted = style_controlled(t, n_boot=0)
    assert raw.index("d") < 3  # the verbose, weakest system climbs on length alone
    assert [r["system"] for r in counted.table.to_pylist()][-1] == "d"
    assert counted.coefficients["length"] > 0.8  # the bias found (ties at random pull it towards 0)
    assert counted.interval.startswith("Wald")
    given = {k: v for k, v in t.items() if not k.startswith("text")}
    for side in ("a", "b"):
        feats = [style_features(x) for x in t[f"text_{side}"]]
        for f in FEATURES:
            given[f"{f}_{side}"] = [x[f] for x in feats]
    same = style_controlled(pa.table(given), n_boot=0)
    assert same.table.column("strength").to_pylist() == pytest.approx(counted.table.column("strength").to_pylist())
    boot = style_controlled(given, n_boot=20, seed=3)
    assert boot.replicates.shape == (20, 4) and boot.interval.startswith("bootstrap percentile")


def test_missing_columns_are_named_not_a_key_error():
    with pytest.raises(ValueError, match=r"lacks columns \['winner'\]"):
        bradley_terry({"model_a": ["x"], "model_b": ["y"]})
    with pytest.raises(ValueError, match=r"lacks columns \['length_a', .*'text_a', 'text_b'\]"):
        style_controlled({"model_a": ["x"], "model_b": ["y"], "winner": ["A"]})
    with pytest.raises(ValueError, match=r"battles row 1: winner: expected one of"):
        bradley_terry({"model_a": ["x", "x"], "model_b": ["y", "y"], "winner": ["A", "C"]})


def test_a_dataframe_and_the_win_rate_against_a_baseline():
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(simulate(800, seed=5))
    board = bradley_terry(df, n_boot=0)
    rates = win_rate_against(board, "c")
    assert rates["c"] == 0.5 and rates["a"] > rates["b"] > 0.5 > rates["d"]


def test_import_pairank_exports_the_three_battle_statistics():
    import pairank
    from pairank.operators import battles

    for name in ("bradley_terry", "style_controlled", "length_controlled", "BattleBoard"):
        assert name in pairank.__all__ and getattr(pairank, name) is getattr(battles, name)
    rates = {r["system"]: r for r in pairank.length_controlled(simulate(800, seed=6), "c").to_pylist()}
    assert set(rates) == {"a", "b", "d"} and rates["a"]["win_rate"] > 0.5 > rates["d"]["win_rate"]
