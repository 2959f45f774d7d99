"""Judge consistency: intransitive (cyclic) triads, and the spread of results over seeds.

For every (context, aspect) with a full comparison matrix, each unordered pair
{a, b} gets one preference. In ``symmetric`` mode it comes from both slot orders::

    s(a, b) = (p(a, b) + 1 - p(b, a)) / 2

so a beats b when s > 1/2, i.e. when p(a, b) > p(b, a), and the pair is a tie when
they are equal. In ``a_first`` mode only the order with a < b (lexicographically)
is read: a beats b when p(a, b) > 1/2. A triad {a, b, c} is intransitive when its
preferences form a cycle a > b > c > a; a triad with a tie is never a cycle but
counts among the triads.

Without ties the cycles are counted in O(N) from the win counts w_i (Kendall &
Babington Smith 1940, "On the Method of Paired Comparisons")::

    cyclic triads = C(N, 3) - sum_i C(w_i, 2)

because every transitive triad has exactly one member that beats the other two.
With ties that identity fails, so the triads are enumerated (N is small per
context).

    >>> cycle = np.array([[0, 1, -1], [-1, 0, 1], [1, -1, 0]])  # a>b, b>c, c>a
    >>> cyclic_triads(cycle)
    1

Ties. The preference is read from ``p_a`` (averaged over repeated judgments),
not from the label, and a pair is tied only when ``p(a, b) == p(b, a)`` exactly
(``a_first``: ``p(a, b) == 0.5``); a tied pair is never part of a cycle.
Sampled and pointwise verdicts put a tie at exactly 0.5. With generated verdicts
(p_a 1, 0.5 or 0 for A, tie, B) the symmetric rule is swap-and-sum: a tie in
both orders, or the same slot winning both orders, is a tie; a tie in one order
and a win in the other goes to the winner::

    >>> def pref(p_ab, p_ba):  # +1: a beats b, -1: b beats a, 0: a tie
    ...     return int(_preferences({("a", "b"): p_ab, ("b", "a"): p_ba}, ["a", "b"], "symmetric")[0, 1])
    >>> pref(0.5, 0.5), pref(1.0, 1.0), pref(0.5, 1.0), pref(0.5, 0.0)  # tie+tie, A+A, tie+b, tie+a
    (0, 0, -1, 1)
    >>> cyclic_triads(np.array([[0, 1, 0], [-1, 0, 1], [0, -1, 0]]))  # a>b, b>c, a~c: no cycle
    0

Spread over seeds::

    >>> seed_spread([0.5, 0.7])
    {'mean': 0.6, 'se': 0.1, 'n': 2}
"""

from __future__ import annotations

import itertools
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from pairank.operators.checks import finite_vector
from pairank.operators.reports import spearman_table

#: Columns of the judgments table this operator reads.
COLUMNS = ("context_id", "aspect", "candidate_a", "candidate_b", "p_a", "error")

#: How a pair's preference is read: from both slot orders, or from the a < b order only.
MODES = ("symmetric", "a_first")

#: Output of :func:`intransitive_triads` (a report table, never read back).

TRIADS = pa.schema(
    [
        pa.field("context_id", pa.string(), nullable=False, metadata={"description": "Input the candidates answer."}),
        pa.field("aspect", pa.string(), nullable=False, metadata={"description": "Aspect judged."}),
        pa.field("n_candidates", pa.int64(), nullable=False, metadata={"description": "Candidates in the matrix."}),
        pa.field("triads", pa.int64(), nullable=False, metadata={"description": "C(n_candidates, 3)."}),
        pa.field("intransitive", pa.int64(), nullable=False, metadata={"description": "Cyclic triads."}),
        pa.field("fraction", pa.float64(), metadata={"description": "intransitive / triads; null with no triad."}),
    ]
)

#: Output of :func:`spearman_by_seed`.
SEED_SPREAD = pa.schema(
    [
        pa.field("aspect", pa.string(), nullable=False, metadata={"description": "Aspect compared with human scores."}),
        pa.field("method", pa.string(), nullable=False, metadata={"description": "Scoring method."}),
        pa.field("level", pa.string(), nullable=False, metadata={"description": "'sample' or 'dataset'."}),
        pa.field("mean", pa.float64(), metadata={"description": "Mean Spearman rho over the seeds."}),
        pa.field("se", pa.float64(), metadata={"description": "Standard error of that mean; null below 2 seeds."}),
        pa.field("n", pa.int64(), nullable=False, metadata={"description": "Seeds with a rho."}),
    ]
)


