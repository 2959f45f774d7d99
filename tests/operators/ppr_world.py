"""A seeded world for prediction-powered ranking: humans follow Bradley-Terry, the judge prefers length.

``SYSTEMS`` systems have strengths spaced ``STEP`` logits apart (``s0`` best). The humans prefer a over b with
probability sigmoid(s_a - s_b). The two weakest systems write long answers (length 1, the others 0; each
answer's length varies by N(0, 0.3)); the judge's log-odds add ``bias`` per unit of length difference and
N(0, 0.5) of noise, and it reports that probability (a soft ``p_a``). Its verdicts cover ``judged`` keys drawn
without replacement from ``contexts`` x all system pairs; humans label ``labels`` of them, drawn uniformly.

The true order is the strengths' order: the humans' win rate of a system over uniformly drawn opponents rises
with its strength. :func:`run` returns, over seeds, how often each rank-set holds every true rank at once.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa

from pairank.operators.prediction_powered import covers, prediction_powered

SYSTEMS = 8
STEP = 0.25
CONTEXTS = 500
LONG = (SYSTEMS - 2, SYSTEMS - 1)


def names() -> list[str]:
    return [f"s{i}" for i in range(SYSTEMS)]


def true_ranks() -> dict[str, int]:
    return {name: i + 1 for i, name in enumerate(names())}


def true_win_rates() -> dict[str, float]:
    """Each system's human win rate against an opponent drawn uniformly from the others."""
    s = -STEP * np.arange(SYSTEMS)
    p = 1.0 / (1.0 + np.exp(-(s[:, None] - s[None, :])))
    np.fill_diagonal(p, 0.0)
    return dict(zip(names(), (p.sum(axis=1) / (SYSTEMS - 1)).tolist()))


def world(seed: int, judged: int, labels: int, bias: float = 1.0) -> tuple[pa.Table, pa.Table]:
    """The judged keys (with the judge's probability) and the labelled ones (with one human vote each)."""
    rng = np.random.default_rng(seed)
    strength = -STEP * np.arange(SYSTEMS)
    length = np.array([1.0 if m in LONG else 0.0 for m in range(SYSTEMS)])
    pairs = list(itertools.combinations(range(SYSTEMS), 2))
    picks = rng.choice(CONTEXTS * len(pairs), size=judged, replace=False)
    ctx, pair = picks // len(pairs), picks % len(pairs)
    a = np.array([pairs[p][0] for p in pair])
    b = np.array([pairs[p][1] for p in pair])
    gap = length[a] - length[b] + rng.normal(0, 0.3, judged) - rng.normal(0, 0.3, judged)
    judge_logit = strength[a] - strength[b] + bias * gap + rng.normal(0, 0.5, judged)
    judge = 1.0 / (1.0 + np.exp(-judge_logit))
    human_p = 1.0 / (1.0 + np.exp(-(strength[a] - strength[b])))
    sys = names()
    keys = pa.table(
        {
            "context_id": [f"c{c}" for c in ctx],
            "system_a": [sys[i] for i in a],
            "system_b": [sys[i] for i in b],
            "judge": judge,
        }
    )
    lab = rng.choice(judged, size=labels, replace=False)
    vote = (rng.random(labels) < human_p[lab]).astype(float)
    human = pa.table(
        {
            "context_id": [f"c{c}" for c in ctx[lab]],
            "system_a": [sys[i] for i in a[lab]],
            "system_b": [sys[i] for i in b[lab]],
            "human": vote,
        }
    )
    return keys, human


def run(seeds: int, judged: int, labels: int, bias: float = 1.0, alpha: float = 0.1, n_boot: int = 200) -> dict:
    """Coverage of the true order and mean rank-set size, prediction-powered and judge-only, over ``seeds``."""
    truth, rates = true_ranks(), true_win_rates()
    pp_hits = judge_hits = inside = 0
    pp_size = judge_size = 0.0
    for seed in range(seeds):
        keys, human = world(seed, judged, labels, bias)
        t = prediction_powered(keys, human, alpha=alpha, n_boot=n_boot, seed=seed).table
        pp_hits += covers(t, truth)
        judge_hits += covers(t, truth, "judge_rank_low", "judge_rank_high")
        rows = t.to_pylist()
        inside += sum(r["win_low"] <= rates[r["system"]] <= r["win_high"] for r in rows)
        pp_size += sum(r["rank_high"] - r["rank_low"] + 1 for r in rows) / len(rows)
        judge_size += sum(r["judge_rank_high"] - r["judge_rank_low"] + 1 for r in rows) / len(rows)
    return {
        "seeds": seeds,
        "judged": judged,
        "labels": labels,
        "bias": bias,
        "alpha": alpha,
        "pp_coverage": pp_hits / seeds,
        "judge_coverage": judge_hits / seeds,
        "pp_interval_coverage": round(inside / (seeds * SYSTEMS), 4),
        "pp_rank_set_size": round(pp_size / seeds, 3),
        "judge_rank_set_size": round(judge_size / seeds, 3),
    }
