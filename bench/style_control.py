"""Benchmark (SIMULATED judge): do length- and style-controlled scores see through a judge that prefers length?

The outputs are the 16 systems' real SummEval summaries on ``--contexts`` articles
(data/summeval), so their lengths are real. Their quality is synthetic and made to be
the opposite of verbosity: systems ranked by mean length, longest first, get latent
qualities -0.25 ... 0.25 in that order (SPREAD; small next to the length effect, as among close
systems), and each output gets its system's quality plus
N(0, 0.5) (written as a human_scores table, which the SIMULATED judge's ``quality``
reads and z-scores per article). The judge adds a known length preference
(``length_bias``: logit per unit of log(len_a / len_b), texts from ``lengths``), noise 0.5,
scale 2, and judges every ordered pair on each article through the real judge code.

Per seed (the judge's noise and the outputs' quality draws), system scores are compared
with the systems' latent qualities (Spearman over the 16 systems), each controlled
score next to the raw score of the same comparisons:

- win rate against ``--baseline``: **raw** against **length-controlled** (operators.style_control);
- all pairs: the **raw** hard win ratio against the **style-controlled Bradley-Terry** strength,

and the style fit's length coefficient is set against the bias put in. Reported: mean
and standard error over ``--seeds`` seeds, per length bias in ``--biases``.

Run from the repository root:  .venv/bin/python bench/style_control.py
Writes bench/results/style_control.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DATA = ROOT / "data" / "summeval"
#: Latent qualities run from -SPREAD (the most verbose system) to SPREAD (the tersest).
SPREAD = 0.25


def requests_for(candidates, contexts: list[str]):
    import pyarrow as pa

    rows = []
    by_ctx: dict[str, list[str]] = {}
    for ctx, cid in zip(candidates.column("context_id").to_pylist(), candidates.column("candidate_id").to_pylist()):
        by_ctx.setdefault(ctx, []).append(cid)
    for ctx in contexts:
        for a in by_ctx[ctx]:
            for b in by_ctx[ctx]:
                if a != b:
                    rows.append(
                        {
                            "key": f"{ctx}|{a}|{b}",
                            "context_id": ctx,
                            "aspect": "coherence",
                            "candidate_a": a,
                            "candidate_b": b,
                            "prompt": "",
                            "prompt_hash": "h",
                        }
                    )
    return pa.Table.from_pylist(rows)


def world(candidates, seed: int, folder: Path) -> dict[str, float]:
    """Write candidates and synthetic human scores (quality against verbosity) to ``folder``; the systems' q."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    systems = candidates.column("system").to_pylist()
    lengths: dict[str, list[int]] = {}
    for s, text in zip(systems, candidates.column("text").to_pylist()):
        lengths.setdefault(s, []).append(len(text))
    by_length = sorted(lengths, key=lambda s: -np.mean(lengths[s]))
    q = dict(zip(by_length, np.linspace(-SPREAD, SPREAD, len(by_length))))
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(candidates, folder / "candidates.parquet")
    pq.write_table(
        pa.table(
            {
                "candidate_id": candidates.column("candidate_id"),
                "aspect": ["coherence"] * len(systems),
                "score": [q[s] + rng.normal(0, 0.5) for s in systems],
            }
        ),
        folder / "human_scores.parquet",
    )
    return q


def one(seed: int, bias: float, candidates, requests, baseline: str, tmp: Path) -> dict:
    import numpy as np
    from scipy.stats import spearmanr

    from pairank.judges.engines.simulated import SimulatedJudgeSpec
    from pairank.judges.engines.simulated_judge import SimulatedJudge
    from pairank.operators.style_control import length_controlled_winrates, style_controlled_bt

    folder = tmp / f"seed-{seed}"
    truth = world(candidates, seed, folder)
    spec = SimulatedJudgeSpec(
        seed=seed, quality=str(folder), scale=2.0, noise=0.5, length_bias=bias, lengths=str(folder) if bias else None
    )
    judged = SimulatedJudge(spec).judge(requests)
    system_of = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    wins: dict[str, list[float]] = {}
    for a, b, label in zip(*(judged.column(c).to_pylist() for c in ("candidate_a", "candidate_b", "label"))):
        wins.setdefault(system_of[a], []).append({"A": 1.0, "tie": 0.5, "B": 0.0}[label])
        wins.setdefault(system_of[b], []).append({"A": 0.0, "tie": 0.5, "B": 1.0}[label])
    raw = {s: float(np.mean(v)) for s, v in wins.items()}
    against = length_controlled_winrates(judged, candidates, baseline).to_pylist()
    raw_vs = {r["system"]: r["win_rate"] for r in against} | {baseline: 0.5}
    lc = {r["system"]: r["lc_win_rate"] for r in against} | {baseline: 0.5}
    strengths, coefs = style_controlled_bt(judged, candidates)
    bt = {r["system"]: r["strength"] for r in strengths.to_pylist()}
    length = next(r for r in coefs.to_pylist() if r["feature"] == "length")
    systems = sorted(truth)

    def rho(scores):
        return float(spearmanr([scores[s] for s in systems], [truth[s] for s in systems]).statistic)

    return {
        "seed": seed,
        "bias": bias,
        "raw_vs_baseline": rho(raw_vs),
        "length_controlled": rho(lc),
        "raw_win_ratio": rho(raw),
        "style_bt": rho(bt),
        "length_coef": length["coef"],
        "length_se": length["se"],
    }


def summary(rows: list[dict], key: str) -> tuple[float, float]:
    values = [r[key] for r in rows]
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
    return round(mean, 3), round(sd / math.sqrt(len(values)), 3)


def main() -> None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, default=30)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--biases", type=float, nargs="+", default=[0.0, 1.0, 2.0])
    ap.add_argument("--baseline", default="M11")
    args = ap.parse_args()
    t0 = time.perf_counter()
    candidates = pq.read_table(DATA / "candidates.parquet")
    contexts = sorted(set(candidates.column("context_id").to_pylist()))[: args.contexts]
    candidates = candidates.filter(pc.is_in(candidates.column("context_id"), pc.cast(contexts, "string")))
    requests = requests_for(candidates, contexts)
    with tempfile.TemporaryDirectory() as tmp:
        rows = [
            one(seed, bias, candidates, requests, args.baseline, Path(tmp))
            for bias in args.biases
            for seed in range(args.seeds)
        ]
    table = []
    for bias in args.biases:
        mine = [r for r in rows if r["bias"] == bias]
        table.append(
            {
                "length_bias": bias,
                **{
                    k: summary(mine, k)
                    for k in ("raw_vs_baseline", "length_controlled", "raw_win_ratio", "style_bt", "length_coef")
                },
            }
        )
    for row in table:
        print(row)
    out = ROOT / "bench" / "results" / "style_control.json"
    out.write_text(
        json.dumps(
            {
                "benchmark": "style_control",
                "contexts": args.contexts,
                "seeds": args.seeds,
                "baseline": args.baseline,
                "requests_per_seed": requests.num_rows,
                "seconds": round(time.perf_counter() - t0, 1),
                "summary": table,
                "runs": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(out)


if __name__ == "__main__":
    main()
