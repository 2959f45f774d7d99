"""How good a leaderboard is: separability, agreement and Spearman with a reference ranking, and the Brier
score of its Bradley-Terry model on comparisons it was not fitted on.

Input: a LEADERBOARD table, the JUDGMENTS and CANDIDATES it was computed from, its
:class:`~pairank.operators.leaderboard.LeaderboardOptions`, and any number of
:class:`Reference` rankings. Output: per aspect (and ``overall``) a dict of figures
(:func:`board_quality`). The definitions follow Arena-Hard's:

- **Separability**: the share of pairs of the aspect's systems whose bootstrap
  intervals (``strength_low`` .. ``strength_high``) do not overlap. Intervals that
  touch overlap. A pair with a system without an interval (``n_boot`` 0) is not
  counted; with no pair left the figure is null.
- **A reference ranking** is a score per (aspect, system), higher better: the
  systems' mean human score (:func:`human_reference`) or another leaderboard's
  strengths (:func:`board_reference`); systems are matched by name.
- **Agreement** with a reference: of the pairs separable here whose two systems
  both have a reference score and whose reference scores differ, the share ordered
  the same way (the system whose interval lies above the other's has the higher
  reference score). Pairs not separable here, or tied in the reference, count
  neither way.
- **Spearman** between the strengths and the reference scores, over the systems in
  both; null with fewer than 2 such systems or a constant side.
- **Brier score** on held-out comparisons (:func:`brier`). The contexts are split
  once, seeded by the board's seed (:func:`held_out_contexts`): ``HELD_OUT`` (20%)
  of them, rounded, at least one, are held out (a board of one context has no
  split). The model is refitted, with the board's options and no bootstrap, on
  the judgments of the other contexts. Each held-out *decisive* comparison (verdict
  A or B, two different systems that both have a refitted strength) is predicted
  P(A wins) = 1 / (1 + exp(theta_B - theta_A)) and scored (P - y)^2, y 1 when A
  won and 0 when B did. Ties are left out, since the model gives no probability
  of a tie, and so are comparisons of a system the training contexts never
  compared; both are counted. Each comparison counts once, a decisive
  five-level verdict too. Always answering 0.5 scores 0.25, so ``skill`` =
  1 - brier / 0.25 is above 0 exactly when the model beats a coin.

A hand-checked example of the first three: A and B's intervals overlap, C's is
apart from both, so 2 of 3 pairs are separable. The reference puts B above A,
so of those 2 pairs (A-C, B-C) both agree; Spearman of (A 1st, B 2nd, C 3rd)
against (B, A, C) is 1 - 6 (1 + 1) / (3 (9 - 1)) = 0.5:

    >>> low, high = [0.6, 0.3, -1.2], [1.2, 0.7, -0.8]
    >>> separable_pairs(low, high)
    [(0, 2), (1, 2)]
    >>> agreement(low, high, [3.0, 4.0, 1.0])
    (2, 2)
    >>> round(spearman([1.0, 0.5, -1.0], [3.0, 4.0, 1.0]), 12)
    0.5
"""

from __future__ import annotations

import math
import warnings
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy import stats

from pairank.operators.checks import require_columns
from pairank.operators.leaderboard import OVERALL, LeaderboardOptions, leaderboard
from pairank.operators.scores import hard_verdict

#: The share of contexts held out for the Brier score.
HELD_OUT = 0.2
#: The Brier score of always answering 0.5 on decisive comparisons.
COIN_BRIER = 0.25


@dataclass(frozen=True)
class Reference:
    """A reference ranking: ``scores[(aspect, system)]``, higher is better; ``name`` says what it is."""

    name: str
    source: str
    scores: dict[tuple[str, str], float]


def overlap(low_a: float, high_a: float, low_b: float, high_b: float) -> bool:
    """Whether two closed intervals share a point (touching intervals do).

    >>> overlap(0.0, 1.0, 1.0, 2.0), overlap(0.0, 1.0, 1.5, 2.0)
    (True, False)
    """
    return low_a <= high_b and low_b <= high_a


