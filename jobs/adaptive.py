"""Adaptive schedulers: PAIRS merge sort as one state machine per context.

A machine holds the candidates of one context and asks for ordered pairs
``(a, b)`` (``a`` in slot A) as its merge sort needs them. A driver advances many
machines in lockstep: it collects :meth:`next_requests` from every unfinished
machine, judges them as one batch and hands each machine its answers with
:meth:`observe`, where ``p_a[(a, b)]`` is the probability that ``a`` is better.

The sort is PAIRS (Liu et al., "Aligning with human judgement: the role of
pairwise preference in LLM evaluators", 2024) run bottom-up over the merge tree
that the recursive algorithm builds (split at ``mid = (lo + hi) // 2``): every
merge starts as soon as both its inputs are sorted, so all merges of a level run
side by side and each round carries the next comparison of every active merge
(and, for the beam, of every path of its beam). A merge only ever depends on its
two inputs and the judgments it reads, so a context's ranking does not depend on
the other contexts, on how rounds are batched, or on which answers arrive late.

Two more machines speak the same protocol: :class:`AnchorInsertion` (scaled
PAIRS: sort a seeded sample of anchors, then place every other candidate by
binary search among them) and :class:`AdaptiveSymmetric` (ask both orders of
the pairs whose order a Bradley-Terry posterior is least sure of).

The candidate order before sorting is a seeded shuffle of the sorted ids (the
generator is :func:`pairank.jobs.schedulers.rng` of the job seed and the context id), so
identical seeds give identical requests and rankings, whatever order the ids
come in::

    >>> m = PairsGreedy("ctx", ["x", "y", "z"], seed=0)
    >>> judge = {"x": 3, "y": 2, "z": 1}                 # latent quality
    >>> while not m.done:
    ...     m.observe({(a, b): float(judge[a] > judge[b]) for a, b in m.next_requests()})
    >>> m.ranking(), m.asked
    (['x', 'y', 'z'], 3)

Protocol details a driver relies on:

* :meth:`next_requests` returns only pairs never requested before (``[]`` while
  the machine waits for answers it already asked for, or when it is done). A
  pair asked but not yet answered stays in :attr:`pending`; the merge that needs
  it waits, other merges go on. It is never asked again: the driver owes an
  answer (a failed judgment must still be answered, e.g. with 0.5, or that
  context stalls).
* :meth:`observe` may carry fewer pairs than were asked (the rest may come in a
  later call), and pairs that were never asked (e.g. from the judgment cache or
  a resumed run): these are kept and reused, so their comparisons are never
  requested. A pair answered twice keeps its first value.
* :attr:`asked` counts distinct ordered pairs requested; with ``symmetric=True``
  each comparison is two ordered pairs, asked in the same round.

Ties. Every machine reads p = 0.5 as no preference: a tie verdict, a judge that
picks the same slot in both orders (``symmetric_p(1, 1) = 0.5``), or a failed
judgment the driver answers with 0.5. Each machine states its rule in its
docstring. None waits for a decided comparison or divides by a count of them,
so with every answer 0.5 each one finishes and returns a permutation: PAIRS
greedy and beam return the seeded start order (:attr:`order`), anchors the
sorted anchors and then the rest in seeded order, and adaptive_symmetric the
ids sorted, stopped as "stable"::

    >>> m = PairsGreedy("ctx", ["x", "y", "z"], seed=0)
    >>> while not m.done:
    ...     m.observe({pair: 0.5 for pair in m.next_requests()})
    >>> m.ranking() == m.order, m.asked
    (True, 2)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from statistics import NormalDist
from typing import Protocol, runtime_checkable

import numpy as np
from scipy.optimize import brentq

from pairank.jobs.schedulers import Pair, rng

LN2 = math.log(2.0)
#: Floor for a probability inside a logarithm (a path score stays finite).
_P_FLOOR = 1e-300


# ---------------------------------------------------------------------------
# maths


def binary_entropy(p: float) -> float:
    """Entropy of a Bernoulli(p) in nats: 0 at p in {0, 1}, ln 2 at p = 0.5.

    >>> binary_entropy(0.5) == math.log(2)
    True
    >>> round(binary_entropy(0.6), 4), binary_entropy(1.0)
    (0.673, 0.0)
    """
    p = _check_p(p, "p")
    return 0.0 - sum(q * math.log(q) for q in (p, 1.0 - p) if q > 0.0)


def u_h_from_prob_gap(g: float) -> float:
    """The entropy threshold U_h that prunes exactly where the public code does.

    The public PAIRS code prunes a branch when the other choice's probability
    exceeds ``0.5 + g``; both branches survive iff ``max(p, 1 - p) <= 0.5 + g``.
    H is symmetric about 0.5 and falls as ``max(p, 1 - p)`` grows, so that is
    ``H(p) >= H(0.5 + g)``, i.e. ``U_h = H(0.5 + g)`` (up to the boundary, where
    this module branches only on ``H(p) > U_h``).

    >>> round(u_h_from_prob_gap(0.1), 3)
    0.673
    >>> round(u_h_from_prob_gap(0.2), 3), u_h_from_prob_gap(0.5)
    (0.611, 0.0)
    """
    if not (isinstance(g, (int, float)) and 0.0 <= g <= 0.5):
        raise ValueError(f"probability gap: expected a number in [0, 0.5], found {g!r}")
    return binary_entropy(0.5 + g)


def prob_gap_from_u_h(u: float) -> float:
    """Inverse of :func:`u_h_from_prob_gap`: the gap g with ``H(0.5 + g) = u``.

    The binary entropy has no closed-form inverse; g is found by Brent's method
    on [0, 0.5], where ``H(0.5 + g)`` falls strictly from ln 2 to 0.

    >>> round(prob_gap_from_u_h(0.6), 4)   # the default U_h branches for p in about (0.29, 0.71)
    0.2124
    >>> round(prob_gap_from_u_h(u_h_from_prob_gap(0.1)), 9)
    0.1
    >>> prob_gap_from_u_h(math.log(2)), prob_gap_from_u_h(0.0)
    (0.0, 0.5)
    """
    if not (isinstance(u, (int, float)) and 0.0 <= u <= LN2 + 1e-15):
        raise ValueError(f"entropy threshold U_h: expected a number in [0, ln 2 = {LN2:.6f}], found {u!r}")
    if u >= LN2:
        return 0.0
    if u == 0.0:
        return 0.5
    return float(brentq(lambda g: binary_entropy(0.5 + g) - u, 0.0, 0.5, xtol=1e-14, rtol=1e-14))


def symmetric_p(p_ab: float, p_ba: float) -> float:
    """P(a better than b) from both orders: ``(p(a, b) + 1 - p(b, a)) / 2``.

    A judge that only prefers slot A (the same p in both orders) gives 0.5.

    >>> symmetric_p(0.8, 0.4)
    0.7
    >>> symmetric_p(0.9, 0.9)
    0.5
    """
    return 0.5 + (_check_p(p_ab, "p_ab") - _check_p(p_ba, "p_ba")) / 2.0


def _check_p(p: float, what: str) -> float:
    try:
        value = float(p)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"{what}: expected a probability in [0, 1], found {p!r}")
    return value


# ---------------------------------------------------------------------------
# checks and seeded order shared by the machines


def _distinct(context_id: str, ids: Iterable[str]) -> list[str]:
    """The ids as a list; a repeated id is an error naming the repeats."""
    ids = list(ids)
    seen: set[str] = set()
    dupes = sorted({x for x in ids if x in seen or seen.add(x)})
    if dupes:
        raise ValueError(f"context {context_id!r}: candidate ids must be distinct; repeated: {dupes}")
    return ids


def _seeded(ids: Iterable[str], gen: np.random.Generator) -> list[str]:
    """A seeded shuffle of the sorted ids: the same for the same ids in any order."""
    ordered = sorted(ids)
    return [ordered[k] for k in gen.permutation(len(ordered))]


def _checked(context_id: str, ids: AbstractSet[str], p_a: Mapping[Pair, float]) -> dict[Pair, float]:
    """Validate all of ``p_a`` before any is stored (a bad entry stores none of the call)."""
    checked: dict[Pair, float] = {}
    for pair, p in p_a.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] != pair[1] and set(pair) <= ids):
            raise ValueError(f"context {context_id!r}: {pair!r} is not a pair of two distinct candidates")
        checked[pair] = _check_p(p, f"context {context_id!r}: p_a for {pair!r}")
    return checked


def _read(known: Mapping[Pair, float], x: str, y: str, symmetric: bool) -> float | None:
    """P(x better than y) from the known judgments, None if missing.

    Plain: the judgment of ``(x, y)``. Symmetric: :func:`symmetric_p` of both
    orders, None until both are known.
    """
    if not symmetric:
        return known.get((x, y))
    p_xy, p_yx = known.get((x, y)), known.get((y, x))
    if p_xy is None or p_yx is None:
        return None
    return symmetric_p(p_xy, p_yx)


class _Ledger:
    """What a machine asked for and was answered: the bookkeeping every machine shares.

    ``_p`` holds each answer given (a pair answered twice keeps its first value)
    and ``_asked`` each pair requested. A machine sets ``context_id``,
    ``symmetric`` and ``_ids`` (its candidates) and calls :meth:`_open_ledger`.
    """

    context_id: str
    symmetric: bool
    _ids: AbstractSet[str]

    def _open_ledger(self) -> None:
        self._p: dict[Pair, float] = {}
        self._asked: set[Pair] = set()

    @property
    def asked(self) -> int:
        return len(self._asked)

    @property
    def pending(self) -> frozenset[Pair]:
        return frozenset(pair for pair in self._asked if pair not in self._p)

    def _ask(self, pairs: Iterable[Pair]) -> list[Pair]:
        """The comparisons ``pairs`` need (both orders when symmetric) that were never asked nor answered; now asked."""
        out: list[Pair] = []
        for x, y in pairs:
            for pair in ((x, y), (y, x)) if self.symmetric else ((x, y),):
                if pair not in self._asked and pair not in self._p:
                    self._asked.add(pair)
                    out.append(pair)
        return out

    def _record(self, p_a: Mapping[Pair, float]) -> dict[Pair, float]:
        """Check all of ``p_a``, then keep each answer not already known; returns the checked answers."""
        checked = _checked(self.context_id, self._ids, p_a)
        for pair, value in checked.items():
            self._p.setdefault(pair, value)
        return checked

    def _lookup(self, x: str, y: str) -> float | None:
        return _read(self._p, x, y, self.symmetric)


def _check_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what}: expected an integer >= {minimum}, found {value!r}")
    return value


def _check_real(value: object, what: str, ok: Callable[[float], bool], expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(float(value)):
        raise ValueError(f"{what}: expected {expected}, found {value!r}")
    return float(value)


# ---------------------------------------------------------------------------
# the protocol


@runtime_checkable
class AdaptiveScheduler(Protocol):
    """One context's adaptive scheduler, advanced by a driver in rounds."""

    context_id: str
    #: Distinct ordered pairs requested so far.
    asked: int

    def next_requests(self) -> list[Pair]:
        """Ordered pairs (a in slot A, b in slot B) wanted now; [] when waiting or done."""
        ...

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        """Judgments for (some of) the asked pairs; ``p_a[(a, b)]`` = P(a better than b)."""
        ...

    @property
    def pending(self) -> frozenset[Pair]:
        """Pairs requested and not yet answered."""
        ...

    @property
    def done(self) -> bool: ...

    def ranking(self) -> list[str]:
        """Best first; only once done."""
        ...


