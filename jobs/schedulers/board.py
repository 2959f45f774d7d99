"""Board: system-level active judging, to a stated confidence in the board's order or its top k.

The other adaptive schedulers rank the candidates *within* one context. ``board``
ranks the SYSTEMS of a run across all its contexts: its unit is a comparison
(context, system A, system B), and one :class:`Board` per (aspect, seed) chooses
them for every context at once. The driver still sees one machine per context
(:class:`BoardContext`, the board's view of that context), so a board runs in the
same lockstep rounds on the same warm pool as the other adaptive schedulers.

The model: a Bradley-Terry strength per system, the same in every context
(pooled), fitted to the soft outcomes of the comparisons made so far (with a
weak prior N(0, I / :data:`PRIOR_PRECISION`)); its posterior is approximated by a
Gaussian at the mode (Laplace). ``P(i above j) = Phi(mu_d / sigma_d)``.

Each round (planned once the previous one is fully answered):

1. fit the posterior and order the systems by posterior mean;
2. the *targeted* pairs: every adjacent pair of that order (``target="order"``),
   or, with ``target="topk"``, each top-k system against every system below the
   top k plus the adjacent pairs within the top k (the top k's set and order);
3. stop as "confident" when every targeted pair's order is at least
   ``confidence`` likely, as "budget" when ``budget`` comparisons (ordered
   judgments, cached or judged) leave no room for one more, as "all_pairs" when
   every (context, system pair) is known;
4. otherwise choose ``pairs_per_round`` comparisons greedily: the system pair
   whose comparison most lowers the targeted pairs' posterior variance (summed
   relative reductions over the pairs not yet confident; the Fisher information of
   a comparison is s(1 - s) at the posterior mean, and the covariance is updated
   by Sherman-Morrison before the next pick), each on the next context (in a
   seeded order per system pair) that holds both systems and has not had that pair.
   Round 0 asks ``warmup`` seeded cycles through the systems instead (each gives
   every system two comparisons), so no system is placed by one or two unlucky
   verdicts before the posterior first chooses.

A comparison is asked in both orders (``symmetric``, the default; its outcome is
``(p(a, b) + 1 - p(b, a)) / 2``) or in one order whose slot a seeded coin per
(context, pair) draws. The same seed and the same judgments give the same requests,
so a re-run replays the finished rounds from the judgment cache and asks nothing twice.

>>> contexts = {f"q{c}": [f"q{c}-{s}" for s in "abcd"] for c in range(30)}
>>> system = {cid: cid[-1] for ids in contexts.values() for cid in ids}
>>> views = BoardSettings(name="board", confidence=0.9).machines(contexts, system, seed=0)
>>> while not views[0].done:   # a judge that always prefers the earlier system letter, surely
...     for v in views:
...         v.observe({(a, b): float(a[-1] < b[-1]) for a, b in v.next_requests()})
>>> board = views[0].board
>>> board.order(), board.stopped, views[1].ranking()
(['a', 'b', 'c', 'd'], 'confident', ['q1-a', 'q1-b', 'q1-c', 'q1-d'])
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import Field, model_validator
from scipy.special import expit, ndtr

from pairank.jobs.schedulers.protocol import AdaptiveSettings, Pair, rng, symmetric_p

#: The prior precision of each system's strength (a weak prior: it only keeps an unbeaten system finite).
PRIOR_PRECISION = 0.01
#: Newton steps of a fit at most (it converges in a handful).
FIT_STEPS = 100

STOP_RULES = ("confident", "budget", "all_pairs")


class BoardSettings(AdaptiveSettings):
    name: Literal["board"] = Field(
        "board",
        description="System-level active judging: choose (context, system pair) comparisons that settle the board's "
        "order (or its top k) across all contexts, and stop at the asked confidence.",
    )
    target: Literal["order", "topk"] = Field(
        "order",
        description="order: every adjacent pair of the board's order; topk: the top k's set and order (each top-k "
        "system against every other, adjacent pairs within the top k).",
    )
    k: int | None = Field(None, ge=1, description="How many systems the top k holds (target topk only; default 3).")
    confidence: float = Field(
        0.95,
        gt=0.5,
        lt=1,
        description="Stop when every targeted pair's order is at least this likely under the posterior.",
    )
    margin: float = Field(
        0.05,
        ge=0,
        description="Indifference margin in Bradley-Terry strength (logit; 0.05 is a 51.25% win chance, 8.7 Elo): a "
        "targeted pair whose strengths differ by less than this with the asked confidence counts as settled (tied); "
        "0: every targeted pair must be ordered.",
    )
    pairs_per_round: int | None = Field(
        None, ge=1, description="(context, system pair) comparisons chosen per round (unset: the number of systems)."
    )
    warmup: int = Field(
        5,
        ge=1,
        description="Seeded cycles through the systems in round 0, before the posterior chooses: each gives every "
        "system two comparisons, so no system is judged on one or two unlucky verdicts.",
    )
    symmetric: bool = Field(
        True,
        description="Judge each comparison in both orders (a constant position bias cancels); false: one order, "
        "its slot drawn by a seeded coin per (context, pair).",
    )

    @model_validator(mode="after")
    def _k_with_topk(self) -> BoardSettings:
        if self.k is not None and self.target != "topk":
            raise ValueError("k applies to target: topk only (target is order)")
        return self

    def machine(self, context_id: str, ids: list[str], seed: int) -> BoardContext:
        raise ValueError(
            "the board scheduler ranks systems across contexts: its machines are built for all contexts at once, "
            "with machines(contexts, system, seed)"
        )

    def machines(
        self, contexts: Mapping[str, Sequence[str]], system: Mapping[str, str], seed: int
    ) -> list[BoardContext]:
        board = Board(
            contexts,
            system,
            seed,
            target=self.target,
            k=3 if self.k is None else self.k,
            confidence=self.confidence,
            margin=self.margin,
            budget=self.budget,
            pairs_per_round=self.pairs_per_round,
            symmetric=self.symmetric,
            warmup=self.warmup,
        )
        return [BoardContext(board, ctx) for ctx in contexts]


def fit(n: np.ndarray, wins: np.ndarray, prior: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Pooled Bradley-Terry strengths with soft outcomes: the MAP and its Laplace covariance.

    ``n[i, j]`` (symmetric): comparisons of systems i and j; ``wins[i, j]``: the
    sum of their outcomes for i (so ``wins + wins.T == n``). These are the
    sufficient statistics of the soft-outcome likelihood, so a fit costs the same
    whatever the number of comparisons.

    >>> mean, cov = fit(np.array([[0.0, 10.0], [10.0, 0.0]]), np.array([[0.0, 8.0], [2.0, 0.0]]))
    >>> round(float(mean[0] - mean[1]), 2), bool(cov[0, 0] > 0)   # ln(8 / 2) = 1.39, shrunk a little
    (1.38, True)
    """
    prior = PRIOR_PRECISION if prior is None else prior
    size = n.shape[0]
    theta = np.zeros(size)
    for _ in range(FIT_STEPS):
        s = expit(theta[:, None] - theta[None, :])
        grad = (wins - n * s).sum(axis=1) - prior * theta
        hess = _precision(n, s, prior)
        step = np.clip(np.linalg.solve(hess, grad), -5.0, 5.0)
        theta += step
        if np.max(np.abs(step)) < 1e-9:
            break
    s = expit(theta[:, None] - theta[None, :])
    return theta, np.linalg.inv(_precision(n, s, prior))


