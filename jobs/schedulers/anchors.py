"""Scaled PAIRS: sort a seeded sample of anchors, then place every other candidate by binary search.

The anchors are ranked by a PAIRS machine (:mod:`pairank.jobs.schedulers.pairs`,
greedy or beam); each other candidate then searches its gap among the sorted
anchors, O(log n) comparisons each, all searches of a context side by side. A
context ranked on an earlier night is :meth:`AnchorInsertion.resume`\\ d from its
placements and only its new candidates are inserted (nightly jobs).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from pairank.jobs.schedulers.pairs import SYMMETRIC, BeamSpec, PairsBeam, PairsGreedy
from pairank.jobs.schedulers.protocol import (
    AdaptiveSettings,
    Ledger,
    Lookup,
    Pair,
    check_int,
    check_probability,
    check_real,
    distinct_ids,
    rng,
    seeded_shuffle,
)


class AnchorSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    size: int | None = Field(
        None, ge=2, description="Anchors ranked by PAIRS; unset: n = z^2 p(1-p) / margin^2 x deff, capped at N."
    )
    z: float = Field(1.96, gt=0, description="Sample-size formula: z of the confidence level.")
    p: float = Field(0.5, gt=0, lt=1, description="Sample-size formula: expected proportion.")
    margin: float = Field(0.1, gt=0, lt=1, description="Sample-size formula: margin of error e.")
    deff: float = Field(1.0, gt=0, description="Sample-size formula: design effect.")
    inner: Literal["pairs_greedy", "pairs_beam"] = Field("pairs_beam", description="How the anchors are ranked.")


class PairsAnchorsSettings(AdaptiveSettings):
    name: Literal["pairs_anchors"] = Field(
        "pairs_anchors", description="Scaled PAIRS: rank anchors, binary-insert the rest."
    )
    symmetric: bool = SYMMETRIC
    anchors: AnchorSpec = Field(default_factory=AnchorSpec, description="The anchor set.")
    beam: BeamSpec = Field(default_factory=BeamSpec, description="The beam, when anchors.inner is pairs_beam.")

    def machine(self, context_id: str, ids: list[str], seed: int) -> AnchorInsertion:
        a = self.anchors
        return AnchorInsertion(
            context_id,
            ids,
            seed,
            symmetric=self.symmetric,
            anchors=a.size,
            z=a.z,
            p=a.p,
            margin=a.margin,
            deff=a.deff,
            inner=a.inner,
            **self.beam.options(),
        )


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
    z = check_real(z, "z (normal quantile)", lambda v: 0.0 < v < math.inf, "a number > 0")
    p = check_real(p, "p (expected proportion)", lambda v: 0.0 < v < 1.0, "a number in (0, 1)")
    margin = check_real(margin, "margin (of error)", lambda v: 0.0 < v <= 1.0, "a number in (0, 1]")
    deff = check_real(deff, "deff (design effect)", lambda v: 0.0 < v < math.inf, "a number > 0")
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


class AnchorInsertion(Ledger):
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

    _ids: set[str]  # grows as :meth:`add` inserts candidates

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
        score: str = "mean",
        symmetric: bool = False,
    ) -> None:
        ids = distinct_ids(context_id, ids)
        size = sample_size(z, p, margin, deff)
        if anchors is not None:
            size = check_int(anchors, "anchors (how many candidates to sort first)", 1)
        if inner not in ("pairs_greedy", "pairs_beam"):
            raise ValueError(
                f"inner (the sort of the anchors): expected 'pairs_greedy' or 'pairs_beam', found {inner!r}"
            )
        self.context_id = context_id
        self.symmetric = bool(symmetric)
        self._gen = rng(seed, context_id)
        #: All candidates in seeded order; each :meth:`add` appends its own seeded shuffle.
        self.order: list[str] = seeded_shuffle(ids, self._gen)
        #: The anchors: the first candidates of the seeded order.
        self.anchors: list[str] = self.order[: min(len(ids), size)]
        self._inner: PairsGreedy | PairsBeam | _Sorted
        if inner == "pairs_greedy":
            self._inner = PairsGreedy(context_id, self.anchors, seed, symmetric=symmetric)
        else:
            self._inner = PairsBeam(
                context_id,
                self.anchors,
                seed,
                beam_size=beam_size,
                entropy_threshold=entropy_threshold,
                symmetric=symmetric,
                score=score,
            )
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
        anchors, order = distinct_ids(context_id, anchors), distinct_ids(context_id, order)
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
            self._searches[c] = _Insertion.placed(len(anchors), gap, check_probability(mean_p, f"mean p of {c!r}"))
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
        new = distinct_ids(self.context_id, ids)
        present = sorted(self._ids.intersection(new))
        if present:
            raise ValueError(f"context {self.context_id!r}: already candidates: {present}")
        if new and not self.anchors:
            raise ValueError(f"context {self.context_id!r}: no anchors to insert into (built with no candidates)")
        for c in seeded_shuffle(new, self._gen):
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
            if search.gap is not None:  # (every search has a gap once done)
                gaps[search.gap].append(c)
        out: list[str] = []
        for k, gap in enumerate(gaps):
            out += sorted(gap, key=lambda c: (-self._searches[c].mean_p, self._pos[c]))
            out += anchors[k : k + 1]
        return out