# ---------------------------------------------------------------------------
# merges: one per inner node of the merge tree

#: ``lookup(x, y)``: P(x better than y) if known, else None.
Lookup = Callable[[str, str], "float | None"]


class _GreedyMerge:
    """Compare the two heads, take the preferred one (the left one on p = 0.5)."""

    def __init__(self, left: list[str], right: list[str]) -> None:
        self.left, self.right = left, right
        self.i = self.j = 0
        self.out: list[str] = []
        self.result: list[str] | None = None

    def advance(self, lookup: Lookup) -> list[Pair]:
        """Merge as far as the known judgments allow; return the comparisons it waits on."""
        left, right = self.left, self.right
        while self.i < len(left) and self.j < len(right):
            p = lookup(left[self.i], right[self.j])
            if p is None:
                return [(left[self.i], right[self.j])]
            if p >= 0.5:
                self.out.append(left[self.i])
                self.i += 1
            else:
                self.out.append(right[self.j])
                self.j += 1
        self.result = self.out + left[self.i :] + right[self.j :]
        return []


class _BeamMerge:
    """A beam of partial merge paths scored by the transitive likelihood.

    A path is ``(score, i, j, trail)``: it has placed ``left[:i]`` and
    ``right[:j]`` (``trail`` is that order as a linked list, newest first) and
    ``score`` is the sum of log p of the choices made. All unfinished paths have
    placed the same number of items, so one step advances them together. A path
    is finished when one input is used up (the rest follows with no comparison).
    A step: an unfinished path reads p = P(left[i] better than right[j]) and
    branches into both choices if H(p) > U_h, else takes the likelier one. The
    paths are then sorted by score (earlier first on ties: finished paths carried
    over, then children in order, the left choice first) and cut to the beam
    size; when no unfinished path is left, the first path wins.

    Two exact shortcuts on top of that beam (they change neither the winner nor,
    with an unsaturated beam, anything else; they only save comparisons and work):

    * an unfinished path whose score is not above a finished path in the beam is
      dropped: scores only fall, and the finished path ranks ahead of all its
      descendants;
    * of the paths at the same ``(i, j)`` only the best is kept (hypothesis
      recombination): they have the same continuations with the same increments.
      When the beam is full this spends its slots on distinct states rather than
      on copies that can never win.

    With recombination a step holds at most ``min(len(left), len(right)) + 1``
    unfinished paths, so a beam size above that is an exact search over the
    entropy-pruned lattice.

    With ``mean=True`` paths are ranked by the mean log p per comparison, as the
    public code's moving average does (a path made a comparison at each of its
    ``i + j`` steps). Recombination stays exact (same ``(i, j)``, same count);
    the first shortcut does not hold for a mean and is skipped.
    """

    def __init__(self, left: list[str], right: list[str], beam_size: int, threshold: float, mean: bool = False) -> None:
        self.left, self.right = left, right
        self.beam_size, self.threshold, self.mean = beam_size, threshold, mean
        self.paths: list[tuple[float, int, int, tuple | None]] = [(0.0, 0, 0, None)]
        self.result: list[str] | None = None

    def _finished(self, i: int, j: int) -> bool:
        return i == len(self.left) or j == len(self.right)

    def _rank_key(self, path: tuple[float, int, int, tuple | None]) -> float:
        """Sort key, best first: minus the sum (or mean) of log p."""
        score, i, j, _ = path
        return -score / max(i + j, 1) if self.mean else -score

    def advance(self, lookup: Lookup) -> list[Pair]:
        left, right = self.left, self.right
        while True:
            cells = list(dict.fromkeys((left[i], right[j]) for _, i, j, _ in self.paths if not self._finished(i, j)))
            if not cells:
                break
            known = {c: lookup(*c) for c in cells}
            missing = [c for c, p in known.items() if p is None]
            if missing:
                return missing
            self._step(known)
        _, i, j, trail = self.paths[0]
        placed: list[str] = []
        while trail is not None:
            placed.append(trail[0])
            trail = trail[1]
        self.result = placed[::-1] + left[i:] + right[j:]
        return []

    def _step(self, known: dict[Pair, float]) -> None:
        left, right = self.left, self.right
        carried = [path for path in self.paths if self._finished(path[1], path[2])]
        children: list[tuple[float, int, int, tuple | None]] = []
        for score, i, j, trail in self.paths:
            if self._finished(i, j):
                continue
            p = known[(left[i], right[j])]
            take_left = (score + math.log(max(p, _P_FLOOR)), i + 1, j, (left[i], trail))
            take_right = (score + math.log(max(1.0 - p, _P_FLOOR)), i, j + 1, (right[j], trail))
            if binary_entropy(p) > self.threshold:
                children += [take_left, take_right]
            else:
                children.append(take_left if p >= 0.5 else take_right)
        best_at: dict[tuple[int, int], tuple[float, int, int, tuple | None]] = {}
        for path in carried + children:  # recombination: first of the best per (i, j)
            key = (path[1], path[2])
            if key not in best_at or path[0] > best_at[key][0]:
                best_at[key] = path
        ranked = sorted(best_at.values(), key=self._rank_key)[: self.beam_size]  # stable
        finished = [path[0] for path in ranked if self._finished(path[1], path[2])]
        if finished and not self.mean:
            bound = max(finished)
            ranked = [path for path in ranked if self._finished(path[1], path[2]) or path[0] > bound]
        self.paths = ranked


