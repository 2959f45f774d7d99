"""Benchmark: prediction-powered rank-sets against the judge-only bootstrap (operators/prediction_powered.py).

On the seeded world of tests/operators/ppr_world.py: 8 systems whose human strengths are 0.25 logit apart, a
judge whose log-odds add ``bias`` per unit of answer-length difference (the two weakest systems write long
answers), 5,000 judged (context, system pair) keys drawn from 500 contexts x 28 pairs, and 100, 300 or 1,000 of
them labelled by one simulated human vote each, drawn uniformly. Per arm, over ``--seeds`` seeds: how often the
rank-sets at 1 - alpha hold every system's true rank at once (prediction-powered, and judge-only from the
judge's bootstrap intervals), their mean size, and how often the prediction-powered win-rate intervals hold the
true win rate (per system, marginal).

Run from the repository root:  .venv/bin/python bench/prediction_powered.py [--seeds 100]
Writes bench/results/prediction_powered.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.operators import ppr_world as W  # noqa: E402

JUDGED = 5000
LABELS = (100, 300, 1000)
BIASES = (1.0, 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=100)
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--n-boot", type=int, default=200, help="judge-only bootstrap resamples")
    args = parser.parse_args()
    started = time.perf_counter()
    arms = [
        W.run(args.seeds, JUDGED, n, bias=bias, alpha=args.alpha, n_boot=args.n_boot) for bias in BIASES for n in LABELS
    ]
    out = {"seconds": round(time.perf_counter() - started, 1), "systems": W.SYSTEMS, "arms": arms}
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "prediction_powered.json").write_text(json.dumps(out, indent=2))
    print(
        "| judge's length bias (logit) | human labels | coverage, prediction-powered | coverage, judge-only "
        "bootstrap | mean rank-set size, prediction-powered | mean rank-set size, judge-only | win-rate "
        "intervals holding the truth |\n|---|---|---|---|---|---|---|"
    )
    for a in arms:
        print(
            f"| {a['bias']:g} | {a['labels']:,} | {a['pp_coverage']:.2f} | {a['judge_coverage']:.2f} | "
            f"{a['pp_rank_set_size']:.2f} | {a['judge_rank_set_size']:.2f} | {a['pp_interval_coverage']:.3f} |"
        )
    print(f"\n{args.seeds} seeds per arm, alpha {args.alpha}, {out['seconds']} s")


if __name__ == "__main__":
    main()
