"""Benchmark: what the Ray Data job costs over a bare loop on the same engine.

Two arms judge the SAME requests (a demo.yaml-like job: SummEval, C contexts x N
candidates, full matrix, two aspects, prefix order) with the same vLLM CPU engine
settings and the same batch size; each arm runs in its own process, one after the
other (one engine at a time), with a cold prefix cache:

* ``pipeline``: ``jobs.run.run_job`` on the spec (a fresh temporary output root, so
  nothing is cached): local Ray start, the judge pool's actors (JudgeActor), the plan
  streamed by Ray Data, the driver's forwarders sending its batches to the actors,
  judgments committed every ``flush_rows`` rows, then the report.
* ``bare``: ``VllmJudge.score`` in a loop over the same prompts in batches of
  ``pool.batch_size``; no Ray, no storage.

Measured for each arm:

(a) steady-state judging throughput, excluding engine start and the warm-up batch:
    the pipeline from its first judgment part (the first progress callback) to its
    last; the bare loop over the SAME rows (from the end of the batch holding the
    row of the first flush to the end of the last batch). Also reported: the bare
    loop excluding only its first batch, and the actor's own rate from the
    judgments' created_at stamps (written in the actor right after each batch).
(b) end-to-end: from the start (run_job called / engine construction begun) to the
    last judgment, engine start and Ray start included; and run_job's whole wall
    time including the report.

Where the pipeline's time goes is recorded too: per-batch engine time inside the
actor (the judgments' ``seconds`` column) against the bare loop's, the gaps between
batches, and the CPU seconds every process on the machine used during the
steady-state window, sampled once a second by the idle parent process from the end
of the first batch to the end of the last (the arm's process, judge actor, raylet,
GCS, other Ray processes, other processes, exited processes, hypervisor steal).

Every arm starts only once the machine is idle (another engine or test run on the
same 2 cores would ruin it); a repeat in which other load still showed up in either
arm's steady window is flagged ``disturbed`` and run again (--retries).

Run from the repository root:  .venv/bin/python bench/pipeline_overhead.py
Knobs: --batch-size, --flush-rows, --pool-cpus, --set KEY=VALUE (any spec override),
--repeats; --tag names the result
(bench/results/pipeline_overhead[-TAG].json).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "pipeline_overhead"
#: The pool's progress line (jobs/judging/passes.py: CacheWriter), one per flushed part; the total is "?" while
#: a stream made in Ray Data tasks is still being planned.
PROGRESS = re.compile(r"^[\w-]+: (\d+)/(\d+|\?) \(")
TARGET = 0.9


# ---------------------------------------------------------------- the spec and the requests
def job_spec(output: str, args):
    from pairank.jobs.specs.job import load_spec

    overrides = [
        f"name=bench-{args.tag or 'pipeline'}",
        f"output={output}",
        f"subset.contexts={args.contexts}",
        f"subset.candidates={args.candidates}",
        f"pool.batch_size={args.batch_size}",
        f"flush_rows={args.flush_rows}",
        *([f"pool.num_cpus={args.pool_cpus}"] if args.pool_cpus else []),
        *args.set,
    ]
    return load_spec(C.ROOT / "configs" / "demo.yaml", overrides)


def job_requests(spec):
    """The requests run_job builds for this spec (same code path, same order)."""
    from pairank.jobs.judging.requests import scheduled_requests
    from pairank.jobs.pipeline.inputs import read_inputs
    from pairank.jobs.pipeline.setup import prepare_judging
    from pairank.storage.layout import RunLayout

    inputs = read_inputs(spec.input, spec.subset)
    setup = prepare_judging(spec, inputs.candidates, RunLayout.of(spec.output, spec.name))
    return setup.maker.table(scheduled_requests(setup.maker, inputs.candidates, spec.aspects, spec.scheduler))


# ---------------------------------------------------------------- arms
def arm_bare(args) -> dict:
    from pairank.judges import make_judge

    spec = job_spec("/nonexistent-unused", args)
    requests = job_requests(spec)
    prompts = requests.column("prompt").to_pylist()
    n = len(prompts)
    size = spec.pool.batch_size
    t0 = time.time()
    judge = make_judge(spec.judge)
    engine_ready = time.time()
    batches = []  # (rows done, start, end)
    done = 0
    errors = 0
    for i in range(0, n, size):
        s = time.time()
        scores = judge.score(prompts[i : i + size])
        e = time.time()
        done += len(scores)
        errors += sum(x.error is not None for x in scores)
        batches.append({"rows_done": done, "start": s, "end": e, "seconds": round(e - s, 3)})
    return {
        "arm": "bare",
        "comparisons": n,
        "errors": errors,
        "batch_size": size,
        "t0": t0,
        "engine_ready": engine_ready,
        "batches": batches,
    }


def arm_pipeline(args) -> dict:
    import pyarrow.compute as pc

    import pairank.cluster.runtime as runtime
    from pairank.jobs.run import run_job
    from pairank.storage.store.cache import JudgmentCache

    with tempfile.TemporaryDirectory(prefix="pairank-bench-store-") as out:
        spec = job_spec(out, args)
        n_requests = job_requests(spec).num_rows
        events = []

        def progress(msg: str) -> None:  # "<pass>: <done>/<todo> (...)", once per flushed part
            t = time.time()
            found = PROGRESS.match(msg)
            judged = int(found.group(1)) if found else None
            events.append({"t": t, "judged": judged, "msg": msg})

        ray_ready = {}
        real_ensure = runtime.ensure_ray

        def timed_ensure(*a, **k):  # run_job imports ensure_ray from cluster.runtime when it runs
            s = time.time()
            real_ensure(*a, **k)
            ray_ready.update(start=s, end=time.time())

        runtime.ensure_ray = timed_ensure
        t0 = time.time()
        try:
            result = run_job(spec, progress=progress)
        finally:
            runtime.ensure_ray = real_ensure
        t_end = time.time()
        table = JudgmentCache(result.layout.judgments).read()
        parts = JudgmentCache(result.layout.judgments).version()  # one commit per flush (version 0 creates it)
        # Actor-side batches: rows stamped with the same created_at came out of one judge() call.
        stamps = table.group_by("created_at").aggregate([("seconds", "sum"), ("key", "count")]).sort_by("created_at")
        actor_batches = [
            {"end": c.timestamp(), "engine_seconds": round(s, 3), "rows": k}
            for c, s, k in zip(
                stamps.column("created_at").to_pylist(),
                stamps.column("seconds_sum").to_pylist(),
                stamps.column("key_count").to_pylist(),
            )
        ]
        errors = table.num_rows - pc.sum(pc.is_null(table.column("error")).cast("int64")).as_py()
    from pairank.cluster.runtime import shutdown_ray

    shutdown_ray()
    judged_events = [e for e in events if e["judged"] is not None]
    return {
        "arm": "pipeline",
        "comparisons": n_requests,
        "judged": result.judged,
        "cached": result.cached,
        "errors": int(errors),
        "parts": parts,
        "batch_size": spec.pool.batch_size,
        "flush_rows": spec.flush_rows,
        "pool_num_cpus": spec.pool.num_cpus,
        "t0": t0,
        "ray": ray_ready,
        "progress": judged_events,
        "run_job_end": t_end,
        "actor_batches": actor_batches,
    }


# ---------------------------------------------------------------- analysis
#: CPU used by anything that is neither the benchmark nor Ray/the engine (other
#: processes, processes that exited, hypervisor steal) above which a repeat counts
#: as disturbed: the machine has 2 cores and the engine wants both.
DISTURBED_CORES = 0.1
FOREIGN = ("other processes", "unaccounted (exited processes etc.)", "steal (hypervisor)")


def foreign_load(cpu: dict | None) -> float | None:
    if not cpu:
        return None
    return round(sum(v for k, v in cpu["cores_busy"].items() if k in FOREIGN), 3)


def analyse(bare: dict, pipe: dict) -> dict:
    """Throughput of both arms, excluding engine start and the first (warm-up) batch.

    Primary steady-state window, the same in both arms: from the end of the first
    batch (pipeline: its created_at stamp, written in the actor) to the last
    judgment (pipeline: the last part written by the driver; bare: the end of the
    last batch), over the rows after the first batch.

    The brief's literal definition (first progress callback to last) is reported too
    but is skewed: ``iter_batches(batch_size=None)`` with Ray Data's default
    ``prefetch_batches=1`` hands the driver block i only once block i+1 exists, so
    every flush (and progress call) lags the actor by one batch.
    """
    n = bare["comparisons"]
    assert pipe["comparisons"] == n, (pipe["comparisons"], n)
    b = bare["batches"]
    ab = pipe["actor_batches"]
    ev = pipe["progress"]
    first, last = ev[0], ev[-1]
    assert sum(x["rows"] for x in ab) == n, "judgments lost or duplicated"
    # Primary: after the first batch, to the last judgment.
    pipe_steady = (n - ab[0]["rows"]) / (last["t"] - ab[0]["end"])
    bare_steady = (n - b[0]["rows_done"]) / (b[-1]["end"] - b[0]["end"])
    actor_steady = (n - ab[0]["rows"]) / (ab[-1]["end"] - ab[0]["end"])
    # The brief's literal definition and the bare loop over the same rows.
    # (None when the first and last flush come out together, as with flush_rows >= 2 batches.)
    prog = (last["judged"] - first["judged"]) / (last["t"] - first["t"]) if last["t"] - first["t"] > 1.0 else None
    start_batch = next(x for x in b if x["rows_done"] >= first["judged"])
    bare_window = (
        (b[-1]["rows_done"] - start_batch["rows_done"]) / (b[-1]["end"] - start_batch["end"])
        if b[-1] is not start_batch
        else None
    )
    # When each batch reached the driver, relative to when the actor finished it.
    lags = []
    for e in ev:
        done = 0
        for x in ab:
            done += x["rows"]
            if done >= e["judged"]:
                lags.append(round(e["t"] - x["end"], 3))
                break
    actor_engine = [x["engine_seconds"] for x in ab[1:]]
    bare_engine = [x["seconds"] for x in b[1:]]
    gaps = [round(ab[i]["end"] - ab[i - 1]["end"] - ab[i]["engine_seconds"], 3) for i in range(1, len(ab))]
    pipe_e2e = last["t"] - pipe["t0"]
    bare_e2e = b[-1]["end"] - bare["t0"]
    ray = pipe.get("ray") or {}
    first_batch_start_in_actor = ab[0]["end"] - ab[0]["engine_seconds"]
    r4 = lambda x: round(x, 4) if x else None  # noqa: E731
    loads = {arm: foreign_load(x.get("cpu_steady")) for arm, x in (("bare", bare), ("pipeline", pipe))}
    return {
        "disturbed": {
            "foreign_cores_busy": loads,
            "threshold_cores": DISTURBED_CORES,
            "any": any(v is None or v > DISTURBED_CORES for v in loads.values()),
        },
        "steady": {
            "pipeline_per_s": r4(pipe_steady),
            "bare_per_s": r4(bare_steady),
            "ratio": r4(pipe_steady / bare_steady),
            "actor_per_s (first to last batch end in the actor)": r4(actor_steady),
            "ratio_actor": r4(actor_steady / bare_steady),
            "literal_progress_window_rows": [first["judged"], last["judged"]],
            "literal_pipeline_progress_per_s": r4(prog),
            "literal_bare_same_rows_per_s": r4(bare_window),
            "literal_ratio": r4(prog / bare_window) if prog and bare_window else None,
            "driver_lag_s_per_flush (progress time minus actor end of the batch holding that row)": lags,
        },
        "end_to_end": {
            "pipeline_s": round(pipe_e2e, 2),
            "bare_s": round(bare_e2e, 2),
            "pipeline_per_s": round(n / pipe_e2e, 4),
            "bare_per_s": round(n / bare_e2e, 4),
            "ratio": round(bare_e2e / pipe_e2e, 4),
            "pipeline_run_job_wall_s": round(pipe["run_job_end"] - pipe["t0"], 2),
        },
        "where_time_goes": {
            "pipeline": {
                "before_ray_s": round(ray["start"] - pipe["t0"], 2) if ray else None,
                "ray_start_s": round(ray["end"] - ray["start"], 2) if ray else None,
                "ray_ready_to_first_batch_start_s (actor spawn + vllm import + engine start + dataset start)": round(
                    first_batch_start_in_actor - ray["end"], 2
                )
                if ray
                else None,
                "first_batch_engine_s": ab[0]["engine_seconds"],
                "engine_s_per_batch_after_first": actor_engine,
                "gap_s_between_batches (end-to-end minus engine time)": gaps,
                "last_batch_end_to_last_part_written_s": round(last["t"] - ab[-1]["end"], 3),
                "after_last_judgment_s (cache read, rankings, bootstrap, report)": round(
                    pipe["run_job_end"] - last["t"], 2
                ),
            },
            "bare": {
                "engine_start_s": round(bare["engine_ready"] - bare["t0"], 2),
                "first_batch_s": b[0]["seconds"],
                "seconds_per_batch_after_first": bare_engine,
            },
            "engine_time_after_first_batch_actor_over_bare": round(sum(actor_engine) / sum(bare_engine), 4)
            if actor_engine and bare_engine and len(actor_engine) == len(bare_engine)
            else None,
        },
    }


def report(result: dict) -> None:
    """(Re)compute the analysis of every repeat and the summary; print the table."""
    pairs = result["repeats"]
    for p in pairs:
        p["analysis"] = analyse(p["bare"], p["pipeline"])

    def agg(path):
        vals = [p["analysis"] for p in pairs]
        for k in path:
            vals = [v[k] for v in vals]
        return vals

    summary = {
        "steady_ratio": agg(["steady", "ratio"]),
        "steady_ratio_actor": agg(["steady", "ratio_actor"]),
        "steady_ratio_literal_progress_window": agg(["steady", "literal_ratio"]),
        "end_to_end_ratio": agg(["end_to_end", "ratio"]),
        "pipeline_steady_per_s": agg(["steady", "pipeline_per_s"]),
        "bare_steady_per_s": agg(["steady", "bare_per_s"]),
        "pipeline_e2e_s": agg(["end_to_end", "pipeline_s"]),
        "bare_e2e_s": agg(["end_to_end", "bare_s"]),
        "engine_time_actor_over_bare": agg(["where_time_goes", "engine_time_after_first_batch_actor_over_bare"]),
    }
    summary["disturbed"] = agg(["disturbed", "any"])
    summary["steady_ratio_mean"] = round(statistics.fmean(summary["steady_ratio"]), 4)
    summary["end_to_end_ratio_mean"] = round(statistics.fmean(summary["end_to_end_ratio"]), 4)
    clean = [i for i, d in enumerate(summary["disturbed"]) if not d]
    summary["undisturbed_repeats"] = clean
    summary["steady_ratio_mean_undisturbed"] = (
        round(statistics.fmean(summary["steady_ratio"][i] for i in clean), 4) if clean else None
    )
    summary["end_to_end_ratio_mean_undisturbed"] = (
        round(statistics.fmean(summary["end_to_end_ratio"][i] for i in clean), 4) if clean else None
    )
    best = summary["steady_ratio_mean_undisturbed"] or summary["steady_ratio_mean"]
    summary["meets_target_steady"] = best >= TARGET

    rows = []
    for i, p in enumerate(pairs):
        a = p["analysis"]
        rows.append(
            [
                i,
                "/".join(p["order"]),
                a["steady"]["bare_per_s"],
                a["steady"]["pipeline_per_s"],
                a["steady"]["ratio"],
                a["where_time_goes"]["engine_time_after_first_batch_actor_over_bare"],
                a["end_to_end"]["bare_s"],
                a["end_to_end"]["pipeline_s"],
                a["end_to_end"]["ratio"],
                "yes" if a["disturbed"]["any"] else "no",
            ]
        )
    print()
    print(f"model: {C.MODEL_LABEL}")
    st = result["settings"]
    print(
        f"{pairs[0]['bare']['comparisons']} comparisons, batch {st['batch_size']}, flush_rows {st['flush_rows']}, "
        f"pool.num_cpus {st['pool_num_cpus']}, extra overrides {st.get('extra_overrides') or 'none'}"
    )
    print(
        C.table(
            rows,
            [
                "repeat",
                "order",
                "bare comp/s",
                "pipeline comp/s",
                "steady ratio",
                "engine s actor/bare",
                "bare e2e s",
                "pipeline e2e s",
                "e2e ratio",
                "disturbed",
            ],
        )
    )
    print(
        f"\nsteady-state ratio (pipeline/bare, after the first batch) mean {summary['steady_ratio_mean']} "
        f"(target >= {TARGET}: {'met' if summary['meets_target_steady'] else 'NOT met'}); "
        f"end-to-end throughput ratio mean {summary['end_to_end_ratio_mean']}; without disturbed repeats: "
        f"steady {summary['steady_ratio_mean_undisturbed']}, end-to-end {summary['end_to_end_ratio_mean_undisturbed']}"
    )
    for i, p in enumerate(pairs):
        w = p["analysis"]["where_time_goes"]
        print(f"repeat {i} where time goes: {json.dumps(w)}")
        print(f"repeat {i} CPU (steady window) pipeline: {json.dumps(p['pipeline']['cpu_steady'])}")
        print(f"repeat {i} CPU (steady window) bare: {json.dumps(p['bare']['cpu_steady'])}")
    result["summary"] = summary


def run_arm(arm: str, args, tmp: str) -> dict:
    out = Path(tmp) / f"{arm}-{time.time_ns()}.json"
    cmd = [sys.executable, __file__, "--arm", arm, "--out", str(out)] + passthrough(args)
    print(f"--- {arm}", flush=True)
    samples = []  # (time, CPU snapshot of every process), once a second, taken here in the idle parent
    stop = threading.Event()
    proc = subprocess.Popen(cmd, cwd=C.ROOT)
    labels = {proc.pid: "arm process (bare: engine; pipeline: job driver)"}

    def sample() -> None:
        while not stop.is_set():
            samples.append((time.time(), C.cpu_snapshot("benchmark parent (sampling)", labels)))
            stop.wait(1.0)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        rc = proc.wait()
    finally:
        stop.set()
        sampler.join()
    if rc:
        raise SystemExit(f"{arm} arm failed with exit status {rc}")
    result = json.loads(out.read_text(encoding="utf-8"))
    # CPU over the steady-state window: end of the first batch to end of the last.
    ends = [x["end"] for x in (result["batches"] if arm == "bare" else result["actor_batches"])]
    inside = [x for x in samples if ends[0] <= x[0] <= ends[-1]]
    result["cpu_steady"] = (
        C.cpu_delta(inside[0][1], inside[-1][1], inside[-1][0] - inside[0][0]) if len(inside) > 1 else None
    )
    return result


def passthrough(args) -> list[str]:
    return [
        "--contexts",
        str(args.contexts),
        "--candidates",
        str(args.candidates),
        "--batch-size",
        str(args.batch_size),
        "--flush-rows",
        str(args.flush_rows),
        "--pool-cpus",
        str(args.pool_cpus or 0),
        "--tag",
        args.tag,
    ] + [f"--set={x}" for x in args.set]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, default=4)
    ap.add_argument("--candidates", type=int, default=5, help="per context; full matrix, aspects of demo.yaml (2)")
    ap.add_argument("--batch-size", type=int, default=32, help="pool.batch_size (demo.yaml: 32)")
    ap.add_argument("--flush-rows", type=int, default=64, help="flush_rows (spec default: 64)")
    ap.add_argument("--pool-cpus", type=float, default=0, help="pool.num_cpus (0: demo.yaml's, now 2)")
    ap.add_argument("--repeats", type=int, default=2, help="bare/pipeline pairs, order alternating (ABBA)")
    ap.add_argument("--retries", type=int, default=2, help="re-run a repeat disturbed by other load up to this often")
    ap.add_argument("--tag", default="", help="result file suffix for a knob variant")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="more spec overrides for both arms, as `pairank run --set` (e.g. judge.env.OMP_NUM_THREADS=2)",
    )
    ap.add_argument("--reanalyse", metavar="JSON", help="recompute the analysis of a result file from its raw data")
    ap.add_argument("--arm", choices=["bare", "pipeline"], help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    C.quiet_engine_logs()

    if args.arm:
        from pairank.judges.models import prepare_default_model

        prepare_default_model()
        result = arm_bare(args) if args.arm == "bare" else arm_pipeline(args)
        Path(args.out).write_text(json.dumps(result), encoding="utf-8")
        return

    if args.reanalyse:
        path = Path(args.reanalyse)
        result = json.loads(path.read_text(encoding="utf-8"))
        report(result)
        path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"\nrewrote {path}")
        return

    os.chdir(C.ROOT)
    C.ensure_summeval()
    pairs = []
    discarded = []  # disturbed attempts that were repeated
    with tempfile.TemporaryDirectory(prefix="pairank-bench-") as tmp:
        for r in range(args.repeats):
            order = ["bare", "pipeline"] if r % 2 == 0 else ["pipeline", "bare"]
            for attempt in range(args.retries + 1):
                waited = {}
                got = {}
                for arm in order:
                    waited[arm] = C.wait_quiet()  # another engine or test run on these 2 cores ruins a repeat
                    got[arm] = run_arm(arm, args, tmp)
                pair = {
                    "order": order,
                    "bare": got["bare"],
                    "pipeline": got["pipeline"],
                    "waited_for_idle_s": waited,
                    "analysis": analyse(got["bare"], got["pipeline"]),
                }
                a = pair["analysis"]
                print(
                    f"repeat {r}: steady pipeline {a['steady']['pipeline_per_s']}/s "
                    f"vs bare {a['steady']['bare_per_s']}/s (ratio {a['steady']['ratio']}); "
                    f"end-to-end {a['end_to_end']['pipeline_s']} s vs {a['end_to_end']['bare_s']} s",
                    flush=True,
                )
                if not a["disturbed"]["any"]:
                    break
                print(f"repeat {r}: DISTURBED by other load {a['disturbed']['foreign_cores_busy']}", flush=True)
                if attempt < args.retries:
                    discarded.append(pair)
            pairs.append(pair)

    settings = {
        "spec": "configs/demo.yaml with overrides: fresh temporary output root, subset, pool.batch_size, flush_rows "
        "(and pool.num_cpus when given)",
        "contexts": args.contexts,
        "candidates_per_context": args.candidates,
        "aspects": ["coherence", "fluency"],
        "scheduler": "full",
        "batch_size": args.batch_size,
        "flush_rows": args.flush_rows,
        "pool_num_cpus": pairs[0]["pipeline"]["pool_num_cpus"],
        "pool_size": 1,
        "extra_overrides": args.set,
        "repeats": args.repeats,
        "retries_if_disturbed": args.retries,
        "engine_env": C.cpu_engine_env(),
        "target_steady_ratio": TARGET,
    }
    name = NAME + (f"-{args.tag}" if args.tag else "")
    result = {
        "benchmark": name,
        "date": C.now(),
        "model": C.MODEL_LABEL,
        "machine": C.machine(),
        "settings": settings,
        "summary": None,
        "repeats": pairs,
        "discarded_disturbed_attempts": discarded,
    }
    report(result)
    path = C.write_result(name, result)
    print(f"\nwrote {path.relative_to(C.ROOT)}")


if __name__ == "__main__":
    main()