def _precision(n: np.ndarray, s: np.ndarray, prior: float) -> np.ndarray:
    info = n * s * (1.0 - s)
    return np.diag(info.sum(axis=1) + prior) - info


def _seed_of(seed: int, *parts: str) -> int:
    digest = hashlib.sha256("\x00".join([str(seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:8], "little")


class Board:
    """The shared state of one board: the systems' comparisons over every context, the rounds, the stop rule."""

    def __init__(
        self,
        contexts: Mapping[str, Sequence[str]],
        system: Mapping[str, str],
        seed: int,
        *,
        target: str = "order",
        k: int = 3,
        confidence: float = 0.95,
        margin: float = 0.0,
        budget: int | None = None,
        pairs_per_round: int | None = None,
        symmetric: bool = True,
        warmup: int = 5,
    ) -> None:
        self.seed, self.target, self.k, self.confidence, self.margin = seed, target, k, confidence, margin
        self.budget, self.symmetric, self.warmup = budget, symmetric, warmup
        #: per context: system -> its candidate
        self.candidates: dict[str, dict[str, str]] = {}
        for ctx, ids in contexts.items():
            mine: dict[str, str] = {}
            for cid in ids:
                if cid not in system:
                    raise ValueError(f"board: context {ctx!r}: candidate {cid!r} has no system")
                if system[cid] in mine:
                    raise ValueError(
                        f"board: context {ctx!r} has two candidates of system {system[cid]!r} "
                        f"({mine[system[cid]]!r}, {cid!r}); the board compares one output per system and context"
                    )
                mine[system[cid]] = cid
            self.candidates[ctx] = mine
        self.systems = sorted({s for mine in self.candidates.values() for s in mine})
        size = len(self.systems)
        if size < 2:
            raise ValueError(f"board: the run has {size} system(s); a board needs at least 2")
        if target == "topk" and not 1 <= k < size:
            raise ValueError(f"board: target topk with k = {k}: expected 1 <= k < {size} (the number of systems)")
        self.pairs_per_round = size if pairs_per_round is None else pairs_per_round
        index = {s: i for i, s in enumerate(self.systems)}
        #: per system pair (i < j): the contexts holding both, in a seeded order, and how many are used
        self._contexts: dict[tuple[int, int], list[str]] = {}
        holding: dict[tuple[int, int], list[str]] = {}
        for ctx in sorted(self.candidates):
            present = sorted(index[s] for s in self.candidates[ctx])
            for a, i in enumerate(present):
                for j in present[a + 1 :]:
                    holding.setdefault((i, j), []).append(ctx)
        for (i, j), ctxs in holding.items():
            gen = np.random.default_rng(_seed_of(seed, "board", self.systems[i], self.systems[j]))
            self._contexts[(i, j)] = [ctxs[p] for p in gen.permutation(len(ctxs))]
        self._used: dict[tuple[int, int], int] = dict.fromkeys(self._contexts, 0)
        self.n = np.zeros((size, size))
        self.wins = np.zeros((size, size))
        #: every context's answers (ordered candidate pairs), and each context's requests not yet handed out
        self.answers: dict[str, dict[Pair, float]] = {ctx: {} for ctx in self.candidates}
        self._outbox: dict[str, list[Pair]] = {}
        #: per context, the comparisons chosen and not yet complete: (context, system i, system j, slot A, slot B)
        self._waiting: dict[str, list[tuple[str, int, int, str, str]]] = {}
        self.asked = 0  # ordered comparisons requested
        self.rounds = 0
        self.stopped: str | None = None
        self.mean, self.cov = fit(self.n, self.wins)

    # -- the rounds ---------------------------------------------------------------------------------------------

    def advance(self) -> None:
        """Plan the next round when the last one is complete (or stop)."""
        while self.stopped is None and not self._waiting:
            self._plan()

    def take(self, ctx: str) -> list[Pair]:
        """The requests of ``ctx`` this round (each handed out once)."""
        self.advance()
        return self._outbox.pop(ctx, [])

    def observe(self, ctx: str, p_a: Mapping[Pair, float]) -> None:
        """Answers for ``ctx``'s candidates; a comparison is counted once all its orders are known."""
        known = self.answers[ctx]
        for pair, p in p_a.items():
            known.setdefault(pair, p)
        left = [w for w in self._waiting.pop(ctx, []) if not self._complete(*w)]
        if left:
            self._waiting[ctx] = left

    def _complete(self, ctx: str, i: int, j: int, a: str, b: str) -> bool:
        known = self.answers[ctx]
        if self.symmetric:
            if (a, b) not in known or (b, a) not in known:
                return False
            p = symmetric_p(known[(a, b)], known[(b, a)])
        elif (a, b) in known:
            p = known[(a, b)]
        elif (b, a) in known:
            p = 1.0 - known[(b, a)]
        else:
            return False
        p_i = p if self.candidates[ctx][self.systems[i]] == a else 1.0 - p
        self.n[i, j] += 1.0
        self.n[j, i] += 1.0
        self.wins[i, j] += p_i
        self.wins[j, i] += 1.0 - p_i
        return True

    def _plan(self) -> None:
        self.mean, self.cov = fit(self.n, self.wins)
        cost = 2 if self.symmetric else 1
        room = (
            self.pairs_per_round
            if self.budget is None
            else min(self.pairs_per_round, (self.budget - self.asked) // cost)
        )
        if self.rounds > 0 and not self.unsettled():
            self.stopped = "confident"
        elif room < 1:
            self.stopped = "budget"
        elif not any(self._used[pair] < len(ctxs) for pair, ctxs in self._contexts.items()):
            self.stopped = "all_pairs"
        if self.stopped is not None:
            return
        picks = self._warmup() if self.rounds == 0 else self._greedy(room)
        budget_room = len(picks) if self.budget is None else (self.budget - self.asked) // cost
        for i, j in picks[:budget_room]:
            if self._used[(i, j)] == len(self._contexts[(i, j)]):
                continue  # a warmup cycle met a pair with no context left
            ctx = self._contexts[(i, j)][self._used[(i, j)]]
            self._used[(i, j)] += 1
            ci, cj = self.candidates[ctx][self.systems[i]], self.candidates[ctx][self.systems[j]]
            a, b = (ci, cj) if self.symmetric or rng(self.seed, f"{ctx}\x00{ci}\x00{cj}").random() < 0.5 else (cj, ci)
            comparison = (ctx, i, j, a, b)
            if self._complete(*comparison):  # answered before it was asked (a cache): nothing to ask
                continue
            self._waiting.setdefault(ctx, []).append(comparison)
            orders = [(a, b), (b, a)] if self.symmetric else [(a, b)]
            new = [o for o in orders if o not in self.answers[ctx]]
            self._outbox.setdefault(ctx, []).extend(new)
            self.asked += len(new)
        self.rounds += 1

    def _warmup(self) -> list[tuple[int, int]]:
        """``warmup`` seeded cycles through the systems (each gives every system two comparisons; only pairs some
        context holds)."""
        gen = np.random.default_rng(_seed_of(self.seed, "cycle"))
        picks: list[tuple[int, int]] = []
        for _ in range(self.warmup):
            order = [int(i) for i in gen.permutation(len(self.systems))]
            edges = [(min(a, b), max(a, b)) for a, b in zip(order, order[1:] + order[:1])]
            picks.extend(e for e in dict.fromkeys(edges) if e in self._contexts)
        return picks if picks else self._greedy(self.pairs_per_round)

    def _greedy(self, room: int) -> list[tuple[int, int]]:
        """Up to ``room`` system pairs, each the one that most lowers the unsettled targets' variance."""
        size = len(self.systems)
        left = {pair: len(ctxs) - self._used[pair] for pair, ctxs in self._contexts.items()}
        cands = [pair for pair in sorted(left) if left[pair] > 0]
        targets = self.unsettled() or [(i, j) for i, j, _, _ in self.targets()]
        x = np.zeros((len(cands), size))
        rows = np.arange(len(cands))
        x[rows, [i for i, _ in cands]], x[rows, [j for _, j in cands]] = 1.0, -1.0
        y = np.zeros((len(targets), size))
        y[np.arange(len(targets)), [i for i, _ in targets]] = 1.0
        y[np.arange(len(targets)), [j for _, j in targets]] = -1.0
        s = expit(x @ self.mean)
        info = s * (1.0 - s)
        cov = self.cov.copy()
        picks: list[tuple[int, int]] = []
        while len(picks) < room and cands:
            var_t = np.einsum("ts,su,tu->t", y, cov, y)
            cross = y @ cov @ x.T  # targets x candidates
            q = np.einsum("ps,su,pu->p", x, cov, x)
            score = info * ((cross**2) / var_t[:, None]).sum(axis=0) / (1.0 + info * q)
            best = int(np.argmax(score))
            pair = cands[best]
            picks.append(pair)
            v = cov @ x[best]
            cov -= info[best] * np.outer(v, v) / (1.0 + info[best] * q[best])
            left[pair] -= 1
            if left[pair] == 0:
                keep = np.arange(len(cands)) != best
                cands, x, info = [c for c, k in zip(cands, keep) if k], x[keep], info[keep]
        return picks

    # -- what it says -------------------------------------------------------------------------------------------

    def ranked(self) -> list[int]:
        """System indices by posterior mean, best first (ties by name)."""
        return sorted(range(len(self.systems)), key=lambda i: (-self.mean[i], self.systems[i]))

    def order(self) -> list[str]:
        return [self.systems[i] for i in self.ranked()]

    def targets(self) -> list[tuple[int, int, float, float]]:
        """The targeted pairs (above, below) of the current order, with P(above is better) and P(tied within
        ``margin``)."""
        ranked = self.ranked()
        if self.target == "order":
            pairs = list(zip(ranked, ranked[1:]))
        else:
            top = ranked[: self.k]
            pairs = list(zip(top, top[1:])) + [(i, j) for i in top for j in ranked[self.k :]]
        out = []
        for i, j in pairs:
            d = self.mean[i] - self.mean[j]
            sd = np.sqrt(max(self.cov[i, i] + self.cov[j, j] - 2 * self.cov[i, j], 1e-12))
            tied = ndtr((self.margin - d) / sd) - ndtr((-self.margin - d) / sd) if self.margin > 0 else 0.0
            out.append((i, j, float(ndtr(d / sd)), float(tied)))
        return out

    def unsettled(self) -> list[tuple[int, int]]:
        """The targeted pairs neither ordered nor tied (within ``margin``) at the asked confidence."""
        return [(i, j) for i, j, p, tied in self.targets() if max(p, tied) < self.confidence]

    def summary(self) -> dict:
        """The board's result for the report: why it stopped, what it used, the order with each system's strength."""
        self.mean, self.cov = fit(self.n, self.wins)
        targets = self.targets()
        above = {i: p for i, _, p, _ in targets} if self.target == "order" else {}
        return {
            "stopped": self.stopped,
            "target": self.target if self.target == "order" else f"top{self.k}",
            "confidence": self.confidence,
            "margin": self.margin,
            "ordered_pairs": sum(p >= self.confidence for _, _, p, _ in targets),
            "tied_pairs": sum(p < self.confidence <= tied for _, _, p, tied in targets),
            "targeted_pairs": len(targets),
            "comparisons": self.asked,
            "judged_pairs": int(self.n.sum() // 2),
            "rounds": self.rounds,
            "budget": self.budget,
            "order": [
                {
                    "system": self.systems[i],
                    "strength": round(float(self.mean[i]), 4),
                    "sd": round(float(np.sqrt(self.cov[i, i])), 4),
                    "p_above_next": None if i not in above else round(above[i], 4),
                }
                for i in self.ranked()
            ],
        }


class BoardContext:
    """One context's view of a :class:`Board`: the machine the driver advances for that context."""

    def __init__(self, board: Board, context_id: str) -> None:
        self.board, self.context_id = board, context_id
        self._asked: set[Pair] = set()
        self._ids = set(board.candidates[context_id].values())

    @property
    def asked(self) -> int:
        return len(self._asked)

    @property
    def pending(self) -> frozenset[Pair]:
        known = self.board.answers[self.context_id]
        return frozenset(p for p in self._asked if p not in known)

    @property
    def done(self) -> bool:
        self.board.advance()
        return self.board.stopped is not None

    @property
    def stop_reason(self) -> str | None:
        return self.board.stopped

    def next_requests(self) -> list[Pair]:
        new = self.board.take(self.context_id)
        self._asked.update(new)
        return new

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        checked: dict[Pair, float] = {}
        for pair, p in p_a.items():
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] != pair[1] and set(pair) <= self._ids):
                raise ValueError(f"context {self.context_id!r}: {pair!r} is not a pair of two distinct candidates")
            if not 0.0 <= float(p) <= 1.0:
                raise ValueError(f"context {self.context_id!r}: p_a for {pair!r}: expected a probability in [0, 1]")
            checked[pair] = float(p)
        self.board.observe(self.context_id, checked)

    def ranking(self) -> list[str]:
        """This context's candidates in the board's order of their systems."""
        mine = self.board.candidates[self.context_id]
        return [mine[s] for s in self.board.order() if s in mine]


def board_line(summary: dict) -> str:
    """One line of what a board did, for the console and the report.

    >>> summary = {"stopped": "confident", "target": "order", "confidence": 0.95, "targeted_pairs": 3,
    ...            "ordered_pairs": 2, "tied_pairs": 1, "margin": 0.1, "comparisons": 40, "rounds": 5}
    >>> board_line(summary)  # doctest: +ELLIPSIS
    'board (order): stopped by confidence: 2 of 3 targeted pairs ordered and 1 tied within 0.1 at 0.95; 40 ...'
    """
    rule = {"confident": "confidence", "budget": "budget", "all_pairs": "every pair judged"}.get(
        summary["stopped"], str(summary["stopped"])
    )
    return (
        f"board ({summary['target']}): stopped by {rule}: {summary['ordered_pairs']} of {summary['targeted_pairs']} "
        f"targeted pairs ordered and {summary['tied_pairs']} tied within {summary['margin']} at "
        f"{summary['confidence']}; {summary['comparisons']} comparisons in {summary['rounds']} rounds"
    )


def board_summaries(machines: Sequence[object]) -> list[dict]:
    """The summary of every board among ``machines`` (one per aspect and seed), in their order."""
    boards = {id(m.board): m.board for m in machines if isinstance(m, BoardContext)}
    return [b.summary() for b in boards.values()]
