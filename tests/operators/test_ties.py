"""Ties through every downstream operator: each counts a tie by its stated rule.

Generated verdicts ([[A]]/[[B]]/[[C]]), sampled verdicts (p_a = share of samples for A) and
pointwise comparisons make ties common: label "tie", p_a 0.5. These tables are small and the
expected numbers are worked out by hand in the comments.
"""

from __future__ import annotations

import hashlib
import itertools
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.jobs.schedulers import ADAPTIVE, AnchorInsertion, run_lockstep, symmetric_p
from pairank.operators.calibration import calibrate_table
from pairank.operators.meta_eval import meta_eval
from pairank.operators.reports import position_bias
from pairank.operators.scores import hard_verdict, rank_table, win_ratios
from pairank.operators.transitivity import intransitive_triads
from pairank.operators.votes import pair_votes
from pairank.operators.winrate import BASELINE, NO_VOTE, SYSTEM, tie_break
from pairank.storage.schemas import CANDIDATES, JUDGMENTS, PAIRWISE_LABELS
from tests.operators.rows import judgment

#: Generated verdicts as stored: the label and its p_a.
P = {"A": 1.0, "B": 0.0, "tie": 0.5}
#: A tie whose p_a is a hair off 0.5 (one ulp), as float noise could leave it.
NOISY = 0.5000000000000001


def row(ctx: str, a: str, b: str, label: str, p: float | None = None, aspect: str = "coherence", **extra) -> dict:
    """A judgment row with ``label``; p_a is the label's unless given."""
    return {**judgment(ctx, aspect, a, b, P[label] if p is None else p), "label": label, **extra}


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


def candidates(ids_by_ctx: dict[str, list[str]]) -> pa.Table:
    rows = [
        {"context_id": c, "context": c, "candidate_id": i, "system": f"sys_{i}", "text": i}
        for c, ids in ids_by_ctx.items()
        for i in ids
    ]
    return pa.Table.from_pylist(rows, schema=CANDIDATES)


def scores(ranked: pa.Table) -> dict[str, float]:
    return dict(zip(ranked.column("candidate_id").to_pylist(), ranked.column("score").to_pylist()))


# --- operators.scores: hard win ratio, a tie counts half; the label is the hard verdict -----------


def test_hard_win_ratios_count_a_tie_half() -> None:
    rows = [
        row("d", "x", "y", "tie"),
        row("d", "y", "x", "tie"),  # x ~ y twice: 1/2 + 1/2 each
        row("d", "x", "z", "A"),
        row("d", "z", "x", "tie"),  # x beats z, then a tie: x 1 + 1/2, z 0 + 1/2
        row("d", "y", "z", "B"),
        row("d", "z", "y", "A"),  # z beats y in both orders
    ]
    hard = scores(rank_table(table(rows), candidates({"d": ["x", "y", "z"]}), "hard"))
    # x: (1/2 + 1/2 + 1 + 1/2) / 4; y: (1/2 + 1/2 + 0 + 0) / 4; z: (0 + 1/2 + 1 + 1) / 4
    assert hard == {"x": 0.625, "y": 0.25, "z": 0.625}
    soft = scores(rank_table(table(rows), candidates({"d": ["x", "y", "z"]}), "soft"))
    assert soft == hard  # with p_a in {0, 0.5, 1} soft and hard agree


def test_a_tie_label_is_a_tie_even_when_p_a_is_a_hair_off() -> None:
    rows = [row("d", "x", "y", "tie", p=NOISY)]
    hard = scores(rank_table(table(rows), candidates({"d": ["x", "y"]}), "hard"))
    assert hard == {"x": 0.5, "y": 0.5}  # p_a alone would make this a win for x
    # The label is the hard verdict, p_a the soft one.
    sure = [row("d", "x", "y", "A", p=0.7)]
    assert scores(rank_table(table(sure), candidates({"d": ["x", "y"]}), "hard")) == {"x": 1.0, "y": 0.0}
    assert scores(rank_table(table(sure), candidates({"d": ["x", "y"]}), "soft")) == {"x": 0.7, "y": 0.3}
    # Without a label column the hard verdict is the side of 0.5 that p_a is on.
    unlabelled = rank_table(table(rows).drop_columns(["label"]), candidates({"d": ["x", "y"]}), "hard")
    assert scores(unlabelled) == {"x": 1.0, "y": 0.0}
    assert win_ratios([("x", "y", 0.5)], "hard") == {"x": 0.5, "y": 0.5}


