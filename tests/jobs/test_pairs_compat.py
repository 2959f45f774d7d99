"""PairsBeam(compat="pairs-code") against a port of the authors' code, and the beam's settings.

The oracle is :mod:`tests.jobs.pairs_code_port`, a port of cambridgeltl/PairS
``pairs/pairs_ranking.py`` (its docstring names the commit and the licence).
The compat machine runs in lockstep rounds, all merges of a level side by side,
several contexts in one run; the port runs the code's recursion one comparison
at a time. They must give the same ranking and ask the same pairs, merge by
merge in the same order, on every seeded simulated judge below.
"""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest
from pydantic import ValidationError

from pairank.jobs.schedulers import (
    LN2,
    PairsBeam,
    PairsGreedy,
    parse_scheduler,
    prob_gap_from_u_h,
    run_lockstep,
    symmetric_p,
    u_h_from_prob_gap,
)
from pairank.jobs.schedulers.pairs import code_calibrated_p
from tests.helpers import (
    Tracker,
    _sigmoid,
    _unit,
    cands,
    check_invariants,
    check_known_judgments_reused,
    check_late_and_partial_answers,
    check_reproducible,
    hard_judge,
    random_judge,
    rank_scores,
    run_config,
    spearman,
)
from tests.jobs.pairs_code_port import PairsCodePort

NS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13, 16]
BEAMS = [1, 2, 5, 20, 1000]
#: U_h in nats; u_h_from_prob_gap(0.1) is the code's example gap, ln 2 never branches.
U_HS = [0.0, 0.3, 0.6, u_h_from_prob_gap(0.1), LN2]


def quality(ctx: str, c: str) -> float:
    """A latent quality per candidate, N(0, 1), fixed per context."""
    return NormalDist().inv_cdf(_unit("quality", ctx, c))


def noise(ctx: str, a: str, b: str) -> float:
    return NormalDist().inv_cdf(_unit("noise", ctx, a, b))


def verdict(margin: float) -> float:
    """A generated verdict as p: A (1), B (0), or a tie (0.5) within 0.4 of even."""
    return 1.0 if margin > 0.4 else 0.0 if margin < -0.4 else 0.5


#: Simulated judges ``p(ctx, a, b)`` = P(a, in slot A, better than b); pure functions of their arguments.
JUDGES = {
    # logistic in the quality gap, with noise per ordered pair
    "clean": lambda ctx, a, b: _sigmoid(3.0 * (quality(ctx, a) - quality(ctx, b)) + 0.5 * noise(ctx, a, b)),
    # the same with slot A favoured by one logit
    "slot_biased": lambda ctx, a, b: _sigmoid(3.0 * (quality(ctx, a) - quality(ctx, b)) + 1.0 + 0.5 * noise(ctx, a, b)),
    # generated verdicts: A, B or a tie (p = 0.5), slot-biased, noisy
    "verdicts": lambda ctx, a, b: verdict(quality(ctx, a) - quality(ctx, b) + 0.3 + 0.5 * noise(ctx, a, b)),
    # p on a 0.1 grid (many equal p's, none exact in binary), slot-biased
    "grid": lambda ctx, a, b: round(_sigmoid(2.0 * (quality(ctx, a) - quality(ctx, b)) + 0.5 + noise(ctx, a, b)), 1),
    # every answer a tie
    "all_ties": lambda ctx, a, b: 0.5,
    # arbitrary, intransitive
    "intransitive": lambda ctx, a, b: 0.01 + 0.98 * _unit("p", ctx, a, b),
}


def merge_node(order: list[str], a: str, b: str) -> tuple[int, int]:
    """The merge (lo, hi) of the split tree over ``order`` that compares a and b: where they part."""
    pos = {c: k for k, c in enumerate(order)}
    lo, hi = 0, len(order)
    while True:
        mid = (lo + hi) // 2
        if pos[a] < mid and pos[b] < mid:
            hi = mid
        elif pos[a] >= mid and pos[b] >= mid:
            lo = mid
        else:
            return lo, hi


