"""PAIRS merge sort (greedy and beam) as one state machine per context.

A machine holds the candidates of one context and asks for ordered pairs
``(a, b)`` (``a`` in slot A) as its merge sort needs them; the protocol a driver
relies on is in :mod:`pairank.jobs.schedulers.protocol`.

The sort is PAIRS (Liu et al., "Aligning with human judgement: the role of
pairwise preference in LLM evaluators", 2024) run bottom-up over the merge tree
that the recursive algorithm builds (split at ``mid = (lo + hi) // 2``): every
merge starts as soon as both its inputs are sorted, so all merges of a level run
side by side and each round carries the next comparison of every active merge
(and, for the beam, of every path of its beam). A merge only ever depends on its
two inputs and the judgments it reads, so a context's ranking does not depend on
the other contexts, on how rounds are batched, or on which answers arrive late.

``PairsBeam(compat="pairs-code")`` (spec: ``compat: pairs-code``) follows the
authors' public code rule by rule instead (:class:`_CodeBeamMerge`).

Two more machines speak the same protocol:
:class:`~pairank.jobs.schedulers.anchors.AnchorInsertion` (scaled PAIRS: sort a
seeded sample of anchors, then place every other candidate by binary search among
them) and :class:`~pairank.jobs.schedulers.adaptive_symmetric.AdaptiveSymmetric`
(ask both orders of the pairs whose order a Bradley-Terry posterior is least sure of).

The candidate order before sorting is a seeded shuffle of the sorted ids (the
generator is :func:`pairank.jobs.schedulers.protocol.rng` of the job seed and the context id), so
identical seeds give identical requests and rankings, whatever order the ids
come in::

    >>> m = PairsGreedy("ctx", ["x", "y", "z"], seed=0)
    >>> judge = {"x": 3, "y": 2, "z": 1}                 # latent quality
    >>> while not m.done:
    ...     m.observe({(a, b): float(judge[a] > judge[b]) for a, b in m.next_requests()})
    >>> m.ranking(), m.asked
    (['x', 'y', 'z'], 3)


* :attr:`asked` counts distinct ordered pairs requested; with ``symmetric=True``
  each comparison is two ordered pairs, asked in the same round.

Ties. Every machine reads p = 0.5 as no preference: a tie verdict, a judge that
picks the same slot in both orders (``symmetric_p(1, 1) = 0.5``), or a failed
judgment the driver answers with 0.5. Each machine states its rule in its
docstring. None waits for a decided comparison or divides by a count of them,
so with every answer 0.5 each one finishes and returns a permutation: PAIRS
greedy and beam return the seeded start order (:attr:`order`; not the beam
with ``compat="pairs-code"``, whose ties fall as in the public code), anchors the
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
from collections.abc import Mapping, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from pairank.jobs.schedulers.protocol import (
    LN2,
    P_FLOOR,
    AdaptiveSettings,
    Ledger,
    Lookup,
    Pair,
    binary_entropy,
    distinct_ids,
    prob_gap_from_u_h,
    rng,
    seeded_shuffle,
)


class BeamSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    size: int = Field(1000, ge=1, description="Partial merge paths kept per merge (paper: 1000).")
    entropy_threshold: float = Field(
        0.6,
        ge=0,
        description="U_h in nats: both choices of a step are kept only when its binary entropy exceeds this "
        "(at most ln 2 = 0.693; 0.6 is the paper's value, a probability gap of about 0.21).",
    )
    score: Literal["mean", "sum"] = Field(
        "mean",
        description="Path score: the mean log p of its choices (the public code's running mean), or their sum "
        "(the transitive likelihood, which favours paths that use up one input early).",
    )

    def options(self) -> dict:
        """The beam machine's keyword arguments."""
        return {"beam_size": self.size, "entropy_threshold": self.entropy_threshold, "score": self.score}


SYMMETRIC = Field(
    True,
    description="Make each comparison in both orders and use (p(a,b) + 1 - p(b,a)) / 2 (small judges are "
    "position-biased); false asks one order.",
)


class PairsGreedySettings(AdaptiveSettings):
    name: Literal["pairs_greedy"] = Field("pairs_greedy", description="PAIRS merge sort, the likelier branch.")
    symmetric: bool = SYMMETRIC

    def machine(self, context_id: str, ids: list[str], seed: int) -> PairsGreedy:
        return PairsGreedy(context_id, ids, seed, symmetric=self.symmetric)


