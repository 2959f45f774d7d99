"""Tests of pairank.jobs.schedulers: PAIRS greedy/beam state machines and the lockstep loop.

Judges here are small pure functions of a latent score per candidate: the same
ordered pair always gets the same p, whichever scheduler asks and in which round.
"""

from __future__ import annotations

import doctest
import math
from statistics import NormalDist

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.jobs.schedulers import (
    ADAPTIVE,
    LN2,
    PairsBeam,
    PairsGreedy,
    binary_entropy,
    get_adaptive,
    prob_gap_from_u_h,
    run_lockstep,
    symmetric_p,
    u_h_from_prob_gap,
)
from tests.helpers import (
    Tracker,
    _unit,
    cands,
    check_invariants,
    check_known_judgments_reused,
    check_late_and_partial_answers,
    check_reproducible,
    hard_judge,
    logit_judge,
    n_log_n,
    random_judge,
    rank_scores,
    run_config,
    spearman,
)

#: name -> factory(context_id, ids, seed); every configuration the tests sweep.
CONFIGS = {
    "greedy": lambda c, ids, s: PairsGreedy(c, ids, s),
    "greedy_sym": lambda c, ids, s: PairsGreedy(c, ids, s, symmetric=True),
    "beam": lambda c, ids, s: PairsBeam(c, ids, s),
    "beam_sym": lambda c, ids, s: PairsBeam(c, ids, s, symmetric=True),
    "beam_always_branch": lambda c, ids, s: PairsBeam(c, ids, s, entropy_threshold=0.0),
    "beam_small": lambda c, ids, s: PairsBeam(c, ids, s, beam_size=3, entropy_threshold=0.3),
    "beam_sum": lambda c, ids, s: PairsBeam(c, ids, s, entropy_threshold=0.0, score="sum"),
}
NAMES = sorted(CONFIGS)
GREEDY_LIKE = ["greedy", "greedy_sym"]


def run_one(name: str, ids: list[str], seed: int, p_fn, ctx: str = "ctx"):
    return run_config(CONFIGS[name], ids, seed, p_fn, ctx)


# ---------------------------------------------------------------------------
# protocol checks every machine must pass (test_adaptive_more.py runs them on its machines too)


def critical_path(n: int) -> int:
    """Rounds greedy needs at most: per level of the split tree, its longest merge."""
    if n <= 1:
        return 0
    return max(critical_path(n // 2), critical_path(n - n // 2)) + n - 1


def test_doctests() -> None:
    from pairank.jobs.schedulers import adaptive_symmetric, anchors, pairs, protocol

    results = [doctest.testmod(module) for module in (protocol, pairs, anchors, adaptive_symmetric)]
    assert sum(r.attempted for r in results) > 10 and sum(r.failed for r in results) == 0


# ---------------------------------------------------------------------------
# invariants


@settings(max_examples=60, deadline=None, derandomize=True)
@given(name=st.sampled_from(NAMES), n=st.integers(1, 40), seed=st.integers(0, 2**32), judge_seed=st.integers(0, 9))
def test_ranking_is_a_permutation_and_no_pair_is_asked_twice(name, n, seed, judge_seed) -> None:
    ids = cands(n)
    check_invariants(*run_one(name, ids, seed, random_judge(judge_seed)), ids, symmetric=name.endswith("_sym"))


@settings(max_examples=60, deadline=None, derandomize=True)
@given(n=st.integers(1, 40), seed=st.integers(0, 2**32), judge_seed=st.integers(0, 9))
def test_greedy_comparison_bound(n, seed, judge_seed) -> None:
    ids = cands(n)
    # Top-down merge sort's worst case, which is within N ceil(log2 N).
    tight = n_log_n(n) - 2 ** math.ceil(math.log2(n)) + 1 if n > 1 else 0
    m, judge, _ = run_one("greedy", ids, seed, random_judge(judge_seed))
    assert m.asked <= tight <= n_log_n(n)
    assert len(judge.rounds) <= critical_path(n)
    m, _, _ = run_one("greedy_sym", ids, seed, random_judge(judge_seed))
    assert m.asked % 2 == 0 and m.asked <= 2 * tight <= 2 * n_log_n(n)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [2, 3, 7, 16, 33])
def test_noiseless_transitive_judges_recover_the_true_order(name: str, n: int) -> None:
    ids = cands(n)
    scores = rank_scores(ids)
    for seed in range(3):
        for p_fn in (hard_judge(scores), logit_judge(scores, k=5.0)):  # k=5: neighbours at p = 0.993
            m, _, _ = run_one(name, ids, seed, p_fn)
            assert m.ranking() == ids, (name, seed)


@pytest.mark.parametrize("name,bias", [("greedy_sym", 3.0), ("beam_sym", 1.0)])
def test_symmetric_cancels_a_constant_position_bias(name: str, bias: float) -> None:
    """Greedy only needs the sign of p - 0.5, which symmetric_p restores under any
    constant bias. The beam also reads p's size, and averaging both orders pulls
    p towards 0.5 (bias 3: neighbours at 0.55), so it branches and its score
    can err (with the sum score: mean Spearman 0.98 over 5 seeds at bias 3, 1.0 at bias 1)."""
    ids = cands(20)
    scores = rank_scores(ids)
    biased = logit_judge(scores, k=1.0, bias=bias)  # slot A wins against up to `bias` ranks better
    plain = name.removesuffix("_sym")
    assert any(run_one(plain, ids, seed, biased)[0].ranking() != ids for seed in range(3))
    for seed in range(3):
        assert run_one(name, ids, seed, biased)[0].ranking() == ids


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(2, 24), seed=st.integers(0, 2**32), beam=st.integers(1, 50), u=st.sampled_from([0.0, 0.3, 0.6]))
def test_beam_never_asks_twice_even_when_branching_everywhere(n, seed, beam, u) -> None:
    ids = cands(n)
    for symmetric in (False, True):
        m = PairsBeam("ctx", ids, seed, beam_size=beam, entropy_threshold=u, symmetric=symmetric)
        judge = Tracker(random_judge(seed % 7))
        run_lockstep([m], judge)  # Tracker fails on a repeat
        assert sorted(m.ranking()) == ids
        assert m.asked == len(judge.seen) <= (2 if symmetric else 1) * n * (n - 1) // 2


