"""Benchmark (SIMULATED judge): the adaptive driver at scale, end to end on the real Ray pool.

Every number this script writes comes from the SIMULATED judge
(``judge.engine: simulated``: p_a from seeded latent qualities, noise 0.5, scale 2,
no position bias). It answers without any model, so it says nothing about any
real judge's quality; it measures how the schedulers and the driver scale.

Each case runs in its own fresh process (so peak RSS is the case's own): a
synthetic input folder is written (``candidates.parquet`` conforming to
``storage.schemas.CANDIDATES``; short texts, "ctx-00000" ... x "ctx-00000/c-00000" ...),
Ray is started and the judge pool is entered with ``pairank.jobs.judging.pool_wiring.judge_pool`` (one
actor, ``pool.num_cpus 1``, ``batch_size`` 4096) before the clock starts, then
``jobs.driver.Driver(...).run()`` runs the scheduler to completion with a fresh
judgment cache (``flush_rows`` 1,000,000, so one cache part per round).

(a) ``anchors``: scaled PAIRS (``pairs_anchors``, symmetric, anchors ranked by
    the default PAIRS-beam) on ONE context of N candidates, N in ``--sizes``,
    with a fixed anchor count (``--anchors``, default 97, Cochran's sample size
    the spec uses when unset). Sorting the anchors costs the same at every N;
    each other candidate is placed by binary search, ceil(log2(anchors + 1)) = 7
    comparisons at most. Reported: total comparisons, the anchors' sort, and
    comparisons per inserted candidate (``(asked - inner sort) / (N - anchors)``,
    from the machine's counters), rounds, and Spearman of the ranking against
    the simulated latent quality.
(b) ``contexts``: PAIRS-greedy, symmetric, on ``--contexts`` contexts of 16
    candidates (10,000 by default), all machines in lockstep rounds.
(c) ``one_context``: PAIRS-greedy, symmetric, on one context of
    ``--one-context`` candidates. A merge sort's final merge of N items is up to
    N - 1 comparisons in a row, so one big context needs about 2N rounds; that is
    why one big context uses ``pairs_anchors`` (case a at N = 10,000 is the
    10,000-candidate context) and this case is run small to show the round count.

Per case: wall seconds of ``Driver.run``, rounds, comparisons (ordered pairs
judged), and per round the Driver's own stats: ``driver_seconds`` (collecting
requests from every machine, keying them, the budget check, feeding answers
back with ``observe``) and ``judge_seconds`` (everything from the requests to
the answers: building the request table with rendered prompts in prefix order,
the round's Ray Data stream through the pool, the cache part write). The parts
of that which are not Ray Data are measured in process on 4096 of the run's
requests (``request_table_us_per_row``, ``judge_compute_us_per_row`` of the
simulated judge, ``cache_append_us_per_row``); the simulated judge answers
nearly instantly, so ``judge_seconds`` here is mostly Ray Data's per-round
pipeline cost and moving the rows; with a real engine it would be the engine's
time. The machine's busy cores during the run (from /proc/stat) and the
driver process's own are recorded, so a run that shared the 2 cores with other
work can be told apart. Peak RSS of the driver process is ``resource.getrusage`` of the
child (Ray's own processes are not included).

Run from the repository root:  .venv/bin/python bench/driver_scale.py [--quick]
Knobs: --sizes, --anchors, --contexts, --one-context, --batch-size, --cases.
Writes bench/results/driver_scale[-TAG].json (``--quick`` writes ``-quick``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "driver_scale"
LABEL = (
    "SIMULATED judge (engine=simulated: seeded latent quality, scale 2, noise 0.5, no position bias); not a real judge"
)
SIMULATED = {"engine": "simulated", "seed": 0, "scale": 2.0, "noise": 0.5}
ASPECT = "coherence"


# ---------------------------------------------------------------- the synthetic input
def synthetic_candidates(contexts: int, per_context: int):
    """CANDIDATES rows: ``contexts`` x ``per_context`` short texts, validated against the schema."""
    import pyarrow as pa

    from pairank.storage.schemas import CANDIDATES
    from pairank.storage.validation import validate

    ctx, ctx_text, cid, system, text = [], [], [], [], []
    for k in range(contexts):
        c = f"ctx-{k:05d}"
        for j in range(per_context):
            ctx.append(c)
            ctx_text.append(f"Document {k}: a short synthetic article for the scale benchmark.")
            cid.append(f"{c}/c-{j:05d}")
            system.append(f"sys-{j % 8}")
            text.append(f"Summary {j} of document {k}.")
    table = pa.table(
        {"context_id": ctx, "context": ctx_text, "candidate_id": cid, "system": system, "text": text}, schema=CANDIDATES
    )
    return validate(table, CANDIDATES, "synthetic candidates")


# ---------------------------------------------------------------- one case, in a child process
def scheduler_for(case: dict) -> dict:
    if case["kind"] == "anchors":
        return {"name": "pairs_anchors", "symmetric": True, "anchors": {"size": case["anchors"]}}
    return {"name": "pairs_greedy", "symmetric": True}


def run_case(case: dict) -> dict:
    """Run one case in this process; returns its measurements."""
    import contextlib

    from pairank.cluster.runtime import ensure_ray
    from pairank.jobs.judging.adaptive import Driver
    from pairank.jobs.judging.passes import Judging
    from pairank.jobs.judging.pool_wiring import judge_pool
    from pairank.jobs.judging.requests import RequestMaker
    from pairank.jobs.pipeline.inputs import read_inputs
    from pairank.jobs.specs.job import parse_spec
    from pairank.judges import judge_identity
    from pairank.judges.prompts import load_prompts
    from pairank.storage.fs import Location
    from pairank.storage.layout import RunLayout
    from pairank.storage.store.cache import JudgmentCache

    def rss():
        return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)

    out: dict = {"case": case}
    with tempfile.TemporaryDirectory(prefix="pairank-driver-scale-") as tmp:
        t = time.perf_counter()
        candidates = synthetic_candidates(case["contexts"], case["candidates"])
        folder = Location.of(str(Path(tmp) / "input"))
        folder.join("candidates.parquet").write_parquet(candidates)
        spec = parse_spec(
            {
                "name": f"scale-{case['kind']}",
                "input": folder.uri,
                "output": str(Path(tmp) / "out"),
                "aspects": [ASPECT],
                "prompts": str(C.PROMPTS),
                "judge": SIMULATED,
                "scheduler": scheduler_for(case),
                "pool": {"size": 1, "num_cpus": 1, "batch_size": case["batch_size"]},
                "report": {"bootstrap": 0},
                "cluster": {"num_cpus": 2},
                "flush_rows": 1_000_000,
            },
            "driver_scale",
        )
        candidates = read_inputs(spec.input, spec.subset).candidates
        maker = RequestMaker(candidates, load_prompts(Path(spec.prompts), spec.aspects), judge_identity(spec.judge))
        cache = JudgmentCache(RunLayout.of(spec.output, spec.name).judgments)
        out["input_seconds"] = round(time.perf_counter() - t, 3)

        t = time.perf_counter()
        ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
        out["ray_start_seconds"] = round(time.perf_counter() - t, 3)
        with judge_pool(spec) as pool:
            out["pool_start_seconds"] = round(time.perf_counter() - t - out["ray_start_seconds"], 3)
            out["rss_mib_before_driver"] = rss()
            t = time.perf_counter()
            judging = Judging(spec.judging, maker, judge_identity(spec.judge), None, spec.flush_rows)
            driver = Driver(
                spec, candidates, judging, cache, lambda _spec: contextlib.nullcontext(pool), lambda _m: None
            )
            out["driver_init_seconds"] = round(time.perf_counter() - t, 3)
            load0, busy0, cpu0 = os.getloadavg()[0], C.machine_cpu(), os.times()
            t = time.perf_counter()
            result = driver.run()
            out["run_seconds"] = round(time.perf_counter() - t, 3)
            busy1, cpu1 = C.machine_cpu(), os.times()
            # Disturbance check: what the whole machine was busy with during the run, next to this process.
            out["machine_cores_busy"] = round((busy1[0] - busy0[0]) / out["run_seconds"], 2)
            out["driver_process_cores_busy"] = round(
                (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / out["run_seconds"], 2
            )
            out["loadavg_1min"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
            out["actors"] = pool.info()
        out["rss_mib_peak"] = rss()
        rounds = result.rounds
        out["stopped"] = result.stopped
        out["judged"] = result.judged
        out["errors"] = result.errors
        out["rounds"] = len(rounds)
        out["comparisons_ordered"] = len(result.used_keys)
        out["driver_seconds"] = round(sum(r["driver_seconds"] for r in rounds), 3)
        out["judge_seconds"] = round(sum(r["judge_seconds"] for r in rounds), 3)
        out["per_round"] = [
            {k: r[k] for k in ("round", "requests", "judged", "contexts_done", "driver_seconds", "judge_seconds")}
            for r in rounds
        ]
        out.update(quality(result.tasks, spec))
        if case["kind"] == "anchors":
            m = result.tasks[0].machine
            anchors = len(m.anchors)
            inner = m._inner.asked  # the anchors' sort (ordered pairs); no public counter for it
            inserted = case["candidates"] - anchors
            out["anchors"] = anchors
            out["anchor_sort_ordered"] = inner
            out["inserted"] = inserted
            out["insertion_ordered"] = m.asked - inner
            out["per_inserted_ordered"] = round((m.asked - inner) / inserted, 3) if inserted else None
            out["per_inserted_comparisons"] = round((m.asked - inner) / inserted / 2, 3) if inserted else None
        out.update(judge_parts(spec, maker, result.tasks, Path(tmp) / "probe"))
    return out


def quality(tasks, spec) -> dict:
    """Spearman of each finished context's ranking against the simulated latent quality (mean over contexts)."""
    import numpy as np
    from scipy.stats import spearmanr

    from pairank.judges.engines.simulated_judge import latent_qualities

    rhos = []
    for task in tasks:
        if not task.machine.done:
            continue
        order = task.machine.ranking()
        q = latent_qualities(spec.judge.seed, [task.context_id] * len(order), order)
        rhos.append(spearmanr(-np.arange(len(order)), q).statistic)
    return {"spearman_vs_latent_mean": round(float(np.mean(rhos)), 4) if rhos else None, "contexts_ranked": len(rhos)}