class PairsBeamSettings(AdaptiveSettings):
    name: Literal["pairs_beam"] = Field(
        "pairs_beam", description="PAIRS merge sort keeping a beam of partial merges, branching where unsure."
    )
    symmetric: bool = SYMMETRIC
    beam: BeamSpec = Field(default_factory=BeamSpec, description="The beam.")
    compat: Literal["pairs-code"] | None = Field(
        None,
        description="Unset: pairank's beam. 'pairs-code': the rules of the authors' public code "
        "(cambridgeltl/PairS pairs/pairs_ranking.py): merges run worst first, a merge's first step is never cut, "
        "paths at the same point are all kept, the score is the running mean of log p (beam.score mean), ties "
        "fall as there, and U_h is read as the probability gap g with H(0.5 + g) = U_h.",
    )

    @model_validator(mode="after")
    def _compat_score(self) -> PairsBeamSettings:
        if self.compat == "pairs-code" and self.beam.score != "mean":
            raise ValueError(
                "compat: pairs-code scores a path by the running mean of log p, as the public code does; "
                f"beam.score: {self.beam.score} contradicts it (leave it unset or set mean)"
            )
        return self

    def machine(self, context_id: str, ids: list[str], seed: int) -> PairsBeam:
        return PairsBeam(context_id, ids, seed, symmetric=self.symmetric, compat=self.compat, **self.beam.options())


