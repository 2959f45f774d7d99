"""Leaderboard quality: separability, agreement and Spearman with a reference on a hand-computed board, the
Brier score of the held-out refit on a hand-computed split, the seeded split, human and leaderboard references."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from pairank.operators.board_quality import (
    COIN_BRIER,
    Reference,
    board_quality,
    board_reference,
    brier,
    held_out_contexts,
    human_reference,
    quality_lines,
)
from pairank.operators.board_quality_html import quality_panel
from pairank.operators.leaderboard import OVERALL, LeaderboardOptions, leaderboard
from tests.helpers import leaderboard_candidates as candidates
from tests.helpers import leaderboard_judgment as judgment
from tests.helpers import leaderboard_table as table

# A hand-made board of five systems (aspect "coherence"): strength [interval]
#   A  1.2 [ 0.9,  1.5]     B  0.8 [ 0.5,  1.1]     C  0.0 [-0.3, 0.3]
#   D -0.5 [-0.8, -0.2]     E -1.5 [-1.9, -1.1]
BOARD = {
    "A": (1.2, 0.9, 1.5),
    "B": (0.8, 0.5, 1.1),
    "C": (0.0, -0.3, 0.3),
    "D": (-0.5, -0.8, -0.2),
    "E": (-1.5, -1.9, -1.1),
}
# A reference ranking (mean human scores); E has none, A and D tie.
HUMAN = {"A": 4.0, "B": 4.5, "C": 4.2, "D": 4.0}


def board_table() -> pa.Table:
    rows = [
        {"aspect": "coherence", "system": s, "strength": v, "strength_low": lo, "strength_high": hi}
        for s, (v, lo, hi) in BOARD.items()
    ]
    return pa.Table.from_pylist(rows)


def test_separability_agreement_and_spearman_reproduce_the_hand_computation():
    # Separability. Of the 10 pairs, two overlap: A-B (A's low 0.9 <= B's high 1.1) and C-D (C's low -0.3 <=
    # D's high -0.2). 8 of 10 are separable: 0.8.
    # Agreement with HUMAN. Of the 8 separable pairs, A-E, B-E, C-E and D-E have no reference score for E and
    # A-D is tied in the reference: left out. Counted: A-C, B-C, B-D. Here A > C but the reference has
    # 4.0 < 4.2: disagree; B > C with 4.5 > 4.2 and B > D with 4.5 > 4.0: agree. 2 of 3. (A-B, which the
    # reference orders the other way, is not separable here: it counts neither way.)
    # Spearman over A, B, C, D (E has no reference score). Ranks, ascending, ties averaged:
    #   strength  D 1, C 2, B 3, A 4;   reference  A 1.5, D 1.5, C 3, B 4.
    #   Pearson of the ranks (A, B, C, D) = (4, 3, 2, 1) against (1.5, 4, 3, 1.5), both of mean 2.5:
    #   deviations (1.5, .5, -.5, -1.5) and (-1, 1.5, .5, -1); sum of products -1.5 + .75 - .25 + 1.5 = 0.5;
    #   sums of squares 5 and 4.5; rho = 0.5 / sqrt(5 * 4.5) = 1 / sqrt(90) = 0.10541.
    contexts = ["c1", "c2"]
    cands = candidates(contexts, list(BOARD))
    judgments = table([judgment(c, "coherence", f"{c}/A", f"{c}/B", "A") for c in contexts])
    ref = Reference("human scores", "hand", {("coherence", s): v for s, v in HUMAN.items()})
    q = board_quality(board_table(), judgments, cands, LeaderboardOptions(n_boot=0), [ref])["coherence"]
    assert (q["systems"], q["pairs"], q["separable_pairs"], q["separability"]) == (5, 10, 8, 0.8)
    (r,) = q["references"]
    assert (r["systems"], r["pairs"], r["agreeing_pairs"]) == (4, 3, 2)
    assert r["agreement"] == pytest.approx(2 / 3)
    assert r["spearman"] == pytest.approx(1 / math.sqrt(90))
    assert r["status"] == "ok" and r["reference"] == "human scores"


def test_a_reference_without_the_aspect_and_a_board_without_intervals():
    rows = board_table().to_pylist()
    no_intervals = pa.Table.from_pylist([{**r, "strength_low": None, "strength_high": None} for r in rows])
    cands = candidates(["c1"], list(BOARD))
    judgments = table([judgment("c1", "coherence", "c1/A", "c1/B", "A")])
    other = Reference("other", "x", {("fluency", "A"): 1.0})
    q = board_quality(no_intervals, judgments, cands, LeaderboardOptions(n_boot=0), [other])["coherence"]
    assert (q["pairs"], q["separable_pairs"], q["separability"]) == (0, 0, None)
    (r,) = q["references"]
    assert r["systems"] == 0 and r["spearman"] is None and r["agreement"] is None
    assert "no system of the board has a reference score for 'coherence'" in r["status"]
    # one context: nothing to hold out
    assert q["brier"]["brier"] is None and q["brier"]["status"] == "no split: a board of one context"


def test_the_brier_score_reproduces_the_hand_computation():
    # Training contexts t1, t2, t3: X beats Y, X beats Y, Y beats X. Without the prior (prior_ties=0) the
    # maximum-likelihood fit has theta_X - theta_Y = ln(2/1), so P(X beats Y) = 2/3.
    # Held-out context h1:
    #   X (slot A) beats Y:  p(A) = 2/3, y = 1: (2/3 - 1)^2 = 1/9
    #   Y (slot A) beats X:  p(A) = 1/3, y = 1: (1/3 - 1)^2 = 4/9
    #   X - Y tie: left out (counted);  X - Z: Z is not in the training contexts, left out (counted);
    #   an error row: skipped.
    # Brier = (1/9 + 4/9) / 2 = 5/18 = 0.2778; a coin scores 1/4, so skill = 1 - (5/18) / (1/4) = -1/9.
    rows = [
        judgment("t1", "coherence", "t1/X", "t1/Y", "A"),
        judgment("t2", "coherence", "t2/Y", "t2/X", "B"),
        judgment("t3", "coherence", "t3/X", "t3/Y", "B"),
        judgment("h1", "coherence", "h1/X", "h1/Y", "A", i=1),
        judgment("h1", "coherence", "h1/Y", "h1/X", "A"),
        judgment("h1", "coherence", "h1/X", "h1/Y", "tie", i=2),
        judgment("h1", "coherence", "h1/X", "h1/Z", "A"),
        judgment("h1", "coherence", "h1/Y", "h1/X", None, error="timeout", i=3),
    ]
    cands = pa.concat_tables([candidates(["t1", "t2", "t3"], ["X", "Y"]), candidates(["h1"], ["X", "Y", "Z"])])
    out = brier(table(rows), cands, LeaderboardOptions(n_boot=0, prior_ties=0), held_out={"h1"})
    assert set(out) == {OVERALL, "coherence"}
    for b in out.values():
        assert b["brier"] == pytest.approx(5 / 18, abs=1e-8)
        assert b["skill"] == pytest.approx(-1 / 9, abs=1e-7)
        assert (b["n"], b["ties_left_out"], b["unfitted_left_out"]) == (2, 1, 1)
        assert (b["train_contexts"], b["held_out_contexts"], b["coin"], b["status"]) == (3, 1, COIN_BRIER, "ok")


def test_the_held_out_split_is_seeded_and_a_fifth_of_the_contexts():
    contexts = [f"c{i:02d}" for i in range(25)]
    held = held_out_contexts(contexts, seed=3)
    assert len(held) == 5 and held <= set(contexts)
    assert held == held_out_contexts(list(reversed(contexts)), seed=3)  # a set, not an order
    assert any(held_out_contexts(contexts, seed=s) != held for s in range(4, 8))
    assert len(held_out_contexts(["a", "b"], 0)) == 1 and len(held_out_contexts(["a", "b", "c"], 0)) == 1


def simulate(theta: dict[str, float], contexts: int, seed: int):
    rng = np.random.default_rng(seed)
    rows, ctxs = [], [f"c{k:03d}" for k in range(contexts)]
    for ctx in ctxs:
        for a, theta_a in theta.items():
            for b, theta_b in theta.items():
                if a != b:
                    p = 1 / (1 + math.exp(theta_b - theta_a))
                    rows.append(
                        judgment(ctx, "coherence", f"{ctx}/{a}", f"{ctx}/{b}", "A" if rng.random() < p else "B")
                    )
    return table(rows), candidates(ctxs, list(theta))


def test_on_simulated_judgments_the_model_beats_a_coin_and_agrees_with_the_truth():
    theta = {"S1": -1.5, "S2": -0.5, "S3": 0.5, "S4": 1.5}
    judgments, cands = simulate(theta, contexts=60, seed=11)
    options = LeaderboardOptions(n_boot=100, seed=2)
    board = leaderboard(judgments, cands, options=options)
    truth = Reference("truth", "simulation", {(a, s): v for s, v in theta.items() for a in ("coherence", OVERALL)})
    quality = board_quality(board.table, judgments, cands, options, [truth])
    assert list(quality) == [OVERALL, "coherence"]
    q = quality["coherence"]
    assert q["separability"] == 1.0  # one logit apart, 60 contexts of both orders: every pair is separable
    (r,) = q["references"]
    assert r["spearman"] == pytest.approx(1.0) and r["agreement"] == 1.0 and r["pairs"] == 6
    b = q["brier"]
    assert b["held_out_contexts"] == 12 and b["train_contexts"] == 48 and b["n"] == 12 * 12
    # the true probabilities' expected Brier here is mean p(1 - p) over the pairs, about 0.18
    assert 0.12 < b["brier"] < 0.23 and b["skill"] > 0.1
    again = board_quality(board.table, judgments, cands, options, [truth])
    assert again == quality  # seeded
    lines = quality_lines(quality)
    assert lines[1].startswith("coherence: separability 1.00 (6 of 6 pairs); Brier 0.")
    assert "truth: Spearman +1.00, agreement 1.00 (6 of 6 pairs)" in lines[1]
    page = "".join(quality_panel({"quality": quality}))
    assert "<h2>Quality</h2>" in page and "truth: Spearman" in page and "1.00 (6 of 6)" in page


def test_human_and_leaderboard_references():
    cands = candidates(["c1", "c2"], ["x", "y"])
    human = pa.table(
        {
            "candidate_id": ["c1/x", "c2/x", "c1/y", "c2/y", "c1/x", "other/z"],
            "aspect": ["coherence", "coherence", "coherence", "coherence", "fluency", "coherence"],
            "score": [1.0, 2.0, 4.0, 5.0, 3.0, 9.0],
        }
    )
    ref = human_reference(human, cands, ["coherence"])  # fluency is not an aspect of the board
    # coherence: x (1 + 2) / 2 = 1.5, y (4 + 5) / 2 = 4.5; overall pools the board's aspects: the same here
    assert ref.scores == {("coherence", "x"): 1.5, ("coherence", "y"): 4.5, (OVERALL, "x"): 1.5, (OVERALL, "y"): 4.5}
    other = board_reference(board_table(), "b.parquet")
    assert other.name == "leaderboard b.parquet" and other.scores[("coherence", "A")] == 1.2