def judge_parts(spec, maker, tasks, folder: Path) -> dict:
    """In process, on up to 4096 of the run's requests, microseconds per row of the parts of a round's
    ``judge_seconds`` that are not Ray Data: building the request table (keys known; rendering prompts,
    prefix order), the simulated judge's compute, and appending the judgments as a cache part."""
    from pairank.judges.engines.simulated_judge import SimulatedJudge
    from pairank.storage.fs import Location
    from pairank.storage.store.cache import JudgmentCache

    wanted = {}
    for task in tasks:
        for a, b in sorted(task.pairs):
            wanted[maker.key(task.aspect, task.context_id, a, b)] = (task.aspect, task.context_id, a, b)
            if len(wanted) >= 4096:
                break
        if len(wanted) >= 4096:
            break
    if not wanted:
        return {}

    def us(t, n):
        return round((time.perf_counter() - t) / n * 1e6, 2)

    t = time.perf_counter()
    table = maker.table(wanted)
    out = {"request_table_us_per_row": us(t, table.num_rows)}
    judge = SimulatedJudge(spec.judge)
    judge.judge(table.slice(0, 16))
    t = time.perf_counter()
    judged = judge.judge(table)
    out["judge_compute_us_per_row"] = us(t, table.num_rows)
    t = time.perf_counter()
    JudgmentCache(Location.of(str(folder))).append(judged)
    out["cache_append_us_per_row"] = us(t, table.num_rows)
    return out


