"""Win-rate maths: observed rates, judge accuracies and BWRS on votes simulated from known truth."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pairank.operators.winrate import (
    BASELINE,
    NO_VOTE,
    SYSTEM,
    Accuracy,
    Counts,
    accuracies,
    bwrs,
    correct,
    observed,
    summarize,
)


def simulate(p: float, q: list[tuple[float, float]], n: int, seed: int):
    """Truth (n,) with P(class 0) = p and votes (n, judges) of judges with accuracies (q0, q1)."""
    rng = np.random.default_rng(seed)
    truth = np.where(rng.random(n) < p, SYSTEM, BASELINE).astype(np.int8)
    votes = np.empty((n, len(q)), dtype=np.int8)
    for j, (q0, q1) in enumerate(q):
        right = rng.random(n) < np.where(truth == SYSTEM, q0, q1)
        votes[:, j] = np.where(right, truth, 1 - truth)
    return truth, votes


def bwrs_in_dist(truth, votes, gold_fraction: float, seed: int):
    rng = np.random.default_rng(seed)
    masked = np.where(rng.random(len(truth)) < gold_fraction, truth, NO_VOTE)
    names = [f"j{j}" for j in range(votes.shape[1])]
    k = [observed(votes[:, j]) for j in range(votes.shape[1])]
    q = [accuracies(votes[:, j], masked) for j in range(votes.shape[1])]
    return bwrs(k, q, names, draws=4000, seed=seed)


@given(
    p=st.floats(0.01, 0.99),
    q0=st.floats(0.55, 1.0),
    q1=st.floats(0.55, 1.0),
)
def test_correct_inverts_the_judge_model(p, q0, q1):
    k = p * q0 + (1 - p) * (1 - q1)
    assert float(correct(k, q0, q1)) == pytest.approx(p, abs=1e-9)


def test_counts_posterior_is_the_beta_with_a_uniform_prior():
    s = Counts(hits=7, misses=3).posterior(0.9)
    assert s.mean == pytest.approx(8 / 12)
    assert s.mode == pytest.approx(0.7)
    assert s.low < 0.7 < s.high and s.mass == 0.9


def test_summarize_gives_an_hdi_of_the_requested_mass_and_a_kde_mode():
    draws = np.random.default_rng(3).beta(2, 8, size=40000)  # skewed: mode 1/8, mean 0.2
    s = summarize(draws, 0.9)
    inside = np.mean((draws >= s.low) & (draws <= s.high))
    assert inside == pytest.approx(0.9, abs=0.005)
    assert s.mode == pytest.approx(1 / 8, abs=0.02) and s.mean == pytest.approx(0.2, abs=0.005)
    # The HDI of a right-skewed posterior is shorter than the equal-tailed interval.
    lo, hi = np.quantile(draws, [0.05, 0.95])
    assert s.high - s.low < hi - lo
    with pytest.raises(ValueError, match="non-empty set of finite draws"):
        summarize([])


def test_accuracies_count_each_true_class_and_skip_unknowns():
    truth = np.array([SYSTEM, SYSTEM, BASELINE, BASELINE, NO_VOTE, SYSTEM])
    votes = np.array([SYSTEM, BASELINE, BASELINE, BASELINE, SYSTEM, NO_VOTE])
    a = accuracies(votes, truth)
    assert (a.q0.hits, a.q0.misses, a.q1.hits, a.q1.misses) == (1, 1, 2, 0)
    assert a.accuracy == pytest.approx(3 / 4)
    with pytest.raises(ValueError, match="differ in shape"):
        accuracies(votes, truth[:3])


def test_bwrs_recovers_the_true_win_rate_where_the_observed_rate_is_biased():
    # Judges that favour the baseline (q1 > q0) pull the observed rate well below p = 0.7.
    judges = [(0.65, 0.95), (0.7, 0.9), (0.6, 0.9)]
    covered_bwrs = covered_observed = 0
    for seed in range(10):
        truth, votes = simulate(0.7, judges, 400, seed)
        r = bwrs_in_dist(truth, votes, 0.3, seed)
        covered_bwrs += r.summary.low <= 0.7 <= r.summary.high
        k = observed(votes[:, 0]).posterior()
        covered_observed += k.low <= 0.7 <= k.high
    assert covered_bwrs >= 8
    assert covered_observed <= 2


def test_bwrs_drops_impossible_draws_and_counts_them():
    # k = 0.97 cannot come from p in (0, 1) with q0 about 0.8: most draws map above 1.
    r = bwrs([Counts(97, 3)], [Accuracy(Counts(40, 10), Counts(45, 5))], ["j"], draws=5000, seed=0)
    j = r.judges[0]
    assert j.out_of_range > 2500 and j.below_chance == 0
    assert j.kept + j.out_of_range == j.drawn == 5000
    assert r.dropped == j.drawn - j.kept
    assert np.all((r.draws > 0) & (r.draws < 1)) and r.draws.size == j.kept


def test_a_judge_below_chance_is_not_inverted():
    truth, votes = simulate(0.7, [(0.85, 0.85), (0.8, 0.9), (0.25, 0.25)], 400, 1)
    masked = np.where(np.arange(400) % 3 == 0, truth, NO_VOTE)
    q = [accuracies(votes[:, j], masked) for j in range(3)]
    assert [a.below_chance for a in q] == [False, False, True]
    r = bwrs([observed(votes[:, j]) for j in range(3)], q, ["good1", "good2", "bad"], draws=4000, seed=1)
    bad = r.judges[2]
    # Inverting the bad judge would give a valid-looking p for nearly every draw; instead they are dropped.
    assert bad.below_chance > 0.99 * bad.drawn and bad.kept < 0.01 * bad.drawn
    assert r.summary.low <= 0.7 <= r.summary.high


def test_bwrs_with_every_draw_dropped_reports_no_estimate():
    r = bwrs([Counts(50, 50)], [Accuracy(Counts(0, 60), Counts(0, 60))], ["inverted"], draws=500, seed=0)
    assert r.summary is None and r.dropped == 500


def test_bwrs_checks_its_inputs():
    with pytest.raises(ValueError, match="one k and one q per judge"):
        bwrs([Counts(1, 1)], [], ["j"])
