"""Benchmark: does judging requests in prefix order (jobs.requests.prefix_order) pay off?

The same comparison prompts (SummEval, C contexts x N candidates, full matrix, the
real summarization templates, keyed with the vllm judge identity) are judged by
ONE in-process VllmJudge in batches of the job's batch size, once in prefix order
("grouped", as build_requests emits them) and once in a seeded random order
("shuffled"). Both arms of a round judge the SAME prompts; ``llm.reset_prefix_cache()``
empties vLLM's prefix cache before every arm, so neither arm profits from the
other. Rounds use disjoint context sets and alternate the arm order (ABBA), after a
warm-up batch on unrelated prompts (the first batch pays a compile cost).

Two engine configurations ("scenarios"), each in its own process, one after the other:

* ``job``: the engine exactly as the job starts it (VLLM_CPU_KVCACHE_SPACE=1, i.e.
  a 1 GiB KV cache; for Gemma-3-270M that is 2730 blocks of 128 tokens shared by 6
  layer groups, about 58k tokens of fully cached prefix).
* ``small-cache``: the same with ``num_gpu_blocks_override`` (a vllm.LLM argument,
  spec.judge.engine_kwargs) shrinking the KV cache below the contexts' working set,
  which is the regime of a large model or many contexts where the cache cannot hold
  every context at once.

Prefix-cache hits are read from vLLM's own counters (``disable_log_stats=False``,
set for both arms alike). Each arm also records the CPU every process on the machine
used while it ran; an arm where the engine did not have both cores to itself is
flagged ``disturbed``.

Defaults: 4 contexts x 5 candidates x 2 aspects = 160 comparisons per arm, batches
of 32, 4 rounds (job) and 2 rounds (small-cache, 128 blocks).

Run from the repository root:  .venv/bin/python bench/prefix_grouping.py
Writes bench/results/prefix_grouping.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "prefix_grouping"
P_A_TOLERANCE = 0.05  # bf16: P(A) differs from float32 by up to 0.04 (shared/VLLM_CPU.md)


def _prefix_counters(llm) -> tuple[int, int]:
    queries = hits = 0
    for m in llm.get_metrics():
        if m.name == "vllm:prefix_cache_queries":
            queries = int(m.value)
        elif m.name == "vllm:prefix_cache_hits":
            hits = int(m.value)
    return queries, hits


def _kv_groups(llm) -> list[str]:
    try:
        config = llm.llm_engine.engine_core.engine_core.scheduler.kv_cache_config
    except AttributeError:  # another engine layout: informational only
        return []
    out = []
    for g in config.kv_cache_groups:
        window = getattr(g.kv_cache_spec, "sliding_window", None)
        out.append(
            f"{type(g.kv_cache_spec).__name__}({len(g.layer_names)} layers{f', window {window}' if window else ''})"
        )
    return out


def _judge_arm(judge, rows: list[dict], batch_size: int) -> dict:
    """Score ``rows`` in the given order in batches; returns timing, cache hits and p_a per key."""
    from pairank.judges.interface import p_a_from_logprobs

    assert judge.llm.reset_prefix_cache(), "vLLM refused to reset its prefix cache"
    q0, h0 = _prefix_counters(judge.llm)
    cpu0 = C.cpu_snapshot("engine (this process)")
    batches = []
    p_a = {}
    errors = 0
    tokens = 0
    started = time.perf_counter()
    for i in range(0, len(rows), batch_size):
        chunk = rows[i : i + batch_size]
        t = time.perf_counter()
        scores = judge.score([r["prompt"] for r in chunk])
        batches.append(round(time.perf_counter() - t, 3))
        for r, s in zip(chunk, scores):
            tokens += s.input_tokens
            if s.error is None and s.logprob_a is not None and s.logprob_b is not None:
                p_a[r["key"]] = p_a_from_logprobs(s.logprob_a, s.logprob_b)
            else:
                errors += 1
    seconds = time.perf_counter() - started
    q1, h1 = _prefix_counters(judge.llm)
    cpu = C.cpu_delta(cpu0, C.cpu_snapshot("engine (this process)"), seconds)
    return {
        "comparisons": len(rows),
        "seconds": round(seconds, 3),
        "comparisons_per_s": round(len(rows) / seconds, 4),
        "batch_seconds": batches,
        "input_tokens": tokens,
        "prefix_cache_query_tokens": q1 - q0,
        "prefix_cache_hit_tokens": h1 - h0,
        "prefix_cache_hit_rate": round((h1 - h0) / max(q1 - q0, 1), 4),
        "errors": errors,
        "cpu_cores_busy": cpu["cores_busy"],
        # The engine alone keeps both cores busy (~1.95); anything else running means a disturbed arm.
        "disturbed": cpu["cores_busy"].get("engine (this process)", 0) < 1.8
        or sum(v for k, v in cpu["cores_busy"].items() if k != "engine (this process)") > 0.1,
        "p_a": p_a,
    }


def worker(args) -> dict:
    """One scenario in this process: one engine, warm-up, then the rounds."""
    C.quiet_engine_logs()
    from pairank.judges import make_judge
    from pairank.judges.engines.vllm import VllmJudgeSpec
    from pairank.judges.models import prepare_default_model

    prepare_default_model()
    engine_kwargs = {"disable_log_stats": False}
    if args.kv_blocks:
        engine_kwargs["num_gpu_blocks_override"] = args.kv_blocks
    spec = VllmJudgeSpec(env=C.cpu_engine_env(), engine_kwargs=engine_kwargs)
    candidates = C.candidates_table()
    ids = C.context_ids(candidates)
    need = args.rounds * args.contexts
    if need + 1 > len(ids):
        raise SystemExit(f"{need} contexts asked for, SummEval has {len(ids)}")
    round_sets = [ids[r * args.contexts : (r + 1) * args.contexts] for r in range(args.rounds)]
    # Warm-up on unrelated prompts: the last contexts, another aspect.
    warm = C.requests_for(C.pick(candidates, ids[-2:], 5), ["relevance"], spec).to_pylist()[: args.batch_size]

    started = time.perf_counter()
    judge = make_judge(spec)
    engine_start = time.perf_counter() - started
    cache = judge.llm.llm_engine.vllm_config.cache_config
    groups = _kv_groups(judge.llm)
    sched = judge.llm.llm_engine.vllm_config.scheduler_config
    t = time.perf_counter()
    judge.score([r["prompt"] for r in warm])
    warmup = time.perf_counter() - t
    print(
        f"[{args.scenario}] engine start {engine_start:.1f} s, warm-up batch of {len(warm)}: {warmup:.1f} s", flush=True
    )

    rounds = []
    discarded = 0
    for r, ctx_set in enumerate(round_sets):
        grouped = C.requests_for(C.pick(candidates, ctx_set, args.candidates), args.aspects, spec).to_pylist()
        shuffled = list(grouped)
        random.Random(args.seed + r).shuffle(shuffled)
        order = ["grouped", "shuffled"] if r % 2 == 0 else ["shuffled", "grouped"]
        for attempt in range(args.retries + 1):
            arms = {}
            for arm in order:
                C.wait_quiet()  # another engine or test run on these 2 cores ruins an arm
                arms[arm] = _judge_arm(judge, grouped if arm == "grouped" else shuffled, args.batch_size)
                a = arms[arm]
                others = sum(v for k, v in a["cpu_cores_busy"].items() if k != "engine (this process)")
                print(
                    f"[{args.scenario}] round {r} {arm:8s}: {a['comparisons']} in {a['seconds']:.1f} s = "
                    f"{a['comparisons_per_s']:.2f}/s, prefix-cache hit rate {a['prefix_cache_hit_rate']:.2f}, "
                    f"other processes {others:.2f} cores{' DISTURBED' if a['disturbed'] else ''}",
                    flush=True,
                )
            if not any(a["disturbed"] for a in arms.values()) or attempt == args.retries:
                break
            discarded += 1
            print(f"[{args.scenario}] round {r}: disturbed, run again", flush=True)
        pg, ps = arms["grouped"].pop("p_a"), arms["shuffled"].pop("p_a")
        common = sorted(set(pg) & set(ps))
        diffs = [abs(pg[k] - ps[k]) for k in common]
        flips = sum((pg[k] > 0.5) != (ps[k] > 0.5) for k in common)
        rounds.append(
            {
                "contexts": ctx_set,
                "order": order,
                "arms": arms,
                "ratio_grouped_over_shuffled": round(
                    arms["grouped"]["comparisons_per_s"] / arms["shuffled"]["comparisons_per_s"], 4
                ),
                "p_a_check": {
                    "compared": len(common),
                    "max_abs_diff": round(max(diffs), 6) if diffs else None,
                    "mean_abs_diff": round(statistics.fmean(diffs), 6) if diffs else None,
                    "identical": sum(d == 0 for d in diffs),
                    "label_flips": flips,
                    "tolerance": P_A_TOLERANCE,
                    "within_tolerance": bool(diffs) and max(diffs) <= P_A_TOLERANCE,
                },
            }
        )
    total = {}
    for arm in ("grouped", "shuffled"):
        n = sum(x["arms"][arm]["comparisons"] for x in rounds)
        s = sum(x["arms"][arm]["seconds"] for x in rounds)
        hits = sum(x["arms"][arm]["prefix_cache_hit_tokens"] for x in rounds)
        queries = sum(x["arms"][arm]["prefix_cache_query_tokens"] for x in rounds)
        total[arm] = {
            "comparisons": n,
            "seconds": round(s, 3),
            "comparisons_per_s": round(n / s, 4),
            "prefix_cache_hit_rate": round(hits / max(queries, 1), 4),
        }
    return {
        "scenario": args.scenario,
        "kv_cache": {
            "num_blocks": cache.num_gpu_blocks,
            "block_size_tokens": cache.block_size,
            "groups": groups,
            # Every KV-cache group (3 layers each for Gemma-3-270M) takes blocks from one pool,
            # so a fully cached prefix of T tokens costs about len(groups) * T / block_size blocks
            # (less for the sliding-window groups once T exceeds the window).
            "capacity_tokens": (cache.num_gpu_blocks or 0) * cache.block_size // max(len(groups), 1),
            "num_gpu_blocks_override": args.kv_blocks,
        },
        "scheduler": {"max_num_batched_tokens": sched.max_num_batched_tokens, "max_num_seqs": sched.max_num_seqs},
        "engine_start_s": round(engine_start, 2),
        "warmup_batch_s": round(warmup, 2),
        "rounds": rounds,
        "total": total,
        "ratio_grouped_over_shuffled": round(
            total["grouped"]["comparisons_per_s"] / total["shuffled"]["comparisons_per_s"], 4
        ),
        "ratio_per_round": [x["ratio_grouped_over_shuffled"] for x in rounds],
        "p_a_within_tolerance": all(x["p_a_check"]["within_tolerance"] for x in rounds),
        "p_a_max_abs_diff": max(x["p_a_check"]["max_abs_diff"] for x in rounds),
        "label_flips": sum(x["p_a_check"]["label_flips"] for x in rounds),
        "disturbed_arms": sum(a["disturbed"] for x in rounds for a in x["arms"].values()),
        "discarded_disturbed_rounds": discarded,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, default=4, help="contexts per round")
    ap.add_argument("--candidates", type=int, default=5, help="candidates per context (full matrix: N(N-1) pairs)")
    ap.add_argument("--aspects", nargs="+", default=["coherence", "fluency"])
    ap.add_argument("--rounds", type=int, default=4, help="rounds (disjoint context sets, arm order alternates)")
    ap.add_argument("--small-cache-rounds", type=int, default=2, help="rounds of the small-cache scenario")
    ap.add_argument("--batch-size", type=int, default=32, help="the job's pool.batch_size")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--retries", type=int, default=2, help="run a round again when another load disturbed it")
    ap.add_argument(
        "--small-cache-blocks",
        type=int,
        default=128,
        help="KV blocks (of 128 tokens, shared by the 6 layer groups) of the small-cache scenario; 0 skips it",
    )
    ap.add_argument("--scenario", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--kv-blocks", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.scenario:  # a worker process: one engine
        result = worker(args)
        Path(args.out).write_text(json.dumps(result), encoding="utf-8")
        return

    os.chdir(C.ROOT)
    C.ensure_summeval()
    scenarios = [("job", 0, args.rounds)]
    if args.small_cache_blocks:
        scenarios.append(("small-cache", args.small_cache_blocks, args.small_cache_rounds))
    results = {}
    with tempfile.TemporaryDirectory(prefix="pairank-bench-") as tmp:
        for name, blocks, rounds in scenarios:
            out = Path(tmp) / f"{name}.json"
            cmd = [sys.executable, __file__, "--scenario", name, "--kv-blocks", str(blocks), "--out", str(out)]
            cmd += ["--contexts", str(args.contexts), "--candidates", str(args.candidates), "--rounds", str(rounds)]
            cmd += ["--batch-size", str(args.batch_size), "--seed", str(args.seed), "--retries", str(args.retries)]
            cmd += ["--aspects", *args.aspects]
            subprocess.run(cmd, check=True)  # one engine at a time: the next starts after this one exits
            results[name] = json.loads(out.read_text(encoding="utf-8"))

    rows = []
    for name, res in results.items():
        for arm in ("grouped", "shuffled"):
            t = res["total"][arm]
            rows.append(
                [
                    name,
                    res["kv_cache"]["capacity_tokens"],
                    arm,
                    t["comparisons"],
                    f"{t['seconds']:.1f}",
                    f"{t['comparisons_per_s']:.3f}",
                    f"{t['prefix_cache_hit_rate']:.2f}",
                ]
            )
    print()
    print(f"model: {C.MODEL_LABEL}")
    print(
        C.table(
            rows, ["scenario", "kv tokens (full prefix)", "arm", "comparisons", "seconds", "comp/s", "prefix hit rate"]
        )
    )
    print()
    for name, res in results.items():
        print(
            f"{name}: grouped/shuffled = {res['ratio_grouped_over_shuffled']:.3f} "
            f"(per round {', '.join(f'{x:.3f}' for x in res['ratio_per_round'])}); "
            f"p_a same prompts: max |diff| {res['p_a_max_abs_diff']:.4f}, label flips {res['label_flips']}, "
            f"within {P_A_TOLERANCE}: {res['p_a_within_tolerance']}; disturbed arms: {res['disturbed_arms']}"
        )
    settings = {
        "contexts_per_round": args.contexts,
        "candidates_per_context": args.candidates,
        "aspects": args.aspects,
        "scheduler": "full",
        "comparisons_per_arm_per_round": args.contexts * args.candidates * (args.candidates - 1) * len(args.aspects),
        "rounds": {"job": args.rounds, "small-cache": args.small_cache_rounds},
        "batch_size": args.batch_size,
        "shuffle_seed": args.seed,
        "engine_env": C.cpu_engine_env(),
        "engine_kwargs": {"disable_log_stats": False, "num_gpu_blocks_override": "small-cache scenario only"},
        "prefix_cache_reset_between_arms": True,
        "warmup": "one batch of unrelated prompts (other contexts, aspect relevance) per engine",
    }
    path = C.write_result(
        NAME,
        {
            "benchmark": NAME,
            "date": C.now(),
            "model": C.MODEL_LABEL,
            "machine": C.machine(),
            "settings": settings,
            "scenarios": results,
        },
    )
    print(f"\nwrote {path.relative_to(C.ROOT)}")


if __name__ == "__main__":
    main()
