"""Benchmark: vLLM's synchronous engine against its async engine with several batches in flight.

Issue 13, item 3. On the same prompts (a demo.yaml-like job: SummEval, C contexts x N
candidates, full matrix, two aspects, prefix order, the real templates), with the same
engine settings (the embedded Gemma-3-270M on the vLLM CPU build, bfloat16, eager,
prefix caching on) and label probabilities read as the judge reads them (one token,
``logprob_token_ids`` = every surface form of A and B):

* ``sync``: a bare loop of ``vllm.LLM.generate`` over batches of ``--batch-size``
  prompts (the engine core in this process, ``VLLM_ENABLE_V1_MULTIPROCESSING=0``, as
  the judge runs it today);
* ``async-k``: a bare loop on vLLM's ``AsyncLLM`` (its engine core in a second
  process) that keeps ``k`` batches of ``--batch-size`` requests in flight: a batch is
  submitted as soon as one of the ``k`` before it has finished.

``--pool`` adds the pairank path: a one-actor :class:`~pairank.cluster.pools.judge_pool.JudgePool`
judging the same requests with ``judge.async_engine`` false and true
(``pool.max_batches_in_flight`` k), each arm in its own process holding its pool.

Both bare engines live in this one process for the whole run (the async one is built
first: its engine core is a forked process), so the arms alternate window by window
and see the same machine load. Before each window the engine's prefix cache is
emptied, so every window judges the same prompts from the same cold cache; start-up
and a warm-up window per engine (the compile batch) are left out. Each window records
its comparisons per second and the machine's busy cores from /proc/stat, split into
this benchmark's own processes and everything else (``foreign``: another engineer's
tests on the same 2 cores).

Run from the repository root:  .venv/bin/python bench/async_engine.py [--pool]
Result: bench/results/async_engine[-TAG].json (--reanalyse recomputes its summary).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "async_engine"


# ---------------------------------------------------------------- prompts
def job_spec(args, output: str = "/nonexistent-unused", extra: list[str] = ()):
    from pairank.jobs.specs.job import load_spec

    overrides = [
        "name=bench-async",
        f"output={output}",
        f"subset.contexts={args.contexts}",
        f"subset.candidates={args.candidates}",
        f"pool.batch_size={args.batch_size}",
        *extra,
    ]
    return load_spec(C.ROOT / "configs" / "demo.yaml", overrides)


def job_requests(spec):
    """The requests run_job builds for this spec (same code path, same prefix order)."""
    from pairank.jobs.judging.requests import scheduled_requests
    from pairank.jobs.pipeline.inputs import read_inputs
    from pairank.jobs.pipeline.setup import prepare_judging
    from pairank.storage.layout import RunLayout

    inputs = read_inputs(spec.input, spec.subset)
    setup = prepare_judging(spec, inputs.candidates, RunLayout.of(spec.output, spec.name))
    return setup.maker.table(scheduled_requests(setup.maker, inputs.candidates, spec.aspects, spec.scheduler))


# ---------------------------------------------------------------- machine load
class Load:
    """Busy cores of the machine over a window (/proc/stat), and how much of it was this benchmark."""

    def __init__(self) -> None:
        import psutil

        self.me = psutil.Process()

    def own_cpu(self) -> float:
        total = 0.0
        for p in [self.me, *self.me.children(recursive=True)]:
            try:
                t = p.cpu_times()  # live processes only
                total += t.user + t.system
            except Exception:
                continue
        return total

    def snapshot(self) -> tuple[float, float, float]:
        busy, steal = C.machine_cpu()
        return time.time(), busy + steal, self.own_cpu()

    @staticmethod
    def delta(a, b) -> dict:
        seconds = b[0] - a[0]
        machine = (b[1] - a[1]) / seconds
        own = (b[2] - a[2]) / seconds
        return {
            "machine_cores_busy": round(machine, 3),
            "own_cores": round(own, 3),
            "foreign_cores": round(max(machine - own, 0.0), 3),
        }


# ---------------------------------------------------------------- the bare arms
def engine_kwargs(spec, model) -> dict:
    j = spec.judge
    return dict(
        model=str(model),
        dtype=j.dtype,
        max_model_len=j.max_model_len,
        enable_prefix_caching=True,
        enforce_eager=j.enforce_eager,
        seed=j.seed,
    )


def bare(args) -> dict:
    os.environ.update(C.cpu_engine_env(bare=True))
    from pairank.judges.engines.vllm_judge import label_token_ids
    from pairank.judges.models import prepare_default_model, resolve_model

    prepare_default_model()
    spec = job_spec(args)
    prompts = job_requests(spec).column("prompt").to_pylist()
    size = args.batch_size
    batches = [prompts[i : i + size] for i in range(0, len(prompts), size)]
    model = resolve_model(spec.judge.model)

    from vllm import LLM, AsyncEngineArgs, SamplingParams
    from vllm.v1.engine.async_llm import AsyncLLM

    loop = asyncio.new_event_loop()
    started = time.time()

    async def make_async():
        return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs(spec, model)))

    aengine = loop.run_until_complete(make_async())  # first: its engine core process is forked from this one
    async_start = time.time() - started
    started = time.time()
    llm = LLM(**engine_kwargs(spec, model))
    sync_start = time.time() - started
    tok = llm.get_tokenizer()
    ids = label_token_ids(tok, spec.judge.labels.a, "A") + label_token_ids(tok, spec.judge.labels.b, "B")
    params = SamplingParams(max_tokens=1, temperature=0.0, logprob_token_ids=ids, seed=spec.judge.seed)

    def p_a(out) -> float:
        step = out.outputs[0].logprobs[0]
        import math

        la = math.log(sum(math.exp(step[t].logprob) for t in ids[: len(spec.judge.labels.a)]))
        lb = math.log(sum(math.exp(step[t].logprob) for t in ids[len(spec.judge.labels.a) :]))
        return 1 / (1 + math.exp(lb - la))

    def run_sync() -> list[float]:
        llm.reset_prefix_cache()
        out = []
        for b in batches:
            out += [p_a(o) for o in llm.generate(b, params, use_tqdm=False)]
        return out

    async def one(prompt: str):
        last = None
        async for o in aengine.generate(prompt, params, request_id=uuid.uuid4().hex):
            last = o
        return last

    async def run_async(k: int) -> list[float]:
        await aengine.reset_prefix_cache()
        gate = asyncio.Semaphore(k)

        async def batch(b):
            async with gate:  # FIFO: the batches enter the engine in prefix order, k at a time
                return await asyncio.gather(*(one(p) for p in b))

        done = await asyncio.gather(*(batch(b) for b in batches))
        return [p_a(o) for outs in done for o in outs]

    arms = {"sync": run_sync, **{f"async-{k}": (lambda k=k: loop.run_until_complete(run_async(k))) for k in args.k}}
    load = Load()
    for name, fn in [("sync", run_sync), ("async-1", arms[f"async-{args.k[0]}"])]:  # warm-up (compile) windows
        t = time.time()
        fn()
        print(f"warm-up {name}: {time.time() - t:.1f} s", flush=True)
    reference = None
    windows = []
    names = list(arms)
    for r in range(args.repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        if r % 2:
            order.reverse()
        waited = C.wait_quiet(max_wait_s=args.max_wait)  # another engineer's tests share these 2 cores
        for name in order:
            a = load.snapshot()
            got = arms[name]()
            b = load.snapshot()
            seconds = b[0] - a[0]
            reference = reference or got
            diff = max(abs(x - y) for x, y in zip(reference, got))
            windows.append(
                {
                    "repeat": r,
                    "arm": name,
                    "waited_for_idle_s": waited,
                    "seconds": round(seconds, 3),
                    "per_s": round(len(got) / seconds, 4),
                    "max_p_a_diff_vs_first_sync": round(diff, 5),
                    **Load.delta(a, b),
                }
            )
            print(json.dumps(windows[-1]), flush=True)
    aengine.shutdown()
    return {
        "comparisons": len(prompts),
        "batches": len(batches),
        "engine_start_s": {"async": round(async_start, 1), "sync": round(sync_start, 1)},
        "windows": windows,
    }


# ---------------------------------------------------------------- the pool arms
def pool_child(args, async_engine: bool) -> dict:
    """One process: a one-actor JudgePool on the job's spec, judging ``--pool-repeats`` + 1 windows of requests.

    Each window judges requests of ``--contexts`` contexts of its own (a cold prefix cache without reaching into
    the engine); the first window is the warm-up (the compile batch) and is left out, and the first timed one
    judges the same prompts as the bare loops. Both pool arms judge the same windows in the same order.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from pairank.cluster.runtime import ensure_ray, shutdown_ray
    from pairank.jobs.judging.pool_wiring import batches_in_flight, judge_pool
    from pairank.judges.models import prepare_default_model

    prepare_default_model()
    k = args.pool_k if async_engine else 1
    extra = [
        f"judge.async_engine={str(async_engine).lower()}",
        f"pool.max_batches_in_flight={k}",
        f"subset.contexts={args.contexts * (args.pool_repeats + 1)}",
    ]
    spec = job_spec(args, extra=extra)
    requests = job_requests(spec)
    contexts = sorted(set(requests.column("context_id").to_pylist()))
    windows_of = [contexts[i : i + args.contexts] for i in range(0, len(contexts), args.contexts)]
    # The warm-up window takes the last contexts, so the first timed window judges the bare loops' prompts.
    windows_of = windows_of[-1:] + windows_of[:-1]
    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    load = Load()
    windows = []
    with judge_pool(spec) as pool:
        for r, ids in enumerate(windows_of):
            todo = requests.filter(pc.is_in(requests.column("context_id"), pa.array(ids)))
            a = load.snapshot()
            n = sum(t.num_rows for t in pool.judge(todo))
            b = load.snapshot()
            assert n == todo.num_rows, (n, todo.num_rows)
            windows.append(
                {
                    "repeat": r - 1,
                    "comparisons": n,
                    "per_s": round(n / (b[0] - a[0]), 4),
                    "seconds": round(b[0] - a[0], 3),
                    **Load.delta(a, b),
                }
            )
        info = pool.info()
    shutdown_ray()
    return {
        "async_engine": async_engine,
        "batches_in_flight": batches_in_flight(spec),
        "warmup": windows[0],
        "windows": windows[1:],
        "actors": info,
    }