def separable_pairs(low: Sequence[float | None], high: Sequence[float | None]) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, i < j, whose intervals do not overlap (systems without an interval are left out)."""
    spans = [None if lo is None or hi is None else (lo, hi) for lo, hi in zip(low, high)]
    return [
        (i, j)
        for i, a in enumerate(spans)
        if a is not None
        for j in range(i + 1, len(spans))
        if (b := spans[j]) is not None and not overlap(*a, *b)
    ]


def agreement(
    low: Sequence[float | None], high: Sequence[float | None], reference: Sequence[float | None]
) -> tuple[int, int]:
    """``(agreeing, counted)``: the pairs separable here, both in the reference with different reference scores
    (``counted``), and of these the ones the reference orders as the intervals do (``agreeing``).

    >>> agreement([0.0, 2.0], [1.0, 3.0], [5.0, 4.0]), agreement([0.0, 2.0], [1.0, 3.0], [5.0, None])
    ((0, 1), (0, 0))
    """
    agreeing = counted = 0
    for i, j in separable_pairs(low, high):
        ref_i, ref_j, low_i, high_j = reference[i], reference[j], low[i], high[j]
        if ref_i is None or ref_j is None or ref_i == ref_j or low_i is None or high_j is None:
            continue  # (separable pairs have both intervals)
        counted += 1
        agreeing += (low_i > high_j) == (ref_i > ref_j)
    return agreeing, counted


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho, or None with fewer than 2 values or a constant side.

    >>> round(spearman([1.0, 2.0, 3.0], [10.0, 30.0, 20.0]), 12), spearman([1.0, 2.0], [5.0, 5.0])
    (0.5, None)
    """
    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = float(stats.spearmanr(x, y).statistic)
    return None if math.isnan(rho) else rho


def held_out_contexts(contexts: Collection[str], seed: int, fraction: float = HELD_OUT) -> set[str]:
    """The contexts held out for the Brier score: ``round(fraction * k)`` of the ``k`` contexts, at least 1, at
    most k - 1 (none when k < 2), drawn by a generator seeded by ``seed``. The draw depends on the set of
    contexts, not their order.

    >>> sorted(held_out_contexts([f"c{i}" for i in range(10)], 0)) == sorted(held_out_contexts(
    ...     [f"c{i}" for i in reversed(range(10))], 0))
    True
    >>> len(held_out_contexts([f"c{i}" for i in range(10)], 0)), held_out_contexts(["only"], 0)
    (2, set())
    """
    ordered = sorted(set(contexts))
    k = len(ordered)
    if k < 2:
        return set()
    n = min(k - 1, max(1, round(fraction * k)))
    rng = np.random.default_rng([seed, zlib.crc32(b"held-out")])
    return {ordered[i] for i in rng.permutation(k)[:n]}


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def brier(
    judgments: pa.Table, candidates: pa.Table, options: LeaderboardOptions, held_out: Collection[str]
) -> dict[str, dict]:
    """Per aspect and ``overall``: the Brier score of the model fitted on the contexts not in ``held_out``, on the
    decisive comparisons of those in it (see the module docstring), with its counts."""
    require_columns(
        judgments, ("context_id", "aspect", "candidate_a", "candidate_b", "p_a", "error"), "the judgments table"
    )
    test_mask = pc.is_in(judgments.column("context_id"), pa.array(sorted(held_out), type=pa.string()))
    train, test = judgments.filter(pc.invert(test_mask)), judgments.filter(test_mask)
    fit = leaderboard(train, candidates, options=replace(options, n_boot=0, baseline=None)).table
    theta = {
        (r["aspect"], r["system"]): r["strength"] for r in fit.select(["aspect", "system", "strength"]).to_pylist()
    }
    system_of = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    labels = test.column("label").to_pylist() if "label" in test.column_names else [None] * test.num_rows
    cols = [test.column(c).to_pylist() for c in ("aspect", "candidate_a", "candidate_b", "p_a", "error")]
    scored: dict[str, list[float]] = {}
    ties: dict[str, int] = {}
    unfitted: dict[str, int] = {}
    for aspect, a, b, p, error, label in zip(*cols, labels):
        sa, sb = system_of.get(a), system_of.get(b)
        if error is not None or sa is None or sb is None or sa == sb:
            continue
        y = hard_verdict(p, label)
        for group in (aspect, OVERALL):
            if y == 0.5:
                ties[group] = ties.get(group, 0) + 1
            elif (group, sa) not in theta or (group, sb) not in theta:
                unfitted[group] = unfitted.get(group, 0) + 1
            else:
                prob = _sigmoid(theta[group, sa] - theta[group, sb])
                scored.setdefault(group, []).append((prob - y) ** 2)
    contexts = {}
    for name, table in (("train", train), ("held_out", test)):
        pairs = set(zip(table.column("aspect").to_pylist(), table.column("context_id").to_pylist()))
        contexts[name] = {a: len({c for x, c in pairs if x == a}) for a in {x for x, _ in pairs}}
        contexts[name][OVERALL] = len({c for _, c in pairs})
    groups = sorted(set(judgments.column("aspect").to_pylist()))
    out = {}
    for group in ([OVERALL] if groups else []) + groups:
        squares = scored.get(group, [])
        value = float(np.mean(squares)) if squares else None
        status = (
            "ok"
            if squares
            else (
                "no split: a board of one context"
                if not held_out
                else "no decisive held-out comparison between systems the training contexts compared"
            )
        )
        out[group] = {
            "brier": value,
            "coin": COIN_BRIER,
            "skill": None if value is None else 1.0 - value / COIN_BRIER,
            "n": len(squares),
            "ties_left_out": ties.get(group, 0),
            "unfitted_left_out": unfitted.get(group, 0),
            "train_contexts": contexts["train"].get(group, 0),
            "held_out_contexts": contexts["held_out"].get(group, 0),
            "held_out_fraction": HELD_OUT,
            "seed": options.seed,
            "status": status,
        }
    return out


