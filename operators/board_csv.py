"""Boards as the CSV files AlpacaEval and Arena-Hard publish, so dashboards that read theirs read ours.

- :func:`alpaca_eval_csv`: AlpacaEval's leaderboard columns, one row per system (the index column first, unnamed):
  ``win_rate``, ``standard_error``, ``n_wins``, ``n_wins_base``, ``n_draws``, ``n_total``,
  ``discrete_win_rate``, ``mode``, ``avg_length``, ``length_controlled_winrate``, ``lc_standard_error``, in
  percent where AlpacaEval has percent. From the judgments between each system's output and the baseline's on
  the same context: a win is 1, a tie 1/2; ``win_rate`` is the mean of p_a-based preferences (slot-adjusted, as
  AlpacaEval averages its soft preferences), ``discrete_win_rate`` the mean of the hard verdicts,
  ``standard_error`` the standard error of the soft preferences; ``avg_length`` the mean characters of the
  system's outputs; the length-controlled columns are the board's ``lc_win_rate`` and its interval's
  half-width / 1.96 (Wald's, or under compat alpaca-eval AlpacaEval's own standard error). ``mode`` is
  ``pairank``.
- :func:`arena_hard_csv`: Arena-Hard's columns ``model``, ``score``, ``rating_q025``, ``rating_q975``, ``CI``,
  ``avg_tokens``: the Bradley-Terry win rate against the baseline in percent, 100 / (1 + exp(theta_base -
  theta)), at the point strength and at the board's interval ends (the baseline's strength held at its point),
  ``CI`` as ``"(-a, +b)"``, and the mean tokens of the system's outputs (the given style features' length where
  an import brought them, else whitespace-separated words).
"""

from __future__ import annotations

import csv
import io
import math
from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from pairank.operators.checks import require_columns

ALPACA_EVAL_COLUMNS = (
    "",
    "win_rate",
    "standard_error",
    "n_wins",
    "n_wins_base",
    "n_draws",
    "n_total",
    "discrete_win_rate",
    "mode",
    "avg_length",
    "length_controlled_winrate",
    "lc_standard_error",
)
ARENA_HARD_COLUMNS = ("model", "score", "rating_q025", "rating_q975", "CI", "avg_tokens")
Z95 = 1.959963984540054


def _csv(columns, rows) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow(["" if v is None else v for v in r])
    return out.getvalue()


def _aspect(board: pa.Table, aspect: str) -> list[dict]:
    rows = board.filter(pc.equal(board.column("aspect"), aspect)).to_pylist()
    if not rows:
        raise ValueError(f"the board has no rows of aspect {aspect!r}")
    return rows


def baseline_votes(judgments: pa.Table, candidates: pa.Table, baseline: str, aspect: str | None) -> dict:
    """Per system: its (soft, hard) points against the baseline's output on the same context, one per judgment."""
    require_columns(judgments, ("candidate_a", "candidate_b", "p_a", "label", "error", "aspect"), "the judgments")
    system = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    out: dict[str, list[tuple[float, float]]] = defaultdict(list)
    cols = (judgments.column(c).to_pylist() for c in ("candidate_a", "candidate_b", "p_a", "label", "error", "aspect"))
    for a, b, p, label, err, asp in zip(*cols):
        if err is not None or label not in ("A", "B", "tie") or (aspect is not None and asp != aspect):
            continue
        sa, sb = system.get(a), system.get(b)
        hard = {"A": 1.0, "B": 0.0, "tie": 0.5}[label]
        soft = hard if p is None else p
        if sb == baseline and sa not in (None, baseline):
            out[sa].append((soft, hard))
        elif sa == baseline and sb not in (None, baseline):
            out[sb].append((1.0 - soft, 1.0 - hard))
    return out


def alpaca_eval_csv(
    board: pa.Table, judgments: pa.Table, candidates: pa.Table, baseline: str, aspect: str = "overall"
) -> str:
    """AlpacaEval's leaderboard CSV of one aspect of a board (see the module docstring)."""
    rows = _aspect(board, aspect)
    votes = baseline_votes(judgments, candidates, baseline, None if aspect == "overall" else aspect)
    lengths: dict[str, list[int]] = defaultdict(list)
    for s, t in zip(candidates.column("system").to_pylist(), candidates.column("text").to_pylist()):
        lengths[s].append(len(t))
    out = []
    for r in sorted(rows, key=lambda r: -(r.get("lc_win_rate") or 0.0) if r["system"] != baseline else -0.5):
        s = r["system"]
        avg_length = round(sum(lengths[s]) / len(lengths[s])) if lengths[s] else None
        if s == baseline:
            n = max((len(v) for v in votes.values()), default=0)
            out.append([s, 50.0, 0.0, 0, 0, n, n, 50.0, "pairank", avg_length, 50.0, None])
            continue
        v = votes.get(s, [])
        n = len(v)
        soft = [x for x, _ in v]
        mean = sum(soft) / n if n else None
        se = math.sqrt(sum((x - mean) ** 2 for x in soft) / (n - 1) / n) if n > 1 else None
        lc = r.get("lc_win_rate")
        lc_se = (r["lc_high"] - r["lc_low"]) / (2 * Z95) if lc is not None and r.get("lc_high") is not None else None
        out.append(
            [
                s,
                None if mean is None else 100 * mean,
                None if se is None else 100 * se,
                sum(h == 1.0 for _, h in v),
                sum(h == 0.0 for _, h in v),
                sum(h == 0.5 for _, h in v),
                n,
                None if not n else 100 * sum(h for _, h in v) / n,
                "pairank",
                avg_length,
                None if lc is None else 100 * lc,
                None if lc_se is None else 100 * lc_se,
            ]
        )
    return _csv(ALPACA_EVAL_COLUMNS, out)


def _win(theta: float, base: float) -> float:
    return 100.0 / (1.0 + math.exp(base - theta))


def arena_hard_csv(
    board: pa.Table, candidates: pa.Table, baseline: str, aspect: str = "overall", tokens: dict | None = None
) -> str:
    """Arena-Hard's leaderboard CSV of one aspect of a board (see the module docstring); ``tokens``: candidate id
    -> its tokens (given style features), else words are counted."""
    rows = _aspect(board, aspect)
    by = {r["system"]: r for r in rows}
    if baseline not in by:
        raise ValueError(f"baseline {baseline!r} is not on the board's {aspect!r} rows: {sorted(by)}")
    base = by[baseline]["strength"]
    count: dict[str, list[float]] = defaultdict(list)
    for cid, s, t in zip(*(candidates.column(c).to_pylist() for c in ("candidate_id", "system", "text"))):
        count[s].append(float(tokens[cid]) if tokens and cid in tokens else float(len(t.split())))
    out = []
    for r in sorted(rows, key=lambda r: -r["strength"]):
        score = _win(r["strength"], base)
        low = _win(r["strength_low"], base) if r["strength_low"] is not None else None
        high = _win(r["strength_high"], base) if r["strength_high"] is not None else None
        if r["system"] == baseline:
            low = high = 50.0
        ci = f"(-{score - low:.2f}, +{high - score:.2f})" if low is not None and high is not None else ""
        avg = round(sum(count[r["system"]]) / len(count[r["system"]]), 1) if count[r["system"]] else None
        out.append(
            [
                r["system"],
                round(score, 2),
                None if low is None else round(low, 2),
                None if high is None else round(high, 2),
                ci,
                avg,
            ]
        )
    return _csv(ARENA_HARD_COLUMNS, out)