# ---------------------------------------------------------------------------
# the beam against a plain transcription of the public algorithm


def reference_merge_sort(order: list[str], p, beam_size: int | None, u: float, mean: bool = False):
    """Recursive PAIRS merge sort; a beam as in the public code (no shortcuts),
    scored by the sum (or mean) of log p; ``beam_size=None`` is greedy.
    Returns the ranking and the set of comparisons (a, b) it read."""
    read: set[tuple[str, str]] = set()

    def prob(a, b):
        read.add((a, b))
        return p(a, b)

    def merge(left, right):
        if beam_size is None:
            out, i, j = [], 0, 0
            while i < len(left) and j < len(right):
                if prob(left[i], right[j]) >= 0.5:
                    out.append(left[i]), (i := i + 1)
                else:
                    out.append(right[j]), (j := j + 1)
            return out + left[i:] + right[j:]

        def fin(path):
            return path[1] == len(left) or path[2] == len(right)

        def key(path):
            return -path[0] / max(path[1] + path[2], 1) if mean else -path[0]

        paths = [(0.0, 0, 0, ())]
        while not all(fin(q) for q in paths):
            new = [q for q in paths if fin(q)]
            for score, i, j, placed in paths:
                if fin((score, i, j)):
                    continue
                pa = prob(left[i], right[j])
                take_left = (score + math.log(max(pa, 1e-300)), i + 1, j, placed + (left[i],))
                take_right = (score + math.log(max(1 - pa, 1e-300)), i, j + 1, placed + (right[j],))
                if binary_entropy(pa) > u:
                    new += [take_left, take_right]
                else:
                    new.append(take_left if pa >= 0.5 else take_right)
            paths = sorted(new, key=key)[:beam_size]
        _, i, j, placed = paths[0]
        return list(placed) + left[i:] + right[j:]

    def sort(lo, hi):
        if hi - lo <= 1:
            return order[lo:hi]
        mid = (lo + hi) // 2
        return merge(sort(lo, mid), sort(mid, hi))

    return sort(0, len(order)), read


@settings(max_examples=50, deadline=None, derandomize=True)
@given(
    n=st.integers(2, 12),
    seed=st.integers(0, 2**32),
    u=st.sampled_from([0.0, 0.3, 0.6, 0.69]),
    mean=st.booleans(),
)
def test_beam_matches_the_plain_algorithm(n, seed, u, mean) -> None:
    """With a beam wider than any merge's path count (924 for 6+6), the shortcuts
    (recombination, pruning below a finished path) change nothing but the cost."""
    ids = cands(n)
    p_fn = random_judge(seed % 11)
    m = PairsBeam("ctx", ids, seed, beam_size=1000, entropy_threshold=u, score="mean" if mean else "sum")
    run_lockstep([m], Tracker(p_fn))
    want, read = reference_merge_sort(m.order, lambda a, b: p_fn("ctx", a, b), 1000, u, mean)
    assert m.ranking() == want
    assert m.asked <= len(read)
    if mean:  # no pruning: the same comparisons
        assert m.asked == len(read)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(n=st.integers(2, 30), seed=st.integers(0, 2**32))