def human_reference(human: pa.Table, candidates: pa.Table, aspects: Sequence[str], source: str = "") -> Reference:
    """The systems' mean human score per aspect, over the candidates of ``candidates`` (HUMAN_SCORES rows of
    other candidates or aspects are ignored); ``overall``: the mean of all the system's scores on ``aspects``.

    >>> cands = pa.table({"candidate_id": ["x1", "y1", "x2"], "system": ["x", "y", "x"]})
    >>> human = pa.table({"candidate_id": ["x1", "x2", "y1", "x1"], "aspect": ["a", "a", "a", "b"],
    ...                   "score": [1.0, 3.0, 4.0, 5.0]})
    >>> sorted(human_reference(human, cands, ["a", "b"]).scores.items())
    [(('a', 'x'), 2.0), (('a', 'y'), 4.0), (('b', 'x'), 5.0), (('overall', 'x'), 3.0), (('overall', 'y'), 4.0)]
    """
    system_of = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    wanted = set(aspects)
    sums: dict[tuple[str, str], list[float]] = {}
    for cid, aspect, score in zip(*(human.column(c).to_pylist() for c in ("candidate_id", "aspect", "score"))):
        if cid in system_of and aspect in wanted:
            for group in (aspect, OVERALL):
                sums.setdefault((group, system_of[cid]), []).append(score)
    return Reference("human scores", source, {k: float(np.mean(v)) for k, v in sorted(sums.items())})


def board_reference(table: pa.Table, source: str) -> Reference:
    """Another leaderboard (LEADERBOARD rows) as a reference: its strength per (aspect, system)."""
    require_columns(table, ("aspect", "system", "strength"), f"the reference leaderboard {source}")
    rows = table.select(["aspect", "system", "strength"]).to_pylist()
    return Reference(f"leaderboard {source}", source, {(r["aspect"], r["system"]): r["strength"] for r in rows})