def child(case: dict) -> dict:
    """Run a case in a fresh interpreter; its JSON comes back on the last stdout line."""
    return C.run_child(__file__, case, {"PYTHONUNBUFFERED": "1", "RAY_DEDUP_LOGS": "0"})


# ---------------------------------------------------------------- summary
def per_round(r: dict) -> dict:
    n = max(r["rounds"], 1)
    steady = r["per_round"][1:] or r["per_round"]
    return {
        "driver_s_per_round": round(r["driver_seconds"] / n, 4),
        "judge_s_per_round": round(r["judge_seconds"] / n, 4),
        "driver_share": round(r["driver_seconds"] / max(r["driver_seconds"] + r["judge_seconds"], 1e-9), 3),
        "max_round_driver_s": max((x["driver_seconds"] for x in r["per_round"]), default=None),
        "max_round_judge_s": max((x["judge_seconds"] for x in r["per_round"]), default=None),
        "driver_us_per_request": round(r["driver_seconds"] / max(r["comparisons_ordered"], 1) * 1e6, 1),
        "judge_us_per_request": round(r["judge_seconds"] / max(r["comparisons_ordered"], 1) * 1e6, 1),
        "judge_s_per_round_after_first": round(sum(x["judge_seconds"] for x in steady) / len(steady), 4),
    }