# ---------------------------------------------------------------------------
# the machines


class _PairsMachine(_Ledger):
    """Merge sort over the PAIRS split tree; subclasses choose the merge."""

    def __init__(self, context_id: str, ids: Sequence[str], seed: int, symmetric: bool = False) -> None:
        ids = _distinct(context_id, ids)
        self.context_id = context_id
        self.symmetric = bool(symmetric)
        #: The candidates in the seeded order the sort starts from.
        self.order: list[str] = _seeded(ids, rng(seed, context_id))
        self._ids = frozenset(ids)
        self._open_ledger()
        self._blocked: list[Pair] = []
        self._ranking: list[str] | None = None
        # Merge tree: node (lo, hi) over self.order; a leaf is one candidate.
        self._run: dict[tuple[int, int], list[str]] = {}
        self._parent: dict[tuple[int, int], tuple[int, int]] = {}
        self._active: dict[tuple[int, int], _GreedyMerge | _BeamMerge] = {}
        if len(self.order) <= 1:
            self._ranking = list(self.order)
            return
        self._build(0, len(self.order))
        self._advance()

    # -- tree

    def _build(self, lo: int, hi: int) -> None:
        if hi - lo == 1:
            self._run[(lo, hi)] = [self.order[lo]]
            return
        mid = (lo + hi) // 2
        for child in ((lo, mid), (mid, hi)):
            self._parent[child] = (lo, hi)
            self._build(*child)
        if (lo, mid) in self._run and (mid, hi) in self._run:
            self._start(lo, hi)

    def _start(self, lo: int, hi: int) -> None:
        mid = (lo + hi) // 2
        self._active[(lo, hi)] = self._new_merge(self._run.pop((lo, mid)), self._run.pop((mid, hi)))

    def _new_merge(self, left: list[str], right: list[str]) -> _GreedyMerge | _BeamMerge:
        raise NotImplementedError

    # -- judgments

    def _advance(self) -> None:
        """Run every active merge as far as the known judgments allow."""
        progressed = True
        while progressed:
            progressed = False
            blocked: list[Pair] = []
            for node in sorted(self._active):
                merge = self._active[node]
                waiting = merge.advance(self._lookup)
                if merge.result is None:
                    blocked += waiting
                    continue
                del self._active[node]
                self._run[node] = merge.result
                parent = self._parent.get(node)
                if parent is None:
                    self._ranking = merge.result
                    continue
                lo, hi = parent
                mid = (lo + hi) // 2
                if (lo, mid) in self._run and (mid, hi) in self._run:
                    self._start(lo, hi)
                    progressed = True
            self._blocked = blocked

    # -- the protocol

    @property
    def done(self) -> bool:
        return self._ranking is not None

    def next_requests(self) -> list[Pair]:
        return self._ask(self._blocked)

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        self._record(p_a)
        if self._ranking is None:
            self._advance()

    def ranking(self) -> list[str]:
        if self._ranking is None:
            raise RuntimeError(
                f"context {self.context_id!r} is not done: {len(self._active)} merges running, "
                f"{len(self.pending)} pairs pending"
            )
        return list(self._ranking)


