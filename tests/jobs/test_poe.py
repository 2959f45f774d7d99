"""The Product-of-Experts maths (operators.product_of_experts) and its scheduler (jobs.schedulers.poe).

The closed forms are checked against direct fits of the same experts (an explicit
least-squares design, a general-purpose optimiser on the Bradley-Terry likelihood),
and the selection against the paper's criterion evaluated by brute force: the
determinant of the precision after each candidate pair.
"""

from __future__ import annotations

import doctest
import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError
from scipy.optimize import minimize

from pairank.jobs.schedulers import ADAPTIVE, REGISTRY, Poe, PoeSettings, parse_scheduler, run_lockstep
from pairank.operators import product_of_experts as poe
from tests.helpers import (
    Tracker,
    cands,
    check_invariants,
    check_known_judgments_reused,
    check_late_and_partial_answers,
    check_reproducible,
    logit_judge,
    random_judge,
    rank_scores,
    run_config,
    spearman,
)

CONFIGS = {
    "gaussian": lambda c, ids, s: Poe(c, ids, s),
    "gaussian_one_order": lambda c, ids, s: Poe(c, ids, s, symmetric=False),
    "gaussian_hard": lambda c, ids, s: Poe(c, ids, s, outcome="hard", share=0.5),
    "bt": lambda c, ids, s: Poe(c, ids, s, expert="bt"),
    "bt_one_order_code": lambda c, ids, s: Poe(c, ids, s, expert="bt", symmetric=False, compat="poe-code"),
    "stable": lambda c, ids, s: Poe(c, ids, s, patience=1, pairs_per_round=2, share=1.0),
    "confident": lambda c, ids, s: Poe(c, ids, s, confidence=0.9, pairs_per_round=3, share=1.0, expert="bt"),
    "confident_gaussian": lambda c, ids, s: Poe(c, ids, s, confidence=0.9, symmetric=False, share=1.0),
}
NAMES = sorted(CONFIGS)


def test_doctests() -> None:
    from pairank.jobs.schedulers import poe as machine

    results = [doctest.testmod(m) for m in (poe, machine)]
    assert sum(r.attempted for r in results) >= 6 and sum(r.failed for r in results) == 0


# ---------------------------------------------------------------------------
# the closed form against direct fits


def random_experts(gen: np.random.Generator, n: int, k: int) -> list[tuple[int, int, float]]:
    """k judgments (i in slot A, j in slot B, p) over a connected graph: a chain, then random pairs."""
    out = [(i, i + 1, float(gen.uniform(0.05, 0.95))) for i in range(n - 1)]
    for _ in range(k):
        i, j = gen.choice(n, size=2, replace=False)
        out.append((int(i), int(j), float(gen.uniform(0.05, 0.95))))
    return out


def stacked(n: int, experts_by_context: list[list[tuple[int, int, float]]]):
    counts = np.zeros((len(experts_by_context), n, n))
    sums = np.zeros_like(counts)
    squares = np.zeros(len(experts_by_context))
    for c, experts in enumerate(experts_by_context):
        for i, j, p in experts:
            counts[c, i, j] += 1
            sums[c, i, j] += p
            squares[c] += p * p
    return counts, sums, squares


def design(n: int, experts: list[tuple[int, int, float]]) -> np.ndarray:
    w = np.zeros((len(experts), n))
    for k, (i, j, _) in enumerate(experts):
        w[k, i], w[k, j] = 1.0, -1.0
    return w