def test_greedy_matches_the_plain_algorithm_and_degenerate_beams(n, seed) -> None:
    ids = cands(n)
    p_fn = random_judge(seed % 5)
    greedy, g_judge, _ = run_one("greedy", ids, seed, p_fn)
    want, read = reference_merge_sort(greedy.order, lambda a, b: p_fn("ctx", a, b), None, 0.0)
    assert greedy.ranking() == want and greedy.asked == len(read)
    for beam in (
        PairsBeam("ctx", ids, seed, beam_size=1, entropy_threshold=0.0),
        PairsBeam("ctx", ids, seed, entropy_threshold=LN2),
    ):
        judge = Tracker(p_fn)
        run_lockstep([beam], judge)
        assert beam.ranking() == greedy.ranking()
        assert judge.rounds == g_judge.rounds


# ---------------------------------------------------------------------------
# protocol: reproducibility, independence, partial answers


def test_same_seed_same_requests_and_rankings_independent_of_other_contexts() -> None:
    contexts = {f"q{i}": cands(5 + 3 * i) for i in range(6)}
    for name in NAMES:
        check_reproducible(CONFIGS[name], contexts)


def test_seed_and_context_change_the_start_order() -> None:
    ids = cands(12)
    orders = {tuple(PairsGreedy("ctx", ids, seed).order) for seed in range(10)}
    orders |= {tuple(PairsGreedy(f"ctx{i}", ids, 0).order) for i in range(10)}
    assert len(orders) == 20


@pytest.mark.parametrize("name", NAMES)
def test_late_and_partial_answers_give_the_same_result(name: str) -> None:
    check_late_and_partial_answers(CONFIGS[name], 14)


@pytest.mark.parametrize("name", NAMES)
def test_known_judgments_are_reused_not_asked(name: str) -> None:
    check_known_judgments_reused(CONFIGS[name], 10)


# ---------------------------------------------------------------------------
# the lockstep loop


def test_lockstep_batches_contexts_and_merges() -> None:
    n = 16
    ids = cands(n)
    _, _, stats = run_one("greedy", ids, 0, logit_judge(rank_scores(ids), k=1.0))
    rounds = len(stats["rounds"])
    assert rounds <= critical_path(n) == 26 <= 2 * n
    assert rounds < stats["comparisons"]
    assert stats["rounds"][0]["requests"] == n // 2  # every first-level merge at once
    # 50 contexts: the same number of rounds, 50 times the batch.
    ms = [PairsGreedy(f"q{i}", ids, i) for i in range(50)]
    many = run_lockstep(ms, Tracker(logit_judge(rank_scores(ids), k=1.0)))
    assert len(many["rounds"]) <= critical_path(n)
    assert sum(r["requests"] for r in many["rounds"]) == many["comparisons"] == sum(x.asked for x in ms)
    assert many["rounds"][-1]["done"] == 50 and many["stopped"] == "done"
    assert many["comparisons"] / len(many["rounds"]) > 50


def test_lockstep_budget_stops_before_an_overrun() -> None:
    ms = [PairsGreedy(f"q{i}", cands(16), i) for i in range(4)]
    judge = Tracker(random_judge(0))
    stats = run_lockstep(ms, judge, max_comparisons=60)
    assert stats["stopped"] == "budget" and not stats["done"]
    assert stats["comparisons"] == len(judge.seen) <= 60
    assert stats["comparisons"] + sum(len(m.pending) for m in ms) > 60  # the round it did not send
    with pytest.raises(RuntimeError, match="not done"):
        ms[0].ranking()


def test_lockstep_errors() -> None:
    with pytest.raises(ValueError, match="two machines for context 'q'"):
        run_lockstep([PairsGreedy("q", ["a", "b"], 0), PairsGreedy("q", ["c", "d"], 0)], lambda r: [0.5] * len(r))
    with pytest.raises(ValueError, match="returned 0 probabilities for 1 requests"):
        run_lockstep([PairsGreedy("q", ["a", "b"], 0)], lambda r: [])
    assert run_lockstep([PairsGreedy("q", ["a"], 0), PairsBeam("r", [], 0)], lambda r: 1 / 0)["rounds"] == []


# ---------------------------------------------------------------------------
# quality under noise