def reference_figures(rows: list[dict], reference: Reference, aspect: str) -> dict:
    """Spearman and agreement of one aspect's LEADERBOARD rows with ``reference``."""
    score = {s: v for (a, s), v in reference.scores.items() if a == aspect}
    common = [r for r in rows if r["system"] in score]
    agreeing, counted = agreement(
        [r["strength_low"] for r in rows], [r["strength_high"] for r in rows], [score.get(r["system"]) for r in rows]
    )
    if not common:
        status = f"no system of the board has a reference score for {aspect!r}"
    elif counted == 0:
        status = "no separable pair with different reference scores"
    else:
        status = "ok"
    return {
        "reference": reference.name,
        "source": reference.source,
        "systems": len(common),
        "spearman": spearman([r["strength"] for r in common], [score[r["system"]] for r in common]),
        "agreement": agreeing / counted if counted else None,
        "agreeing_pairs": agreeing,
        "pairs": counted,
        "status": status,
    }


def board_quality(
    table: pa.Table,
    judgments: pa.Table,
    candidates: pa.Table,
    options: LeaderboardOptions,
    references: Sequence[Reference] = (),
) -> dict[str, dict]:
    """Per aspect of the LEADERBOARD ``table`` (``overall`` first): separability, the Brier score and, per
    reference, Spearman and agreement (see the module docstring). ``judgments``, ``candidates`` and ``options``
    are those the table was computed from."""
    require_columns(table, ("aspect", "system", "strength", "strength_low", "strength_high"), "the leaderboard")
    rows = table.to_pylist()
    briers = brier(
        judgments, candidates, options, held_out_contexts(judgments.column("context_id").to_pylist(), options.seed)
    )
    aspects = sorted({r["aspect"] for r in rows} - {OVERALL})
    out = {}
    for aspect in ([OVERALL] if any(r["aspect"] == OVERALL for r in rows) else []) + aspects:
        mine = [r for r in rows if r["aspect"] == aspect]
        low, high = [r["strength_low"] for r in mine], [r["strength_high"] for r in mine]
        with_interval = sum(lo is not None and hi is not None for lo, hi in zip(low, high))
        pairs = with_interval * (with_interval - 1) // 2
        separable = len(separable_pairs(low, high))
        out[aspect] = {
            "systems": len(mine),
            "pairs": pairs,
            "separable_pairs": separable,
            "separability": separable / pairs if pairs else None,
            "brier": briers.get(aspect),
            "references": [reference_figures(mine, ref, aspect) for ref in references],
        }
    return out


def _fmt(x, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def quality_lines(quality: dict[str, dict]) -> list[str]:
    """One line per aspect, as ``pairank leaderboard`` prints them.

    >>> print(*quality_lines({"overall": {"separability": 0.5, "separable_pairs": 1, "pairs": 2, "references": [],
    ...     "brier": {"brier": 0.2, "coin": 0.25, "skill": 0.2, "n": 10, "status": "ok"}}}))
    overall: separability 0.50 (1 of 2 pairs); Brier 0.200 on 10 held-out comparisons (0.250 for a coin, skill +0.20)
    """
    out = []
    for aspect, q in quality.items():
        parts = [f"separability {_fmt(q['separability'], '.2f')} ({q['separable_pairs']} of {q['pairs']} pairs)"]
        b = q.get("brier") or {}
        if b.get("brier") is not None:
            parts.append(
                f"Brier {b['brier']:.3f} on {b['n']} held-out comparisons ({b['coin']:.3f} for a coin, "
                f"skill {b['skill']:+.2f})"
            )
        elif b:
            parts.append(f"Brier – ({b['status']})")
        for r in q["references"]:
            parts.append(
                f"{r['reference']}: Spearman {_fmt(r['spearman'], '+.2f')}, agreement "
                f"{_fmt(r['agreement'], '.2f')} ({r['agreeing_pairs']} of {r['pairs']} pairs)"
            )
        out.append(f"{aspect}: " + "; ".join(parts))
    return out
