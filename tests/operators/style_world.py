"""A judge that prefers longer outputs, with verbose systems that are not the better ones: candidates and
judgments drawn from a known model, for the style-control tests."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from scipy.stats import spearmanr

QUALITY = {"S0": 0.0, "S1": 0.4, "S2": 0.8, "S3": 1.2, "S4": 1.6, "S5": 2.0}
#: Characters per output: the weaker systems write the most.
LENGTH = {"S0": 1600, "S1": 1200, "S2": 900, "S3": 700, "S4": 500, "S5": 400}


def world(length_bias: float, seed: int, contexts: int = 150, markdown: bool = False):
    """Candidates and judgments: logit P(A) = q_a - q_b + length_bias * log(len_a / len_b)
    (+ 0.8 * the normalised difference of bold spans, each output holding 0-3 of them at random)."""
    rng = np.random.default_rng(seed)
    cands, rows = [], []
    for c in range(contexts):
        for s in QUALITY:
            n = int(LENGTH[s] * rng.lognormal(0.0, 0.4))  # outputs of one system vary in length
            text = ("**bold** " * int(rng.integers(0, 4)) if markdown else "") + "x" * n
            cands.append(
                {"context_id": f"c{c}", "context": "q", "candidate_id": f"c{c}/{s}", "system": s, "text": text}
            )
    text_of = {r["candidate_id"]: r["text"] for r in cands}
    for c in range(contexts):
        for a in QUALITY:
            for b in QUALITY:
                if a == b:
                    continue
                ia, ib = f"c{c}/{a}", f"c{c}/{b}"
                logit = QUALITY[a] - QUALITY[b] + length_bias * np.log(len(text_of[ia]) / len(text_of[ib]))
                bold_a, bold_b = text_of[ia].count("**") / 2, text_of[ib].count("**") / 2
                if bold_a + bold_b:
                    logit += 0.8 * (bold_a - bold_b) / (bold_a + bold_b)
                label = "A" if rng.random() < 1 / (1 + np.exp(-logit)) else "B"
                rows.append(
                    {
                        "context_id": f"c{c}",
                        "aspect": "overall",
                        "candidate_a": ia,
                        "candidate_b": ib,
                        "label": label,
                        "p_a": 1.0 if label == "A" else 0.0,
                        "error": None,
                    }
                )
    return pa.Table.from_pylist(cands), pa.Table.from_pylist(rows)


def rho(scores: dict[str, float]) -> float:
    systems = sorted(QUALITY)
    return spearmanr([scores[s] for s in systems], [QUALITY[s] for s in systems]).statistic