def cyclic_triads(prefs: np.ndarray) -> int:
    """Cyclic triads of a preference matrix: ``prefs[i, j]`` is 1 (i beats j), -1 or 0 (tie).

    Uses the win-count identity without ties and enumerates the triads with them.

    >>> transitive = np.array([[0, 1, 1], [-1, 0, 1], [-1, -1, 0]])
    >>> cyclic_triads(transitive)
    0
    """
    prefs = np.asarray(prefs)
    n = len(prefs)
    ties = (prefs == 0) & ~np.eye(n, dtype=bool)
    if not ties.any():
        wins = (prefs > 0).sum(axis=1)
        return math.comb(n, 3) - sum(math.comb(int(w), 2) for w in wins)
    return sum(1 for i, j, k in itertools.combinations(range(n), 3) if prefs[i, j] == prefs[j, k] == prefs[k, i] != 0)


def _preferences(p: dict[tuple[str, str], float], ids: list[str], mode: str) -> np.ndarray | None:
    """The preference matrix of ``ids`` (sorted), or None when a needed order is missing."""
    n = len(ids)
    prefs = np.zeros((n, n), dtype=int)
    for i, j in itertools.combinations(range(n), 2):
        a, b = ids[i], ids[j]
        if mode == "symmetric":
            if (a, b) not in p or (b, a) not in p:
                return None
            diff = p[(a, b)] - p[(b, a)]  # the sign of s(a, b) - 1/2, exact in floating point
        else:
            if (a, b) not in p:
                return None
            diff = p[(a, b)] - 0.5
        prefs[i, j] = int(np.sign(diff))
        prefs[j, i] = -prefs[i, j]
    return prefs


def intransitive_triads(judgments: pa.Table, mode: str = "symmetric") -> pa.Table:
    """TRIADS rows per (context_id, aspect) with a full matrix; others are skipped.

    A context's candidates are all those in its rows, errors included, so a
    candidate whose judgments all failed makes the matrix incomplete. Rows with an
    error give no preference; repeated judgments of one ordered pair are averaged.
    """
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {list(MODES)}")
    missing = [c for c in COLUMNS if c not in judgments.column_names]
    if missing:
        raise ValueError(
            f"intransitive_triads: expected columns {list(COLUMNS)}, found {judgments.column_names} (missing {missing})"
        )
    candidates: dict[tuple[str, str], set[str]] = defaultdict(set)
    judged: dict[tuple[str, str], dict[tuple[str, str], list[float]]] = defaultdict(lambda: defaultdict(list))
    for ctx, aspect, a, b, p, error in zip(*(judgments.column(c).to_pylist() for c in COLUMNS)):
        candidates[(ctx, aspect)].update((a, b))
        if error is None:
            judged[(ctx, aspect)][(a, b)].append(p)
    rows = []
    for (ctx, aspect), members in sorted(candidates.items()):
        ids = sorted(members)
        p = {pair: float(np.mean(v)) for pair, v in judged[(ctx, aspect)].items()}
        prefs = _preferences(p, ids, mode)
        if prefs is None:
            continue
        triads = math.comb(len(ids), 3)
        cycles = cyclic_triads(prefs)
        rows.append(
            {
                "context_id": ctx,
                "aspect": aspect,
                "n_candidates": len(ids),
                "triads": triads,
                "intransitive": cycles,
                "fraction": cycles / triads if triads else None,
            }
        )
    return pa.Table.from_pylist(rows, schema=TRIADS)


def seed_spread(values: Sequence[float]) -> dict:
    """Mean, standard error (sample sd / sqrt(n), ddof=1; None for n < 2) and n of ``values``."""
    x = finite_vector(values, "values")
    se = float(x.std(ddof=1) / math.sqrt(x.size)) if x.size >= 2 else None
    return {"mean": round(float(x.mean()), 12), "se": None if se is None else round(se, 12), "n": int(x.size)}


def spearman_by_seed(rankings_by_seed: Mapping[int, pa.Table], human: pa.Table) -> pa.Table:
    """Spread of Spearman rho over seeds: SEED_SPREAD rows per (aspect, method, level).

    Each seed's rankings go through :func:`pairank.operators.reports.spearman_table` (no
    bootstrap); a seed whose rho is undefined for a row is left out of its ``n``.
    """
    rhos: dict[tuple[str, str, str], list[float]] = {}
    for _, rankings in sorted(rankings_by_seed.items()):
        for r in spearman_table(rankings, human, n_boot=0).to_pylist():
            values = rhos.setdefault((r["aspect"], r["method"], r["level"]), [])
            if r["rho"] is not None:
                values.append(r["rho"])
    rows = []
    for (aspect, method, level), values in sorted(rhos.items()):
        spread = seed_spread(values) if values else {"mean": None, "se": None, "n": 0}
        rows.append({"aspect": aspect, "method": method, "level": level, **spread})
    return pa.Table.from_pylist(rows, schema=SEED_SPREAD)