class PairsGreedy(_PairsMachine):
    """PAIRS-greedy: each merge step compares the two heads and takes the preferred.

    At most ``N * ceil(log2 N)`` comparisons (each two ordered pairs with
    ``symmetric=True``, where p is :func:`symmetric_p` of both orders).

    Ties: on p = 0.5 the merge takes the left head, so it is stable: equals keep
    their seeded order, and a judge that ties everything returns :attr:`order`.
    """

    def _new_merge(self, left: list[str], right: list[str]) -> _GreedyMerge:
        return _GreedyMerge(left, right)


class PairsBeam(_PairsMachine):
    """PAIRS-beam: each merge keeps a beam of partial merges (see :class:`_BeamMerge`).

    A path's score is its transitive likelihood, the sum of log p over its
    choices (p being the probability of the choice made). Where the binary
    entropy H(p) of a step exceeds ``entropy_threshold`` (U_h, in nats, at most
    ln 2 ~ 0.693) both choices are kept, otherwise only the likelier one. The
    beam is cut to ``beam_size`` paths; when the merge is done the best path wins.
    All paths' comparisons of a step go out in one round (each pair once; known
    judgments are reused).

    The public code's probability gap g (prune a branch when the other choice's
    probability exceeds ``0.5 + g``) is the same rule as
    ``U_h = H(0.5 + g) = -(0.5+g) ln(0.5+g) - (0.5-g) ln(0.5-g)``, since
    ``max(p, 1-p) > 0.5 + g  <=>  H(p) < H(0.5 + g)``:

    >>> round(u_h_from_prob_gap(0.1), 3), round(u_h_from_prob_gap(0.3), 3)
    (0.673, 0.5)
    >>> round(prob_gap_from_u_h(0.6), 3)   # the default U_h is a gap of about 0.21
    0.212

    ``score="sum"`` (the default) ranks paths by the sum of log p, the log of
    the product of the step p's. It favours paths that use up one input early
    (fewer factors below 1), e.g. placing a slightly worse item ahead of a run
    of three that each beat it with p = 0.6 (log 0.4 > 3 log 0.6).
    ``score="mean"`` ranks by the mean log p per comparison, as the public
    code's moving average does. ``entropy_threshold >= ln 2`` never branches
    and ``beam_size=1`` keeps one path: both reduce to :class:`PairsGreedy`.

    Ties: p = 0.5 has the largest entropy, ln 2, so below that threshold a tie
    always keeps both branches, each at the same cost log 0.5; recombination
    caps the paths as usual. Paths of equal score keep their order (the left
    choice first), so a judge that ties everything returns :attr:`order`, as
    greedy does (which also takes the left head on a tie when it cannot branch).

    >>> m = PairsBeam("ctx", ["w", "x", "y", "z"], seed=0)
    >>> while not m.done:
    ...     m.observe({pair: 0.5 for pair in m.next_requests()})
    >>> m.ranking() == m.order
    True
    """

    def __init__(
        self,
        context_id: str,
        ids: Sequence[str],
        seed: int,
        beam_size: int = 1000,
        entropy_threshold: float = 0.6,
        symmetric: bool = False,
        score: str = "sum",
    ) -> None:
        if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
            raise ValueError(f"beam_size: expected an integer >= 1, found {beam_size!r}")
        if not (isinstance(entropy_threshold, (int, float)) and entropy_threshold >= 0.0):
            raise ValueError(
                f"entropy_threshold (U_h, nats): expected a number >= 0 (ln 2 = {LN2:.4f} never branches), "
                f"found {entropy_threshold!r}"
            )
        if score not in ("sum", "mean"):
            raise ValueError(f"score: expected 'sum' or 'mean' (of the log p of a path's steps), found {score!r}")
        self.beam_size = beam_size
        self.entropy_threshold = float(entropy_threshold)
        self.score = score
        super().__init__(context_id, ids, seed, symmetric)

    def _new_merge(self, left: list[str], right: list[str]) -> _BeamMerge:
        return _BeamMerge(left, right, self.beam_size, self.entropy_threshold, mean=self.score == "mean")


# ---------------------------------------------------------------------------
# scaled PAIRS: sort a sample of anchors, insert the others by binary search