def test_hard_verdict_rule_and_unknown_labels() -> None:
    assert [hard_verdict(p, label) for p, label in [(1.0, "A"), (0.0, "B"), (0.5, "tie"), (NOISY, "tie")]] == [
        1.0,
        0.0,
        0.5,
        0.5,
    ]
    assert [hard_verdict(p) for p in (0.9, 0.1, 0.5, NOISY)] == [1.0, 0.0, 0.5, 1.0]
    with pytest.raises(ValueError, match=r"label: expected one of \['A', 'B', 'tie'\].*'C'"):
        hard_verdict(0.5, "C")
    with pytest.raises(ValueError, match="neither a label nor a p_a"):
        hard_verdict(None, None)


# --- operators.transitivity: a tied pair is never part of a cycle --------------------------------


def triads(rows: list[dict], mode: str = "symmetric") -> int:
    [out] = intransitive_triads(table(rows), mode=mode).to_pylist()
    return out["intransitive"]


def cycle_but_c_vs_a(c_a: str, a_c: str) -> list[dict]:
    """a beats b and b beats c in both orders; (c, a) and (a, c) are judged ``c_a`` and ``a_c``."""
    return [
        row("d", "a", "b", "A"),
        row("d", "b", "a", "B"),
        row("d", "b", "c", "A"),
        row("d", "c", "b", "B"),
        row("d", "c", "a", c_a),
        row("d", "a", "c", a_c),
    ]


@pytest.mark.parametrize(
    "c_a,a_c,cycles",
    [
        ("A", "B", 1),  # c beats a in both orders: a > b > c > a
        ("tie", "tie", 0),  # tied in both orders
        ("A", "A", 0),  # slot A wins both orders: no preference
        ("A", "tie", 1),  # c wins one order, the other is a tie: c beats a, the cycle stands
        ("tie", "A", 0),  # a wins one order, the other is a tie: a beats c, transitive
    ],
)
def test_intransitive_triads_ignore_tied_pairs(c_a: str, a_c: str, cycles: int) -> None:
    assert triads(cycle_but_c_vs_a(c_a, a_c)) == cycles


@pytest.mark.parametrize("c_a,a_c", [("tie", "tie"), ("A", "A"), ("B", "B")])
def test_a_tie_closes_no_cycle_whichever_way_the_chain_runs(c_a: str, a_c: str) -> None:
    # c beats b, b beats a: a tie of a and c read as "a beats c" (or, above, as "c beats a") would close a cycle
    rows = [
        row("d", "b", "a", "A"),
        row("d", "a", "b", "B"),
        row("d", "c", "b", "A"),
        row("d", "b", "c", "B"),
        row("d", "c", "a", c_a),
        row("d", "a", "c", a_c),
    ]
    assert triads(rows) == 0
    rows[-2:] = [row("d", "c", "a", "B"), row("d", "a", "c", "A")]  # a beats c: the cycle a > c > b > a
    assert triads(rows) == 1


def test_a_first_mode_reads_an_exact_half_as_a_tie() -> None:
    rows = [row("d", "a", "b", "A"), row("d", "b", "c", "A"), row("d", "a", "c", "B")]  # a > b > c > a
    assert triads(rows, "a_first") == 1
    rows[-1] = row("d", "a", "c", "tie")
    assert triads(rows, "a_first") == 0


def test_ties_among_four_candidates_are_enumerated() -> None:
    # a > b > c > a is a cycle; d ties everyone: 4 triads, one cyclic
    rows = cycle_but_c_vs_a("A", "B")
    rows += [r for x in "abc" for r in (row("d", x, "d", "tie"), row("d", "d", x, "tie"))]
    [out] = intransitive_triads(table(rows)).to_pylist()
    assert (out["triads"], out["intransitive"]) == (4, 1)


# --- operators.reports.position_bias: a tie is half a slot-A win ---------------------------------


