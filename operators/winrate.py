"""Win rates against a baseline, corrected for an imperfect judge.

The setting of Gao et al., "Bayesian Calibration of Win Rate Estimation with LLM
Evaluators" (EMNLP 2024). A *pair* is a system's output and the baseline's output
for the same input. Its true class is 0 when the system's output is better and 1
when the baseline's is; the true win rate is ``p = P(class 0)``. A judge votes 0
or 1 on each pair:

- ``k = P(vote 0)``: the observed win rate;
- ``q0 = P(vote 0 | class 0)``: agreement on pairs the system truly wins;
- ``q1 = P(vote 1 | class 1)``: agreement on pairs the baseline truly wins.

Then ``k = p q0 + (1 - p)(1 - q1)``, so ``p = (k - 1 + q1) / (q0 + q1 - 1)``
(:func:`correct`). A judge with ``q0 + q1 < 1`` is worse than chance; the
correction would silently invert it, so such draws are dropped and counted
(:func:`bwrs`), never used.

Votes are coded as small integers in numpy arrays: :data:`SYSTEM` (0),
:data:`BASELINE` (1) and :data:`NO_VOTE` (-1, the judge did not see the pair, or
the human truth is unknown or a tie).

Each quantity gets a Beta posterior with a uniform prior, ``Beta(1 + hits,
1 + misses)``. BWRS (Bayesian Win Rate Sampling) draws ``k``, ``q0``, ``q1`` from
their posteriors, maps each draw through :func:`correct`, keeps draws in (0, 1)
and pools the kept draws of every judge.

Ties. A vote is binary: a pair the judge ties on (its swap-and-sum points
exactly half, :mod:`pairank.operators.votes`) goes to :data:`SYSTEM` or :data:`BASELINE`
by :func:`tie_break`, a fair coin seeded by (seed, pair, judge), and is counted
(``n_ties``). The coin is the same rule on labelled and unlabelled pairs, so
``q0`` and ``q1`` are measured on the same coin-broken votes and the correction
still holds: a judge that ties often just looks closer to chance. A tie in the
human truth is :data:`NO_VOTE` (no class), counted in no accuracy.

    >>> coins = [tie_break(0, f"ctx{i}", "system", "baseline", "judge") for i in range(1000)]
    >>> sorted(set(coins)), coins.count(SYSTEM)
    ([0, 1], 529)
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

SYSTEM = 0
BASELINE = 1
NO_VOTE = -1


@dataclass(frozen=True)
class Summary:
    """A posterior summarised: mean, KDE mode and a highest-density credible interval."""

    mean: float
    mode: float
    low: float
    high: float
    mass: float
    n_draws: int


def summarize(draws: Sequence[float] | np.ndarray, mass: float = 0.95) -> Summary:
    """Mean, mode of a Gaussian KDE and the narrowest interval holding ``mass`` of the draws.

    >>> s = summarize(np.random.default_rng(0).beta(30, 10, size=20000))
    >>> round(s.mean, 2), round(s.mode, 2), s.low < 0.75 < s.high
    (0.75, 0.76, True)
    """
    x = np.sort(np.asarray(draws, dtype=float).ravel())
    if x.size == 0 or not np.all(np.isfinite(x)):
        raise ValueError(f"summarize: expected a non-empty set of finite draws, found {x.size} draws")
    if not 0 < mass < 1:
        raise ValueError(f"summarize: mass must be in (0, 1), found {mass}")
    low, high = _hdi(x, mass)
    return Summary(float(x.mean()), kde_mode(x), low, high, mass, int(x.size))


def _hdi(sorted_x: np.ndarray, mass: float) -> tuple[float, float]:
    n = sorted_x.size
    width = max(1, min(n - 1, math.ceil(mass * n)))
    if n == 1:
        return float(sorted_x[0]), float(sorted_x[0])
    spans = sorted_x[width:] - sorted_x[: n - width]
    i = int(np.argmin(spans))
    return float(sorted_x[i]), float(sorted_x[i + width])


def kde_mode(x: np.ndarray, grid: int = 512) -> float:
    """The maximum of a Gaussian kernel density estimate of ``x`` (its mean if ``x`` is constant)."""
    x = np.asarray(x, dtype=float)
    if x.size < 2 or np.ptp(x) == 0:
        return float(x.mean())
    sample = x if x.size <= 20000 else np.random.default_rng(0).choice(x, 20000, replace=False)
    from scipy import stats  # here: the block-scoring tasks import this module and never need it

    kde = stats.gaussian_kde(sample)
    points = np.linspace(x.min(), x.max(), grid)
    return float(points[int(np.argmax(kde(points)))])


def correct(k: np.ndarray | float, q0: np.ndarray | float, q1: np.ndarray | float) -> np.ndarray:
    """The true win rate implied by observed rate ``k`` and accuracies ``q0``, ``q1``.

    >>> round(float(correct(0.62, 0.8, 0.7)), 6)  # p = (0.62 - 1 + 0.7) / (0.8 + 0.7 - 1)
    0.64
    """
    k, q0, q1 = (np.asarray(v, dtype=float) for v in (k, q0, q1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return (k - 1 + q1) / (q0 + q1 - 1)


@dataclass(frozen=True)
class Counts:
    """Hits and misses of a binary quantity; its posterior is ``Beta(1 + hits, 1 + misses)``."""

    hits: int
    misses: int

    @property
    def n(self) -> int:
        return self.hits + self.misses

    @property
    def rate(self) -> float | None:
        return self.hits / self.n if self.n else None

    def draw(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.beta(1 + self.hits, 1 + self.misses, size=size)

    def posterior(self, mass: float = 0.95) -> Summary:
        """Analytic summary of ``Beta(1 + hits, 1 + misses)``: mean, mode, equal-tailed interval."""
        a, b = 1 + self.hits, 1 + self.misses
        mode = (a - 1) / (a + b - 2) if a + b > 2 else 0.5
        from scipy import stats

        low, high = stats.beta.ppf([(1 - mass) / 2, (1 + mass) / 2], a, b)
        return Summary(a / (a + b), float(mode), float(low), float(high), mass, self.n)


def observed(votes: np.ndarray) -> Counts:
    """Wins of the system (votes 0) against losses (votes 1) of one judge; no-votes are ignored.

    >>> observed(np.array([0, 0, 1, -1, 0]))
    Counts(hits=3, misses=1)
    """
    v = np.asarray(votes)
    return Counts(int(np.sum(v == SYSTEM)), int(np.sum(v == BASELINE)))


@dataclass(frozen=True)
class Accuracy:
    """A judge's agreement with the human truth on each true class."""

    q0: Counts
    q1: Counts

    @property
    def below_chance(self) -> bool:
        """Posterior means with ``q0 + q1 < 1``: the judge prefers the wrong output more often than not."""
        return self.q0.posterior().mean + self.q1.posterior().mean < 1

    @property
    def accuracy(self) -> float | None:
        n = self.q0.n + self.q1.n
        return (self.q0.hits + self.q1.hits) / n if n else None