def pool_arms(args) -> list[dict]:
    out = []
    with tempfile.TemporaryDirectory(prefix="pairank-bench-") as tmp:
        for r in range(args.pool_rounds):
            for async_engine in [False, True] if r % 2 == 0 else [True, False]:
                path = Path(tmp) / f"{r}-{async_engine}.json"
                cmd = [
                    sys.executable,
                    __file__,
                    "--child-pool",
                    str(async_engine),
                    "--out",
                    str(path),
                    *passthrough(args),
                ]
                subprocess.run(cmd, check=True, cwd=C.ROOT)
                got = json.loads(path.read_text())
                got["round"] = r
                out.append(got)
                print(json.dumps(got), flush=True)
    return out


def passthrough(args) -> list[str]:
    return [
        "--contexts",
        str(args.contexts),
        "--candidates",
        str(args.candidates),
        "--batch-size",
        str(args.batch_size),
        "--pool-k",
        str(args.pool_k),
        "--pool-repeats",
        str(args.pool_repeats),
    ]


# ---------------------------------------------------------------- summary
#: Cores busy with anything but this benchmark above which a window counts as disturbed.
DISTURBED_CORES = 0.15


def summarise(bare_result: dict | None, pool_result: list[dict] | None) -> dict:
    out = {}
    if bare_result:
        by_repeat: dict[int, dict[str, float]] = {}
        for w in bare_result["windows"]:
            by_repeat.setdefault(w["repeat"], {})[w["arm"]] = w["per_s"]
        arms = sorted({w["arm"] for w in bare_result["windows"]}, key=lambda a: (a != "sync", a))
        ratios = {a: [round(r[a] / r["sync"], 4) for r in by_repeat.values()] for a in arms if a != "sync"}
        disturbed = sorted({w["repeat"] for w in bare_result["windows"] if w["foreign_cores"] > DISTURBED_CORES})
        clean = [i for i, r in enumerate(sorted(by_repeat)) if r not in disturbed]
        # Comparisons per CPU second the arm used (its own processes): how much work a core-second buys, which
        # other load on the machine changes less than the wall-clock rate.
        per_cpu: dict[int, dict[str, float]] = {}
        for w in bare_result["windows"]:
            per_cpu.setdefault(w["repeat"], {})[w["arm"]] = w["per_s"] / max(w["own_cores"], 1e-9)
        cpu_ratios = {a: [round(r[a] / r["sync"], 4) for r in per_cpu.values()] for a in arms if a != "sync"}
        out["bare"] = {
            "per_s": {a: [w["per_s"] for w in bare_result["windows"] if w["arm"] == a] for a in arms},
            "per_own_cpu_s": {a: [round(r[a], 4) for r in per_cpu.values()] for a in arms},
            "per_own_cpu_s_ratio_vs_sync_per_repeat": cpu_ratios,
            "per_own_cpu_s_ratio_vs_sync_mean": {a: round(statistics.fmean(v), 4) for a, v in cpu_ratios.items()},
            "ratio_vs_sync_per_repeat": ratios,
            "ratio_vs_sync_mean": {a: round(statistics.fmean(v), 4) for a, v in ratios.items()},
            "ratio_vs_sync_spread": {a: [min(v), max(v)] for a, v in ratios.items()},
            "foreign_cores": [w["foreign_cores"] for w in bare_result["windows"]],
            "disturbed_repeats": disturbed,
            "ratio_vs_sync_mean_undisturbed": {
                a: round(statistics.fmean(v[i] for i in clean), 4) if clean else None for a, v in ratios.items()
            },
            "max_p_a_diff_vs_sync": max(w["max_p_a_diff_vs_first_sync"] for w in bare_result["windows"]),
        }
    if pool_result:
        rate = {True: [], False: []}
        for p in pool_result:
            rate[p["async_engine"]].append(statistics.fmean(w["per_s"] for w in p["windows"]))
        pairs = [(a, s) for a, s in zip(rate[True], rate[False])]
        ratios = [round(a / s, 4) for a, s in pairs]
        out["pool"] = {
            "sync_per_s": [round(x, 4) for x in rate[False]],
            "async_per_s": [round(x, 4) for x in rate[True]],
            "ratio_async_over_sync_per_round": ratios,
            "ratio_mean": round(statistics.fmean(ratios), 4),
            "foreign_cores": [w["foreign_cores"] for p in pool_result for w in p["windows"]],
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, default=8)
    ap.add_argument("--candidates", type=int, default=5, help="per context; full matrix, two aspects")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--k", type=int, nargs="+", default=[1, 2, 4], help="batches in flight on the async engine")
    ap.add_argument("--repeats", type=int, default=3, help="windows per arm, arms alternating")
    ap.add_argument("--max-wait", type=float, default=300, help="seconds to wait for an idle machine per repeat")
    ap.add_argument("--pool", action="store_true", help="also the pairank pool path, async vs sync engine")
    ap.add_argument("--pool-only", action="store_true", help="only the pool path (keeps the bare result on file)")
    ap.add_argument("--pool-k", type=int, default=4, help="pool.max_batches_in_flight of the async pool arm")
    ap.add_argument("--pool-rounds", type=int, default=2, help="sync/async pool process pairs, order alternating")
    ap.add_argument("--pool-repeats", type=int, default=2, help="timed windows per pool process")
    ap.add_argument("--reanalyse", action="store_true", help="recompute the summary of the result file")
    ap.add_argument("--tag", default="", help="result file suffix (bench/results/async_engine-TAG.json)")
    ap.add_argument("--child-pool", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    C.quiet_engine_logs()
    os.chdir(C.ROOT)
    if args.child_pool:
        result = pool_child(args, args.child_pool == "True")
        Path(args.out).write_text(json.dumps(result), encoding="utf-8")
        return
    C.ensure_summeval()
    name = NAME + (f"-{args.tag}" if args.tag else "")
    path = C.RESULTS / f"{name}.json"
    old = json.loads(path.read_text()) if path.is_file() else {}
    if args.reanalyse:
        old["summary"] = summarise(old.get("bare"), old.get("pool"))
        print(json.dumps(old["summary"], indent=2))
        print(f"rewrote {C.write_result(name, old).relative_to(C.ROOT)}")
        return
    waited = C.wait_quiet(max_wait_s=args.max_wait)
    bare_result = old.get("bare") if args.pool_only else bare(args)
    pool_result = pool_arms(args) if args.pool or args.pool_only else old.get("pool")
    settings = {
        "contexts": args.contexts,
        "candidates_per_context": args.candidates,
        "aspects": ["coherence", "fluency"],
        "batch_size": args.batch_size,
        "k": args.k,
        "repeats": args.repeats,
        "engine_env": C.cpu_engine_env(bare=True),
        "pool_k": args.pool_k,
        "pool_rounds": args.pool_rounds,
        "pool_repeats": args.pool_repeats,
    }
    if args.pool_only and "settings" in old:
        settings = {**old["settings"], **{k: v for k, v in settings.items() if k.startswith("pool")}}
    result = {
        "benchmark": name,
        "date": C.now(),
        "model": C.MODEL_LABEL,
        "machine": C.machine(),
        "settings": settings,
        "waited_for_idle_s": waited,
        "summary": summarise(bare_result, pool_result),
        "bare": bare_result,
        "pool": pool_result,
    }
    print(json.dumps(result["summary"], indent=2))
    print(f"wrote {C.write_result(name, result).relative_to(C.ROOT)}")


if __name__ == "__main__":
    main()
