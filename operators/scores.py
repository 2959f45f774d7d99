"""Win-ratio scores and rankings from judgments (comparative assessment).

For candidate i with c(a, b) the verdict that a (slot A) beats b (slot B)::

    score_i = [sum_j c(i, j) + sum_j (1 - c(j, i))] / (comparisons involving i)

Hard verdicts take c = 1 when p_a > 0.5, 0 when p_a < 0.5 and 1/2 at exactly
0.5 (a tie counts half); soft verdicts take c = p_a.

    >>> win_ratios([("x", "y", 0.9), ("y", "x", 0.2)], "hard")
    {'x': 1.0, 'y': 0.0}
    >>> win_ratios([("x", "y", 0.9), ("y", "x", 0.6)], "soft")["x"]
    0.65
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from storage.schemas import RANKINGS

#: Columns of the judgments table this operator reads.
COLUMNS = ("context_id", "aspect", "candidate_a", "candidate_b", "p_a", "error")


def verdict(p_a: float, mode: str) -> float:
    if mode == "soft":
        return p_a
    if mode == "hard":
        return 1.0 if p_a > 0.5 else 0.0 if p_a < 0.5 else 0.5
    raise ValueError(f"unknown verdict mode {mode!r}; expected 'hard' or 'soft'")


def win_ratios(comparisons: Iterable[tuple[str, str, float]], mode: str = "hard") -> dict[str, float]:
    """Score of every candidate that appears in ``(a, b, p_a)`` comparisons."""
    wins: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for a, b, p in comparisons:
        c = round(verdict(p, mode), 12)
        wins[a] += c
        wins[b] += 1.0 - c
        count[a] += 1
        count[b] += 1
    return {k: round(wins[k] / count[k], 12) for k in sorted(count)}


def comparison_counts(comparisons: Iterable[tuple[str, str, float]]) -> dict[str, int]:
    count: dict[str, int] = defaultdict(int)
    for a, b, _ in comparisons:
        count[a] += 1
        count[b] += 1
    return dict(count)


def min_ranks(scores: dict[str, float]) -> dict[str, int]:
    """Rank 1 is best; equal scores share the smallest rank.

    >>> min_ranks({"a": 0.5, "b": 1.0, "c": 0.5})
    {'b': 1, 'a': 2, 'c': 2}
    """
    order = sorted(scores, key=lambda k: (-scores[k], k))
    ranks, prev, rank = {}, None, 0
    for i, k in enumerate(order, start=1):
        if scores[k] != prev:
            rank, prev = i, scores[k]
        ranks[k] = rank
    return ranks


def rank_table(judgments: pa.Table, candidates: pa.Table, mode: str = "hard") -> pa.Table:
    """A RANKINGS table: one row per (context, aspect, candidate) with a verdict."""
    ok = judgments.filter(pc.is_null(judgments.column("error")))
    groups: dict[tuple[str, str], list[tuple[str, str, float]]] = defaultdict(list)
    for ctx, aspect, a, b, p in zip(
        *(ok.column(c).to_pylist() for c in ("context_id", "aspect", "candidate_a", "candidate_b", "p_a"))
    ):
        groups[(ctx, aspect)].append((a, b, p))
    system = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    rows = []
    for (ctx, aspect), comps in sorted(groups.items()):
        scores = win_ratios(comps, mode)
        counts = comparison_counts(comps)
        ranks = min_ranks(scores)
        for cid in sorted(scores, key=lambda k: ranks[k]):
            rows.append(
                {
                    "context_id": ctx,
                    "aspect": aspect,
                    "candidate_id": cid,
                    "system": system.get(cid, ""),
                    "method": f"win_ratio_{mode}",
                    "score": scores[cid],
                    "rank": ranks[cid],
                    "n_comparisons": counts[cid],
                }
            )
    return pa.Table.from_pylist(rows, schema=RANKINGS)
