"""Win-ratio scores and rankings from judgments (comparative assessment).

For candidate i with c(a, b) the verdict that a (slot A) beats b (slot B)::

    score_i = [sum_j c(i, j) + sum_j (1 - c(j, i))] / (comparisons involving i)

Hard verdicts take c = 1 for a win of slot A, 0 for a loss and 1/2 for a tie
(a tie counts half to each side); soft verdicts take c = p_a.

    >>> win_ratios([("x", "y", 0.9), ("y", "x", 0.2)], "hard")
    {'x': 1.0, 'y': 0.0}
    >>> win_ratios([("x", "y", 0.9), ("y", "x", 0.6)], "soft")["x"]
    0.65

Ties. A judgment row's hard verdict is its ``label`` (:func:`hard_verdict`): "A"
is 1, "B" 0 and "tie" 1/2, so a row labelled "tie" is a tie even if its ``p_a``
is a hair off 0.5, and hard win ratios count exactly what the swap-and-sum votes
of :mod:`pairank.operators.votes` count. A comparison without a label (the ``(a, b, p)``
tuples of :func:`win_ratios`, or a table without a ``label`` column) is read from
the side of 0.5 its p is on, which is how every judge labels its rows
(:func:`pairank.judges.interface.label_of`): exactly 0.5 is a tie. Soft verdicts
always use ``p_a``. A tie of x and y gives each half a win:

    >>> win_ratios([("x", "y", hard_verdict(0.5, "tie")), ("x", "z", 1.0)], "hard")
    {'x': 0.75, 'y': 0.5, 'z': 0.0}

Five-level verdicts (``judging.verdict_scale: 5``). They are stored as every verdict
is, a label and a p_a (A>>B: A and 1, A>B: A and 0.75, A=B: tie and 0.5, ...), so a
hard verdict counts A>B as a win and a soft one as 0.75. As in Arena-Hard, a
decisive verdict (A>>B or B>>A) counts ``decisive_weight`` times (default
:data:`DECISIVE_WEIGHT`): a comparison of weight w adds w c to slot A's wins, w (1 - c)
to slot B's, and w to both sides' totals. The weight is read from the stored row at
scoring time (:func:`verdict_weights`), so the judgments and their keys do not depend
on it. With weights, x's decisive win over y counts 3 times against y's win over x:

    >>> win_ratios([("x", "y", 1.0), ("y", "x", 1.0)], "hard", weights=[3.0, 1.0])
    {'x': 0.75, 'y': 0.25}
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage.schemas import LABELS, RANKINGS

#: Columns of the judgments table this operator reads; ``label`` too where the table has it.
COLUMNS = ("context_id", "aspect", "candidate_a", "candidate_b", "p_a", "error")

#: Slot A's points for each hard verdict label: a win, a loss, and a tie counting half.
LABEL_POINTS = {"A": 1.0, "B": 0.0, "tie": 0.5}

#: How many times a decisive five-level verdict ([[A>>B]], [[B>>A]]) counts by default, as in Arena-Hard.
DECISIVE_WEIGHT = 3.0

#: What is ranked: a candidate id, or a system's index.
K = TypeVar("K", str, int)


def verdict_scale(sampling: str | None) -> int:
    """The verdict scale of a judgment from its sampling JSON: 5 where the generate mode recorded five levels, else 3.

    (:func:`pairank.judges.modes.judging_identity` records ``"verdict_scale": 5``
    under ``judging``, and nothing for three levels.)

    >>> verdict_scale('{"judging":{"verdict_scale":5},"mode":"generate"}'), verdict_scale("{}"), verdict_scale(None)
    (5, 3, 3)
    """
    try:
        value = json.loads(sampling or "{}")
    except json.JSONDecodeError:
        return 3
    judging = value.get("judging") if isinstance(value, dict) else None
    return 5 if isinstance(judging, dict) and judging.get("verdict_scale") == 5 else 3


def verdict_weights(sampling: Sequence[str | None], p_a: Sequence[float | None], decisive_weight: float) -> list[float]:
    """Each judgment's weight: ``decisive_weight`` for a decisive five-level verdict (p_a 1 or 0), else 1.

    >>> five = '{"judging":{"verdict_scale":5}}'
    >>> verdict_weights([five, five, five, "{}"], [1.0, 0.75, 0.0, 1.0], 3.0)
    [3.0, 1.0, 3.0, 1.0]
    """
    if not (decisive_weight >= 1.0 and decisive_weight < float("inf")):
        raise ValueError(f"decisive_weight: expected a finite number >= 1, found {decisive_weight!r}")
    scales = {s: verdict_scale(s) for s in set(sampling)}
    return [decisive_weight if scales[s] == 5 and p in (0.0, 1.0) else 1.0 for s, p in zip(sampling, p_a)]


def hard_verdict(p_a: float | None, label: str | None = None) -> float:
    """Slot A's points in a hard verdict: its label's (A 1, B 0, tie 1/2), else the side of 0.5 ``p_a`` is on.

    >>> hard_verdict(0.5000000000000001, "tie"), hard_verdict(0.5), hard_verdict(0.7), hard_verdict(0.2)
    (0.5, 0.5, 1.0, 0.0)
    """
    if label is not None:
        try:
            return LABEL_POINTS[label]
        except KeyError:
            raise ValueError(f"label: expected one of {list(LABELS)} or null, found {label!r}") from None
    if p_a is None:
        raise ValueError("hard verdict: the judgment has neither a label nor a p_a")
    return 1.0 if p_a > 0.5 else 0.0 if p_a < 0.5 else 0.5


def verdict(p_a: float, mode: str) -> float:
    """The verdict c of a comparison with probability ``p_a``: :func:`hard_verdict` of p, or p itself."""
    if mode == "soft":
        return p_a
    if mode == "hard":
        return hard_verdict(p_a)
    raise ValueError(f"unknown verdict mode {mode!r}; expected 'hard' or 'soft'")


def win_ratios(
    comparisons: Iterable[tuple[str, str, float]], mode: str = "hard", weights: Sequence[float] | None = None
) -> dict[str, float]:
    """Score of every candidate that appears in ``(a, b, p_a)`` comparisons, each of weight 1 or ``weights[i]``."""
    wins: dict[str, float] = defaultdict(float)
    count: dict[str, float] = defaultdict(float)
    for i, (a, b, p) in enumerate(comparisons):
        w = 1.0 if weights is None else weights[i]
        c = round(verdict(p, mode), 12)
        wins[a] += w * c
        wins[b] += w * (1.0 - c)
        count[a] += w
        count[b] += w
    return {k: round(wins[k] / count[k], 12) for k in sorted(count)}


def comparison_counts(comparisons: Iterable[tuple[str, str, float]]) -> dict[str, int]:
    count: dict[str, int] = defaultdict(int)
    for a, b, _ in comparisons:
        count[a] += 1
        count[b] += 1
    return dict(count)


def min_ranks(scores: Mapping[K, float]) -> dict[K, int]:
    """Rank 1 is best; equal scores share the smallest rank.

    >>> min_ranks({"a": 0.5, "b": 1.0, "c": 0.5})
    {'b': 1, 'a': 2, 'c': 2}
    """
    order = sorted(scores, key=lambda k: (-scores[k], k))
    ranks: dict[K, int] = {}
    prev, rank = None, 0
    for i, k in enumerate(order, start=1):
        if scores[k] != prev:
            rank, prev = i, scores[k]
        ranks[k] = rank
    return ranks


def rank_table(
    judgments: pa.Table, candidates: pa.Table, mode: str = "hard", decisive_weight: float = DECISIVE_WEIGHT
) -> pa.Table:
    """A RANKINGS table: one row per (context, aspect, candidate) with a verdict.

    Hard verdicts are the rows' labels where the table has them; a decisive five-level
    verdict counts ``decisive_weight`` times where the table has the ``sampling``
    column (see the module docstring). ``n_comparisons`` counts each judgment once.
    """
    if mode not in ("hard", "soft"):
        raise ValueError(f"unknown verdict mode {mode!r}; expected 'hard' or 'soft'")
    ok = judgments.filter(pc.is_null(judgments.column("error")))
    labels = ok.column("label").to_pylist() if "label" in ok.column_names else [None] * ok.num_rows
    sampling = ok.column("sampling").to_pylist() if "sampling" in ok.column_names else [None] * ok.num_rows
    weights = verdict_weights(sampling, ok.column("p_a").to_pylist(), decisive_weight)
    groups: dict[tuple[str, str], list[tuple[str, str, float]]] = defaultdict(list)
    group_weights: dict[tuple[str, str], list[float]] = defaultdict(list)
    for ctx, aspect, a, b, p, label, w in zip(
        *(ok.column(c).to_pylist() for c in ("context_id", "aspect", "candidate_a", "candidate_b", "p_a")),
        labels,
        weights,
    ):
        groups[(ctx, aspect)].append((a, b, hard_verdict(p, label) if mode == "hard" else p))
        group_weights[(ctx, aspect)].append(w)
    system = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    rows = []
    for (ctx, aspect), comps in sorted(groups.items()):
        scores = win_ratios(comps, mode, group_weights[(ctx, aspect)])
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
