"""Quantile (CDF) matching: turn a ranking into scores on a target distribution.

A ranking says only who is better; quantile matching places it on the scale of a
target distribution, e.g. the 1-5 scores human annotators gave a reference set, or
a chosen share per grade. The candidate at 0-based position k of N (best first)
gets the target's quantile at level::

    u = 1 - (k + 0.5) / N

using the lower (step) inverse of the discrete target CDF: the smallest value v
with CDF(v) >= u. The best candidate gets the top of the distribution, and when N
is a multiple of the grid each score goes to its share of the candidates.
Candidates with equal ranks get one score, the quantile at their group's middle
position. This is histogram specification (quantile mapping) with the empirical
CDF of the ranking as source: the classic inverse-CDF transform of Hyndman & Fan
(1996, "Sample Quantiles in Statistical Packages", definition 1) applied at the
mid-ranks (k + 0.5) / N.

    >>> five = target_from_percentages({1: 0.2, 2: 0.2, 3: 0.2, 4: 0.2, 5: 0.2})
    >>> quantile_match(["a", "b", "c", "d", "e"], five)
    {'a': 5.0, 'b': 4.0, 'c': 3.0, 'd': 2.0, 'e': 1.0}
    >>> quantile_match_ranks({"a": 1, "b": 2, "c": 2, "d": 4}, target_from_scores([1, 2, 3, 4]))
    {'a': 4.0, 'b': 2.0, 'c': 2.0, 'd': 1.0}
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pairank.operators.checks import finite_vector
from pairank.storage.schemas import RANKINGS

#: Columns of the rankings table this operator reads.
COLUMNS = ("context_id", "aspect", "candidate_id", "method", "rank")

#: Slack on the CDF comparison, so that sums of shares such as 0.2 + 0.2 + 0.2
#: (0.6000000000000001) do not push a level that sits on a step to the next value.
_SLACK = 1e-9


@dataclass(frozen=True)
class Target:
    """A discrete distribution: increasing ``values`` and their cumulative shares ``cdf`` (last is 1)."""

    values: tuple[float, ...]
    cdf: tuple[float, ...]

    def __post_init__(self) -> None:
        v, c = np.asarray(self.values, dtype=float), np.asarray(self.cdf, dtype=float)
        if not (v.size and v.shape == c.shape and (np.diff(v) > 0).all() and (np.diff(c) >= 0).all() and c[-1] == 1):
            raise ValueError(
                f"Target: expected increasing values and a non-decreasing cdf of the same length ending at 1, "
                f"found values={self.values}, cdf={self.cdf}"
            )

    def quantile(self, u: float) -> float:
        """The smallest value whose CDF is at least ``u`` (``u`` in (0, 1]).

        >>> Target((1.0, 2.0), (0.25, 1.0)).quantile(0.25), Target((1.0, 2.0), (0.25, 1.0)).quantile(0.3)
        (1.0, 2.0)
        """
        i = int(np.searchsorted(self.cdf, u - _SLACK, side="left"))
        return self.values[min(i, len(self.values) - 1)]


def _target(shares: Mapping[float, float]) -> Target:
    """Target from positive shares that sum to 1 (values with share 0 are dropped)."""
    values = sorted(v for v, s in shares.items() if s > 0)
    cdf = np.cumsum([shares[v] for v in values])
    cdf /= cdf[-1]
    return Target(tuple(float(v) for v in values), tuple(float(c) for c in cdf))


def target_from_percentages(percentages: Mapping[float, float]) -> Target:
    """Target giving each score value its share; shares are >= 0 and sum to 1 (within 1e-6).

    >>> target_from_percentages({"bad": 1.0})
    Traceback (most recent call last):
    ...
    ValueError: percentages: expected finite numeric score values, found {'bad': 1.0}
    """
    try:
        bad_value = not percentages or not all(math.isfinite(float(v)) for v in percentages)
    except (TypeError, ValueError):
        bad_value = True
    if bad_value:
        raise ValueError(f"percentages: expected finite numeric score values, found {dict(percentages)}")
    shares = [float(s) for s in percentages.values()]
    if not all(s >= 0 for s in shares) or abs(math.fsum(shares) - 1.0) > 1e-6:
        raise ValueError(
            f"percentages: expected shares >= 0 that sum to 1, found {dict(percentages)} (sum {math.fsum(shares)})"
        )
    return _target({float(v): float(s) for v, s in percentages.items()})


def target_from_scores(scores: Sequence[float]) -> Target:
    """The empirical distribution of ``scores``, e.g. human scores of a reference set.

    >>> target_from_scores([3, 1, 3, 5])
    Target(values=(1.0, 3.0, 5.0), cdf=(0.25, 0.75, 1.0))
    """
    x = finite_vector(scores, "scores")
    values, counts = np.unique(x, return_counts=True)
    return _target(dict(zip(values.tolist(), (counts / x.size).tolist())))


def quantile_match_ranks(ranks: Mapping[str, int], target: Target) -> dict[str, float]:
    """Score of every candidate from its rank (1 is best); equal ranks share one score.

    A group of tied candidates at 0-based positions k0..k1 gets the quantile at the
    middle position (k0 + k1) / 2. Works for competition (1, 2, 2, 4) and dense
    (1, 2, 2, 3) ranks alike.
    """
    order = sorted(ranks, key=lambda c: (ranks[c], c))
    n = len(order)
    positions: dict[int, list[int]] = defaultdict(list)
    for k, cid in enumerate(order):
        positions[ranks[cid]].append(k)
    scores = {}
    for cid in order:
        group = positions[ranks[cid]]
        middle = (group[0] + group[-1]) / 2
        scores[cid] = target.quantile(1.0 - (middle + 0.5) / n)
    return scores


def quantile_match(ranking: Sequence[str], target: Target) -> dict[str, float]:
    """Score of every candidate of a best-first ``ranking`` (no ties)."""
    seen: dict[str, int] = {}
    for k, cid in enumerate(ranking):
        if cid in seen:
            raise ValueError(
                f"ranking: expected distinct candidate ids, found {cid!r} at positions {seen[cid]} and {k}"
            )
        seen[cid] = k
    return quantile_match_ranks(seen, target)


def quantile_table(rankings: pa.Table, target: Target, method_suffix: str = "quantile") -> pa.Table:
    """RANKINGS rows with quantile-matched scores, per (context_id, aspect, method).

    Each row keeps its candidate, system, rank and comparison count; ``method``
    becomes ``f"{method}_{method_suffix}"`` and ``score`` the matched score.
    """
    missing = [c for c in RANKINGS.names if c not in rankings.column_names]
    if missing:
        raise ValueError(
            f"quantile_table: expected columns {RANKINGS.names}, found {rankings.column_names} (missing {missing})"
        )
    rows = rankings.select(RANKINGS.names).to_pylist()
    groups: dict[tuple[str, str, str], dict[str, int]] = defaultdict(dict)
    for i, r in enumerate(rows):
        ranks = groups[(r["context_id"], r["aspect"], r["method"])]
        if r["candidate_id"] in ranks:
            raise ValueError(
                f"rankings row {i}: expected one row per candidate of (context_id, aspect, method), found "
                f"{r['candidate_id']!r} twice in {(r['context_id'], r['aspect'], r['method'])}"
            )
        ranks[r["candidate_id"]] = r["rank"]
    scores = {key: quantile_match_ranks(ranks, target) for key, ranks in groups.items()}
    out = [
        {
            **r,
            "method": f"{r['method']}_{method_suffix}",
            "score": scores[(r["context_id"], r["aspect"], r["method"])][r["candidate_id"]],
        }
        for r in rows
    ]
    return pa.Table.from_pylist(out, schema=RANKINGS)
