"""Every judging mode on a small LLMBar Natural subset with the embedded CPU judge, scored by meta-eval.

For each mode (logprob with the legacy template, logprob with the three mode
template variants, generate, sample, prepair, prepair_pairwise, pointwise) this
runs ``configs/modes.yaml`` (full schedule: each instruction's two outputs in
both orders) through the real pipeline, then ``pairank meta-eval`` on that
mode's judgments: LLMBar's statistics (accuracy in each order, their average,
accuracy when both orders agree, positional agreement) plus Cohen's kappa, with
the error rows, engine prompts per judging pass and wall time.

Gemma-3-270M is a base model with a strong first-slot bias: its accuracy is
expected near chance and it rarely writes a verdict marker. The point is that
every mode runs end to end, and what each costs; never a quality claim.

Run from the repository root:  .venv/bin/python bench/modes_llmbar.py [--contexts 20]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import ROOT, machine, now, table, write_result

NATURAL = ROOT.parent / "shared" / "data" / "llmbar" / "LLMBar" / "Natural"
#: (label, overrides of configs/modes.yaml)
CASES = [
    ("logprob (legacy template)", {"judging": {"mode": "logprob"}}),
    ("logprob v1+v2+v3", {"judging": {"mode": "logprob", "variants": ["v1", "v2", "v3"]}}),
    ("generate", {"judging": {"mode": "generate"}}),
    ("sample (n=3)", {"judging": {"mode": "sample"}}),
    ("prepair", {"judging": {"mode": "prepair"}}),
    ("prepair_pairwise (PRePair^)", {"judging": {"mode": "prepair_pairwise"}}),
    ("pointwise", {"judging": {"mode": "pointwise"}}),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--contexts", type=int, default=20, help="LLMBar Natural instructions (each judged both orders)")
    args = ap.parse_args()

    import pyarrow.parquet as pq
    import yaml

    from pairank.jobs.run import run_job
    from pairank.jobs.specs.job import parse_spec
    from pairank.operators.meta_eval import meta_eval
    from pairank.storage.importers import run_import
    from pairank.storage.store.cache import JudgmentCache

    rows = []
    with tempfile.TemporaryDirectory(prefix="pairank-modes-") as tmp:
        data = Path(tmp) / "llmbar-natural"
        run_import("llmbar", str(NATURAL), str(data))
        labels = pq.read_table(data / "pairwise_labels.parquet")
        base = yaml.safe_load((ROOT / "configs" / "modes.yaml").read_text())
        for i, (label, over) in enumerate(CASES):
            judging = {**base["judging"], **over["judging"]}
            if "variants" not in over["judging"] and judging["mode"] == "logprob":
                judging.pop("variants")  # the legacy template <prompts>/<aspect>.txt
            spec = parse_spec(
                {
                    **base,
                    "name": f"case{i}",
                    "input": str(data),
                    "output": str(Path(tmp) / f"store{i}"),
                    "prompts": str(ROOT / "configs/prompts/instruction"),
                    "subset": {"contexts": args.contexts},
                    "judging": judging,
                },
                f"modes:{label}",
            )
            started = time.perf_counter()
            result = run_job(spec, progress=lambda m: None)
            wall = time.perf_counter() - started
            judgments = JudgmentCache(result.layout.judgments).read()  # a store per case: only this run's rows
            calls: Counter = Counter()
            for actor in result.report.get("pool", []):
                calls.update(actor["calls"])
            for s in meta_eval(judgments, labels).to_pylist():
                n = s["n_pairs"]
                rows.append(
                    {
                        "mode": label,
                        "prompt": s["prompt_hash"][:8],
                        "pairs": n,
                        "errors": result.errors,
                        "acc_original": round(s["n_correct_False"] / n, 3),
                        "acc_swapped": round(s["n_correct_True"] / n, 3),
                        "acc_both": round(s["n_correct_both"] / n, 3),
                        "positional_agreement": round(s["n_equal"] / n, 3),
                        "kappa_average": None if s["kappa_average"] is None else round(s["kappa_average"], 3),
                        "engine_prompts": dict(sorted(calls.items())),
                        "wall_seconds": round(wall, 1),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
    out = {"benchmark": "modes_llmbar", "when": now(), "machine": machine(), "contexts": args.contexts, "rows": rows}
    write_result("modes_llmbar", out)
    cols = list(rows[0])
    print(table([[r[c] for c in cols] for r in rows], cols))


if __name__ == "__main__":
    main()
