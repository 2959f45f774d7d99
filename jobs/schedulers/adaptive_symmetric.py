"""Adaptive symmetric sampling: ask both orders of the pairs a Bradley-Terry posterior is least sure of."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.special import expit, ndtr

from pairank.jobs.schedulers.protocol import (
    AdaptiveSettings,
    Ledger,
    Pair,
    check_int,
    check_real,
    distinct_ids,
    rng,
    seeded_shuffle,
)
from pairank.operators.bradley_terry import bt_laplace
from pairank.operators.product_of_experts import d_optimal_picks, difference_variance

SELECTIONS = ("uncertainty", "d_optimal")


class SamplingSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    budget: int | None = Field(
        None, ge=1, description="Unordered comparisons per context (unset: N ceil(log2 N), PAIRS-greedy's worst case)."
    )
    pairs_per_round: int | None = Field(None, ge=1, description="Pairs chosen per round (unset: ceil(N/2)).")
    patience: int = Field(
        2, ge=1, description="Stop when the posterior-mean ranking is unchanged for this many rounds."
    )
    confidence: float = Field(
        0.95, gt=0.5, lt=1, description="Stop when every unasked pair's order is at least this certain."
    )
    selection: Literal["uncertainty", "d_optimal"] = Field(
        "uncertainty",
        description="uncertainty: the pairs whose order is least certain; d_optimal: the pairs that most raise the "
        "determinant of the posterior precision (largest Fisher information times the variance of the "
        "difference, greedily), a Bradley-Terry analogue of the PoE selection.",
    )


class AdaptiveSymmetricSettings(AdaptiveSettings):
    name: Literal["adaptive_symmetric"] = Field(
        "adaptive_symmetric", description="Bradley-Terry uncertainty sampling, both orders of every pair."
    )
    sampling: SamplingSpec = Field(default_factory=SamplingSpec, description="The sampling.")

    def machine(self, context_id: str, ids: list[str], seed: int) -> AdaptiveSymmetric:
        s = self.sampling
        return AdaptiveSymmetric(
            context_id,
            ids,
            seed,
            budget=s.budget,
            pairs_per_round=s.pairs_per_round,
            patience=s.patience,
            confidence=s.confidence,
            selection=s.selection,
        )


def _both_orders(pairs: Iterable[Pair]) -> list[Pair]:
    return [order for a, b in pairs for order in ((a, b), (b, a))]


class AdaptiveSymmetric(Ledger):
    """Adaptive symmetric sampling: ask the pairs whose order the posterior is least sure of.

    Each chosen unordered pair is asked in both orders in the same round (a
    constant position bias cancels) and never asked again; an order already
    known (e.g. from the judgment cache) is not asked. Each ordered judgment is
    one Bradley-Terry comparison with a soft outcome: slot A won with weight
    p_a, slot B with 1 - p_a (so a judge that always says "A" gives each side
    of a pair the same weight, which is what :func:`symmetric_p` near 0.5 says).
    The posterior over the strengths (prior N(0, I / alpha), logit link) is
    approximated by a Gaussian at its mode (Laplace, :func:`bt_laplace`), and
    ``P(i above j) = Phi(mu_d / sigma_d)``
    (:func:`~pairank.operators.bradley_terry.prob_order`). The active choice of
    pairs is this module's own baseline, not from a paper.

    Rounds:

    * round 0 asks a seeded random cycle (each candidate against the next in the
      seeded order, the last against the first; one pair when N = 2), so every
      candidate is compared once the posterior is first used;
    * each later round asks up to ``pairs_per_round`` disjoint unasked pairs
      (default ``ceil(N / 2)``), most uncertain order first (P closest to 0.5),
      ties by the seeded order; a pair whose order is already certain beyond
      ``confidence`` is not asked. With ``selection="d_optimal"`` they are
      instead the pairs that most raise the determinant of the posterior
      precision: each pair's Fisher information (both orders,
      ``2 s(mu_d) (1 - s(mu_d))`` at the posterior mean) times the variance of
      its difference, greedily with the covariance updated after each pick
      (:func:`~pairank.operators.product_of_experts.d_optimal_picks`; D-optimal
      design, as the PoE selection is for Gaussian experts).

    A round is planned once the previous one is fully answered. Stopping rule,
    checked then: the machine is done when (a) ``budget`` unordered pairs have
    been asked (default ``N ceil(log2 N)``, the PAIRS-greedy worst case), (b)
    every pair is known, (c) the ranking by posterior mean has not changed in
    the last ``patience`` rounds (round 0 only sets the first ranking to compare
    with), or (d) every pair left is certain beyond ``confidence``.
    :attr:`stop_reason` names which: "budget", "all_pairs", "stable" or
    "confident". :meth:`ranking` is by posterior mean, best first, ties by id.

    Ties: an ordered judgment with p = 0.5 is half a win to each side. It pulls
    two strengths together and narrows their difference's posterior, but never
    orders them. A judge that ties everything leaves every posterior mean at 0
    and every ``P(i above j)`` at 0.5 (never confident), so the ranking (by id)
    does not change and the machine stops as "stable" after round 0 and
    ``patience`` more rounds.

    Cost: a Newton fit of N strengths per round (an N x N solve per step), about
    a millisecond for 16 candidates; hundreds of candidates per context are
    fine, thousands call for pairs_anchors.

    >>> m = AdaptiveSymmetric("ctx", list("abcdef"), seed=0)
    >>> while not m.done:
    ...     m.observe({(a, b): float(a < b) for a, b in m.next_requests()})
    >>> m.ranking(), m.asked // 2 <= m.budget, m.stop_reason in ("budget", "stable", "confident")
    (['a', 'b', 'c', 'd', 'e', 'f'], True, True)
    """

    def __init__(
        self,
        context_id: str,
        ids: Sequence[str],
        seed: int,
        *,
        symmetric: bool = True,
        pairs_per_round: int | None = None,
        budget: int | None = None,
        patience: int = 2,
        confidence: float = 0.95,
        alpha: float = 0.1,
        selection: str = "uncertainty",
    ) -> None:
        if symmetric is not True:
            raise ValueError(
                f"symmetric: adaptive_symmetric always asks both orders; expected True, found {symmetric!r}"
            )
        ids = distinct_ids(context_id, ids)
        n = len(ids)
        self.context_id = context_id
        self.symmetric = True
        if pairs_per_round is None:
            pairs_per_round = max(1, math.ceil(n / 2))
        self.pairs_per_round = check_int(pairs_per_round, "pairs_per_round", 1)
        if budget is None:
            budget = n * math.ceil(math.log2(n)) if n > 1 else 0
        else:
            check_int(budget, "budget (unordered comparisons per context)", 1)
        #: Unordered pairs it may ask per context.
        self.budget = budget
        self.patience = check_int(patience, "patience (rounds with an unchanged ranking)", 1)
        self.confidence = check_real(confidence, "confidence", lambda v: 0.5 < v <= 1.0, "a number in (0.5, 1]")
        self.alpha = check_real(alpha, "alpha (prior precision)", lambda v: 0.0 < v < math.inf, "a number > 0")
        if selection not in SELECTIONS:
            raise ValueError(f"selection: expected one of {', '.join(SELECTIONS)}, found {selection!r}")
        self.selection = selection
        gen = rng(seed, context_id)
        #: The candidates in seeded order (round 0's cycle, tie-breaks).
        self.order: list[str] = seeded_shuffle(ids, gen)
        self._ids = frozenset(ids)
        self._index = {c: k for k, c in enumerate(sorted(ids))}
        self._pos = {c: k for k, c in enumerate(self.order)}
        self._open_ledger()
        self._used = 0  # unordered pairs asked
        self._round: list[Pair] | None = None  # the open round's unordered pairs
        #: Rounds fully answered so far.
        self.rounds = 0
        self._stable = 0
        self._last: list[str] | None = None
        self._fit: tuple[int, np.ndarray, np.ndarray] | None = None
        self._ranking: list[str] | None = None
        #: Why it stopped: "budget", "all_pairs", "stable" or "confident"; None while running.
        self.stop_reason: str | None = None
        if n < 2:
            self._ranking, self.stop_reason = list(self.order), "all_pairs"
        self._advance()

    # -- the posterior

    def _posterior(self) -> tuple[np.ndarray, np.ndarray]:
        """Mean and covariance of the strengths given every judgment known (cached until one arrives)."""
        if self._fit is None or self._fit[0] != len(self._p):
            ix = self._index
            known = sorted(self._p.items())
            winners = np.array([ix[a] for (a, _), _ in known], dtype=np.intp)
            losers = np.array([ix[b] for (_, b), _ in known], dtype=np.intp)
            mean, cov = bt_laplace(len(ix), winners, losers, np.array([p for _, p in known]), self.alpha)
            self._fit = (len(self._p), mean, cov)
        return self._fit[1], self._fit[2]

    def _posterior_ranking(self) -> list[str]:
        mean, _ = self._posterior()
        return sorted(self._index, key=lambda c: (-mean[self._index[c]], c))

    # -- rounds

    def _open_matrix(self) -> np.ndarray:
        """``open[k, l]`` (k < l, seeded positions): the pair has an order neither asked nor known."""
        n = len(self.order)
        closed = np.zeros((n, n), dtype=bool)
        pos = self._pos
        for a, b in self._asked.union(self._p):
            closed[pos[a], pos[b]] = True
        return np.triu(~(closed & closed.T), 1)

    def _open_pairs(self) -> list[Pair]:
        """Unordered pairs with an order neither asked nor known, in seeded order."""
        order = self.order
        return [(order[i], order[j]) for i, j in zip(*np.nonzero(self._open_matrix()))]

    def _cycle(self) -> list[Pair]:
        order = self.order
        cycle = [(order[k], order[(k + 1) % len(order)]) for k in range(len(order) if len(order) > 2 else 1)]
        still_open = set(self._open_pairs())
        return [pair for pair in cycle if pair in still_open or pair[::-1] in still_open]

    def _choose(self, room: int) -> list[Pair]:
        """Up to ``room`` disjoint open pairs by the selection rule, none certain beyond ``confidence``."""
        mean, cov = self._posterior()
        perm = np.array([self._index[c] for c in self.order])  # seeded position -> posterior index
        mean, cov = mean[perm], cov[np.ix_(perm, perm)]
        diff = mean[:, None] - mean[None, :]
        q = ndtr(diff / np.sqrt(np.maximum(difference_variance(cov), 1e-12)))
        allowed = self._open_matrix() & (np.maximum(q, 1.0 - q) < self.confidence)
        if self.selection == "d_optimal":
            s = expit(diff)
            picks = d_optimal_picks(cov, 2.0 * s * (1.0 - s), allowed, room, disjoint=True)
        else:
            first, second = np.nonzero(allowed)
            by = np.lexsort((second, first, np.abs(q[first, second] - 0.5)))  # least certain, then seeded order
            picks = []
            busy: set[int] = set()
            for i, j in zip(first[by].tolist(), second[by].tolist()):
                if len(picks) == room:
                    break
                if i not in busy and j not in busy:
                    picks.append((i, j))
                    busy.update((i, j))
        return [(self.order[i], self.order[j]) for i, j in picks]

    def _open_round(self) -> None:
        room = min(self.pairs_per_round, self.budget - self._used)
        if self.rounds == 0:
            pairs = self._cycle()[: self.budget]
        else:
            pairs = self._choose(room) if room > 0 else []
            if not pairs:
                reason = "all_pairs" if not self._open_pairs() else "budget" if room <= 0 else "confident"
                self._ranking, self.stop_reason = self._posterior_ranking(), reason
                return
        self._used += len(pairs)
        self._round = pairs

    def _close_round(self) -> None:
        self._round = None
        self.rounds += 1
        ranking = self._posterior_ranking()
        if self.rounds > 1:
            self._stable = self._stable + 1 if ranking == self._last else 0
        self._last = ranking
        if self._stable >= self.patience:
            self._ranking, self.stop_reason = ranking, "stable"

    def _advance(self) -> None:
        """Close the open round once it is answered, plan the next one, until waiting or done."""
        while self._ranking is None:
            if self._round is None:
                self._open_round()
            elif all(pair in self._p for pair in _both_orders(self._round)):
                self._close_round()
            else:
                return

    # -- the protocol

    @property
    def done(self) -> bool:
        return self._ranking is not None

    def next_requests(self) -> list[Pair]:
        return [] if self._round is None else self._ask(self._round)  # symmetric: both orders of each pair

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        self._record(p_a)
        self._advance()

    def ranking(self) -> list[str]:
        if self._ranking is None:
            raise RuntimeError(
                f"context {self.context_id!r} is not done: round {self.rounds} open, {len(self.pending)} pairs pending"
            )
        return list(self._ranking)


#: A machine class: ``cls(context_id, ids, seed, **options)``.