def first_asks(calls) -> dict[tuple[int, int], list[tuple[str, str]]]:
    """Per merge, the distinct pairs in the order first asked."""
    out: dict[tuple[int, int], list[tuple[str, str]]] = {}
    for node, pair in calls:
        if pair not in out.setdefault(node, []):
            out[node].append(pair)
    return out


@pytest.mark.parametrize("symmetric", [False, True])
@pytest.mark.parametrize("kind", sorted(JUDGES))
def test_compat_machine_ranks_and_asks_as_the_code(kind: str, symmetric: bool) -> None:
    p_fn = JUDGES[kind]
    cases = 0
    for beam in BEAMS:
        for k, u in enumerate(U_HS):
            seed = 7 * beam + k
            machines = {
                n: PairsBeam(
                    f"{kind}-{beam}-{k}-n{n}",
                    cands(n),
                    seed,
                    beam_size=beam,
                    entropy_threshold=u,
                    symmetric=symmetric,
                    compat="pairs-code",
                )
                for n in NS
            }
            judge = Tracker(p_fn)  # fails on a pair asked twice
            run_lockstep(machines.values(), judge)
            for n, m in machines.items():
                ctx = m.context_id
                port = PairsCodePort(lambda a, b, c=ctx: p_fn(c, a, b), beam, prob_gap_from_u_h(u), calibrate=symmetric)
                worst_first = port.rank(m.order)
                where = (kind, symmetric, n, beam, u)
                assert m.ranking() == worst_first[::-1], where
                asked = [(merge_node(m.order, a, b), (a, b)) for r in judge.of(ctx) for a, b in r]
                assert first_asks(asked) == first_asks(port.calls), where
                assert m.asked == len({pair for _, pair in port.calls}), where
                cases += 1
    assert cases == len(BEAMS) * len(U_HS) * len(NS)


COMPAT = {
    "compat": lambda c, ids, s: PairsBeam(c, ids, s, beam_size=20, compat="pairs-code"),
    "compat_sym": lambda c, ids, s: PairsBeam(c, ids, s, beam_size=20, symmetric=True, compat="pairs-code"),
    "compat_one": lambda c, ids, s: PairsBeam(c, ids, s, beam_size=1, entropy_threshold=0.0, compat="pairs-code"),
}


@pytest.mark.parametrize("name", sorted(COMPAT))
def test_compat_machine_keeps_the_adaptive_protocol(name: str) -> None:
    """What every machine promises a driver: a permutation, no pair asked twice, late and partial answers,
    known judgments reused, the same requests for the same seed, alone or with other contexts."""
    factory = COMPAT[name]
    for n in (1, 2, 5, 12, 23):
        ids = cands(n)
        check_invariants(*run_config(factory, ids, n, random_judge(n)), ids, symmetric=name.endswith("_sym"))
        m, _, _ = run_config(factory, ids, n, hard_judge(rank_scores(ids)))
        assert m.ranking() == ids  # a noiseless judge: the true order
    check_late_and_partial_answers(factory, 14)
    check_known_judgments_reused(factory, 10)
    check_reproducible(factory, {f"q{i}": cands(5 + 3 * i) for i in range(5)})


def test_the_port_sorts_a_noiseless_judge_worst_first_and_asks_a_zero_again() -> None:
    ids = cands(9)

    def better(a: str, b: str) -> float:  # c00 is best
        return 1.0 if a < b else 0.0

    port = PairsCodePort(better, beam_size=5, prob_gap=0.2, calibrate=False)
    assert port.rank(list(reversed(ids))) == list(reversed(ids))
    assert port.rank(ids) == list(reversed(ids))
    # The code's answer matrix reads 0 as "not asked yet": a p of exactly 0 is asked again.
    pairs = [pair for _, pair in port.calls]
    assert len(pairs) > len(set(pairs))
    m = PairsBeam("q", ids, 0, beam_size=5, entropy_threshold=u_h_from_prob_gap(0.2), compat="pairs-code")
    judge = Tracker(lambda ctx, a, b: better(a, b))
    run_lockstep([m], judge)
    assert m.ranking() == ids and m.asked == len(judge.seen)