def print_tables(results: list[dict]) -> None:
    anchors = [r for r in results if r["case"]["kind"] == "anchors"]
    if anchors:
        rows = [
            [
                r["case"]["candidates"],
                r["anchors"],
                r["inserted"],
                r["comparisons_ordered"],
                r["anchor_sort_ordered"],
                r["per_inserted_ordered"],
                r["rounds"],
                r["run_seconds"],
                r["driver_seconds"],
                r["judge_seconds"],
                r["rss_mib_peak"],
                r["spearman_vs_latent_mean"],
            ]
            for r in anchors
        ]
        print("\n(a) pairs_anchors, one context, symmetric (SIMULATED judge)")
        print(
            C.table(
                rows,
                [
                    "N",
                    "anchors",
                    "inserted",
                    "ordered pairs",
                    "anchor sort",
                    "per inserted",
                    "rounds",
                    "run s",
                    "driver s",
                    "judge s",
                    "peak RSS MiB",
                    "rho vs latent",
                ],
            )
        )
    others = [r for r in results if r["case"]["kind"] != "anchors"]
    if others:
        rows = []
        for r in others:
            s = per_round(r)
            rows.append(
                [
                    r["case"]["kind"],
                    r["case"]["contexts"],
                    r["case"]["candidates"],
                    r["comparisons_ordered"],
                    r["rounds"],
                    r["run_seconds"],
                    r["driver_seconds"],
                    r["judge_seconds"],
                    s["driver_s_per_round"],
                    s["judge_s_per_round"],
                    s["driver_us_per_request"],
                    r["rss_mib_peak"],
                    r["spearman_vs_latent_mean"],
                ]
            )
        print("\n(b, c) pairs_greedy, symmetric (SIMULATED judge)")
        print(
            C.table(
                rows,
                [
                    "case",
                    "contexts",
                    "N",
                    "ordered pairs",
                    "rounds",
                    "run s",
                    "driver s",
                    "judge s",
                    "driver s/round",
                    "judge s/round",
                    "driver us/request",
                    "peak RSS MiB",
                    "rho vs latent",
                ],
            )
        )


# ---------------------------------------------------------------- main
def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="tiny sizes, to check the script")
    ap.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[100, 300, 1000, 3000, 10000])
    ap.add_argument("--anchors", type=int, default=97, help="anchors for pairs_anchors (97: Cochran's default)")
    ap.add_argument("--contexts", type=int, default=10000, help="contexts of 16 candidates for case (b)")
    ap.add_argument("--one-context", type=int, default=256, help="candidates of the single context of case (c)")
    ap.add_argument("--batch-size", type=int, default=4096)
    ap.add_argument("--cases", default="anchors,contexts,one_context", help="which cases to run")
    ap.add_argument("--tag", default="")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.child:
        C.quiet_engine_logs()
        print(json.dumps(run_case(json.loads(args.child))))
        return

    if args.quick:
        args.sizes, args.anchors, args.contexts, args.one_context = [40, 120], 15, 50, 32
    kinds = args.cases.split(",")
    cases = []
    if "anchors" in kinds:
        cases += [
            {"kind": "anchors", "contexts": 1, "candidates": n, "anchors": args.anchors, "batch_size": args.batch_size}
            for n in args.sizes
        ]
    if "contexts" in kinds:
        cases.append({"kind": "contexts", "contexts": args.contexts, "candidates": 16, "batch_size": args.batch_size})
    if "one_context" in kinds:
        cases.append(
            {"kind": "one_context", "contexts": 1, "candidates": args.one_context, "batch_size": args.batch_size}
        )

    started = C.now()
    t0 = time.time()
    results = []
    for case in cases:
        print(f"case {case} ...", flush=True)
        r = child(case)
        r["summary"] = per_round(r)
        print(
            f"  {r['comparisons_ordered']} ordered pairs in {r['rounds']} rounds, run {r['run_seconds']} s "
            f"(driver {r['driver_seconds']} s, judge {r['judge_seconds']} s), peak RSS {r['rss_mib_peak']} MiB",
            flush=True,
        )
        results.append(r)
    print_tables(results)
    name = NAME + ("-quick" if args.quick else "") + (f"-{args.tag}" if args.tag else "")
    path = C.write_result(
        name,
        {
            "benchmark": NAME,
            "judge": LABEL,
            "started_at": started,
            "finished_at": C.now(),
            "wall_seconds": round(time.time() - t0, 1),
            "machine": C.machine(),
            "settings": {
                "judge": SIMULATED,
                "aspect": ASPECT,
                "pool": {"size": 1, "num_cpus": 1, "batch_size": args.batch_size},
                "flush_rows": 1_000_000,
                "quick": args.quick,
            },
            "cases": results,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