def sample_size(z: float = 1.96, p: float = 0.5, margin: float = 0.1, deff: float = 1.0) -> int:
    """Survey sample size ``n = ceil(z^2 p (1 - p) / margin^2 * deff)`` (Cochran's formula).

    PAIRS sizes its anchor set this way: ``z`` is the normal quantile of the
    confidence level (1.96 for 95 %), ``p`` the expected proportion (0.5 is the
    most conservative), ``margin`` the margin of error and ``deff`` the design
    effect. The product is rounded to 9 decimals before the ceiling, so float
    error cannot add one (z = 2 and margin = 0.1 give exactly 100).

    >>> sample_size()
    97
    >>> sample_size(margin=0.05), sample_size(z=2.0), sample_size(deff=2.0)
    (385, 100, 193)
    """
    z = _check_real(z, "z (normal quantile)", lambda v: 0.0 < v < math.inf, "a number > 0")
    p = _check_real(p, "p (expected proportion)", lambda v: 0.0 < v < 1.0, "a number in (0, 1)")
    margin = _check_real(margin, "margin (of error)", lambda v: 0.0 < v <= 1.0, "a number in (0, 1]")
    deff = _check_real(deff, "deff (design effect)", lambda v: 0.0 < v < math.inf, "a number > 0")
    return math.ceil(round(z * z * p * (1.0 - p) / (margin * margin) * deff, 9))


class _Insertion:
    """Binary search for one candidate's gap among ``n`` sorted anchors.

    Gap ``g`` (0 to n) means the candidate ranks below the first ``g`` anchors.
    Each step compares the candidate with the middle anchor of the gaps still
    open; the candidate goes above it when P(candidate better) > 0.5, else below
    (on p = 0.5, a tie, the anchor keeps its place). That is at most
    ``ceil(log2(n + 1))`` steps, and at least ``floor(log2(n + 1))``, ties or not.

    >>> s = _Insertion(3)
    >>> s.advance("c", ["a1", "a2", "a3"], lambda x, y: 0.5), s.gap, s.mean_p  # ties all the way down
    (None, 3, 0.5)
    """

    def __init__(self, n: int) -> None:
        self.lo, self.hi = 0, n
        #: P(candidate better than the probe) at each step, in order.
        self.ps: list[float] = []

    @property
    def gap(self) -> int | None:
        return self.lo if self.lo == self.hi else None

    @property
    def mean_p(self) -> float:
        """Mean P(candidate better) over its probes: the within-gap sort key (0.5 before any probe)."""
        return sum(self.ps) / len(self.ps) if self.ps else 0.5

    @classmethod
    def placed(cls, n: int, gap: int, mean_p: float) -> _Insertion:
        """A finished search (resumed from stored placements): in ``gap``, with ``mean_p`` as its sort key."""
        search = cls(n)
        search.lo = search.hi = gap
        search.ps = [mean_p]
        return search

    def advance(self, candidate: str, anchors: list[str], lookup: Lookup) -> Pair | None:
        """Search as far as the known judgments allow; return the comparison it waits on."""
        while self.lo < self.hi:
            mid = (self.lo + self.hi) // 2
            p = lookup(candidate, anchors[mid])
            if p is None:
                return (candidate, anchors[mid])
            self.ps.append(p)
            if p > 0.5:
                self.hi = mid
            else:
                self.lo = mid + 1
        return None


class _Sorted:
    """Anchors sorted on an earlier run: the inner sort of a resumed :class:`AnchorInsertion`, done from the start."""

    def __init__(self, anchors: list[str]) -> None:
        self._anchors = anchors

    done = True

    def next_requests(self) -> list[Pair]:
        return []

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        pass

    def ranking(self) -> list[str]:
        return list(self._anchors)


