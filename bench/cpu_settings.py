"""Benchmark: the vLLM CPU build's settings, arm against arm on the same prompts (issue 27, item 1).

The demo's job (SummEval, C contexts x N candidates, full matrix, two aspects, prefix
order, the real templates) judged by a bare ``vllm.LLM`` as the judge runs it (the
embedded Gemma-3-270M, ``dtype`` as ``auto`` chooses on this CPU, eager, prefix caching
on, one token with ``logprob_token_ids``), in batches of ``--batch-size`` prompts. Each
arm changes one setting of the baseline (the demo's: ``VLLM_CPU_KVCACHE_SPACE=1``,
threads bound to every core, vLLM's defaults otherwise):

* ``kv4``: a 4 GiB KV cache instead of 1 GiB;
* ``mbt-2048`` / ``mbt-8192``: ``max_num_batched_tokens`` (the tokens of one engine step);
* ``no-chunked-prefill``: ``enable_chunked_prefill=False``.

An arm is one child process (the KV cache size is read when vLLM starts): it builds the
engine, judges one warm-up window (the compile batch), then ``--windows`` timed windows
of the same prompts, each from an emptied prefix cache. The arms take turns round by
round (``--rounds``), so another engineer's load on the same cores falls on all of them;
each window records its comparisons per second and the machine's busy cores split into
this benchmark's and everything else's (``foreign``).

Run from the repository root:  .venv/bin/python bench/cpu_settings.py [--arms base,kv4]
Result: bench/results/cpu_settings[-TAG].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C
from async_engine import Load, job_requests, job_spec

NAME = "cpu_settings"

#: Each arm: (environment, engine keyword arguments) over the baseline's.
ARMS: dict[str, tuple[dict[str, str], dict]] = {
    "base": ({}, {}),
    "kv4": ({"VLLM_CPU_KVCACHE_SPACE": "4"}, {}),
    "mbt-2048": ({}, {"max_num_batched_tokens": 2048}),
    "mbt-8192": ({}, {"max_num_batched_tokens": 8192}),
    "no-chunked-prefill": ({}, {"enable_chunked_prefill": False}),
}


def child(args, arm: str) -> dict:
    env, extra = ARMS[arm]
    from pairank.judges.engines.vllm_judge import label_token_ids

    os.environ.update({**C.cpu_engine_env(bare=True), **env})
    from pairank.judges.engines.vllm import choose_dtype
    from pairank.judges.models import prepare_default_model, resolve_model

    prepare_default_model()
    spec = job_spec(args)
    prompts = job_requests(spec).column("prompt").to_pylist()
    batches = [prompts[i : i + args.batch_size] for i in range(0, len(prompts), args.batch_size)]
    dtype, _ = choose_dtype(spec.judge.dtype, num_gpus=0)

    from vllm import LLM, SamplingParams

    started = time.time()
    llm = LLM(
        model=str(resolve_model(spec.judge.model)),
        dtype=dtype,
        max_model_len=spec.judge.max_model_len,
        enable_prefix_caching=True,
        enforce_eager=True,
        seed=spec.judge.seed,
        **extra,
    )
    engine_start = time.time() - started
    tok = llm.get_tokenizer()
    ids = label_token_ids(tok, spec.judge.labels.a, "A") + label_token_ids(tok, spec.judge.labels.b, "B")
    params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=ids, seed=spec.judge.seed)

    def window() -> None:
        llm.reset_prefix_cache()
        for b in batches:
            llm.generate(b, params, use_tqdm=False)

    t = time.time()
    window()  # the compile batch
    warm_up = time.time() - t
    load, windows = Load(), []
    for _ in range(args.windows):
        a = load.snapshot()
        window()
        b = load.snapshot()
        windows.append({"seconds": round(b[0] - a[0], 3), "per_s": round(len(prompts) / (b[0] - a[0]), 4)})
        windows[-1].update(Load.delta(a, b))
    return {
        "arm": arm,
        "dtype": dtype,
        "comparisons": len(prompts),
        "engine_start_s": round(engine_start, 1),
        "warm_up_s": round(warm_up, 1),
        "windows": windows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arms", default=",".join(ARMS), help="comma-separated arms (first is the reference)")
    parser.add_argument("--contexts", type=int, default=2)
    parser.add_argument("--candidates", type=int, default=4)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--windows", type=int, default=2, help="timed windows per arm and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--tag", default="")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:  # one arm (bench/_common.py's run_child): its settings as JSON, its result the last line
        case = json.loads(args.child)
        vars(args).update(case)
        print(json.dumps(child(args, case["arm"])), flush=True)
        return
    arms = args.arms.split(",")
    unknown = sorted(set(arms) - set(ARMS))
    if unknown:
        parser.error(f"--arms: unknown {', '.join(unknown)}; known: {', '.join(ARMS)}")
    passed = {k: getattr(args, k) for k in ("contexts", "candidates", "batch_size", "windows")}
    runs = []
    for r in range(args.rounds):
        order = arms if r % 2 == 0 else arms[::-1]
        for arm in order:
            out = C.run_child(__file__, {**passed, "arm": arm}, {})
            out["round"] = r
            runs.append(out)
            print(json.dumps(out), flush=True)
    summary = {}
    for arm in arms:
        rates = [w["per_s"] for run in runs if run["arm"] == arm for w in run["windows"]]
        summary[arm] = {"median_per_s": round(statistics.median(rates), 4), "windows": len(rates)}
    reference = summary[arms[0]]["median_per_s"]
    for arm in arms:
        summary[arm]["vs_" + arms[0]] = round(summary[arm]["median_per_s"] / reference, 3)
    result = {"machine": C.machine(), "when": C.now(), "summary": summary, "runs": runs}
    path = C.write_result(NAME + (f"-{args.tag}" if args.tag else ""), result)
    print(C.table([[a, s["median_per_s"], s["vs_" + arms[0]]] for a, s in summary.items()], ["arm", "per s", "ratio"]))
    print(f"written {path}")


if __name__ == "__main__":
    main()
