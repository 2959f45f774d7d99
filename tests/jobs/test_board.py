"""The board scheduler's choice and stop rules on a seeded simulated world (no Ray, no engine).

The world: systems with seeded strengths, contexts that each hold one output of every
system, and a judge whose logit is the strength difference (times a per-context
difficulty) plus seeded noise. The driver's part is played by ``run_lockstep``.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from pydantic import ValidationError

from pairank.jobs.schedulers import Board, BoardSettings, parse_scheduler, run_lockstep
from pairank.jobs.schedulers.board import board_line

STRENGTHS = {"s0": 2.0, "s1": 1.2, "s2": 0.4, "s3": -0.4, "s4": -1.2, "s5": -2.0}


def world(contexts: int, strengths: dict[str, float] = STRENGTHS):
    ctxs = {f"q{c:03d}": [f"q{c:03d}/{s}" for s in strengths] for c in range(contexts)}
    system = {cid: cid.split("/")[1] for ids in ctxs.values() for cid in ids}
    return ctxs, system


def judge(strengths: dict[str, float] = STRENGTHS, seed: int = 0, noise: float = 1.0, bias: float = 0.0):
    """A seeded judge: the same request always gets the same answer; ``asked`` counts every request it saw."""
    asked: Counter = Counter()

    def call(batch):
        out = []
        for ctx, a, b in batch:
            asked[(ctx, a, b)] += 1
            gen = np.random.default_rng([seed, *map(ord, f"{ctx}{a}{b}")])
            difficulty = 0.5 + (int(ctx[1:]) % 5) / 4
            z = difficulty * (strengths[a.split("/")[1]] - strengths[b.split("/")[1]]) + bias + noise * gen.normal()
            out.append(float(1.0 / (1.0 + np.exp(-z))))
        return out

    call.asked = asked  # type: ignore[attr-defined]
    return call


def run(settings: dict, contexts: int = 60, strengths: dict[str, float] = STRENGTHS, **judge_over):
    ctxs, system = world(contexts, strengths)
    views = parse_scheduler({"name": "board", **settings}).machines(ctxs, system, seed=settings.get("seed", 0))
    j = judge(strengths, **judge_over)
    stats = run_lockstep(views, j)
    return views[0].board, stats, j.asked, views


def full_matrix(contexts: int, systems: int = len(STRENGTHS)) -> int:
    return contexts * systems * (systems - 1)


def test_order_target_stops_confident_with_the_true_order_and_far_fewer_comparisons():
    board, stats, asked, views = run({"confidence": 0.95})
    assert board.stopped == "confident"
    assert board.order() == list(STRENGTHS)
    assert stats["comparisons"] == board.asked < full_matrix(60) / 5
    assert max(asked.values()) == 1  # nothing asked twice
    assert all(min(p, 1 - p) <= 0.05 for _, _, p, _ in board.targets())  # every adjacent pair ordered at 0.95
    assert views[7].ranking() == [f"q007/{s}" for s in STRENGTHS]  # a context's candidates in the board's order


def test_topk_target_settles_the_top_only_and_uses_fewer_comparisons_than_the_order():
    # the top two are far apart and from the rest; the bottom four are close together
    strengths = {"s0": 3.0, "s1": 1.5, "s2": 0.1, "s3": 0.05, "s4": 0.0, "s5": -0.05}
    top, _, _, _ = run({"target": "topk", "k": 2, "margin": 0.0}, strengths=strengths)
    order, _, _, _ = run({"target": "order", "margin": 0.0, "budget": 4 * top.asked}, strengths=strengths)
    assert top.stopped == "confident" and top.order()[:2] == ["s0", "s1"]
    assert order.stopped == "budget"  # 0.05 apart: not ordered at 0.95 within four times topk's comparisons
    assert top.asked < order.asked


def test_the_choice_goes_to_the_unsettled_pair():
    """With every pair settled but s2-s3, the next round compares s2 and s3 (or each with a neighbour)."""
    ctxs, system = world(200)
    board = Board(ctxs, system, seed=0, pairs_per_round=10)
    board.rounds = 1  # past the first round's cycle
    idx = {s: i for i, s in enumerate(board.systems)}
    rates = {("s0", "s1"): 0.9, ("s1", "s2"): 0.9, ("s2", "s3"): 0.52, ("s3", "s4"): 0.9, ("s4", "s5"): 0.9}
    for (a, b), rate in rates.items():
        i, j = idx[a], idx[b]
        board.n[i, j] = board.n[j, i] = 60
        board.wins[i, j], board.wins[j, i] = 60 * rate, 60 * (1 - rate)
    board.advance()
    picks = Counter(
        tuple(sorted(system[c] for c in pair))
        for ctx in ctxs
        for pair in board.take(ctx)[::2]  # symmetric: (a, b) then (b, a)
    )
    assert sum(picks.values()) == 10
    assert picks[("s2", "s3")] >= 5 and all("s2" in p or "s3" in p for p in picks)


def test_budget_stops_it_and_is_never_exceeded():
    board, stats, _, _ = run({"budget": 51})
    assert board.stopped == "budget"
    assert board.asked <= 51 and board.asked >= 51 - 2 * board.pairs_per_round
    line = board_line(board.summary())
    assert line.startswith("board (order): stopped by budget:")


def test_a_judge_with_no_preference_ends_when_every_pair_is_judged():
    ctxs, system = world(2)
    views = BoardSettings(name="board", margin=0.0).machines(ctxs, system, seed=1)
    stats = run_lockstep(views, lambda batch: [0.5] * len(batch))
    assert views[0].board.stopped == "all_pairs"
    assert stats["comparisons"] == full_matrix(2)


def test_one_order_asks_each_comparison_once_in_a_seeded_slot():
    board, stats, asked, _ = run({"symmetric": False, "confidence": 0.95})
    assert board.stopped == "confident" and board.order() == list(STRENGTHS)
    pairs = Counter(frozenset((ctx, a, b)) for ctx, a, b in asked)
    assert max(pairs.values()) == 1  # never both orders of a (context, pair)
    slot_a_first = sum(a.split("/")[1] < b.split("/")[1] for _, a, b in asked)
    assert 0.3 < slot_a_first / len(asked) < 0.7  # the coin, not the name, picks slot A
    symmetric, _, _, _ = run({"confidence": 0.95})
    assert board.asked < symmetric.asked


def test_the_same_seed_and_answers_give_the_same_requests_and_a_seed_changes_them():
    def requests(seed: int, rounds: int) -> list:
        ctxs, system = world(40)
        views = BoardSettings(name="board", seed=seed).machines(ctxs, system, seed)
        j, out = judge(), []
        by_id = {v.context_id: v for v in views}
        for _ in range(rounds):
            batch = [(v.context_id, a, b) for v in views for a, b in v.next_requests()]
            out.append(batch)
            for (ctx, a, b), p in zip(batch, j(batch)):
                by_id[ctx].observe({(a, b): p})
        return out

    assert requests(0, 5) == requests(0, 5)
    assert requests(0, 5) != requests(1, 5)


def test_answers_given_before_they_are_asked_are_used_not_asked():
    """A resumed run's verdicts may reach a machine before it asks (the protocol allows it): it asks none of them."""
    first_board, _, first_asked, _ = run({}, contexts=30)
    ctxs, system = world(30)
    views = BoardSettings(name="board").machines(ctxs, system, seed=0)
    j = judge()
    answers = dict(zip(first_asked, j(list(first_asked))))
    for v in views:
        v.observe({(a, b): p for (ctx, a, b), p in answers.items() if ctx == v.context_id})
    stats = run_lockstep(views, j)
    assert stats["comparisons"] == 0 and views[0].board.order() == first_board.order()


def test_settings_are_checked_with_errors_that_say_what():
    with pytest.raises(ValidationError, match="k applies to target: topk only"):
        parse_scheduler({"name": "board", "k": 3})
    with pytest.raises(ValidationError, match="confidence"):
        parse_scheduler({"name": "board", "confidence": 1.5})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
        parse_scheduler({"name": "board", "beam": {"size": 3}})
    ctxs, system = world(3)
    with pytest.raises(ValueError, match=r"target topk with k = 6: expected 1 <= k < 6"):
        parse_scheduler({"name": "board", "target": "topk", "k": 6}).machines(ctxs, system, 0)
    with pytest.raises(ValueError, match="context 'q001' has two candidates of system 's0'"):
        Board(ctxs, {**system, "q001/s1": "s0"}, 0)
    with pytest.raises(ValueError, match="ranks systems across contexts"):
        BoardSettings(name="board").machine("q000", ctxs["q000"], 0)
    with pytest.raises(ValueError, match="a board needs at least 2"):
        Board({"q": ["q/a"]}, {"q/a": "a"}, 0)