@settings(max_examples=40, deadline=None, derandomize=True)
@given(n=st.integers(2, 8), k=st.integers(0, 20), seed=st.integers(0, 10**6), debias=st.booleans())
def test_gaussian_closed_form_is_the_least_squares_fit(n, k, seed, debias) -> None:
    gen = np.random.default_rng(seed)
    contexts = [random_experts(gen, n, k) for _ in range(3)]
    counts, sums, squares = stacked(n, contexts)
    beta = np.array([np.mean([p for *_, p in e]) if debias else 0.5 for e in contexts])
    scores = poe.gaussian_scores(counts, sums, beta)
    post, cov = poe.gaussian_posterior(counts, sums, beta, squares)
    for c, experts in enumerate(contexts):
        w = design(n, experts)
        mu = np.array([p for *_, p in experts]) - beta[c]
        # The paper's form: an anchor row s_1 = 0, then (W~^T W~)^-1 W~^T mu~; the ranking is shift-free.
        wt = np.vstack([np.eye(n)[:1], w])
        anchored = np.linalg.solve(wt.T @ wt, wt.T @ np.concatenate([[0.0], mu]))
        direct = np.linalg.lstsq(w, mu, rcond=None)[0]  # least norm: centred
        assert np.allclose(scores[c], direct, atol=1e-7)
        assert np.allclose(scores[c], anchored - anchored.mean(), atol=1e-7)
        assert np.allclose(post[c], scores[c])
        rss = float(np.sum((w @ direct - mu) ** 2))
        dof = len(experts) - (n - 1)
        if dof > 0:
            sigma2 = rss / dof
            want = sigma2 * np.linalg.pinv(w.T @ w)
            assert np.allclose(poe.difference_variance(cov[c]), poe.difference_variance(want), atol=1e-7)
        else:
            assert np.isinf(cov[c]).all()


def test_gaussian_on_a_disconnected_graph_centres_each_part() -> None:
    counts, sums, _ = stacked(4, [[(0, 1, 0.9), (2, 3, 0.2)]])
    s = poe.gaussian_scores(counts, sums, np.array([0.5]))[0]
    assert np.allclose(s, [0.2, -0.2, -0.15, 0.15], atol=1e-6)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    n=st.integers(2, 6),
    k=st.integers(0, 12),
    seed=st.integers(0, 10**6),
    alpha=st.sampled_from([0.0, 0.01, 1.0]),
    gamma=st.sampled_from([0.0, 0.7]),
)
def test_bt_newton_is_the_maximum_likelihood_fit(n, k, seed, alpha, gamma) -> None:
    gen = np.random.default_rng(seed)
    contexts = [random_experts(gen, n, k) for _ in range(2)]
    counts, sums, _ = stacked(n, contexts)
    s, cov = poe.bt_scores(counts, sums, np.full(2, gamma), alpha, covariance=True)
    for c in range(2):

        def nll(x, c=c):
            return -poe.bt_log_likelihood(x, counts[c], sums[c], gamma, alpha)

        best = minimize(nll, np.zeros(n), method="BFGS", options={"gtol": 1e-10}).x
        assert nll(s[c]) <= nll(best) + 1e-9
        assert np.allclose(s[c] - s[c].mean(), best - best.mean(), atol=1e-4)
        if alpha > 0:  # the Laplace covariance: the inverse of minus the Hessian, by finite differences
            h = 1e-4
            hess = np.array(
                [
                    [
                        (
                            nll(s[c] + h * (e1 + e2))
                            - nll(s[c] + h * (e1 - e2))
                            - nll(s[c] - h * (e1 - e2))
                            + nll(s[c] - h * (e1 + e2))
                        )
                        / (4 * h * h)
                        for e2 in np.eye(n)
                    ]
                    for e1 in np.eye(n)
                ]
            )
            assert np.allclose(cov[c], np.linalg.inv(hess), rtol=1e-3, atol=1e-4)


def test_a_batch_solves_each_context_as_alone() -> None:
    gen = np.random.default_rng(0)
    contexts = [random_experts(gen, 7, 9) for _ in range(5)]
    counts, sums, _ = stacked(7, contexts)
    gamma = np.linspace(-0.5, 0.5, 5)
    together, _ = poe.bt_scores(counts, sums, gamma, 0.01)
    for c in range(5):
        alone, _ = poe.bt_scores(counts[c : c + 1], sums[c : c + 1], gamma[c : c + 1], 0.01)
        assert np.array_equal(alone[0], together[c])
        g_alone = poe.gaussian_scores(counts[c : c + 1], sums[c : c + 1], np.array([0.5]))
        assert np.allclose(g_alone[0], poe.gaussian_scores(counts, sums, np.full(5, 0.5))[c], rtol=0, atol=1e-12)


