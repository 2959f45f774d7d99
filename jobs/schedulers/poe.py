"""Product-of-Experts scheduling: the comparisons that most sharpen the PoE solution, then its scores.

Liusie, Raina, Fathullah and Gales, "Efficient LLM Comparative Assessment: a
Product of Experts Framework for Pairwise Comparisons" (EMNLP 2024, arXiv
2405.05894). The maths is :mod:`pairank.operators.product_of_experts`; this module
is the machine a driver advances, one per context, and its settings.

Every context of N candidates asks the same comparisons in terms of its seeded
order (the greedy D-optimal sequence does not read verdicts), so the selection is
computed once per N. The scores are solved for many contexts at once: machines
of the same N and settings share a :class:`_Batch` that stacks their judgments,
and the first machine that needs a solve in a round solves every machine that is
waiting for one (one batched least-squares or Newton solve for 10^4 contexts).
A machine's result never depends on which others share its batch.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field, model_validator
from scipy.special import logit, ndtr

from pairank.jobs.schedulers.pairs import SYMMETRIC
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
from pairank.operators.product_of_experts import (
    bt_scores,
    d_optimal_sequence,
    difference_variance,
    gaussian_posterior,
    gaussian_scores,
)

EXPERTS = ("gaussian", "bt")
OUTCOMES = ("soft", "hard")
COMPAT = ("poe-code",)
#: Prior precision of the Bradley-Terry expert's scores unless set (0 under compat: poe-code).
BT_ALPHA = 0.01
#: The debiased experts' mean p is clipped to this range before its logit is taken.
_MEAN_CLIP = (0.01, 0.99)


class PoeSettings(AdaptiveSettings):
    name: Literal["poe"] = Field(
        "poe",
        description="Product of Experts (Liusie et al. 2024): the greedy D-optimal comparisons, scored by a "
        "least-squares (Gaussian experts) or Bradley-Terry fit.",
    )
    symmetric: bool = SYMMETRIC
    expert: Literal["gaussian", "bt"] = Field(
        "gaussian",
        description="gaussian: each judgment says s_a - s_b ~ N(p - beta, sigma^2), solved in closed form (least "
        "squares); bt: a soft Bradley-Terry expert sigma(s_a - s_b)^p (1 - sigma(s_a - s_b))^(1 - p), by Newton.",
    )
    debias: bool = Field(
        True,
        description="One order per pair: beta = the mean p of the context's judgments instead of 0.5 (Gaussian), "
        "or a slot-A term logit(mean p) (bt): the paper's debiased experts, which cancel a constant position "
        "bias. No effect with symmetric (both orders cancel it).",
    )
    outcome: Literal["soft", "hard"] = Field(
        "soft",
        description="soft: each p as the judge gives it (logprob probabilities; hard and five-level verdicts "
        "arrive as 0/0.5/1 and 0/0.25/0.5/0.75/1); hard: p replaced by its side of 0.5 (1, 0, or 0.5 on a tie).",
    )
    comparisons: int | None = Field(
        None,
        ge=1,
        description="Budget per context in judgments (ordered pairs; a symmetric comparison is 2), at most "
        "N(N-1). Unset (and no share): N ceil(log2 N) comparisons, PAIRS-greedy's worst case.",
    )
    share: float | None = Field(
        None,
        gt=0,
        le=1,
        description="Budget per context as a share of the full matrix N(N-1) (the paper's axis); not with comparisons.",
    )
    pairs_per_round: int | None = Field(
        None,
        ge=1,
        description="Comparisons per context per round after the first (the first is the chain of N-1). "
        "Unset: ceil(N/2) with a stopping rule, else all of the budget in the second round (the selection does "
        "not read verdicts).",
    )
    patience: int | None = Field(
        None, ge=1, description="Stop when the ranking is unchanged for this many rounds (unset: no such rule)."
    )
    confidence: float | None = Field(
        None,
        gt=0.5,
        lt=1,
        description="Stop when every pair's order is at least this certain under the PoE posterior (Gaussian: "
        "sigma^2 from the residuals; bt: Laplace) (unset: no such rule).",
    )
    alpha: float | None = Field(
        None,
        ge=0,
        description="bt: prior precision of the scores (unset: 0.01, which keeps scores finite when one "
        "candidate wins every comparison; 0 under compat: poe-code).",
    )
    compat: Literal["poe-code"] | None = Field(
        None,
        description="Unset: pairank's PoE. 'poe-code': as the authors' code (adianliusie/PoE-LLM-comparative) "
        "where it differs: the bt expert has no prior (alpha 0), and with one order per pair the candidate "
        "earlier in the seeded order takes slot A (pairank: a seeded coin per pair, as the paper's analysis does).",
    )

    @model_validator(mode="after")
    def _budgets(self) -> PoeSettings:
        if self.comparisons is not None and self.share is not None:
            raise ValueError("scheduler poe: set comparisons or share, not both")
        if self.compat == "poe-code" and self.alpha not in (None, 0):
            raise ValueError(f"compat: poe-code fits the bt expert without a prior; alpha: {self.alpha} contradicts it")
        return self

    def machine(self, context_id: str, ids: list[str], seed: int) -> Poe:
        fields: tuple[str, ...] = ("symmetric", "expert", "debias", "outcome", "comparisons", "share")
        fields += ("pairs_per_round", "patience", "confidence", "alpha", "compat")
        return Poe(context_id, ids, seed, **{k: getattr(self, k) for k in fields})


# ---------------------------------------------------------------------------
# the shared batch


class _Batch:
    """The judgments of machines of one shape, stacked, and the machines waiting for a solve."""

    def __init__(self, n: int, expert: str, alpha: float, covariance: bool) -> None:
        self.n, self.expert, self.alpha, self.covariance = n, expert, alpha, covariance
        self.counts = np.zeros((0, n, n))
        self.sums = np.zeros((0, n, n))
        self.squares = np.zeros(0)
        self.size = 0
        self.waiting: weakref.WeakValueDictionary[int, Poe] = weakref.WeakValueDictionary()

    def add(self) -> int:
        """A fresh row for a new machine."""
        if self.size == len(self.squares):
            grow = max(4, 2 * self.size)
            self.counts = np.concatenate([self.counts, np.zeros((grow, self.n, self.n))])
            self.sums = np.concatenate([self.sums, np.zeros((grow, self.n, self.n))])
            self.squares = np.concatenate([self.squares, np.zeros(grow)])
        self.size += 1
        return self.size - 1

    def flush(self) -> None:
        """Solve every waiting machine at once and hand each its scores (and covariance)."""
        while self.waiting:
            machines = dict(self.waiting)
            self.waiting = weakref.WeakValueDictionary()
            rows = np.array(sorted(machines))
            scores, cov = self.solve(rows, np.array([machines[r]._debiased for r in rows]))
            for k, row in enumerate(rows):
                machines[row]._solved(scores[k], None if cov is None else cov[k])

    def solve(self, rows: np.ndarray, debiased: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        counts, sums = self.counts[rows], self.sums[rows]
        total = counts.sum(axis=(1, 2))
        mean = np.divide(sums.sum(axis=(1, 2)), total, out=np.full(len(rows), 0.5), where=total > 0)
        if self.expert == "gaussian":
            beta = np.where(debiased, mean, 0.5)
            if self.covariance:
                return gaussian_posterior(counts, sums, beta, self.squares[rows])
            return gaussian_scores(counts, sums, beta), None
        gamma = np.where(debiased, logit(np.clip(mean, *_MEAN_CLIP)), 0.0)
        return bt_scores(counts, sums, gamma, self.alpha, covariance=self.covariance)


#: Batches by shape; a batch lives while a machine holds it.
_BATCHES: weakref.WeakValueDictionary[tuple, _Batch] = weakref.WeakValueDictionary()


def _batch(n: int, expert: str, alpha: float, covariance: bool) -> _Batch:
    key = (n, expert, alpha, covariance)
    batch = _BATCHES.get(key)
    if batch is None:
        batch = _BATCHES[key] = _Batch(*key)
    return batch


# ---------------------------------------------------------------------------
# the machine


def _hard(p: float) -> float:
    return 1.0 if p > 0.5 else 0.0 if p < 0.5 else 0.5


class Poe(Ledger):
    """One context's PoE machine: ask the greedy D-optimal comparisons in rounds, rank by the PoE scores.

    Positions are the candidates' seeded order (:func:`~pairank.jobs.schedulers.protocol.rng`
    of the seed and context). The comparisons are
    :func:`~pairank.operators.product_of_experts.d_optimal_sequence` of N over
    those positions, as many as the budget allows: round 0 asks the chain
    (position k against k + 1), each later round the next ``pairs_per_round``.
    With ``symmetric`` each comparison is both orders and one expert with
    ``(p(a, b) + 1 - p(b, a)) / 2``; otherwise one order per comparison (a
    seeded coin per pair picks the slots; a pair picked again asks its other
    order), each judgment one expert.

    A round is planned once the previous one is fully answered. The machine is
    done when the budget's comparisons are answered ("budget"), when every pair
    (every order, without symmetric) is used ("all_pairs"), or, checked after
    each round with the stopping rules set, when the ranking has not changed for
    ``patience`` rounds ("stable") or every pair's order is certain beyond
    ``confidence`` ("confident"). :meth:`ranking` is by PoE score, best first,
    ties by the seeded order. A judgment known before it is asked (the cache, a
    resumed run) is used when its comparison comes up and never asked; others
    are kept but do not enter the scores, so the comparisons used are the paper's.

    A judge whose p is linear in the quality difference is what Gaussian experts
    assume; 8 of the 15 pairs (both orders) recover the order::

    >>> m = Poe("ctx", list("abcdef"), seed=0, comparisons=16)
    >>> while not m.done:
    ...     m.observe({(a, b): 0.5 + (ord(b) - ord(a)) / 12 for a, b in m.next_requests()})
    >>> m.ranking(), m.asked, m.rounds, m.stop_reason
    (['a', 'b', 'c', 'd', 'e', 'f'], 16, 2, 'budget')
    """

    def __init__(
        self,
        context_id: str,
        ids: Sequence[str],
        seed: int,
        *,
        symmetric: bool = True,
        expert: str = "gaussian",
        debias: bool = True,
        outcome: str = "soft",
        comparisons: int | None = None,
        share: float | None = None,
        pairs_per_round: int | None = None,
        patience: int | None = None,
        confidence: float | None = None,
        alpha: float | None = None,
        compat: str | None = None,
    ) -> None:
        ids = distinct_ids(context_id, ids)
        n = len(ids)
        self.context_id = context_id
        if not isinstance(symmetric, bool):
            raise ValueError(f"symmetric: expected true or false, found {symmetric!r}")
        for value, what, allowed in ((expert, "expert", EXPERTS), (outcome, "outcome", OUTCOMES)):
            if value not in allowed:
                raise ValueError(f"{what}: expected one of {', '.join(allowed)}, found {value!r}")
        if compat is not None and compat not in COMPAT:
            raise ValueError(f"compat: expected one of {', '.join(COMPAT)} or unset, found {compat!r}")
        if comparisons is not None and share is not None:
            raise ValueError("set comparisons or share, not both")
        self.symmetric, self.expert, self.outcome, self.compat = symmetric, expert, outcome, compat
        self._debiased = bool(debias) and not symmetric
        if alpha is None:
            alpha = 0.0 if compat == "poe-code" else BT_ALPHA
        self.alpha = check_real(alpha, "alpha (prior precision)", lambda v: 0.0 <= v < math.inf, "a number >= 0")
        self.patience = None if patience is None else check_int(patience, "patience", 1)
        self.confidence = (
            None
            if confidence is None
            else check_real(confidence, "confidence", lambda v: 0.5 < v < 1.0, "a number in (0.5, 1)")
        )
        per = 2 if symmetric else 1
        full = n * (n - 1)
        if comparisons is not None:
            judgments = check_int(comparisons, "comparisons (judgments per context)", 1)
        elif share is not None:
            judgments = round(check_real(share, "share", lambda v: 0.0 < v <= 1.0, "a number in (0, 1]") * full)
        else:
            judgments = per * n * math.ceil(math.log2(n)) if n > 1 else 0
        max_picks = 1 if symmetric else 2
        picks = min(min(judgments, full) // per, max_picks * full // 2)
        #: Judgments (ordered pairs) it may use.
        self.budget = picks * per
        self._adaptive = self.patience is not None or self.confidence is not None
        if pairs_per_round is not None:
            check_int(pairs_per_round, "pairs_per_round", 1)
        self.pairs_per_round = pairs_per_round or (max(1, math.ceil(n / 2)) if self._adaptive else max(1, picks))
        gen = rng(seed, context_id)
        #: The candidates in seeded order (positions of the selection).
        self.order: list[str] = seeded_shuffle(ids, gen)
        self._ids = frozenset(ids)
        self._pos = {c: k for k, c in enumerate(self.order)}
        self._plan = self._orient(d_optimal_sequence(n, picks, max_picks), gen)
        self._all_pairs = picks == max_picks * full // 2
        self._open_ledger()
        self._batch = _batch(n, expert, self.alpha, self.confidence is not None)
        self._row = self._batch.add()
        self._next = 0  # the next pick to ask
        self._round: tuple[int, int] | None = None
        #: Rounds fully answered so far.
        self.rounds = 0
        self._state = "running"  # running | waiting (for a solve) | final (done, ranking unsolved) | done
        self._stable = 0
        self._last: list[str] | None = None
        self._ranking: list[str] | None = None
        #: Why it stopped: "budget", "all_pairs", "stable" or "confident"; None while running.
        self.stop_reason: str | None = None
        if n < 2:
            self._ranking, self._state, self.stop_reason = list(self.order), "done", "all_pairs"
        self._advance()

    def _orient(self, picks: list[tuple[int, int]], gen: np.random.Generator) -> list[Pair]:
        """Position pairs as id pairs in their slots: a coin per pair (compat: the earlier first), then reversed."""
        coins = gen.integers(0, 2, size=len(picks))
        first: dict[tuple[int, int], Pair] = {}
        out: list[Pair] = []
        for (i, j), coin in zip(picks, coins):
            a, b = self.order[i], self.order[j]
            if (i, j) in first:
                out.append(first[(i, j)][::-1])
                continue
            pair = (a, b) if self.compat == "poe-code" or coin == 0 else (b, a)
            first[(i, j)] = pair
            out.append(pair)
        return out

    # -- rounds

    def _value(self, a: str, b: str) -> float | None:
        p = self._lookup(a, b)
        if p is None:
            return None
        return _hard(p) if self.outcome == "hard" else p

    def _round_answered(self) -> bool:
        assert self._round is not None  # a round is open
        start, end = self._round
        return all(self._value(a, b) is not None for a, b in self._plan[start:end])

    def _close_round(self) -> None:
        assert self._round is not None  # a round is open, and answered
        start, end = self._round
        batch, row, pos = self._batch, self._row, self._pos
        for a, b in self._plan[start:end]:
            v = self._value(a, b)
            assert v is not None
            i, j = pos[a], pos[b]
            batch.counts[row, i, j] += 1.0
            batch.sums[row, i, j] += v
            batch.squares[row] += v * v
        self._round = None
        self.rounds += 1
        if self._adaptive:
            self._wait("waiting")
        elif self._next >= len(self._plan):
            self._wait("final")

    def _wait(self, state: str) -> None:
        self._state = state
        if state == "final":
            self.stop_reason = "all_pairs" if self._all_pairs else "budget"
        self._batch.waiting[self._row] = self

    def _advance(self) -> None:
        """Close the open round once it is answered and plan the next, until waiting or done."""
        while self._state == "running":
            if self._round is None:
                if self._next >= len(self._plan):  # nothing asked at all (a budget of 0)
                    self._wait("final")
                    return
                size = min(len(self.order) - 1, len(self._plan)) if self.rounds == 0 else self.pairs_per_round
                self._round = (self._next, min(self._next + size, len(self._plan)))
                self._next = self._round[1]
            if not self._round_answered():
                return
            self._close_round()

    def _settle(self) -> None:
        while self._state == "waiting":
            self._batch.flush()

    def _solved(self, scores: np.ndarray, cov: np.ndarray | None) -> None:
        """The batch's solve of this machine's judgments so far."""
        ranked = sorted(range(len(self.order)), key=lambda k: (-round(float(scores[k]), 9), k))
        ranking = [self.order[k] for k in ranked]
        if self._state == "final":
            assert self.stop_reason is not None  # set when the machine went final
            self._finish(ranking, self.stop_reason)
            return
        if self.rounds > 1 and ranking == self._last:
            self._stable += 1
        elif self.rounds > 1:
            self._stable = 0
        self._last = ranking
        if self.patience is not None and self._stable >= self.patience:
            self._finish(ranking, "stable")
        elif self.confidence is not None and self._confident(scores, cov):
            self._finish(ranking, "confident")
        elif self._next >= len(self._plan):
            self._finish(ranking, "all_pairs" if self._all_pairs else "budget")
        else:
            self._state = "running"
            self._advance()

    def _confident(self, scores: np.ndarray, cov: np.ndarray | None) -> bool:
        if cov is None or not np.isfinite(cov).all():  # no covariance, or no residual degrees of freedom yet
            return False
        var = difference_variance(cov)
        diff = np.abs(scores[:, None] - scores[None, :])
        with np.errstate(divide="ignore", invalid="ignore"):
            z = np.where(np.isfinite(var) & (var > 0), diff / np.sqrt(np.maximum(var, 1e-300)), 0.0)
        off = ~np.eye(len(scores), dtype=bool)
        return bool(np.all(ndtr(z[off]) >= self.confidence))

    def _finish(self, ranking: list[str], reason: str) -> None:
        self._ranking, self.stop_reason, self._state = ranking, reason, "done"

    # -- the protocol

    @property
    def done(self) -> bool:
        self._settle()
        return self._state in ("final", "done")

    def next_requests(self) -> list[Pair]:
        self._settle()
        if self._round is None:
            return []
        start, end = self._round
        return self._ask(self._plan[start:end])  # symmetric: both orders of each pair

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        self._record(p_a)
        if self._state == "running":
            self._advance()

    def ranking(self) -> list[str]:
        self._settle()
        if self._state == "final":
            self._batch.flush()
        if self._ranking is None:
            raise RuntimeError(
                f"context {self.context_id!r} is not done: round {self.rounds} open, {len(self.pending)} pairs pending"
            )
        return list(self._ranking)