def accuracies(votes: np.ndarray, truth: np.ndarray) -> Accuracy:
    """q0 and q1 counts of one judge over the pairs where both its vote and the truth are known.

    >>> a = accuracies(np.array([0, 0, 1, 1, 0, -1]), np.array([0, 0, 0, 1, 1, 1]))
    >>> a.q0, a.q1
    (Counts(hits=2, misses=1), Counts(hits=1, misses=1))
    """
    v, t = np.asarray(votes), np.asarray(truth)
    if v.shape != t.shape:
        raise ValueError(f"accuracies: votes {v.shape} and truth {t.shape} differ in shape")
    seen = v != NO_VOTE
    c0, c1 = seen & (t == SYSTEM), seen & (t == BASELINE)
    return Accuracy(
        Counts(int(np.sum(v[c0] == SYSTEM)), int(np.sum(v[c0] == BASELINE))),
        Counts(int(np.sum(v[c1] == BASELINE)), int(np.sum(v[c1] == SYSTEM))),
    )


@dataclass(frozen=True)
class JudgeDraws:
    """What BWRS did with one judge's draws."""

    judge: str
    drawn: int
    kept: int
    below_chance: int  # draws with q0 + q1 <= 1: the correction is undefined or would invert the judge
    out_of_range: int  # draws whose corrected p falls outside (0, 1)


@dataclass(frozen=True)
class BWRSResult:
    """Pooled BWRS estimate (``None`` when no draw survived) and per-judge draw accounting."""

    summary: Summary | None
    judges: list[JudgeDraws]
    draws: np.ndarray = field(repr=False)

    @property
    def dropped(self) -> int:
        return sum(j.drawn - j.kept for j in self.judges)

    @property
    def drawn(self) -> int:
        return sum(j.drawn for j in self.judges)


def bwrs(
    k: Sequence[Counts],
    q: Sequence[Accuracy],
    names: Sequence[str],
    draws: int = 10000,
    seed: int = 0,
    mass: float = 0.95,
) -> BWRSResult:
    """Bayesian Win Rate Sampling over judges ``names`` (``k[j]``, ``q[j]`` per judge), pooled.

    Each judge contributes ``draws`` draws of ``(k, q0, q1)``; a draw is dropped if
    ``q0 + q1 <= 1`` (the judge is no better than chance in that draw) or if its
    corrected ``p`` is outside (0, 1). The kept draws of all judges are pooled.

    >>> r = bwrs([Counts(62, 38)], [Accuracy(Counts(80, 20), Counts(70, 30))], ["j"], seed=1)
    >>> round(r.summary.mean, 1), r.judges[0].kept < r.judges[0].drawn
    (0.6, True)
    """
    if not (len(k) == len(q) == len(names)) or not names:
        raise ValueError(f"bwrs: need one k and one q per judge, found {len(k)} k, {len(q)} q, {len(names)} names")
    rng = np.random.default_rng(seed)
    kept, report = [], []
    for kj, qj, name in zip(k, q, names):
        kd, q0, q1 = kj.draw(rng, draws), qj.q0.draw(rng, draws), qj.q1.draw(rng, draws)
        p = correct(kd, q0, q1)
        chance = (q0 + q1) <= 1
        inside = ~chance & (p > 0) & (p < 1)
        kept.append(p[inside])
        report.append(JudgeDraws(name, draws, int(inside.sum()), int(chance.sum()), int((~chance & ~inside).sum())))
    pooled = np.concatenate(kept)
    return BWRSResult(summarize(pooled, mass) if pooled.size else None, report, pooled)


def tie_break(seed: int, *parts: str) -> int:
    """A seeded coin for a tied vote, stable across runs and processes: :data:`SYSTEM` or :data:`BASELINE`.

    >>> tie_break(0, "ctx1", "judge") == tie_break(0, "ctx1", "judge")
    True
    """
    digest = hashlib.sha256("\x00".join((str(seed),) + parts).encode("utf-8")).digest()
    return SYSTEM if digest[0] % 2 == 0 else BASELINE