class AnchorInsertion(_Ledger):
    """Scaled PAIRS: sort a sample of anchors with PAIRS, place the others by binary search.

    The scaling variant of PAIRS (Liu et al. 2024; ``merge_sort_with_scale`` in
    the public code): merge sort costs ``N log N`` comparisons, so only
    ``n`` anchors are sorted (by an inner :class:`PairsGreedy` or
    :class:`PairsBeam` machine, whose requests and answers this machine
    forwards) and every other candidate is placed among the sorted anchors by
    binary search (:class:`_Insertion`), ``ceil(log2(n + 1))`` comparisons at
    most per candidate. The anchors are the first ``n`` candidates of the seeded
    order; ``anchors=None`` takes ``n = min(N, sample_size(z, p, margin, deff))``
    (97 with the defaults), the survey sample size the paper uses.

    Rounds: the inner sort first; once the anchors are sorted, every unplaced
    candidate's next probe goes out in the same round. The candidate sits in
    slot A (the public code puts the anchor there); with ``symmetric=True``
    both orders are asked in the same round and p is :func:`symmetric_p`.

    Ranking: the sorted anchors, with each gap holding the candidates that fell
    into it. Candidates in one gap took the same search path (it is fixed by
    the outcomes), so they were compared with the same anchors and never with
    each other; within a gap they are ordered by their mean p against those
    anchors, highest first, then by the seeded order. No comparison is asked
    for that. So a noiseless judge recovers the full order only when every
    candidate is an anchor; with fewer anchors the order is exact at anchor
    granularity.

    Ties: a candidate that ties an anchor goes below it, and candidates in one
    gap with the same mean p keep their seeded order; a judge that ties
    everything puts every candidate below the last anchor, so the ranking is
    the inner sort's (its own seeded order) followed by the rest in seeded order.

    :meth:`add` inserts later candidates the same way (the machine is not done
    until they are placed); the anchors are never re-sorted. ``beam_size``,
    ``entropy_threshold`` and ``score`` configure the inner
    :class:`PairsBeam` and are unused with ``inner="pairs_greedy"``.

    With a noiseless judge (``a`` is best) and three anchors, ``a`` and ``b``
    share the gap above ``c``: both beat it with p = 1, so the seeded order
    decides between them::

    >>> m = AnchorInsertion("ctx", list("abcdefgh"), seed=1, anchors=3, inner="pairs_greedy")
    >>> while not m.done:
    ...     m.observe({(a, b): float(a < b) for a, b in m.next_requests()})
    >>> m.anchors, m.ranking()
    (['c', 'd', 'e'], ['b', 'a', 'c', 'd', 'e', 'f', 'h', 'g'])
    >>> m.asked <= 3 * 2 + 5 * 2        # n ceil(log2 n) + (N - n) ceil(log2(n + 1))
    True
    """

    def __init__(
        self,
        context_id: str,
        ids: Sequence[str],
        seed: int,
        *,
        anchors: int | None = None,
        z: float = 1.96,
        p: float = 0.5,
        margin: float = 0.1,
        deff: float = 1.0,
        inner: str = "pairs_beam",
        beam_size: int = 1000,
        entropy_threshold: float = 0.6,
        score: str = "sum",
        symmetric: bool = False,
    ) -> None:
        ids = _distinct(context_id, ids)
        size = sample_size(z, p, margin, deff)
        if anchors is not None:
            size = _check_int(anchors, "anchors (how many candidates to sort first)", 1)
        if inner not in ("pairs_greedy", "pairs_beam"):
            raise ValueError(
                f"inner (the sort of the anchors): expected 'pairs_greedy' or 'pairs_beam', found {inner!r}"
            )
        self.context_id = context_id
        self.symmetric = bool(symmetric)
        self._gen = rng(seed, context_id)
        #: All candidates in seeded order; each :meth:`add` appends its own seeded shuffle.
        self.order: list[str] = _seeded(ids, self._gen)
        #: The anchors: the first candidates of the seeded order.
        self.anchors: list[str] = self.order[: min(len(ids), size)]
        self._inner: PairsGreedy | PairsBeam | _Sorted
        if inner == "pairs_greedy":
            self._inner = PairsGreedy(context_id, self.anchors, seed, symmetric=symmetric)
        else:
            self._inner = PairsBeam(
                context_id, self.anchors, seed, beam_size=beam_size, entropy_threshold=entropy_threshold,
                symmetric=symmetric, score=score,
            )  # fmt: skip
        self._ids = set(ids)
        self._is_anchor = frozenset(self.anchors)
        self._pos = {c: k for k, c in enumerate(self.order)}
        self._open_ledger()
        self._searches = {c: _Insertion(len(self.anchors)) for c in self.order[len(self.anchors) :]}
        self._waiting: list[Pair] = []
        self._advance()

    @classmethod
    def resume(
        cls,
        context_id: str,
        anchors: Sequence[str],
        placed: Mapping[str, tuple[int, float]],
        order: Sequence[str],
        seed: int,
        *,
        symmetric: bool = False,
    ) -> AnchorInsertion:
        """A machine rebuilt from :meth:`placements`, ready for :meth:`add`; it asks nothing until then.

        ``anchors`` are the sorted anchors (best first), ``placed`` each other
        candidate's ``(gap, mean_p)`` and ``order`` every candidate in seeded order
        (the within-gap tie-break). Candidates added later are searched among the
        same anchors with a generator seeded by ``(seed, context_id)`` as in
        :meth:`__init__`, so a nightly run that adds the same outputs asks the same
        comparisons.

        >>> m = AnchorInsertion.resume("ctx", ["b", "d"], {"e": (2, 0.1)}, ["d", "b", "e"], seed=0)
        >>> m.done, m.ranking()
        (True, ['b', 'd', 'e'])
        >>> m.add(["a", "c"])
        >>> while not m.done:
        ...     m.observe({(x, y): float(x < y) for x, y in m.next_requests()})
        >>> m.ranking(), m.asked        # a and c were compared with anchors only
        (['a', 'b', 'c', 'd', 'e'], 4)
        """
        anchors, order = _distinct(context_id, anchors), _distinct(context_id, order)
        ids = set(anchors) | set(placed)
        if not anchors:
            raise ValueError(f"context {context_id!r}: resume needs at least one sorted anchor")
        if set(anchors) & set(placed) or ids != set(order):
            raise ValueError(
                f"context {context_id!r}: anchors {sorted(anchors)} and placed {sorted(placed)} must be disjoint "
                f"and together the candidates of order {sorted(order)}"
            )
        self = cls.__new__(cls)
        self.context_id, self.symmetric = context_id, bool(symmetric)
        self._gen = rng(seed, context_id)
        self.order = list(order)
        self.anchors = list(anchors)
        self._inner = _Sorted(self.anchors)
        self._ids, self._is_anchor = ids, frozenset(anchors)
        self._pos = {c: k for k, c in enumerate(self.order)}
        self._open_ledger()
        self._searches = {}
        for c, (gap, mean_p) in placed.items():
            if not 0 <= gap <= len(anchors):
                raise ValueError(f"context {context_id!r}: candidate {c!r} has gap {gap}; expected 0..{len(anchors)}")
            self._searches[c] = _Insertion.placed(len(anchors), gap, _check_p(mean_p, f"mean p of {c!r}"))
        self._waiting = []
        return self

    def placements(self) -> list[dict]:
        """Where every candidate sits, for :meth:`resume`: one row per candidate, in ranking order.

        ``role`` is ``anchor`` (``anchor_index``: its place among the sorted
        anchors) or ``inserted`` (``gap`` and ``mean_p``); ``order`` is its place in
        the seeded order and ``rank`` in :meth:`ranking` (1 is best).
        """
        ranking = self.ranking()  # raises while not done
        anchors = self._inner.ranking()
        index = {c: k for k, c in enumerate(anchors)}
        rows = []
        for rank, c in enumerate(ranking, start=1):
            search = self._searches.get(c)
            rows.append(
                {
                    "candidate_id": c,
                    "role": "anchor" if c in index else "inserted",
                    "anchor_index": index.get(c),
                    "gap": None if search is None else search.gap,
                    "mean_p": None if search is None else search.mean_p,
                    "order": self._pos[c],
                    "rank": rank,
                }
            )
        return rows

    def add(self, ids: Iterable[str]) -> None:
        """Insert more candidates among the sorted anchors (the anchors stay as they are)."""
        new = _distinct(self.context_id, ids)
        present = sorted(self._ids.intersection(new))
        if present:
            raise ValueError(f"context {self.context_id!r}: already candidates: {present}")
        if new and not self.anchors:
            raise ValueError(f"context {self.context_id!r}: no anchors to insert into (built with no candidates)")
        for c in _seeded(new, self._gen):
            self._pos[c] = len(self.order)
            self.order.append(c)
            self._searches[c] = _Insertion(len(self.anchors))
        self._ids.update(new)
        self._advance()

    def _advance(self) -> None:
        """Once the anchors are sorted, move every search as far as the known judgments allow."""
        if not self._inner.done:
            return
        anchors = self._inner.ranking()
        lookup = self._lookup
        self._waiting = [pair for c, s in self._searches.items() if (pair := s.advance(c, anchors, lookup))]

    # -- the protocol

    @property
    def done(self) -> bool:
        return self._inner.done and all(s.gap is not None for s in self._searches.values())

    def next_requests(self) -> list[Pair]:
        anchor_pairs = self._inner.next_requests()  # the inner sort keeps its own ledger; record them here too
        self._asked.update(anchor_pairs)
        return anchor_pairs + self._ask(self._waiting)

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        checked = self._record(p_a)
        self._inner.observe({pair: v for pair, v in checked.items() if self._is_anchor.issuperset(pair)})
        self._advance()

    def ranking(self) -> list[str]:
        if not self.done:
            unplaced = sum(s.gap is None for s in self._searches.values())
            raise RuntimeError(
                f"context {self.context_id!r} is not done: anchors {'sorted' if self._inner.done else 'being sorted'}, "
                f"{unplaced} candidates to place, {len(self.pending)} pairs pending"
            )
        anchors = self._inner.ranking()
        gaps: list[list[str]] = [[] for _ in range(len(anchors) + 1)]
        for c, search in self._searches.items():
            gaps[search.gap].append(c)
        out: list[str] = []
        for k, gap in enumerate(gaps):
            out += sorted(gap, key=lambda c: (-self._searches[c].mean_p, self._pos[c]))
            out += anchors[k : k + 1]
        return out


