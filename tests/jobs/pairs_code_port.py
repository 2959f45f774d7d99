"""A port of the authors' PAIRS-beam, the oracle for ``PairsBeam(compat="pairs-code")``.

Source: cambridgeltl/PairS, ``pairs/pairs_ranking.py`` at commit
55ad950e389c87fbcfd29d7b922fb360e7165d02 (the file last changed in 154aa74b,
"debug pairs-beam", 2024-12-21): ``PairsBeam`` -> ``rank_beam`` ->
``merge_with_confidence_beam``, with ``is_better_than_prob`` (``calibrate``),
``moving_average`` and ``get_likelihood_coefficient``, and
``CompareResultObject`` from ``pairs/utils.py``. The original is under the MIT
licence (Copyright (c) 2024 Cambridge Language Technology Lab), which allows
a port like this one; this one is written anew from the rules of that code, not
copied, and keeps its behaviour where it matters to an oracle:

* ``rank(outputs)`` returns the outputs worst first, the order of the indices
  the code returns; the merge tree splits at ``mid = (lo + hi) // 2``.
* a merge of ``left = sorted[lo:mid]`` and ``right = sorted[mid:hi]`` asks
  ``compare(left[i], right[j])`` (left item in slot A) through a matrix of
  answers that starts at 0 and counts 0 as "not asked": an answer of exactly 0
  is asked again (the calls are all logged; a test compares distinct ones).
* a path places one item per step: "A" the next left item (probability
  1 - p), "B" the next right one (p); past the gap a side is dropped. The
  first step keeps "B" before "A" and is not cut to the beam size; later steps
  keep "A" before "B", sort stably by score and cut. Paths at the same point
  are all kept.
* the path score is the running mean ``m * k / (k + 1) + v / (k + 1)`` of
  ``v = log(q + 1e-9) * coef`` (``numpy.log``), ``coef`` the quadratic through
  (0, 1), ((n-1)/2, 1), (n-1, 1) at the step index, rounded to 5 decimals
  except at the first step.
* ``calibrate``: both orders are asked, ``(id1, id2)`` then ``(id2, id1)``, and
  prob_A = A / (A + B + C) with A = (prob_A + prob_B') / 2,
  B = (prob_B + prob_A') / 2, C = prob_C + prob_C' (' the reversed order).

The judge here is ``p(a, b)``, the two-way probability that ``a`` (slot A) is
better, read as a model answer with prob_A = p, prob_B = 1 - p, prob_C = 0:
what pairank stores as ``p_a``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np


@dataclass
class _Path:
    """A partial merge: ``steps`` as (side, index) placed so far, worst first."""

    steps: list[tuple[str, int]] = field(default_factory=list)
    score: float = 0.0
    last_a: int = -1  # index of the last left item placed
    last_b: int = -1  # index of the last right item placed

    def extended(self, side: str, score: float) -> _Path:
        a = self.last_a + (side == "A")
        b = self.last_b + (side == "B")
        return _Path(self.steps + [(side, a if side == "A" else b)], score, a, b)


def _running_mean(mean: float, value: float, k: int) -> float:
    return mean * k / (k + 1) + value / (k + 1)


def _coefficient(n: int, step: int) -> float:
    fit = np.poly1d(np.polyfit([0, (n - 1) / 2, n - 1], [1, 1, 1], 2))
    return fit(step)


class PairsCodePort:
    """The code's PAIRS-beam over ``outputs`` (any labels) with judge ``p``; see the module docstring."""

    def __init__(self, p: Callable[[str, str], float], beam_size: int, prob_gap: float, calibrate: bool) -> None:
        self.p, self.beam_size, self.gap, self.calibrate = p, beam_size, prob_gap, calibrate
        #: Every judge call in order: ((lo, hi) of the merge, (slot A, slot B)).
        self.calls: list[tuple[tuple[int, int], tuple[str, str]]] = []

    def prob_a(self, node: tuple[int, int], x: str, y: str) -> float:
        """The code's ``is_better_than_prob(x, y)['prob_A']``, logged as asked by merge ``node``."""
        self.calls.append((node, (x, y)))
        prob_a, prob_b, prob_c = self.p(x, y), 1 - self.p(x, y), 0.0
        if not self.calibrate:
            return prob_a
        self.calls.append((node, (y, x)))
        rev_a, rev_b, rev_c = self.p(y, x), 1 - self.p(y, x), 0.0
        side_a, side_b, side_c = (prob_a + rev_b) / 2, (prob_b + rev_a) / 2, prob_c + rev_c
        return side_a / (side_a + side_b + side_c)

    def rank(self, outputs: list[str]) -> list[str]:
        """The outputs worst first."""
        order = list(outputs)

        def sort(lo: int, hi: int) -> None:
            if hi - lo > 1:
                mid = (lo + hi) // 2
                sort(lo, mid)
                sort(mid, hi)
                order[lo:hi] = self._merge(order[lo:mid], order[mid:hi], (lo, hi))

        sort(0, len(order))
        return order

    def _merge(self, left: list[str], right: list[str], node: tuple[int, int]) -> list[str]:
        n, gap = len(left) + len(right), self.gap
        answers = np.zeros((len(left), len(right)))

        def ask(i: int, j: int) -> float:
            if answers[i, j] == 0:
                answers[i, j] = self.prob_a(node, left[i], right[j])
            return answers[i, j]

        # First step: the two worst items. "B" puts right[0] first (p that left[0] is better),
        # "A" puts left[0] first; a side is dropped only past the gap; the beam is not cut.
        p = ask(0, 0)
        coef = _coefficient(n, 0)
        start = _Path()
        choose_b = start.extended("B", np.log(p + 1e-9) * coef)
        choose_a = start.extended("A", np.log(1 - p + 1e-9) * coef)
        if p > 0.5 + gap:
            beam = [choose_b]
        elif p < 0.5 - gap:
            beam = [choose_a]
        else:
            beam = [choose_b, choose_a]

        # Every later step places one more item on every path.
        for step in range(1, n):
            coef = np.round(_coefficient(n, step), 5)
            grown: list[_Path] = []
            for path in beam:
                for side in ("A", "B"):
                    score = path.score
                    if path.last_a < len(left) - 1 and path.last_b < len(right) - 1 and step != n - 1:
                        p = ask(path.last_a + 1, path.last_b + 1)
                        if (side == "A" and p > 0.5 + gap) or (side == "B" and 1 - p > 0.5 + gap):
                            continue
                        q = 1 - p + 1e-9 if side == "A" else p + 1e-9
                        score = _running_mean(score, np.log(q) * coef, step)
                    child = path.extended(side, score)
                    if child.last_a >= len(left) or child.last_b >= len(right):
                        continue
                    grown.append(child)
            grown.sort(key=lambda c: c.score, reverse=True)
            beam = grown[: self.beam_size]
        return [left[i] if side == "A" else right[i] for side, i in beam[0].steps]
