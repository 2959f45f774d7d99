"""Tests of operators.dawid_skene: real nutpie / PyMC sampling on votes simulated from known q0, q1 and p.

Every sampled test uses the same eight judges: nutpie's compiled model is kept per
number of judges, so the file compiles it once (about 10 s with a warm pytensor
cache, about 40 s on a clean machine) and each later call samples in about a second.
The one PyMC-sampler test compiles PyMC's C logp (about 30 s cold, 5 s warm). The
whole file: about 35 s warm, 90 s cold, on 2 cores.
"""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest

from pairank.operators.dawid_skene import (
    DawidSkeneResult,
    dawid_skene,
    em_dawid_skene,
    prepare,
)
from pairank.operators.winrate import NO_VOTE, accuracies

JUDGES = [f"judge-{j}" for j in range(8)]
Q0 = np.array([0.85, 0.80, 0.75, 0.70, 0.80, 0.65, 0.90, 0.70])
Q1 = np.array([0.75, 0.85, 0.70, 0.80, 0.65, 0.75, 0.80, 0.90])
P = 0.65
N = 200
SEEDS = range(5)


def simulate(
    n: int, q0: np.ndarray, q1: np.ndarray, p: float, seed: int, missing: float = 0.15
) -> tuple[np.ndarray, np.ndarray]:
    """Votes (n, judges) with a share ``missing`` of no-votes, and the true classes (0 with probability ``p``)."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(n) >= p).astype(int)
    hit = np.where(truth[:, None] == 0, rng.random((n, q0.size)) < q0, rng.random((n, q1.size)) < q1)
    votes = np.where(hit, truth[:, None], 1 - truth[:, None])
    votes[rng.random(votes.shape) < missing] = NO_VOTE
    return votes, truth


def covers(result: DawidSkeneResult, p: float) -> bool:
    return result.estimate is not None and result.estimate.low <= p <= result.estimate.high


@functools.cache
def run(prior: str, seed: int) -> DawidSkeneResult:
    """One dawid_skene call of the recovery test: ``prior`` with its side information simulated."""
    votes, truth = simulate(N, Q0, Q1, P, seed)
    if prior == "in_dist":
        gold = np.where(np.random.default_rng(seed + 500).random(N) < 0.2, truth, NO_VOTE)
        return dawid_skene(votes, JUDGES, prior="in_dist", gold=gold, seed=seed)
    if prior == "ood":
        other, other_truth = simulate(100, Q0, Q1, 0.5, seed + 1000, missing=0.0)
        ood = [accuracies(other[:, j], other_truth) for j in range(len(JUDGES))]
        return dawid_skene(votes, JUDGES, prior="ood", ood=ood, seed=seed)
    return dawid_skene(votes, JUDGES, prior=prior, seed=seed)


# --- recovery ------------------------------------------------------------------------------------


@pytest.mark.parametrize("prior", ["none", "in_dist", "ood"])
def test_the_true_win_rate_is_inside_the_interval_in_most_seeds(prior: str) -> None:
    results = [run(prior, seed) for seed in SEEDS]
    assert all(r.ok for r in results), [r.reason for r in results]
    assert all(r.rhat <= 1.01 and r.ess_bulk >= 1000 for r in results)
    assert sum(covers(r, P) for r in results) >= 4, [(r.estimate.low, r.estimate.high) for r in results]
    assert all(abs(r.estimate.mean - P) < 0.12 for r in results)
    assert all(r.prior == prior and r.n_judges == 8 and r.n_pairs == N for r in results)
    assert all(not j.below_chance for r in results for j in r.judges)
    # The judges' accuracies are recovered too (posterior means, 200 pairs each).
    mean_q0 = np.mean([[j.q0 for j in r.judges] for r in results], axis=0)
    np.testing.assert_allclose(mean_q0, Q0, atol=0.1)


def test_gold_labels_are_counted_and_narrow_the_interval() -> None:
    plain, gold = run("none", 0), run("in_dist", 0)
    assert plain.n_gold == 0 and 20 <= gold.n_gold <= 60
    assert gold.estimate.high - gold.estimate.low < plain.estimate.high - plain.estimate.low


# --- diagnostics -----------------------------------------------------------------------------


def test_failed_diagnostics_refuse_to_report_an_estimate() -> None:
    votes, _ = simulate(N, Q0, Q1, P, 0)
    result = dawid_skene(votes, JUDGES, draws=30, tune=30, ess_min=100_000, rhat_max=10)
    assert not result.ok and result.estimate is None
    assert (
        result.reason.startswith("bulk ESS ") and "< 100000 (worst: " in result.reason and "r_hat" not in result.reason
    )
    assert result.ess_bulk < 100_000 and result.draws.size == 60  # the draws stay inspectable

    strict = dawid_skene(votes, JUDGES, draws=30, tune=30, rhat_max=1.0, ess_min=0)
    assert not strict.ok and strict.estimate is None
    assert strict.reason.startswith("r_hat ") and "> 1 (worst: " in strict.reason and "ESS" not in strict.reason


def test_the_same_seed_gives_the_same_draws() -> None:
    votes, _ = simulate(N, Q0, Q1, P, 1)
    a = dawid_skene(votes, JUDGES, draws=50, tune=50, seed=3, ess_min=0, rhat_max=2)
    b = dawid_skene(votes, JUDGES, draws=50, tune=50, seed=3, ess_min=0, rhat_max=2)
    np.testing.assert_array_equal(a.draws, b.draws)


# --- a judge worse than chance ------------------------------------------------------------------


def test_a_judge_below_chance_is_flagged_and_the_estimate_stays_right() -> None:
    q0, q1 = Q0.copy(), Q1.copy()
    q0[0] = q1[0] = 0.25  # prefers the wrong output three times in four
    covered = 0
    for seed in range(3):
        votes, _ = simulate(N, q0, q1, P, seed)
        result = dawid_skene(votes, JUDGES, seed=seed)
        assert result.ok, result.reason
        bad, *good = result.judges
        assert bad.judge == "judge-0" and bad.below_chance
        assert bad.q0 < 0.4 and bad.q1 < 0.4 and bad.accuracy < 0.4  # modelled as bad, not inverted
        assert not any(j.below_chance for j in good)
        covered += covers(result, P)
    assert covered >= 2


# --- cross-checks ------------------------------------------------------------------------------


def test_crowd_kit_em_agrees_with_the_posterior_mean() -> None:
    votes, _ = simulate(300, Q0, Q1, P, 7)
    bayes = dawid_skene(votes, JUDGES, seed=7)
    em = em_dawid_skene(votes, JUDGES)
    assert bayes.ok
    assert em.win_rate == pytest.approx(bayes.estimate.mean, abs=0.03)
    np.testing.assert_allclose([j.q0 for j in em.judges], [j.q0 for j in bayes.judges], atol=0.05)
    np.testing.assert_allclose([j.q1 for j in em.judges], [j.q1 for j in bayes.judges], atol=0.05)
    assert [j.judge for j in em.judges] == JUDGES


def test_pymc_sampler_agrees_with_nutpie() -> None:
    votes, _ = simulate(N, Q0, Q1, P, 2)
    nuts = dawid_skene(votes, JUDGES, seed=2)
    pymc = dawid_skene(votes, JUDGES, seed=2, sampler="pymc", draws=1000, tune=500, ess_min=500)
    assert pymc.ok, pymc.reason
    assert pymc.estimate.mean == pytest.approx(nuts.estimate.mean, abs=0.02)
    assert pymc.draws.size == 2000


def test_em_names_the_package_when_crowd_kit_is_missing(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "crowdkit", None)
    monkeypatch.setitem(sys.modules, "crowdkit.aggregation", None)
    with pytest.raises(ImportError, match="pip install crowd-kit"):
        em_dawid_skene(np.zeros((2, 1), dtype=int), ["a"])


# --- inputs ------------------------------------------------------------------------------------


def test_pairs_without_votes_are_dropped_unless_labelled() -> None:
    votes = np.array([[0, 0], [-1, -1], [-1, -1], [1, 0]])
    data = prepare(votes, ["a", "b"], gold=[-1, -1, 0, -1])
    assert data.n_pairs == 3 and data.n_gold == 1
    assert data.gold_n.tolist() == [1.0, 0.0] and not data.gold_onehot.any()  # informs pi only
    assert data.weight.sum() == 2


OK_VOTES = np.array([[0, 1], [1, 1], [0, -1]])
ACC = accuracies(np.array([0, 1]), np.array([0, 1]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"votes": np.array([0, 1, 0])}, r"2-d array \(pairs, judges\), found shape \(3,\)"),
        ({"votes": np.array([[0, 2], [1, 1]])}, r"found 2 at pair 0, judge 'b'"),
        ({"votes": np.array([[0.5, 1.0]])}, r"found 0.5 at pair 0, judge 'a'"),
        ({"votes": np.array([["0", "1"]])}, r"integers -1, 0 or 1, found dtype <U1"),
        ({"judges": ["a"]}, r"2 judge columns but 1 judge names"),
        ({"judges": ["a", "a"]}, r"judge names must be unique"),
        ({"gold": [0, 1]}, r"one label per pair, shape \(3,\), found \(2,\)"),
        ({"gold": [0, 1, 3]}, r"found 3 at pair 2"),
        ({"prior": "flat"}, r"unknown prior 'flat'; expected one of none, ood, in_dist"),
        ({"prior": "in_dist"}, r"'in_dist' needs gold labels"),
        ({"prior": "ood", "ood": [ACC]}, r"one Accuracy per judge \(2\), found 1"),
        ({"prior": "ood"}, r"one Accuracy per judge \(2\), found none"),
        ({"ood": [ACC, ACC]}, r"ood accuracies were given but prior is 'none'"),
        ({"sampler": "hmc"}, r"unknown sampler 'hmc'; expected one of nutpie, pymc"),
        ({"draws": 0}, r"draws must be an integer >= 1, found 0"),
        ({"tune": 1.5}, r"tune must be an integer >= 0, found 1.5"),
        ({"votes": np.full((3, 2), -1)}, r"none of the 3 pairs has a vote or a gold label"),
    ],
)
def test_bad_inputs_are_rejected_with_what_was_expected(kwargs: dict, message: str) -> None:
    args = {"votes": OK_VOTES, "judges": ["a", "b"], **kwargs}
    with pytest.raises(ValueError, match=message):
        dawid_skene(args.pop("votes"), args.pop("judges"), **args)


def test_ood_entries_must_be_accuracies() -> None:
    with pytest.raises(TypeError, match=r"ood\[1\] must be an operators.winrate.Accuracy, found tuple"):
        dawid_skene(OK_VOTES, ["a", "b"], prior="ood", ood=[ACC, (1, 2)])