# ---------------------------------------------------------------------------
# the selection against the paper's criterion, by brute force


def log_det_after(n: int, pairs: list[tuple[int, int]], extra: tuple[int, int]) -> float:
    """log det of the anchored precision W~^T W~ (row s_1 = 0, one row per comparison) with ``extra`` added."""
    w = design(n, [(i, j, 0.0) for i, j in [*pairs, extra]])
    wt = np.vstack([np.eye(n)[:1], w])
    return float(np.linalg.slogdet(wt.T @ wt)[1])


@pytest.mark.parametrize("n,max_picks", [(3, 1), (4, 1), (5, 1), (6, 1), (7, 1), (4, 2), (5, 2)])
def test_each_pick_maximises_the_determinant_first_in_pair_order(n, max_picks) -> None:
    seq = poe.d_optimal_sequence(n, max_picks * n * (n - 1) // 2, max_picks)
    assert seq[: n - 1] == poe.chain(n)
    assert len(seq) == max_picks * n * (n - 1) // 2  # every pair, max_picks times
    for t in range(n - 1, len(seq)):
        done = seq[:t]
        allowed = [p for p in itertools.combinations(range(n), 2) if done.count(p) < max_picks]
        value = {p: log_det_after(n, done, p) for p in allowed}
        best = max(value.values())
        assert value[seq[t]] >= best - 1e-9
        ties = [p for p in allowed if value[p] >= best - 1e-9]
        assert seq[t] == ties[0]  # the first maximum in row order, as the paper's argmax


def test_sequences_are_prefixes_and_shared() -> None:
    long = poe.d_optimal_sequence(9, 30)
    assert poe.d_optimal_sequence(9, 12) == long[:12]
    assert poe.d_optimal_sequence(9, 10**6) == poe.d_optimal_sequence(9, 36) and len(long) == 30
    assert poe.d_optimal_sequence(1, 5) == [] and poe.d_optimal_sequence(5, 0) == []


def test_weighted_picks_maximise_the_weighted_determinant() -> None:
    gen = np.random.default_rng(3)
    n = 6
    a = gen.normal(size=(n, n))
    precision = a @ a.T + np.eye(n)
    weight = gen.uniform(0.05, 0.25, size=(n, n))
    weight = (weight + weight.T) / 2
    allowed = np.ones((n, n), dtype=bool)
    picks = poe.d_optimal_picks(np.linalg.inv(precision), weight, allowed, room=4, disjoint=False)
    current = precision.copy()
    for i, j in picks:
        v = np.zeros(n)
        best = {}
        for x, y in itertools.combinations(range(n), 2):
            if (x, y) in picks[: picks.index((i, j))]:
                continue
            v[:] = 0
            v[x], v[y] = 1, -1
            best[(x, y)] = np.linalg.slogdet(current + weight[x, y] * np.outer(v, v))[1]
        assert best[(i, j)] >= max(best.values()) - 1e-9
        v[:] = 0
        v[i], v[j] = 1, -1
        current += weight[i, j] * np.outer(v, v)
    disjoint = poe.d_optimal_picks(np.linalg.inv(precision), weight, allowed, room=5, disjoint=True)
    flat = [x for pair in disjoint for x in pair]
    assert len(disjoint) == 3 and len(flat) == len(set(flat))


# ---------------------------------------------------------------------------
# the machine: the protocol every machine keeps


def run_one(name: str, ids: list[str], seed: int, p_fn, ctx: str = "ctx"):
    return run_config(CONFIGS[name], ids, seed, p_fn, ctx)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(name=st.sampled_from(NAMES), n=st.integers(1, 24), seed=st.integers(0, 2**32), judge_seed=st.integers(0, 9))
def test_ranking_is_a_permutation_within_budget_and_no_pair_is_asked_twice(name, n, seed, judge_seed) -> None:
    ids = cands(n)
    m, judge, stats = run_one(name, ids, seed, random_judge(judge_seed))
    check_invariants(m, judge, stats, ids, symmetric=m.symmetric)
    assert m.asked <= m.budget <= n * (n - 1)
    assert m.stop_reason in ("budget", "all_pairs", "stable", "confident")


@pytest.mark.parametrize("name", NAMES)
def test_late_and_partial_answers_give_the_same_result(name: str) -> None:
    check_late_and_partial_answers(CONFIGS[name], 11)


@pytest.mark.parametrize("name", NAMES)
def test_known_judgments_are_reused_not_asked(name: str) -> None:
    check_known_judgments_reused(CONFIGS[name], 9)


@pytest.mark.parametrize("name", NAMES)
def test_same_seed_same_requests_alone_or_together(name: str) -> None:
    check_reproducible(CONFIGS[name], {f"q{i}": cands(5 + 3 * i) for i in range(5)})


def test_budgets_rounds_and_stop_reasons() -> None:
    ids = cands(10)
    judge = logit_judge(rank_scores(ids), k=0.5)
    m, tracker, stats = run_one("gaussian", ids, 0, judge)
    assert m.budget == 2 * 10 * 4 and m.asked == m.budget and m.stop_reason == "budget"
    assert [len(r) for r in tracker.rounds] == [2 * 9, 2 * 31]  # the chain, then the rest of the budget
    full = Poe("ctx", ids, 0, share=1.0, symmetric=False)
    run_lockstep([full], Tracker(judge))
    assert full.asked == 90 and full.stop_reason == "all_pairs"
    odd = Poe("ctx", ids, 0, comparisons=25)
    assert odd.budget == 24  # whole symmetric comparisons only
    stable = Poe("ctx", ids, 0, share=1.0, patience=2, pairs_per_round=3)
    run_lockstep([stable], Tracker(judge))
    assert stable.stop_reason == "stable" and stable.asked < 90 and stable.rounds >= 4
    sure = Poe("ctx", ids, 0, share=1.0, confidence=0.6, pairs_per_round=5, expert="bt")
    run_lockstep([sure], Tracker(logit_judge(rank_scores(ids), k=1.0, sigma=0.3)))
    assert sure.stop_reason == "confident" and sure.asked < 90
    assert sure.ranking() == ids
    scores = rank_scores(ids)  # p linear in the quality difference, as Gaussian experts assume, with noise
    linear = logit_judge(dict.fromkeys(ids, 0.0), k=0.0, sigma=1.0)
    sure = Poe("ctx", ids, 0, share=1.0, confidence=0.8, pairs_per_round=5)
    run_lockstep([sure], Tracker(lambda c, a, b: 0.5 + (scores[a] - scores[b]) / 20 + (linear(c, a, b) - 0.5) / 10))
    assert sure.stop_reason == "confident" and sure.asked < 90
    assert sure.ranking() == ids


@pytest.mark.parametrize("expert", ["gaussian", "bt"])
def test_noiseless_judges_recover_the_order(expert: str) -> None:
    ids = cands(30)
    for symmetric in (True, False):
        m = Poe("ctx", ids, 1, expert=expert, symmetric=symmetric, share=0.2)
        # (Gaussian experts assume p linear in the difference: a judge that saturates misleads them.)
        run_lockstep([m], Tracker(logit_judge(rank_scores(ids), k=0.1 if expert == "gaussian" else 0.3)))
        assert spearman(m.ranking(), rank_scores(ids)) > 0.99


@pytest.mark.parametrize("expert", ["gaussian", "bt"])
def test_debiased_experts_and_symmetric_cancel_a_position_bias(expert: str) -> None:
    ids = cands(16)
    judge = logit_judge(rank_scores(ids), k=0.4, bias=3.0, sigma=0.5)
    rho = {}
    for label, kw in {
        "sym": {},
        "debiased": {"symmetric": False},
        "plain": {"symmetric": False, "debias": False},
    }.items():
        runs = [Poe(f"q{s}", ids, s, expert=expert, share=0.3, **kw) for s in range(20)]
        run_lockstep(runs, Tracker(judge))
        rho[label] = np.mean([spearman(m.ranking(), rank_scores(ids)) for m in runs])
    assert rho["sym"] > 0.9 and rho["debiased"] > rho["plain"] + 0.05, rho


def test_hard_outcomes_only_read_the_side_of_one_half() -> None:
    ids = cands(8)
    soft = Poe("ctx", ids, 0, outcome="hard")
    sharp = Poe("ctx", ids, 0)
    run_lockstep([soft], Tracker(logit_judge(rank_scores(ids), k=0.2)))
    run_lockstep([sharp], Tracker(lambda c, a, b: 0.999 if a < b else 0.001))
    assert soft.ranking() == sharp.ranking()


def test_one_order_slots_coin_and_compat() -> None:
    ids = cands(12)
    coin = Poe("ctx", ids, 4, symmetric=False, share=1.0)
    code = Poe("ctx", ids, 4, symmetric=False, share=1.0, compat="poe-code")
    first = {}
    for a, b in code._plan:
        first.setdefault(frozenset((a, b)), (a, b))
    assert all(code.order.index(a) < code.order.index(b) for a, b in first.values())
    firsts = coin._plan[: len(ids) - 1]
    assert 0 < sum(coin.order.index(a) < coin.order.index(b) for a, b in firsts) < len(firsts)
    assert code.alpha == 0.0 and coin.alpha == 0.01
    assert sorted(coin._plan) == sorted(itertools.permutations(ids, 2))  # each order once: the full matrix


# ---------------------------------------------------------------------------
# settings


def test_settings_registry_and_errors() -> None:
    assert REGISTRY["poe"] is PoeSettings and ADAPTIVE["poe"] is Poe
    s = parse_scheduler({"name": "poe", "expert": "bt", "share": 0.1, "symmetric": False})
    m = s.machine("q", cands(20), 0)
    assert isinstance(m, Poe) and m.expert == "bt" and m.budget == 38 and not m.symmetric
    for bad, match in [
        ({"name": "poe", "beam": {}}, "beam"),
        ({"name": "poe", "comparisons": 10, "share": 0.1}, "comparisons or share"),
        ({"name": "poe", "compat": "poe-code", "alpha": 0.5}, "without a prior"),
        ({"name": "poe", "expert": "probit"}, "expert"),
        ({"name": "poe", "share": 1.5}, "share"),
        ({"name": "poe", "confidence": 1.0}, "confidence"),
    ]:
        with pytest.raises(ValidationError, match=match):
            parse_scheduler(bad)
    for field in PoeSettings.model_fields.values():
        assert field.description


def test_machine_validation() -> None:
    with pytest.raises(ValueError, match="expert"):
        Poe("q", cands(3), 0, expert="x")
    with pytest.raises(ValueError, match="comparisons or share"):
        Poe("q", cands(3), 0, comparisons=2, share=0.5)
    with pytest.raises(ValueError, match=r"repeated: \['c00'\]"):
        Poe("q", ["c00", "c00"], 0)
    m = Poe("q", cands(4), 0)
    with pytest.raises(RuntimeError, match="not done"):
        m.ranking()
    for n in (0, 1):
        tiny = Poe("q", cands(n), 0)
        assert tiny.done and tiny.ranking() == cands(n) and tiny.next_requests() == []
    none = Poe("q", cands(5), 0, comparisons=1)  # not one whole symmetric comparison
    assert none.done and none.asked == 0 and sorted(none.ranking()) == cands(5)


def test_a_thousand_contexts_solve_in_one_batch() -> None:
    ids = cands(16)
    machines = [Poe(f"q{i}", ids, i, patience=1) for i in range(1000)]
    judge = logit_judge(rank_scores(ids), k=0.5, sigma=0.5)
    stats = run_lockstep(machines, lambda reqs: [judge(*r) for r in reqs])
    assert stats["done"] and len(stats["rounds"]) <= 2 + math.ceil(2 * 16 * 4 / 16)
    assert np.mean([spearman(m.ranking(), rank_scores(ids)) for m in machines]) > 0.9
