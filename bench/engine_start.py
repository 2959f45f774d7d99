"""Benchmark: the vLLM judge's start with its own tokenizer against vLLM's (BENCHMARKS.md §22).

The judge gives the engine token ids and loads no tokenizer in vLLM (``skip_tokenizer_init``): vLLM 0.32 would load
the tokenizer twice, copy it twice for its renderer's threads and load it once more looking for a chat template.
Each arm is one child process that builds the judge as a pool's actor does (``make_judge`` of a ``VllmJudgeSpec``,
the embedded Gemma-3-270M, the synchronous engine in the process, the CPU build's settings of the tests) and then
judges the same four SummEval comparisons:

* ``judge-tokenizer``: the judge as it ships (for this model its tokenizer read straight from ``tokenizer.json``,
  judges/engines/vllm_tokenizer.py);
* ``judge-vllm-loader``: the judge's tokenizer loaded by vLLM's loader, as before that (``judge.engine_kwargs:
  {tokenizer_mode: hf}``, vLLM's ``auto`` for this model, which the fast path leaves to vLLM's loader);
* ``vllm-tokenizer``: ``judge.engine_kwargs.skip_tokenizer_init: false`` (vLLM loads its own as well).

Recorded per arm and round: the seconds and CPU seconds of ``make_judge`` (vLLM's import included, the same in
every arm) and the label probabilities of the four comparisons (equal across arms: the same token ids reach the engine).
The arms take turns round by round (``--rounds``), so load from elsewhere falls on every arm.

Run from the repository root:  .venv/bin/python bench/engine_start.py [--rounds 3]
Result: bench/results/engine_start[-TAG].json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "engine_start"
ARMS = {
    "judge-tokenizer": {},
    "judge-vllm-loader": {"tokenizer_mode": "hf"},
    "vllm-tokenizer": {"skip_tokenizer_init": False},
}


def child(arm: str) -> dict:
    C.quiet_engine_logs()
    from pairank.judges import make_judge
    from pairank.judges.engines.vllm import VllmJudgeSpec
    from pairank.judges.models import prepare_default_model

    prepare_default_model()
    candidates = C.candidates_table()
    requests = C.requests_for(C.pick(candidates, C.context_ids(candidates)[:1], 2), ["coherence"], VllmJudgeSpec())
    spec = VllmJudgeSpec(env=C.cpu_engine_env(), engine_kwargs=ARMS[arm])
    wall, cpu = time.perf_counter(), time.process_time()
    judge = make_judge(spec)
    started = {"seconds": time.perf_counter() - wall, "cpu_seconds": time.process_time() - cpu}
    out = judge.judge(requests.slice(0, 4))
    return {
        "arm": arm,
        **{k: round(v, 2) for k, v in started.items()},
        "p_a": [round(p, 6) for p in out.column("p_a").to_pylist()],
        "errors": out.num_rows - out.column("error").null_count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tag", default="")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child)["arm"])))
        return
    runs = []
    for round_no in range(args.rounds):
        for arm in ARMS:
            result = C.run_child(__file__, {"arm": arm}, {})
            result["round"] = round_no
            runs.append(result)
            print(f"round {round_no} {arm}: {result['seconds']} s, {result['cpu_seconds']} CPU s", flush=True)
    summary = {}
    for arm in ARMS:
        mine = [r for r in runs if r["arm"] == arm]
        summary[arm] = {k: statistics.median(r[k] for r in mine) for k in ("seconds", "cpu_seconds")}
    base = summary["vllm-tokenizer"]
    for arm in ARMS:
        summary[arm]["cpu_ratio_to_vllm_tokenizer"] = round(summary[arm]["cpu_seconds"] / base["cpu_seconds"], 2)
    same = len({json.dumps(r["p_a"]) for r in runs}) == 1
    result = {"when": C.now(), "machine": C.machine(), "model": C.MODEL_LABEL, "rounds": runs, "summary": summary}
    result["same_label_probabilities_in_every_run"] = same
    path = C.write_result(NAME + (f"-{args.tag}" if args.tag else ""), result)
    rows = [[arm, s["seconds"], s["cpu_seconds"], s["cpu_ratio_to_vllm_tokenizer"]] for arm, s in summary.items()]
    print(C.table(rows, ["arm", "median s", "median CPU s", "CPU ratio"]))
    print(f"same label probabilities in every run: {same}\n{path}")


if __name__ == "__main__":
    main()