def test_position_bias_counts_a_tie_half() -> None:
    rows = [
        row("d", "x", "y", "A", aspect="one"),
        row("d", "y", "x", "tie", aspect="one"),
        row("d", "x", "z", "tie", p=NOISY, aspect="one"),
        row("d", "z", "x", "B", aspect="one"),
        row("d", "x", "y", "tie", aspect="two"),
        row("d", "y", "x", "tie", aspect="two"),
        {**judgment("d", "two", "x", "z", None, error="timeout")},  # not a verdict
    ]
    out = {r["aspect"]: r for r in position_bias(table(rows)).to_pylist()}
    assert out["one"]["slot_a_win_fraction"] == (1 + 0.5 + 0.5 + 0) / 4
    assert out["one"]["mean_p_a"] == pytest.approx((1 + 0.5 + NOISY + 0) / 4)
    assert (out["two"]["n"], out["two"]["slot_a_win_fraction"]) == (2, 0.5)
    # Without labels: from p_a, so the noisy tie is a slot-A win.
    unlabelled = position_bias(table(rows).drop_columns(["label"])).to_pylist()
    assert unlabelled[0]["slot_a_win_fraction"] == (1 + 0.5 + 1 + 0) / 4


# --- operators.votes / operators.winrate: 0.5 points for a tie; a split vote goes to the coin -----


#: (system, baseline) pairs, one per context: every combination of verdicts in the two orders,
#: and each verdict in one order only (the other not judged).
ORDERS = [(s, b) for s in P for b in P] + [(s, None) for s in P] + [(None, b) for b in P]
PAIRS = [(f"c{k}", f"s{k}", f"b{k}") for k in range(len(ORDERS))]


def orders_table() -> pa.Table:
    rows = []
    for (ctx, s, b), (first, second) in zip(PAIRS, ORDERS):
        if first is not None:
            rows.append(row(ctx, s, b, first))  # system in slot A
        if second is not None:
            rows.append(row(ctx, b, s, second))  # baseline in slot A
    return table(rows)


def test_swap_and_sum_gives_half_a_point_for_a_tie_and_agrees_with_hard_win_ratios() -> None:
    votes = pair_votes(orders_table(), PAIRS, seed=3)
    ranked = rank_table(orders_table(), candidates({c: [s, b] for c, s, b in PAIRS}), "hard").to_pylist()
    ratio = {r["candidate_id"]: r["score"] for r in ranked}
    tied = 0
    for (ctx, s, b), (first, second), vote in zip(PAIRS, ORDERS, votes.judge(votes.judges[0])):
        # By hand: the system's points in each order it was judged, over the orders judged.
        got = ([] if first is None else [P[first]]) + ([] if second is None else [1 - P[second]])
        share = sum(got) / len(got)
        assert ratio[s] == share, (first, second)  # the hard win ratio is the same share
        if share > 0.5:
            assert vote == SYSTEM, (first, second)
        elif share < 0.5:
            assert vote == BASELINE, (first, second)
        else:
            tied += 1
            assert vote == tie_break(3, ctx, s, b, votes.judges[0]), (first, second)
    # tie+tie, A+A, B+B and the single tie orders: 3 + 2 split pairs
    assert tied == 5 and votes.ties.tolist() == [5]
    assert votes.orders[:, 0].tolist() == [2] * 9 + [1] * 6


def test_an_all_tie_judge_ties_every_pair_and_the_coin_is_seeded_and_fair() -> None:
    pairs = [(f"c{k}", f"s{k}", f"b{k}") for k in range(400)]
    rows = [r for c, s, b in pairs for r in (row(c, s, b, "tie"), row(c, b, s, "tie"))]
    first = pair_votes(table(rows), pairs, seed=0)
    assert first.ties.tolist() == [400] and not (first.votes == NO_VOTE).any()
    assert first.votes.tolist() == pair_votes(table(rows), pairs, seed=0).votes.tolist()  # seeded
    other = pair_votes(table(rows), pairs, seed=1)
    assert other.votes.tolist() != first.votes.tolist()  # the seed moves the coin
    for v in (first, other):
        share = float(np.mean(v.votes == SYSTEM))
        assert abs(share - 0.5) < 4 * math.sqrt(0.25 / 400), share  # a fair coin, within 4 sd