# ---------------------------------------------------------------------------
# adaptive symmetric sampling under a Bradley-Terry posterior


def bt_laplace(
    n: int, winners: np.ndarray, losers: np.ndarray, y: np.ndarray, alpha: float, iters: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Bradley-Terry strengths with soft outcomes: the MAP and its Laplace covariance.

    Comparison k says item ``winners[k]`` beat ``losers[k]`` with weight
    ``y[k]`` in [0, 1] (the judge's p; 1 - y is the weight of the other way).
    The log-posterior ``sum_k y_k log s(d_k) + (1 - y_k) log s(-d_k) - alpha |theta|^2 / 2``,
    ``d_k = theta_w - theta_l``, is concave; Newton's method finds its maximum
    and the inverse of minus its Hessian there is the covariance. choix fits
    the same model for hard outcomes only (and by EP in pure Python, about a
    second per 16-candidate context), hence this small numpy version.

    >>> mean, cov = bt_laplace(2, np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([1.0, 1.0, 0.0]), 0.1)
    >>> bool(mean[0] > mean[1]), bool(np.allclose(cov, cov.T))
    (True, True)

    A tie (y = 0.5) is half a win to each side: it leaves equal strengths equal,
    and it narrows their difference's posterior (the prior alone has variance
    2 / alpha = 20 here):

    >>> mean, cov = bt_laplace(2, np.array([0, 1]), np.array([1, 0]), np.array([0.5, 0.5]), 0.1)
    >>> mean.tolist(), bool(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1] < 20)
    ([0.0, 0.0], True)
    """
    theta = np.zeros(n)
    win, lose = np.asarray(winners, dtype=np.intp), np.asarray(losers, dtype=np.intp)
    y = np.asarray(y, dtype=float)
    eye = alpha * np.eye(n)
    for _ in range(iters):
        s = 1.0 / (1.0 + np.exp(-(theta[win] - theta[lose])))
        grad = -alpha * theta
        np.add.at(grad, win, y - s)
        np.add.at(grad, lose, s - y)
        hess = _bt_hessian(n, win, lose, s * (1.0 - s), eye)
        step = np.clip(np.linalg.solve(hess, grad), -5.0, 5.0)
        theta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    s = 1.0 / (1.0 + np.exp(-(theta[win] - theta[lose])))
    return theta, np.linalg.inv(_bt_hessian(n, win, lose, s * (1.0 - s), eye))


def _bt_hessian(n: int, win: np.ndarray, lose: np.ndarray, v: np.ndarray, eye: np.ndarray) -> np.ndarray:
    """Minus the Hessian of the log-posterior: the prior's precision plus each comparison's s(1 - s)."""
    h = eye.copy()
    np.add.at(h, (win, win), v)
    np.add.at(h, (lose, lose), v)
    np.add.at(h, (win, lose), -v)
    np.add.at(h, (lose, win), -v)
    return h


def prob_order(mean: np.ndarray, cov: np.ndarray, i: int, j: int) -> float:
    """P(theta_i > theta_j) under the Gaussian N(mean, cov): ``Phi(mu_d / sigma_d)``.

    ``mu_d = mean_i - mean_j`` and ``sigma_d^2 = cov_ii + cov_jj - 2 cov_ij``.

    >>> mean, cov = np.array([1.0, 0.0]), np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> round(prob_order(mean, cov, 0, 1), 4), round(prob_order(mean, cov, 1, 0), 4)
    (0.8413, 0.1587)
    """
    var = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    return NormalDist().cdf(float(mean[i] - mean[j]) / math.sqrt(max(float(var), 1e-12)))


def _both_orders(pairs: Iterable[Pair]) -> list[Pair]:
    return [order for a, b in pairs for order in ((a, b), (b, a))]


class AdaptiveSymmetric(_Ledger):
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
    (:func:`prob_order`). The active choice of pairs is this module's own
    baseline, not from a paper.

    Rounds:

    * round 0 asks a seeded random cycle (each candidate against the next in the
      seeded order, the last against the first; one pair when N = 2), so every
      candidate is compared once the posterior is first used;
    * each later round asks up to ``pairs_per_round`` disjoint unasked pairs
      (default ``ceil(N / 2)``), most uncertain order first (P closest to 0.5),
      ties by the seeded order; a pair whose order is already certain beyond
      ``confidence`` is not asked.

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
    ) -> None:
        if symmetric is not True:
            raise ValueError(
                f"symmetric: adaptive_symmetric always asks both orders; expected True, found {symmetric!r}"
            )
        ids = _distinct(context_id, ids)
        n = len(ids)
        self.context_id = context_id
        self.symmetric = True
        if pairs_per_round is None:
            pairs_per_round = max(1, math.ceil(n / 2))
        self.pairs_per_round = _check_int(pairs_per_round, "pairs_per_round", 1)
        if budget is None:
            budget = n * math.ceil(math.log2(n)) if n > 1 else 0
        else:
            _check_int(budget, "budget (unordered comparisons per context)", 1)
        #: Unordered pairs it may ask per context.
        self.budget = budget
        self.patience = _check_int(patience, "patience (rounds with an unchanged ranking)", 1)
        self.confidence = _check_real(confidence, "confidence", lambda v: 0.5 < v <= 1.0, "a number in (0.5, 1]")
        self.alpha = _check_real(alpha, "alpha (prior precision)", lambda v: 0.0 < v < math.inf, "a number > 0")
        gen = rng(seed, context_id)
        #: The candidates in seeded order (round 0's cycle, tie-breaks).
        self.order: list[str] = _seeded(ids, gen)
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

    def _open_pairs(self) -> list[Pair]:
        """Unordered pairs with an order neither asked nor known, in seeded order."""
        done = self._asked.union(self._p)
        order = self.order
        return [(a, b) for k, a in enumerate(order) for b in order[k + 1 :] if (a, b) not in done or (b, a) not in done]

    def _cycle(self) -> list[Pair]:
        order = self.order
        cycle = [(order[k], order[(k + 1) % len(order)]) for k in range(len(order) if len(order) > 2 else 1)]
        still_open = set(self._open_pairs())
        return [pair for pair in cycle if pair in still_open or pair[::-1] in still_open]

    def _most_uncertain(self, room: int) -> list[Pair]:
        """Up to ``room`` disjoint open pairs whose order is least certain, short of ``confidence``."""
        mean, cov = self._posterior()
        ix = self._index
        scored = []
        for a, b in self._open_pairs():
            q = prob_order(mean, cov, ix[a], ix[b])
            if max(q, 1.0 - q) < self.confidence:
                scored.append((abs(q - 0.5), self._pos[a], self._pos[b], a, b))
        busy: set[str] = set()
        out: list[Pair] = []
        for *_, a, b in sorted(scored):
            if len(out) == room:
                break
            if a not in busy and b not in busy:
                out.append((a, b))
                busy.update((a, b))
        return out

    def _open_round(self) -> None:
        room = min(self.pairs_per_round, self.budget - self._used)
        if self.rounds == 0:
            pairs = self._cycle()[: self.budget]
        else:
            pairs = self._most_uncertain(room) if room > 0 else []
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
AdaptiveFactory = Callable[..., AdaptiveScheduler]

ADAPTIVE: dict[str, AdaptiveFactory] = {
    "pairs_greedy": PairsGreedy,
    "pairs_beam": PairsBeam,
    "pairs_anchors": AnchorInsertion,
    "adaptive_symmetric": AdaptiveSymmetric,
}


def get_adaptive(name: str) -> AdaptiveFactory:
    """Look an adaptive scheduler up by name; an unknown name lists the known ones."""
    try:
        return ADAPTIVE[name]
    except KeyError:
        raise ValueError(f"unknown adaptive scheduler {name!r}; available: {', '.join(sorted(ADAPTIVE))}") from None


# ---------------------------------------------------------------------------
# the reference lockstep loop

#: A judge for one round: ``[(context_id, a, b), ...] -> [p_a, ...]`` in the same order.
RoundJudge = Callable[[list[tuple[str, str, str]]], Sequence[float]]


def run_lockstep(
    machines: Iterable[AdaptiveScheduler],
    judge: RoundJudge,
    max_comparisons: int | None = None,
) -> dict:
    """Advance all machines in rounds, one ``judge`` call per round.

    A round gathers the new requests of every unfinished machine as
    ``(context_id, a, b)``, judges them in one call and feeds each machine its
    answers. It stops when every machine is done, or before a round that would
    take the judged total past ``max_comparisons`` (ordered pairs; that round's
    pairs stay pending in their machines and are not judged).

    Returns ``{"rounds": [{"requests": n, "done": contexts done after it}, ...],
    "comparisons": pairs judged, "done": all finished, "stopped": "done" | "budget"}``.

    >>> ms = [PairsGreedy(c, ["a", "b", "c", "d"], seed=1) for c in ("q1", "q2")]
    >>> stats = run_lockstep(ms, lambda reqs: [float(a < b) for _, a, b in reqs])
    >>> [m.ranking() for m in ms], stats["done"], len(stats["rounds"]) < stats["comparisons"]
    ([['a', 'b', 'c', 'd'], ['a', 'b', 'c', 'd']], True, True)
    """
    machines = list(machines)
    by_id: dict[str, AdaptiveScheduler] = {}
    for m in machines:
        if m.context_id in by_id:
            raise ValueError(f"two machines for context {m.context_id!r}")
        by_id[m.context_id] = m
    rounds: list[dict[str, int]] = []
    judged = 0
    stopped = "done"
    while not all(m.done for m in machines):
        batch = [(m.context_id, a, b) for m in machines if not m.done for a, b in m.next_requests()]
        if not batch:
            stuck = sorted(m.context_id for m in machines if not m.done)
            raise RuntimeError(f"no requests but contexts not done (answers missing?): {stuck[:10]}")
        if max_comparisons is not None and judged + len(batch) > max_comparisons:
            stopped = "budget"
            break
        ps = list(judge(batch))
        if len(ps) != len(batch):
            raise ValueError(f"judge returned {len(ps)} probabilities for {len(batch)} requests")
        judged += len(batch)
        answers: dict[str, dict[Pair, float]] = defaultdict(dict)
        for (ctx, a, b), p in zip(batch, ps):
            answers[ctx][(a, b)] = p
        for ctx, p_a in answers.items():
            by_id[ctx].observe(p_a)
        rounds.append({"requests": len(batch), "done": sum(m.done for m in machines)})
    return {"rounds": rounds, "comparisons": judged, "done": stopped == "done", "stopped": stopped}