# ---------------------------------------------------------------------------
# merges: one per inner node of the merge tree


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
    """A beam of partial merge paths scored by the sum (or mean) of log p.

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
            known = {c: p for c in cells if (p := lookup(*c)) is not None}
            missing = [c for c in cells if c not in known]
            if missing:
                return missing
            self._step(known)
        _, i, j, trail = self.paths[0]
        self.result = _unwind(trail) + left[i:] + right[j:]
        return []

    def _step(self, known: dict[Pair, float]) -> None:
        left, right = self.left, self.right
        carried = [path for path in self.paths if self._finished(path[1], path[2])]
        children: list[tuple[float, int, int, tuple | None]] = []
        for score, i, j, trail in self.paths:
            if self._finished(i, j):
                continue
            p = known[(left[i], right[j])]
            take_left = (score + math.log(max(p, P_FLOOR)), i + 1, j, (left[i], trail))
            take_right = (score + math.log(max(1.0 - p, P_FLOOR)), i, j + 1, (right[j], trail))
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


class _CodeBeamMerge:
    """The beam merge as the authors' public code runs it (``compat="pairs-code"``).

    It follows ``merge_with_confidence_beam`` in cambridgeltl/PairS
    ``pairs/pairs_ranking.py`` (commit 55ad950) rule by rule, each unlike
    :class:`_BeamMerge`:

    * direction: the code sorts worst first, so both inputs are reversed,
      merged worst first and the result reversed back. Slot A still holds the
      left item and p = P(left better): choice "A" places the left item next
      (as the worse, probability 1 - p), "B" the right one (probability p).
    * first step: "B" is kept unless p < 0.5 - g, "A" unless p > 0.5 + g,
      "B" listed first, and the beam is not cut, so a beam of size 1 is not greedy.
    * later steps: every path places one item. One with both inputs left reads
      its p and keeps "A" unless p > 0.5 + g, "B" unless 1 - p > 0.5 + g; one
      with an input used up places the other's next item at no cost. Children
      in their parents' order, "A" first; a stable sort by score, highest
      first; cut to the beam size. No recombination: paths at the same point
      all take beam slots.
    * score: the running mean ``s t / (t + 1) + w_t log(q + 1e-9) / (t + 1)``
      after t placed items (q: the choice's probability, log: ``numpy.log``),
      i.e. the mean log q per comparison. ``w_t``, the code's likelihood
      coefficient, is a quadratic fitted through three points of height 1:
      1 in exact arithmetic, computed as there so float ties fall the same way.
    * ties go to the earlier path: the right item's branch at the first step,
      then the left item's; the first path wins.

    ``g`` is the code's probability gap, from U_h by :func:`prob_gap_from_u_h`.
    Below, the code's greedy (worst first) puts ``z`` under ``y`` (p = 0.55)
    and ends with x, y, z; the beam of size 1 also keeps ``y`` lowest, and that
    path wins on the next step (mean of log 0.45 and log 0.7, against log 0.55):

    >>> p = {("y", "z"): 0.55, ("x", "z"): 0.3}
    >>> m = _CodeBeamMerge(["x", "y"], ["z"], beam_size=1, gap=0.2)
    >>> m.advance(lambda a, b: p[(a, b)]), m.result
    ([], ['z', 'x', 'y'])
    """

    def __init__(self, left: list[str], right: list[str], beam_size: int, gap: float) -> None:
        self.left, self.right = left[::-1], right[::-1]  # worst first
        self.beam_size, self.gap = beam_size, gap
        n = len(left) + len(right)
        self._fit = np.poly1d(np.polyfit([0.0, (n - 1) / 2, n - 1], [1.0, 1.0, 1.0], 2))
        self.paths: list[tuple[float, int, int, tuple | None]] = [(0.0, 0, 0, None)]  # as in _BeamMerge
        self.placed = 0
        self.result: list[str] | None = None

    def _mean(self, score: float, q: float, t: int) -> float:
        weight = float(self._fit(0)) if t == 0 else float(np.round(self._fit(t), 5))
        return score * t / (t + 1) + float(np.log(q + 1e-9)) * weight / (t + 1)

    def _cell(self, a: int, b: int) -> Pair | None:
        return (self.left[a], self.right[b]) if a < len(self.left) and b < len(self.right) else None

    def advance(self, lookup: Lookup) -> list[Pair]:
        while self.placed < len(self.left) + len(self.right):
            cells = list(dict.fromkeys(c for _, a, b, _ in self.paths if (c := self._cell(a, b))))
            known = {c: p for c in cells if (p := lookup(*c)) is not None}
            missing = [c for c in cells if c not in known]
            if missing:
                return missing
            self._step(known)
            if self.placed >= 2 and not cells:
                break  # sorted once since the first step and no score moves: the order is final
        _, a, b, trail = self.paths[0]
        self.result = (_unwind(trail) + self.left[a:] + self.right[b:])[::-1]
        return []

    def _step(self, known: dict[Pair, float]) -> None:
        left, right, g, t = self.left, self.right, self.gap, self.placed
        children: list[tuple[float, int, int, tuple | None]] = []
        for score, a, b, trail in self.paths:
            cell = self._cell(a, b)
            if cell is None:  # one input used up: the other's next item, at no cost
                children.append(
                    (score, a + 1, b, (left[a], trail)) if a < len(left) else (score, a, b + 1, (right[b], trail))
                )
                continue
            p = known[cell]
            take_a = (self._mean(score, 1.0 - p, t), a + 1, b, (left[a], trail))
            take_b = (self._mean(score, p, t), a, b + 1, (right[b], trail))
            if t == 0:
                children += [c for c, keep in ((take_b, not p < 0.5 - g), (take_a, not p > 0.5 + g)) if keep]
            else:
                children += [c for c, keep in ((take_a, not p > 0.5 + g), (take_b, not 1.0 - p > 0.5 + g)) if keep]
        self.paths = children if t == 0 else sorted(children, key=lambda c: c[0], reverse=True)[: self.beam_size]
        self.placed = t + 1


def _unwind(trail: tuple | None) -> list[str]:
    """A trail (newest first, as a linked list) as a list, oldest first."""
    placed: list[str] = []
    while trail is not None:
        placed.append(trail[0])
        trail = trail[1]
    return placed[::-1]


# ---------------------------------------------------------------------------
# the machines


#: One merge of two sorted runs, as a machine runs it.
_Merge = _GreedyMerge | _BeamMerge | _CodeBeamMerge


class _PairsMachine(Ledger):
    """Merge sort over the PAIRS split tree; subclasses choose the merge."""

    def __init__(self, context_id: str, ids: Sequence[str], seed: int, symmetric: bool = False) -> None:
        ids = distinct_ids(context_id, ids)
        self.context_id = context_id
        self.symmetric = bool(symmetric)
        #: The candidates in the seeded order the sort starts from.
        self.order: list[str] = seeded_shuffle(ids, rng(seed, context_id))
        self._ids = frozenset(ids)
        self._open_ledger()
        self._blocked: list[Pair] = []
        self._ranking: list[str] | None = None
        # Merge tree: node (lo, hi) over self.order; a leaf is one candidate.
        self._run: dict[tuple[int, int], list[str]] = {}
        self._parent: dict[tuple[int, int], tuple[int, int]] = {}
        self._active: dict[tuple[int, int], _Merge] = {}
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

    def _new_merge(self, left: list[str], right: list[str]) -> _Merge:
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

    A path's score is the mean log p over its choices (p being the probability
    of the choice made). Where the binary entropy H(p) of a step exceeds
    ``entropy_threshold`` (U_h, in nats, at most ln 2 ~ 0.693) both choices
    are kept, otherwise only the likelier one. The beam is cut to ``beam_size``
    paths; when the merge is done the best path wins. All paths' comparisons of
    a step go out in one round (each pair once; known judgments are reused).

    The public code's probability gap g (prune a branch when the other choice's
    probability exceeds ``0.5 + g``) is the same rule as
    ``U_h = H(0.5 + g) = -(0.5+g) ln(0.5+g) - (0.5-g) ln(0.5-g)``, since
    ``max(p, 1-p) > 0.5 + g  <=>  H(p) < H(0.5 + g)``:

    >>> from pairank.jobs.schedulers.protocol import prob_gap_from_u_h, u_h_from_prob_gap
    >>> round(u_h_from_prob_gap(0.1), 3), round(u_h_from_prob_gap(0.3), 3)
    (0.673, 0.5)
    >>> round(prob_gap_from_u_h(0.6), 3)   # the default U_h is a gap of about 0.21
    0.212

    ``score="mean"`` (the default) ranks paths by the mean log p per
    comparison, as the public code's running mean does. ``score="sum"`` ranks
    by the sum, the log of the product of the step p's (the transitive
    likelihood). The sum favours paths that use up one input early (fewer
    factors below 1), e.g. placing a slightly worse item ahead of a run of
    three that each beat it with p = 0.6 (log 0.4 > 3 log 0.6); on simulated
    judges it ranks worse than the mean. ``entropy_threshold >= ln 2`` never
    branches and ``beam_size=1`` keeps one path: both reduce to
    :class:`PairsGreedy`.

    ``compat="pairs-code"`` runs each merge as the authors' public code does
    instead (:class:`_CodeBeamMerge`: worst first, the first step never cut,
    no recombination, the code's running mean and tie order, U_h read as the
    gap g); with ``symmetric=True`` p is the code's calibrated p,
    ``(p(a,b) + 1 - p(b,a)) / 2`` over the sum of both sides' halves.

    Ties: p = 0.5 has the largest entropy, ln 2, so below that threshold a tie
    always keeps both branches, each at the same cost log 0.5; recombination
    caps the paths as usual. Paths of equal score keep their order (the left
    choice first), so a judge that ties everything returns :attr:`order`, as
    greedy does (which also takes the left head on a tie when it cannot branch).
    With ``compat="pairs-code"`` ties fall as in the code, which does not keep
    the seeded order (still a permutation, and every run the same).

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
        score: str = "mean",
        compat: str | None = None,
    ) -> None:
        if isinstance(beam_size, bool) or not isinstance(beam_size, int) or beam_size < 1:
            raise ValueError(f"beam_size: expected an integer >= 1, found {beam_size!r}")
        if not (isinstance(entropy_threshold, (int, float)) and entropy_threshold >= 0.0):
            raise ValueError(
                f"entropy_threshold (U_h, nats): expected a number >= 0 (ln 2 = {LN2:.4f} never branches), "
                f"found {entropy_threshold!r}"
            )
        if score not in ("mean", "sum"):
            raise ValueError(f"score: expected 'mean' or 'sum' (of the log p of a path's steps), found {score!r}")
        if compat not in (None, "pairs-code"):
            raise ValueError(f"compat: expected None or 'pairs-code', found {compat!r}")
        if compat and score != "mean":
            raise ValueError(f"compat 'pairs-code' scores paths by the running mean of log p; found score={score!r}")
        self.beam_size = beam_size
        self.entropy_threshold = float(entropy_threshold)
        self.score = score
        self.compat = compat
        #: The public code's probability gap g, used with ``compat="pairs-code"``.
        self.prob_gap = prob_gap_from_u_h(min(self.entropy_threshold, LN2))
        super().__init__(context_id, ids, seed, symmetric)

    def _new_merge(self, left: list[str], right: list[str]) -> _BeamMerge | _CodeBeamMerge:
        if self.compat:
            return _CodeBeamMerge(left, right, self.beam_size, self.prob_gap)
        return _BeamMerge(left, right, self.beam_size, self.entropy_threshold, mean=self.score == "mean")

    def _lookup(self, x: str, y: str) -> float | None:
        if not (self.compat and self.symmetric):
            return super()._lookup(x, y)
        p_xy, p_yx = self._p.get((x, y)), self._p.get((y, x))
        if p_xy is None or p_yx is None:
            return None
        return code_calibrated_p(p_xy, p_yx)


def code_calibrated_p(p_ab: float, p_ba: float) -> float:
    """P(a better than b) from both orders as the public code's ``calibrate`` computes it.

    Each side's probability is averaged over the two orders, then the two are
    normalised: ``A = (p_ab + (1 - p_ba)) / 2``, ``B = ((1 - p_ab) + p_ba) / 2``,
    ``A / (A + B)``. That is :func:`symmetric_p` in exact arithmetic; the
    compat machine computes it this way so that float ties fall as in the code.

    >>> code_calibrated_p(0.8, 0.4), code_calibrated_p(0.9, 0.9)
    (0.7, 0.5)
    """
    side_a = (p_ab + (1.0 - p_ba)) / 2
    side_b = ((1.0 - p_ab) + p_ba) / 2
    return side_a / (side_a + side_b)