def test_a_noisy_tie_label_is_half_a_point_in_votes_too() -> None:
    pairs = [("c", "s", "b")]
    noisy = table([row("c", "s", "b", "tie", p=NOISY)])
    assert pair_votes(noisy, pairs).ties.tolist() == [1]
    assert scores(rank_table(noisy, candidates({"c": ["s", "b"]}), "hard")) == {"b": 0.5, "s": 0.5}


# --- operators.calibration: labels follow the calibrated p_a -------------------------------------


def test_calibrate_table_relabels_ties_from_the_calibrated_p() -> None:
    rows = [
        # aspect "up": A, A, tie, B -> prior 0.625; the tie goes to 0.375, a "B"
        row("d", "x", "y", "A", aspect="up"),
        row("d", "y", "x", "A", aspect="up"),
        row("d", "x", "z", "tie", aspect="up"),
        row("d", "z", "x", "B", aspect="up"),
        # aspect "down": B, B, tie, A -> prior 0.375; the tie goes to 0.625, an "A"
        row("d", "x", "y", "B", aspect="down"),
        row("d", "y", "x", "B", aspect="down"),
        row("d", "x", "z", "tie", aspect="down"),
        row("d", "z", "x", "A", aspect="down"),
        # aspect "even": prior 0.5, the ties stay ties
        row("d", "x", "y", "tie", aspect="even"),
        row("d", "y", "x", "tie", aspect="even"),
        row("d", "x", "z", "A", aspect="even"),
        row("d", "z", "x", "B", aspect="even"),
        judgment("d", "even", "y", "z", None, error="timeout"),
    ]
    out = calibrate_table(table(rows)).to_pylist()
    got = [(r["aspect"], r["label"], r["p_a"]) for r in out]
    assert got[2] == ("up", "B", pytest.approx(0.375)) and got[6] == ("down", "A", pytest.approx(0.625))
    assert [g[1] for g in got] == ["A", "A", "B", "B", "B", "B", "A", "A", "tie", "tie", "A", "B", None]
    for r in out:  # label and p_a agree on every verdict row
        if r["error"] is None:
            assert r["label"] == ("A" if r["p_a"] > 0.5 else "B" if r["p_a"] < 0.5 else "tie")
    # ... so the hard win ratios over the calibrated table count the relabelled tie as a win
    up = rank_table(calibrate_table(table(rows[:4])), candidates({"d": ["x", "y", "z"]}), "hard")
    assert scores(up)["z"] == 1 / 2  # z: (x, z) now "B" (z wins), (z, x) "B" (z loses)


# --- operators.meta_eval: a tie is never correct; two tied orders agree ----------------------------


def test_meta_eval_counts_a_tie_as_wrong_and_two_ties_as_agreeing() -> None:
    labels = pa.Table.from_pylist(
        [
            {"context_id": f"S/{k}", "candidate_a": f"o1_{k}", "candidate_b": f"o2_{k}", "preferred": "A"}
            for k in range(4)
        ],
        schema=PAIRWISE_LABELS,
    )
    verdicts = [("tie", "tie"), ("tie", "B"), ("A", "tie"), ("A", "B")]  # original order, swapped order
    rows = []
    for k, (original, swapped) in enumerate(verdicts):
        rows += [row(f"S/{k}", f"o1_{k}", f"o2_{k}", original), row(f"S/{k}", f"o2_{k}", f"o1_{k}", swapped)]
    [out] = meta_eval(table(rows), labels).to_pylist()
    # output 1 is preferred; winners: (tie, tie), (tie, 1), (1, tie), (1, 1)
    assert (out["n_correct_False"], out["n_correct_True"], out["n_correct_both"]) == (2, 2, 1)
    assert out["n_equal"] == 2  # (tie, tie) and (1, 1) agree; a tie and a pick do not
    assert out["equal"] == "2 / 4 = 50.0%"


# --- pairank.jobs.schedulers: every machine finishes on all-tie answers, with a permutation -----------------


def machine(name: str, ids: list[str], seed: int, symmetric: bool):
    options = {"anchors": 3} if name == "pairs_anchors" else {}
    return ADAPTIVE[name]("ctx", ids, seed, symmetric=symmetric, **options)


