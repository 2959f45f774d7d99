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

The candidate order before sorting is a seeded shuffle of the sorted ids (the
generator is :func:`jobs.schedulers.rng` of the job seed and the context id), so
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
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from scipy.optimize import brentq

from jobs.schedulers import Pair, rng

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


class _PairsMachine:
    """Merge sort over the PAIRS split tree; subclasses choose the merge."""

    def __init__(self, context_id: str, ids: Sequence[str], seed: int, symmetric: bool = False) -> None:
        ids = list(ids)
        seen: set[str] = set()
        dupes = sorted({x for x in ids if x in seen or seen.add(x)})
        if dupes:
            raise ValueError(f"context {context_id!r}: candidate ids must be distinct; repeated: {dupes}")
        self.context_id = context_id
        self.symmetric = bool(symmetric)
        ordered = sorted(ids)
        #: The candidates in the seeded order the sort starts from.
        self.order: list[str] = [ordered[k] for k in rng(seed, context_id).permutation(len(ordered))]
        self._ids = frozenset(ordered)
        self._p: dict[Pair, float] = {}
        self._asked: set[Pair] = set()
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

    def _lookup(self, x: str, y: str) -> float | None:
        if not self.symmetric:
            return self._p.get((x, y))
        p_xy, p_yx = self._p.get((x, y)), self._p.get((y, x))
        if p_xy is None or p_yx is None:
            return None
        return symmetric_p(p_xy, p_yx)

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
    def asked(self) -> int:
        return len(self._asked)

    @property
    def pending(self) -> frozenset[Pair]:
        return frozenset(pair for pair in self._asked if pair not in self._p)

    @property
    def done(self) -> bool:
        return self._ranking is not None

    def next_requests(self) -> list[Pair]:
        out: list[Pair] = []
        for x, y in self._blocked:
            for pair in ((x, y), (y, x)) if self.symmetric else ((x, y),):
                if pair not in self._asked and pair not in self._p:
                    self._asked.add(pair)
                    out.append(pair)
        return out

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        checked: dict[Pair, float] = {}
        for pair, p in p_a.items():  # all or nothing: a bad entry stores none of the call
            if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] != pair[1] and set(pair) <= self._ids):
                raise ValueError(f"context {self.context_id!r}: {pair!r} is not a pair of two distinct candidates")
            checked[pair] = _check_p(p, f"context {self.context_id!r}: p_a for {pair!r}")
        for pair, value in checked.items():
            self._p.setdefault(pair, value)
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


ADAPTIVE: dict[str, type[_PairsMachine]] = {
    "pairs_greedy": PairsGreedy,
    "pairs_beam": PairsBeam,
}


def get_adaptive(name: str) -> type[_PairsMachine]:
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
