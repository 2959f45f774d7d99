"""A synthetic set for the compatibility settings (operators/compat.py): twelve systems of known strength, a judge
that prefers length and markdown, ties; as LMArena-style battles with style counts, and as AlpacaEval-style
annotations of every system against one baseline."""

from __future__ import annotations

import numpy as np

SYSTEMS = [f"m{i:02d}" for i in range(12)]
#: True strengths (logits); the verbose systems are not the stronger ones.
STRENGTH = dict(zip(SYSTEMS, np.linspace(1.1, -1.1, 12).round(3)))
#: Mean tokens per answer: every third system is verbose.
TOKENS = {s: (900 if i % 3 == 0 else 350) for i, s in enumerate(SYSTEMS)}
#: Mean markdown elements per answer.
MARKDOWN = {s: (4.0 if i % 4 == 1 else 0.5) for i, s in enumerate(SYSTEMS)}


def _answer(rng, system: str) -> dict[str, float]:
    return {
        "length": float(max(5, int(TOKENS[system] * rng.lognormal(0.0, 0.35)))),
        "headers": float(rng.poisson(MARKDOWN[system] * 0.5)),
        "bold": float(rng.poisson(MARKDOWN[system])),
        "lists": float(rng.poisson(MARKDOWN[system] * 1.5)),
    }


def _style_logit(fa: dict, fb: dict) -> float:
    out = 0.6 * np.log(fa["length"] / fb["length"])
    for k, w in (("bold", 0.4), ("lists", 0.3)):
        if fa[k] + fb[k]:
            out += w * (fa[k] - fb[k]) / (fa[k] + fb[k])
    return float(out)


def battles(n: int = 3000, seed: int = 0) -> dict[str, list]:
    """LMArena-style battles: random pairs, ``winner`` model_a / model_b / tie / both_bad, counts as
    ``<feature>_a`` / ``<feature>_b`` (length in tokens), pairs drawn unevenly (the first systems more often)."""
    rng = np.random.default_rng(seed)
    popularity = np.linspace(2.0, 1.0, len(SYSTEMS))
    popularity /= popularity.sum()
    out: dict[str, list] = {k: [] for k in ("model_a", "model_b", "winner", "context")}
    for k in ("length", "headers", "bold", "lists"):
        out[f"{k}_a"], out[f"{k}_b"] = [], []
    for i in range(n):
        a, b = rng.choice(SYSTEMS, size=2, replace=False, p=popularity)
        fa, fb = _answer(rng, a), _answer(rng, b)
        logit = STRENGTH[a] - STRENGTH[b] + _style_logit(fa, fb)
        u = rng.random()
        if u < 0.1:
            winner = "tie"
        elif u < 0.13:
            winner = "both_bad"
        else:
            winner = "model_a" if rng.random() < 1 / (1 + np.exp(-logit)) else "model_b"
        out["model_a"].append(str(a))
        out["model_b"].append(str(b))
        out["winner"].append(winner)
        out["context"].append(f"p{i}")
        for k in fa:
            out[f"{k}_a"].append(fa[k])
            out[f"{k}_b"].append(fb[k])
    return out


#: The share of ties among the annotations.
TIES = 0.08


def annotations(
    n_instructions: int = 200, seed: int = 0, baseline: str = "m05", length_bias: float = 0.8
) -> list[dict]:
    """AlpacaEval-style rows, one per (system, instruction) against ``baseline``: ``index`` (the instruction),
    ``generator_1`` the baseline, ``generator_2`` the system, ``output_1``/``output_2`` texts (only their length
    matters), ``preference`` 1 (baseline wins), 2 (system wins) or 1.5 (tie). Instructions differ in difficulty;
    the judge prefers the longer output by ``length_bias`` logits at the most (0: length-blind)."""
    rng = np.random.default_rng(seed)
    difficulty = rng.normal(0.0, 1.0, n_instructions)
    base_len = [int(TOKENS[baseline] * 4 * rng.lognormal(0.0, 0.35)) for _ in range(n_instructions)]
    rows = []
    for system in SYSTEMS:
        if system == baseline:
            continue
        for i in range(n_instructions):
            n = int(TOKENS[system] * 4 * rng.lognormal(0.0, 0.35))
            logit = (
                STRENGTH[system] - STRENGTH[baseline] + difficulty[i] + length_bias * np.tanh((n - base_len[i]) / 1500)
            )
            u = rng.random()
            pref = 1.5 if u < TIES else (2.0 if rng.random() < 1 / (1 + np.exp(-logit)) else 1.0)
            rows.append(
                {
                    "index": i,
                    "instruction": f"instruction {i}",
                    "generator_1": baseline,
                    "generator_2": system,
                    "output_1": "x" * base_len[i],
                    "output_2": "y" * n,
                    "preference": pref,
                    "annotator": "synthetic",
                }
            )
    return rows


def lc_truth(n_instructions: int = 200, seed: int = 0, baseline: str = "m05") -> dict[str, float]:
    """The true length-controlled win rate of each system against ``baseline`` on the set :func:`annotations`
    draws with these arguments: its expected score (a tie half a win) at equal length, averaged over the set's
    instructions."""
    difficulty = np.random.default_rng(seed).normal(0.0, 1.0, n_instructions)  # annotations' first draw
    return {
        s: TIES / 2 + (1 - TIES) * float(np.mean(1 / (1 + np.exp(-(STRENGTH[s] - STRENGTH[baseline] + difficulty)))))
        for s in SYSTEMS
        if s != baseline
    }


def annotations_as_battles(rows: list[dict]) -> dict[str, list]:
    """The same comparisons as a battles table (the baseline in slot A, as AlpacaEval's output_1)."""
    winner = {1.0: "model_a", 2.0: "model_b", 1.5: "tie"}
    return {
        "model_a": [r["generator_1"] for r in rows],
        "model_b": [r["generator_2"] for r in rows],
        "winner": [winner[r["preference"]] for r in rows],
        "context": [str(r["index"]) for r in rows],
        "length_a": [len(r["output_1"]) for r in rows],
        "length_b": [len(r["output_2"]) for r in rows],
    }