def test_compat_reads_both_orders_as_the_code_calibrates_them() -> None:
    """Bit for bit the port's calibrated p; symmetric_p, equal in exact arithmetic, differs in the last bit."""
    grid = [k / 20 for k in range(21)] + [0.1 * k for k in range(11)]
    last_bit = 0
    for x in grid:
        for y in grid:
            table = {("a", "b"): x, ("b", "a"): y}
            port = PairsCodePort(lambda a, b, t=table: t[(a, b)], 1, 0.2, calibrate=True)
            assert code_calibrated_p(x, y) == port.prob_a((0, 2), "a", "b"), (x, y)
            assert code_calibrated_p(x, y) == pytest.approx(symmetric_p(x, y), abs=1e-15)
            last_bit += code_calibrated_p(x, y) != symmetric_p(x, y)
    assert last_bit > 0


def test_compat_differs_from_pairank_rules_and_its_beam_of_one_is_not_greedy() -> None:
    """The setting changes rankings; with a beam of 1 the code's uncut first step still searches."""
    differs = {"default": 0, "greedy": 0}
    for seed in range(40):
        ids = cands(12)
        p_fn = JUDGES["slot_biased"]
        code = PairsBeam(f"q{seed}", ids, seed, beam_size=20, symmetric=True, compat="pairs-code")
        ours = PairsBeam(f"q{seed}", ids, seed, beam_size=20, symmetric=True)
        one = PairsBeam(f"q{seed}", ids, seed, beam_size=1, symmetric=True, compat="pairs-code")
        greedy = PairsGreedy(f"q{seed}", ids, seed, symmetric=True)
        for m in (code, ours, one, greedy):
            run_lockstep([m], Tracker(p_fn))
        differs["default"] += code.ranking() != ours.ranking()
        differs["greedy"] += one.ranking() != greedy.ranking() and one.asked > greedy.asked
        truth = {c: quality(f"q{seed}", c) for c in ids}
        assert spearman(code.ranking(), truth) > 0.5
    assert differs["default"] > 0 and differs["greedy"] > 0, differs


# ---------------------------------------------------------------------------
# settings


def test_the_default_path_score_is_the_mean() -> None:
    spec = parse_scheduler({"name": "pairs_beam"})
    assert spec.beam.score == "mean" and spec.compat is None
    m = spec.machine("q", cands(5), 0)
    assert m.score == "mean" and m.compat is None
    assert PairsBeam("q", cands(3), 0).score == "mean"
    assert parse_scheduler({"name": "pairs_anchors"}).beam.score == "mean"
    assert parse_scheduler({"name": "pairs_beam", "beam": {"score": "sum"}}).machine("q", cands(3), 0).score == "sum"


def test_compat_setting_builds_the_code_machine_and_refuses_what_contradicts_it() -> None:
    spec = parse_scheduler({"name": "pairs_beam", "compat": "pairs-code", "beam": {"size": 20}})
    m = spec.machine("q", cands(6), 3)
    assert m.compat == "pairs-code" and m.beam_size == 20 and m.symmetric
    assert m.prob_gap == pytest.approx(prob_gap_from_u_h(0.6))
    with pytest.raises(ValidationError, match="compat: pairs-code scores a path by the running mean"):
        parse_scheduler({"name": "pairs_beam", "compat": "pairs-code", "beam": {"score": "sum"}})
    with pytest.raises(ValidationError, match="'pairs-code'"):
        parse_scheduler({"name": "pairs_beam", "compat": "pairs"})
    with pytest.raises(ValidationError, match="compat"):
        parse_scheduler({"name": "pairs_greedy", "compat": "pairs-code"})
    with pytest.raises(ValueError, match="compat: expected None or 'pairs-code'"):
        PairsBeam("q", cands(3), 0, compat="code")
    with pytest.raises(ValueError, match="running mean"):
        PairsBeam("q", cands(3), 0, score="sum", compat="pairs-code")
    # U_h above ln 2 never branches; as a gap that is 0.
    assert PairsBeam("q", cands(3), 0, entropy_threshold=1.0, compat="pairs-code").prob_gap == 0.0
    assert math.isclose(PairsBeam("q", cands(3), 0, entropy_threshold=u_h_from_prob_gap(0.1)).prob_gap, 0.1)
