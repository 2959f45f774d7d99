"""Benchmark: pairank's default length-controlled (LC) win rate against ``compat: alpaca-eval`` on seeded sets
with known truth (issue 49 item 4).

Each set is tests/operators/compat_world.py's ``annotations``: 11 systems x 200 instructions against one
baseline, instructions of random difficulty, 8% ties, a judge that prefers the longer output by ``length_bias``
logits at the most (0.8, or 0: length-blind), the baseline concise (m05) or verbose (m06). Per board, the mean
over the seeds of: Spearman and Kendall with the true strengths, the mean absolute error of the LC win rate
against the true one (``compat_world.lc_truth``: the expected score at equal length over the set's
instructions), the share of systems whose 95% interval holds the true LC win rate (coverage), and the interval's
mean width. Beside the two, the raw win rate and two variants of the default that show what its accuracy
depends on.

Run from the repository root:  .venv/bin/python bench/lc_accuracy.py [--seeds 20]   (bench/compat.py runs it too)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
from scipy.stats import kendalltau, spearmanr  # noqa: E402

from pairank.operators import compat as C  # noqa: E402
from pairank.operators.battles import length_controlled  # noqa: E402
from pairank.operators.style_control import Z95, fit_logistic  # noqa: E402
from tests.operators import compat_world as W  # noqa: E402

SETTINGS = [(0.8, "m05"), (0.8, "m06"), (0.0, "m05"), (0.0, "m06")]


def _variant(t: dict, baseline: str, *, per_system: bool = False, difficulty: bool = False) -> dict:
    """The default's model changed in one part: a length coefficient per system (one fit per system, as before
    issue 49), or AlpacaEval's instruction difficulty as a further shared column (the LC win rate then the mean
    prediction over the system's instructions at equal length, its interval by the delta method)."""
    system = np.array([b if a == baseline else a for a, b in zip(t["model_a"], t["model_b"])])
    sign = np.where(np.array(t["model_a"]) == baseline, 1.0, -1.0)  # +1: the system is B
    d = sign * (np.array(t["length_b"], dtype=float) - np.array(t["length_a"], dtype=float))
    score = {"model_a": 1.0, "model_b": 0.0, "tie": 0.5}
    y = np.array([score[w] if s < 0 else 1.0 - score[w] for w, s in zip(t["winner"], sign)])
    names = sorted(set(system))
    extra = [np.tanh(d / d.std())]
    if difficulty:
        level = C.instruction_difficulty(t["context"], y)
        extra.append(np.array([level[c] for c in t["context"]]))
    out = {}
    groups = [[s] for s in names] if per_system else [names]
    for group in groups:
        keep = np.isin(system, group)
        own = (system[keep][:, None] == np.array(group)[None, :]).astype(float)
        x = np.column_stack([own, *(e[keep] for e in extra)])
        coef, cov = fit_logistic(x, y[keep], ridge=np.r_[np.full(len(group), 1e-6), np.full(len(extra), 1e-2)])
        for j, s in enumerate(group):
            x0 = x[own[:, j] == 1].copy()
            x0[:, len(group)] = 0.0  # equal length
            p = 1.0 / (1.0 + np.exp(-x0 @ coef))
            grad = (x0 * (p * (1 - p))[:, None]).mean(axis=0)
            se = math.sqrt(grad @ cov @ grad)
            out[s] = (float(p.mean()), float(p.mean()) - Z95 * se, float(p.mean()) + Z95 * se)
    return out


def boards(seed: int, length_bias: float, baseline: str) -> dict[str, dict[str, tuple]]:
    """Per board: system -> (LC win rate, low, high) on one seeded set."""
    t = W.annotations_as_battles(W.annotations(seed=seed, baseline=baseline, length_bias=length_bias))

    def rows(compat=None):
        return {
            r["system"]: (r["lc_win_rate"], r["lc_low"], r["lc_high"])
            for r in length_controlled(t, baseline, compat=compat).to_pylist()
        }

    default = rows()
    raw = {r["system"]: (r["win_rate"], None, None) for r in length_controlled(t, baseline).to_pylist()}
    return {
        "pairank default": default,
        "compat alpaca-eval": rows("alpaca-eval"),
        "raw win rate": raw,
        "default with a length coefficient per system (before issue 49)": _variant(t, baseline, per_system=True),
        "default with AlpacaEval's instruction difficulty": _variant(t, baseline, difficulty=True),
    }


def accuracy(board: dict[str, tuple], truth: dict[str, float]) -> dict[str, float]:
    """Spearman and Kendall with the true strengths, mean |error| (points), coverage and mean width (points)."""
    names = sorted(truth)
    est = np.array([board[s][0] for s in names])
    true = np.array([truth[s] for s in names])
    strength = [W.STRENGTH[s] for s in names]
    out = {
        "Spearman": float(spearmanr(est, strength).statistic),
        "Kendall": float(kendalltau(est, strength).statistic),
        "mean |LC - true LC| (points)": float(100 * np.abs(est - true).mean()),
    }
    if board[names[0]][1] is not None:
        low, high = (np.array([board[s][k] for s in names]) for k in (1, 2))
        out["coverage of the true LC"] = float(np.mean((low <= true) & (true <= high)))
        out["interval width (points)"] = float(100 * np.mean(high - low))
    return out


def sweep(seeds: int = 20) -> dict:
    """Per setting and board: the mean of :func:`accuracy` over ``seeds`` seeds, and per setting the seeds where
    the default's Spearman is at least compat alpaca-eval's."""
    out: dict = {}
    for length_bias, baseline in SETTINGS:
        per: dict[str, list[dict]] = {}
        for seed in range(seeds):
            truth = W.lc_truth(seed=seed, baseline=baseline)
            for label, board in boards(seed, length_bias, baseline).items():
                per.setdefault(label, []).append(accuracy(board, truth))
        key = f"length bias {length_bias}, baseline {baseline} ({W.TOKENS[baseline]} tokens), {seeds} seeds"
        out[key] = {label: {m: float(np.mean([r[m] for r in rs])) for m in rs[0]} for label, rs in per.items()}
        ties = zip(per["pairank default"], per["compat alpaca-eval"])
        out[key]["seeds where the default's Spearman >= compat's"] = sum(
            a["Spearman"] >= b["Spearman"] for a, b in ties
        )
    return out


def sweep_lines(result: dict) -> list[str]:
    """The sweep as markdown tables, one per setting."""
    lines = []
    metrics = list(result[next(iter(result))]["pairank default"])
    for key, rows in result.items():
        lines += ["", key, "", "| board | " + " | ".join(metrics) + " |", "|---|" + "---|" * len(metrics)]
        for label, r in rows.items():
            if isinstance(r, dict):
                lines.append(f"| {label} | " + " | ".join(f"{r[m]:.3f}" if m in r else "–" for m in metrics) + " |")
        lines.append(f"\nseeds where the default's Spearman >= compat's: {rows[next(k for k in rows if 'seeds' in k)]}")
    return lines


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="pairank's default LC win rate against compat alpaca-eval")
    parser.add_argument("--seeds", type=int, default=20)
    result = sweep(parser.parse_args().seeds)
    print("\n".join(sweep_lines(result)))
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "lc_accuracy.json").write_text(json.dumps(result, indent=2))