def test_beam_against_greedy_under_a_noisy_judge() -> None:
    """N=12, 30 seeds, p = sigmoid(5 (s_a - s_b) + z), s ~ N(0, 1), z ~ N(0, 1).

    Observed when written (mean Spearman, comparisons per context): greedy
    0.9688 at 30.0, beam (1000, U_h 0.6, sum) 0.9643 at 34.2, beam with the
    mean score (the default) 0.9639 at 35.0. The beam is not better on this
    synthetic judge (nor at k=3, k=10 or N=24); the test pins that it is not
    materially worse and that it asks more.
    """
    n = 12
    ids = cands(n)
    rho = {"greedy": [], "beam_sum": [], "beam_mean": []}
    asked = dict.fromkeys(rho, 0)
    for seed in range(30):
        z = [NormalDist().inv_cdf(_unit("score", seed, i)) for i in range(n)]
        scores = dict(zip(ids, z))
        p_fn = logit_judge(scores, k=5.0, sigma=1.0, seed=seed)
        for key, m in (
            ("greedy", PairsGreedy("ctx", ids, seed)),
            ("beam_sum", PairsBeam("ctx", ids, seed, beam_size=1000, score="sum")),
            ("beam_mean", PairsBeam("ctx", ids, seed, beam_size=1000)),
        ):
            run_lockstep([m], Tracker(p_fn))
            rho[key].append(spearman(m.ranking(), scores))
            asked[key] += m.asked
    mean = {key: sum(v) / len(v) for key, v in rho.items()}
    assert mean["greedy"] > 0.9
    assert mean["beam_sum"] >= mean["greedy"] - 0.01, mean
    assert mean["beam_mean"] >= mean["greedy"] - 0.01, mean
    assert asked["beam_mean"] > asked["greedy"]


# ---------------------------------------------------------------------------
# maths, registry, validation


@settings(max_examples=200, deadline=None, derandomize=True)
@given(g=st.floats(0.0, 0.5))
def test_prob_gap_round_trip(g: float) -> None:
    u = u_h_from_prob_gap(g)
    assert 0.0 <= u <= LN2
    assert prob_gap_from_u_h(u) == pytest.approx(g, abs=1e-6)
    # The two pruning rules agree away from the boundary.
    for p in (0.5 + g * 0.99, 0.5 - g * 0.99, min(1.0, 0.5 + g + 0.01)):
        assert (max(p, 1 - p) <= 0.5 + g) == (binary_entropy(p) >= u) or abs(max(p, 1 - p) - 0.5 - g) < 1e-9


@settings(max_examples=200, deadline=None, derandomize=True)
@given(u=st.floats(0.0, LN2), p=st.floats(0.0, 1.0), q=st.floats(0.0, 1.0))
def test_entropy_and_symmetric_p(u: float, p: float, q: float) -> None:
    assert u_h_from_prob_gap(prob_gap_from_u_h(u)) == pytest.approx(u, abs=1e-9)
    assert binary_entropy(p) == pytest.approx(binary_entropy(1 - p))
    assert 0.0 <= binary_entropy(p) <= LN2 + 1e-15
    assert symmetric_p(p, q) == pytest.approx(1 - symmetric_p(q, p))  # swapping A and B maps p to 1-p
    assert 0.0 <= symmetric_p(p, q) <= 1.0


def test_maths_rejects_bad_values() -> None:
    for bad in (-0.1, 1.5, float("nan"), "x"):
        with pytest.raises(ValueError, match="expected a probability"):
            binary_entropy(bad)
    with pytest.raises(ValueError, match=r"\[0, 0.5\]"):
        u_h_from_prob_gap(0.6)
    with pytest.raises(ValueError, match="ln 2"):
        prob_gap_from_u_h(0.8)


def test_registry() -> None:
    assert get_adaptive("pairs_greedy") is PairsGreedy and get_adaptive("pairs_beam") is PairsBeam
    with pytest.raises(ValueError) as info:
        get_adaptive("pairs_scaled")
    assert "'pairs_scaled'" in str(info.value)
    for name in ADAPTIVE:
        assert name in str(info.value)


def test_machine_validation() -> None:
    with pytest.raises(ValueError, match=r"repeated: \['a'\]"):
        PairsGreedy("q", ["a", "b", "a"], 0)
    with pytest.raises(ValueError, match="beam_size"):
        PairsBeam("q", ["a", "b"], 0, beam_size=0)
    with pytest.raises(ValueError, match="entropy_threshold"):
        PairsBeam("q", ["a", "b"], 0, entropy_threshold=-0.1)
    with pytest.raises(ValueError, match="score"):
        PairsBeam("q", ["a", "b"], 0, score="max")
    m = PairsGreedy("q", ["a", "b"], 0)
    (pair,) = m.next_requests()
    with pytest.raises(
        ValueError, match=r"context 'q': p_a for \('.', '.'\): expected a probability in \[0, 1\], found 1.7"
    ):
        m.observe({pair: 1.7})
    with pytest.raises(ValueError, match="not a pair of two distinct candidates"):
        m.observe({pair: 0.5, ("a", "z"): 0.5})
    assert m.pending == {pair}  # a bad call stores nothing
    with pytest.raises(RuntimeError, match="not done: 1 merges running, 1 pairs pending"):
        m.ranking()
    m.observe({pair: 0.5})
    m.observe({pair: 0.0})  # a repeat keeps the first answer
    assert m.ranking() == list(pair)
    for n in (0, 1):
        tiny = PairsBeam("q", cands(n), 0)
        assert tiny.done and tiny.ranking() == cands(n) and tiny.next_requests() == []
