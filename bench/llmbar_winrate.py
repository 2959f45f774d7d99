"""Reproduction: calibrated win rates on LLMBar with the published judge verdicts (Gao et al. 2024, §5).

LLMBar names no generators, so, as the paper does, the human-preferred output of
80% of the pairs (seeded choice) is attributed to a simulated generator "A" and
that of the other 20% to "B" (``storage.importers.llmbar.attribute_generators``):
the true win rate of A against B is 0.8. The LLM evaluations are the verdicts
LLMBar publishes (``evaluators/<LLM>/<mode>/result.json``, both orders, imported
by ``pairank import llmbar``); each (LLM, prompting mode) is one judge, and its
two orders are combined by swap-and-sum (``operators.votes``; a split verdict is a
tie broken by a seeded coin).

Per subset and seed, the absolute error |estimate - true win rate| of:

- ``observed``: each judge's raw win rate k, averaged over judges (the paper's
  "observed" column), and all judges' votes pooled;
- ``dawid_skene``: Bayesian Dawid-Skene, no prior (``operators.dawid_skene``), its
  posterior mode (the paper's "DS mode") and mean; refused fits are counted;
- ``em``: crowd-kit's EM Dawid-Skene (cross-check);
- ``bwrs``: BWRS with in-distribution accuracies from a seeded fraction
  0.1 ... 1.0 of the human labels (mean and KDE mode).

The paper's judges are not these (it used its own LLM annotations, which are not
public), so its numbers are printed beside ours for scale, not as a target.

Run from the repository root:  .venv/bin/python bench/llmbar_winrate.py [--seeds 5] [--quick]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import machine, now, table, write_result

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "llmbar"
SUBSETS = {
    "LLMBar-Natural": "LLMBar/Natural",
    "LLMBar-all": "LLMBar",
    "MT-Bench": "Processed/MT-Bench",
    "LLMEval^2": "Processed/LLMEval^2",
}
#: Gao et al. (2024), no-prior Dawid-Skene: |error| of the observed rate -> of the DS mode.
PAPER = {"LLMBar-all": (0.142, 0.138), "LLMEval^2": (0.178, 0.156), "MT-Bench": (0.162, 0.188)}
RATIOS = [round(0.1 * i, 1) for i in range(1, 11)]


def one(imported, seed: int, ds_kwargs: dict) -> dict:
    from pairank.operators.dawid_skene import dawid_skene, em_dawid_skene
    from pairank.operators.votes import human_truth, pair_votes, system_pairs
    from pairank.operators.winrate import SYSTEM, accuracies, bwrs, observed
    from pairank.operators.winrate_table import gold_mask
    from pairank.storage.importers.llmbar import ASPECT, attribute_generators

    labels = imported.pairwise_labels
    cands = attribute_generators(imported.candidates, labels, 0.8, seed)
    pairs = system_pairs(cands, "A", "B")
    truth = human_truth(pairs, ASPECT, labels=labels)
    p = float(np.mean(truth == SYSTEM))
    votes = pair_votes(imported.judgments, pairs, truth, seed)
    k = [observed(votes.votes[:, j]) for j in range(len(votes.judges))]
    out = {
        "seed": seed,
        "pairs": votes.n_pairs,
        "judges": len(votes.judges),
        "true_win_rate": p,
        "ties": int(votes.ties.sum()),
        "observed_mean_abs_error": float(np.mean([abs(c.rate - p) for c in k if c.n])),
        "observed_pooled_abs_error": abs(observed(votes.votes).rate - p),
    }
    t = time.perf_counter()
    ds = dawid_skene(votes.votes, votes.judges, prior="none", seed=seed, **ds_kwargs)
    out["dawid_skene"] = {
        "ok": ds.ok,
        "reason": ds.reason,
        "rhat": ds.rhat,
        "ess_bulk": ds.ess_bulk,
        "seconds": round(time.perf_counter() - t, 2),
        "mode_abs_error": abs(ds.estimate.mode - p) if ds.estimate else None,
        "mean_abs_error": abs(ds.estimate.mean - p) if ds.estimate else None,
        "below_chance_judges": [j.judge for j in ds.judges if j.below_chance],
    }
    try:
        out["em_abs_error"] = abs(em_dawid_skene(votes.votes, votes.judges).win_rate - p)
    except ImportError:
        out["em_abs_error"] = None
    out["bwrs"] = {}
    for ratio in RATIOS:
        gold = np.where(gold_mask(truth, ratio, seed), truth, -1)
        q = [accuracies(votes.votes[:, j], gold) for j in range(len(votes.judges))]
        r = bwrs(k, q, votes.judges, draws=4000, seed=seed)
        out["bwrs"][str(ratio)] = {
            "mean_abs_error": abs(r.summary.mean - p) if r.summary else None,
            "mode_abs_error": abs(r.summary.mode - p) if r.summary else None,
            "dropped_fraction": r.dropped / r.drawn,
        }
    return out


def summarise(runs: list[dict]) -> dict:
    def mean(xs):
        xs = [x for x in xs if x is not None]
        return round(float(np.mean(xs)), 4) if xs else None

    return {
        "pairs": runs[0]["pairs"],
        "judges": runs[0]["judges"],
        "seeds": len(runs),
        "observed": mean(r["observed_mean_abs_error"] for r in runs),
        "observed_pooled": mean(r["observed_pooled_abs_error"] for r in runs),
        "ds_mode": mean(r["dawid_skene"]["mode_abs_error"] for r in runs),
        "ds_mean": mean(r["dawid_skene"]["mean_abs_error"] for r in runs),
        "ds_refused": sum(not r["dawid_skene"]["ok"] for r in runs),
        "ds_seconds": mean(r["dawid_skene"]["seconds"] for r in runs),
        "em": mean(r["em_abs_error"] for r in runs),
        "bwrs_mean": {ratio: mean(r["bwrs"][str(ratio)]["mean_abs_error"] for r in runs) for ratio in RATIOS},
        "bwrs_mode": {ratio: mean(r["bwrs"][str(ratio)]["mode_abs_error"] for r in runs) for ratio in RATIOS},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--subsets", nargs="+", default=list(SUBSETS))
    ap.add_argument("--quick", action="store_true", help="2 seeds, MT-Bench only")
    args = ap.parse_args()
    if args.quick:
        args.seeds, args.subsets = 2, ["MT-Bench"]

    from pairank.storage.fs import Location
    from pairank.storage.importers.llmbar import load

    ds_kwargs = {}
    result = {"benchmark": "llmbar_winrate", "started": now(), "machine": machine(), "subsets": {}}
    rows = []
    for name in args.subsets:
        imported = load(Location.of(str(DATA / SUBSETS[name])), skip_invalid=True)
        runs = []
        for seed in range(args.seeds):
            runs.append(one(imported, seed, ds_kwargs))
            print(f"{name} seed {seed}: ds {runs[-1]['dawid_skene']['seconds']} s", file=sys.stderr)
        s = summarise(runs)
        result["subsets"][name] = {"summary": s, "runs": runs, "skipped": list(imported.skipped)}
        paper = PAPER.get(name, (None, None))
        rows.append(
            [
                name,
                s["pairs"],
                s["judges"],
                s["observed"],
                s["observed_pooled"],
                s["ds_mode"],
                s["ds_refused"],
                s["em"],
                s["bwrs_mean"][0.1],
                s["bwrs_mean"][0.5],
                s["bwrs_mean"][1.0],
                paper[0] or "–",
                paper[1] or "–",
                s["ds_seconds"],
            ]
        )
    result["finished"] = now()
    path = write_result("llmbar_winrate", result)
    print(
        table(
            rows,
            [
                "subset",
                "pairs",
                "judges",
                "observed",
                "pooled",
                "DS mode",
                "DS refused",
                "EM",
                "BWRS 0.1",
                "BWRS 0.5",
                "BWRS 1.0",
                "paper obs",
                "paper DS",
                "DS s",
            ],
        )
    )
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