KINDS = [(name, sym) for name in sorted(ADAPTIVE) for sym in (False, True) if name != "adaptive_symmetric" or sym]


def run_to_the_end(m, answer) -> list[str]:
    """Run one machine with ``answer(a, b)`` as the judge; its ranking, checked to be a permutation."""
    stats = run_lockstep([m], lambda reqs: [answer(a, b) for _, a, b in reqs])
    assert stats["done"] and m.done and not m.pending
    ranking = m.ranking()
    assert sorted(ranking) == sorted(m.order)
    return ranking


@pytest.mark.parametrize("name,symmetric", KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 7, 16])
def test_all_tie_answers_finish_with_the_stated_ranking(name: str, symmetric: bool, n: int) -> None:
    ids = [f"c{k:02d}" for k in range(n)]
    m = machine(name, ids, seed=5, symmetric=symmetric)
    ranking = run_to_the_end(m, lambda a, b: 0.5)
    if name in ("pairs_greedy", "pairs_beam"):
        assert ranking == m.order  # a tie takes the left head: the merge keeps the seeded order
    elif name == "pairs_anchors":
        assert isinstance(m, AnchorInsertion)
        # every other candidate falls below the last anchor, in seeded order
        assert ranking == m._inner.ranking() + m.order[len(m.anchors) :]
    elif name == "poe":
        assert ranking == m.order  # every score equal: ties keep the seeded order
        assert m.stop_reason in ("all_pairs", "budget", "stable", "confident")
    else:
        assert ranking == sorted(ids)  # posterior means all 0: by id
        assert m.stop_reason == ("all_pairs" if n <= 3 else "stable")  # round 0's cycle is every pair up to 3
    if name == "pairs_greedy":
        assert m.asked <= (2 if symmetric else 1) * n * math.ceil(math.log2(max(n, 1)))
    if name == "pairs_beam" and n >= 4:  # H(0.5) = ln 2 > U_h: a tie keeps both branches, so it asks more
        greedy = machine("pairs_greedy", ids, seed=5, symmetric=symmetric)
        run_to_the_end(greedy, lambda a, b: 0.5)
        assert m.asked > greedy.asked


@pytest.mark.parametrize("name", ["pairs_greedy", "pairs_beam", "pairs_anchors"])
def test_a_judge_that_always_picks_slot_a_is_all_ties_when_symmetric(name: str) -> None:
    assert symmetric_p(1.0, 1.0) == 0.5
    ids = [f"c{k:02d}" for k in range(9)]
    always_a = machine(name, ids, seed=2, symmetric=True)
    tie = machine(name, ids, seed=2, symmetric=True)
    assert run_to_the_end(always_a, lambda a, b: 1.0) == run_to_the_end(tie, lambda a, b: 0.5)


@pytest.mark.parametrize("name,symmetric", KINDS)
@settings(max_examples=25, deadline=None, derandomize=True)
@given(n=st.integers(2, 12), seed=st.integers(0, 3), salt=st.integers(0, 10**6), mean=st.booleans())
def test_generated_verdicts_with_many_ties_always_finish(name, symmetric, n, seed, salt, mean) -> None:
    """Answers drawn from {0, 0.5, 1} (generated verdicts, often ties, not transitive)."""
    ids = [f"c{k:02d}" for k in range(n)]
    options = {"score": "mean"} if mean and name in ("pairs_beam", "pairs_anchors") else {}
    if name == "pairs_anchors":
        options["anchors"] = 1 + salt % n
    m = ADAPTIVE[name]("ctx", ids, seed, symmetric=symmetric, **options)

    def answer(a: str, b: str) -> float:
        digest = hashlib.sha256(f"{salt}/{a}/{b}".encode()).digest()
        return (0.0, 0.5, 0.5, 1.0)[digest[0] % 4]

    asked: list = []
    stats = run_lockstep([m], lambda reqs: [asked.append((a, b)) or answer(a, b) for _, a, b in reqs])
    assert stats["done"] and sorted(m.ranking()) == sorted(ids)
    assert len(asked) == len(set(asked)) == m.asked  # no pair asked twice
    assert set(asked) <= set(itertools.permutations(ids, 2))
