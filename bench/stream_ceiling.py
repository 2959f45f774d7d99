"""Benchmark (SIMULATED judge): the framework's own ceiling, comparisons per second through the stream.

Every number this script writes comes from the SIMULATED judge at zero cost
(``seconds_per_comparison`` 0, latent qualities drawn from the seed): it answers
without any model, so what is measured is pairank's own path from the candidates
to the judgment store, not any engine:

* the input: SummEval's 100 contexts (``pairank import summeval``) copied under new
  ids (``-r1``, ``-r2``, ...) to ``--contexts`` contexts, ``--candidates`` candidates
  each, one aspect (coherence), ``scheduler.name: full`` (every ordered pair: C x N x (N - 1)
  comparisons; 800 x 16 gives 192,000);
* the run: ``pairank.jobs.run.run_job`` on a fresh store (nothing cached), a local
  Ray started by the run, ``pool.size`` actors of ``pool.num_cpus`` 1: planning tasks
  key and render the requests block by block (:mod:`pairank.jobs.judging.streamed`),
  the pool's forwarders (driver threads) send them to the actors, the driver commits them to the
  Delta table every ``flush_rows`` and prints progress, then scores and reports.

Measured per case (each case in a fresh process; ``--code REV`` runs a case on the code of a git revision
instead of the worktree's, so old and new run in one invocation, one after the other, on the same machine load):

* ``steady_per_s``: comparisons per second between the progress line at >= 10 % of the
  comparisons and the one at >= 90 % (the commits' progress lines, one per ``flush_rows``);
* ``judging_per_s``: all comparisons over the time from ``run_job`` called to the last
  progress line (Ray start, pool start and planning included);
* ``wall_s``: ``run_job``'s whole time (the report included), and ``run_per_s``: all comparisons over it;
* the CPU seconds of every process class over the steady window (driver, judge actor,
  Ray Data workers, raylet, GCS, other processes), sampled by the case's process.

``--profile`` records the whole process tree of a case (the driver, and every Ray worker
it starts: planning tasks, forwarders, the judge actor) with py-spy, as collapsed stacks in
``bench/results/stream_ceiling[-TAG]-profile-<case>.txt``, and sums them by process and by
pairank function (``--breakdown FILE`` prints that sum for a file again).

``--three-nodes`` runs each case twice, on one node and on three: a
:class:`~pairank.cluster.local.nodes.LocalCluster` of a head of 1 CPU (the job's Ray Data tasks; its driver joins it
with ``cluster.address``) and two worker nodes of 1 CPU (``pool.size`` 2 of ``num_cpus`` 1: one actor on each), each
its own Ray node that cannot import pairank; one node is the run's own local Ray as above (3 CPUs: 2 actors and
the tasks' 1). A cluster of several nodes refuses local paths, so with ``--three-nodes`` both arms keep the input
and the store on a SeaweedFS S3 server the benchmark starts (on 127.0.0.1). All the nodes share this machine's
cores: what differs is the framework's cross-node path (shipping pairank to the nodes, objects between raylets,
the actors' calls across nodes), not the hardware.

Run from the repository root:  .venv/bin/python bench/stream_ceiling.py
Knobs: --contexts, --candidates, --batch-size, --flush-rows, --pool-size, --set KEY=VALUE,
--code REV (a case on that revision; repeatable, "HEAD" = the worktree), --repeats, --three-nodes, --tag.
Writes bench/results/stream_ceiling[-TAG].json.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
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

NAME = "stream_ceiling"
PROGRESS = re.compile(r"^[\w-]+: (\d+)/(\d+|\?) \(")
#: The folders of the repository that are pairank's subpackages (pairank/__init__.py is the package's own).
from pairank import SUBPACKAGES  # noqa: E402


# ---------------------------------------------------------------- the input
def write_input(folder: str, contexts: int, candidates: int) -> int:
    """SummEval copied under new ids to ``contexts`` contexts of ``candidates`` each, in ``folder`` (a local path
    or ``s3://``); returns the rows."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    base = C.candidates_table()
    ids = C.context_ids(base)
    base = C.pick(base, ids, candidates)
    copies = []
    for r in range(-(-contexts // len(ids))):
        t = base
        for col in ("context_id", "candidate_id"):
            t = t.set_column(t.schema.get_field_index(col), col, pc.binary_join_element_wise(t[col], f"-r{r}", ""))
        copies.append(t)
    table = pa.concat_tables(copies)
    keep = sorted(set(table.column("context_id").to_pylist()))[:contexts]
    table = table.filter(pc.is_in(table.column("context_id"), pa.array(keep)))
    if "://" in folder:
        from pairank.storage.fs import Location

        Location.of(folder).join("candidates.parquet").write_parquet(table)
    else:
        Path(folder).mkdir(parents=True, exist_ok=True)
        pq.write_table(table, Path(folder) / "candidates.parquet")
    return table.num_rows


def data_root(folder: Path, case: dict) -> str:
    """Where the case's input and store are: ``case["root"]`` (an S3 prefix of its own), else ``folder``."""
    return case.get("root") or str(folder)


def write_spec(folder: Path, case: dict) -> Path:
    import yaml

    root = data_root(folder, case)
    spec = {
        "name": "ceiling",
        "input": f"{root}/input",
        "output": f"{root}/store",
        "aspects": ["coherence"],
        "prompts": str(C.PROMPTS),
        "scheduler": {"name": "full"},
        "judge": {"engine": "simulated", "noise": 0.5},
        "pool": {"size": case["pool_size"], "num_cpus": 1, "batch_size": case["batch_size"]},
        "flush_rows": case["flush_rows"],
    }
    if case.get("address"):
        spec["cluster"] = {"address": case["address"]}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


# ---------------------------------------------------------------- one case (a child process)
def child(case: dict) -> dict:
    import pairank
    from pairank.jobs.run import run_job
    from pairank.jobs.specs.job import load_spec

    with tempfile.TemporaryDirectory(prefix="pairank-ceiling-") as tmp:
        folder = Path(tmp)
        rows = write_input(f"{data_root(folder, case)}/input", case["contexts"], case["candidates"])
        spec = load_spec(write_spec(folder, case), case["set"])
        if case.get("stages") == "only":
            return {
                "code": str(Path(pairank.__file__).resolve().parent.parent),
                "stage_cpu_us_per_comparison": stage_cpu(spec, folder),
            }
        events: list[tuple[float, int]] = []
        samples: list[tuple[float, dict]] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.is_set():
                samples.append((time.time(), C.cpu_snapshot("driver (the run's process)")))
                stop.wait(1.0)

        said: list[tuple[float, str]] = []

        def progress(msg) -> None:
            said.append((time.time(), str(msg)[:160]))
            found = PROGRESS.match(str(msg))
            if found:
                events.append((time.time(), int(found.group(1))))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.time()
        try:
            result = run_job(spec, progress=progress)
        finally:
            stop.set()
            sampler.join()
        t_end = time.time()
        from pairank.cluster.runtime import shutdown_ray

        shutdown_ray()
        stages = stage_cpu(spec, folder) if case.get("stages") else None
    n = result.requests
    if result.judged != n or result.errors:
        raise SystemExit(f"expected {n} judged and no errors, found {result.judged} judged, {result.errors} errors")
    lo = next(e for e in events if e[1] >= 0.1 * n)
    hi = next(e for e in events if e[1] >= 0.9 * n)
    inside = [s for s in samples if lo[0] <= s[0] <= hi[0]]
    return {
        "code": str(Path(pairank.__file__).resolve().parent.parent),
        "candidate_rows": rows,
        "comparisons": n,
        "steady_per_s": round((hi[1] - lo[1]) / (hi[0] - lo[0]), 1) if hi[0] > lo[0] else None,
        "steady_window": [lo[1], hi[1], round(hi[0] - lo[0], 2)],
        "judging_per_s": round(n / (events[-1][0] - t0), 1),
        "run_per_s": round(n / (t_end - t0), 1),
        "to_first_commit_s": round(events[0][0] - t0, 2),
        "to_last_commit_s": round(events[-1][0] - t0, 2),
        "wall_s": round(t_end - t0, 2),
        "commits": len(events),
        "stage_cpu_us_per_comparison": stages,
        "progress_lines": [(round(t - t0, 2), m) for t, m in said if not PROGRESS.match(m)],
        "cpu_steady": C.cpu_delta(inside[0][1], inside[-1][1], inside[-1][0] - inside[0][0])
        if len(inside) > 1
        else None,
    }


def stage_cpu(spec, folder: Path) -> dict:
    """CPU microseconds per comparison of each stage, run in this process on the run's first planning block (its
    store full): ``time.process_time``, this process's own CPU, so other load on the machine changes it little."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from pairank.jobs.judging.block_scoring import ScoreSettings, score_block
    from pairank.jobs.judging.streamed import StaticPlan, cut_blocks, plan_blocks, plan_requests
    from pairank.jobs.pipeline.judge import static_scheduler
    from pairank.jobs.pipeline.setup import prepare_judging
    from pairank.judges import make_judge
    from pairank.storage.fs import Location
    from pairank.storage.layout import RunLayout
    from pairank.storage.store.cache import JudgmentCache

    candidates = pq.read_table(folder / "input" / "candidates.parquet")
    block = cut_blocks(candidates, plan_blocks(candidates))[0]
    setup = prepare_judging(spec, candidates, RunLayout.of(spec.output, spec.name))
    full = StaticPlan.now(
        setup.maker.variants, setup.maker.judge, static_scheduler(spec), tuple(spec.aspects), setup.cache
    )
    empty = JudgmentCache(Location.of(str(folder / "empty")))
    fresh = StaticPlan.now(setup.maker.variants, setup.maker.judge, static_scheduler(spec), tuple(spec.aspects), empty)
    out: dict = {}

    def timed(name: str, fn):
        start = time.process_time()
        value = fn()
        out[name] = time.process_time() - start
        return value

    _, wanted = timed("keys (plan.wanted)", lambda: fresh.wanted(block))
    n = len(wanted)
    requests = pa.concat_tables(timed("plan (keys, render, slices)", lambda: list(plan_requests(block, fresh))))
    judge = make_judge(spec.judge)
    judged = timed("simulated judge", lambda: [judge.judge(requests.slice(i, 1024)) for i in range(0, n, 1024)])
    if setup.cache.version() is None:  # stages only: the store gets the block's judgments here
        for table in judged:
            setup.cache.append(table)
        full = full.next_sweep(first=True)
    part = pa.concat_tables(judged).slice(0, 4096)
    timed("commit of 4096 rows x 5", lambda: [empty.append(part) for _ in range(5)])
    out["commit of 4096 rows x 5"] *= n / (5 * 4096)
    out["commit of 4096 rows (per comparison at flush_rows 4096)"] = out.pop("commit of 4096 rows x 5")
    settings = ScoreSettings.of(full, candidates, spec.scoring.verdicts, spec.judging.decisive_weight, None)
    timed("score (read back, keys, scores)", lambda: score_block(block, settings))
    return {"comparisons": n, **{k: round(v * 1e6 / n, 2) for k, v in out.items()}}


# ---------------------------------------------------------------- code of another revision
def export_revision(rev: str, into: Path) -> Path:
    """``rev``'s tree exported under ``into`` as an importable ``pairank`` package (a folder on PYTHONPATH)."""
    tree = into / "tree"
    tree.mkdir(parents=True)
    archive = subprocess.run(["git", "archive", rev], cwd=C.ROOT, check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    pkg = into / "path" / "pairank"
    pkg.mkdir(parents=True)
    for item in (tree / "pairank").iterdir():
        (pkg / item.name).symlink_to(item)
    for name in SUBPACKAGES:
        (pkg / name).symlink_to(tree / name)
    return into / "path"


# ---------------------------------------------------------------- profiles
def breakdown(path: Path, top: int = 25) -> dict:
    """py-spy's collapsed stacks summed (samples of threads on a CPU, at ``--rate`` per second): per process kind,
    and per function on the stack (inclusive: pairank's own and a few libraries'), per process kind. A process's
    kind is what its stacks run (the judge actor's ``judge_batch``, a planning task's ``plan_requests``, ...)."""
    stacks: list[tuple[str, list[str], int]] = []
    marks: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")
        procs = [i for i, f in enumerate(frames) if f.startswith("process ")]
        if not procs:
            continue
        pid = frames[procs[-1]].split(":", 1)[0]
        rest = frames[procs[-1] + 1 :]
        stacks.append((pid, rest, int(count)))
        text = ";".join(rest)
        for marker, kind in KINDS:
            if marker in text:
                marks[pid][kind] += int(count)
                break
        if len(procs) == 1:
            marks[pid]["driver"] += 10**9
    kind_of = {pid: m.most_common(1)[0][0] for pid, m in marks.items()}
    by_proc: collections.Counter[str] = collections.Counter()
    by_fn: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for pid, frames, n in stacks:
        kind = kind_of.get(pid, "other ray worker")
        by_proc[kind] += n
        seen = set()
        for f in frames:
            name = frame_name(f)
            if name and name not in seen:
                seen.add(name)
                by_fn[kind][name] += n
    total = sum(by_proc.values()) or 1
    return {
        "samples": total,
        "by_process": {k: round(v / total, 3) for k, v in by_proc.most_common()},
        "by_function (share of the process kind's samples)": {
            kind: {k: round(v / by_proc[kind], 3) for k, v in fns.most_common(top)} for kind, fns in by_fn.items()
        },
    }


#: What a process's stacks run, and the process kind it makes it (first match).
KINDS = (
    ("judge_batch (cluster/pools/judge_actor.py", "judge actor"),
    ("plan_requests (jobs/judging/streamed.py", "planning task"),
    ("forward (cluster/pools/forwarding.py", "forwarder"),
    ("score_block", "scoring task"),
    ("collect_judgments", "collecting task"),
    ("read_blocks", "reading task"),
    ("Bookkeeper", "bookkeeper"),
    ("PoolMonitor", "pool monitor"),
    ("PlanCounter", "plan counter"),
    ("SplitCoordinator", "ray data coordinator"),
)


def frame_name(frame: str) -> str | None:
    """``fn (folder/file.py:line)`` -> ``folder.file.fn`` for pairank's frames, ``[lib] fn`` for a few libraries'."""
    found = re.match(r"(.+?) \((.+?)(?::\d+)?\)$", frame.strip())
    if not found:
        return None
    fn, file = found.groups()
    if file.startswith(SUBPACKAGES) or "/wt/" in file or "pairank-ceiling" in file:
        hit = re.search(rf"((?:{'|'.join(SUBPACKAGES)})/[\w/]+)\.py$", file)
        if hit:
            return f"{hit.group(1).replace('/', '.')}.{fn}"
    for lib in ("deltalake", "pyarrow", "ray/data", "ray/_private", "pydantic", "hashlib", "json"):
        if file.startswith(f"{lib}/") or f"/{lib}/" in file:
            return f"[{lib}] {fn}"
    return None


# ---------------------------------------------------------------- the parent
def run_case(case: dict, tmp: Path, profile: Path | None) -> dict:
    env = dict(os.environ)
    if case.get("address"):  # a driver joining the local cluster (as tests/multinode.py's drivers)
        env.pop("RAY_ADDRESS", None)
        env["RAY_AUTH_MODE"] = "token"
    if case["code"] != "HEAD":
        path = export_revision(case["code"], tmp / f"code-{case['code']}-{time.time_ns()}")
        env["PYTHONPATH"] = os.pathsep.join([str(path), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", json.dumps(case)]
    # A driver that joins a cluster runs outside the checkout: Ray puts the driver's working directory on its
    # workers' path, where the checkout's pairank/ (the package's __init__ alone) would hide the one it ships.
    cwd = tmp if case.get("address") else C.ROOT
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spy = None
    if profile is not None:
        spy = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "py-spy"),
                "record",
                "--pid",
                str(proc.pid),
                "--subprocesses",
                "--format",
                "raw",
                "--rate",
                "20",
                "--nonblocking",
                "--output",
                str(profile),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    try:
        out, err = proc.communicate()
    finally:
        if proc.poll() is None:  # this process was stopped: so is the case's
            proc.kill()
        if spy is not None:
            spy.wait(timeout=120)
    if proc.returncode != 0:
        sys.stderr.write(out[-4000:] + err[-8000:])
        raise SystemExit(f"case {case} failed (exit {proc.returncode})")
    result = json.loads(out.strip().splitlines()[-1])
    if profile is not None and profile.is_file():
        result["profile"] = {"file": str(profile.relative_to(C.ROOT)), **breakdown(profile)}
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--contexts", type=int, default=800)
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--batch-size", type=int, default=1024, help="pool.batch_size")
    ap.add_argument("--flush-rows", type=int, default=4096, help="flush_rows")
    ap.add_argument("--pool-size", type=int, default=1)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="more spec overrides")
    ap.add_argument("--code", action="append", default=[], help="git revision per arm ('HEAD': the worktree)")
    ap.add_argument("--repeats", type=int, default=1, help="rounds over the arms (order alternating)")
    ap.add_argument("--profile", action="store_true", help="py-spy the process tree of every case")
    ap.add_argument(
        "--stages",
        nargs="?",
        const="also",
        choices=["also", "only"],
        help="CPU per comparison of each stage, in process (only: without the run, --repeats of each arm)",
    )
    ap.add_argument(
        "--three-nodes",
        action="store_true",
        help="each case on one node and on a local cluster of a head and two worker nodes (both on S3)",
    )
    ap.add_argument("--tag", default="")
    ap.add_argument("--breakdown", metavar="FILE", help="print the breakdown of a profile file")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    if args.breakdown:
        print(json.dumps(breakdown(Path(args.breakdown)), indent=2))
        return
    os.chdir(C.ROOT)
    C.ensure_summeval()
    if args.three_nodes and args.stages:
        raise SystemExit("--stages runs in this process, on one node: not with --three-nodes")
    codes = args.code or ["HEAD"]
    wheres = list(NODES) if args.three_nodes else [None]
    arms = [label(code, where) for code in codes for where in wheres]
    name = NAME + (f"-{args.tag}" if args.tag else "")
    cases = []
    with tempfile.TemporaryDirectory(prefix="pairank-ceiling-bench-") as tmp, contextlib.ExitStack() as stack:
        cluster = start_nodes(Path(tmp), stack) if args.three_nodes else None
        for r in range(args.repeats):
            for code, where in [(c, w) for c in codes for w in wheres][:: 1 if r % 2 == 0 else -1]:
                arm = label(code, where)
                case = {
                    "code": code,
                    "contexts": args.contexts,
                    "candidates": args.candidates,
                    "batch_size": args.batch_size,
                    "flush_rows": args.flush_rows,
                    "pool_size": args.pool_size,
                    "set": args.set,
                    "stages": args.stages,
                }
                if where is not None:  # both arms on S3, each case a prefix of its own (per code revision too)
                    case |= {"where": where, "root": f"s3://bench/ceiling/{r}-{re.sub(r'[^A-Za-z0-9]+', '-', arm)}"}
                if cluster is not None and where == "3 nodes":
                    case["address"] = cluster.address
                busy0 = C.machine_cpu()
                t0 = time.time()
                load_before = C.uptime()
                profile = C.RESULTS / f"{name}-profile-{arm.replace(', ', '-')}-{r}.txt" if args.profile else None
                got = run_case(case, Path(tmp), profile)
                busy1 = C.machine_cpu()
                got["machine_cores_busy_during_case"] = round((busy1[0] - busy0[0]) / (time.time() - t0), 2)
                got["load_avg_after"] = os.getloadavg()
                got["uptime_before"], got["uptime_after"] = load_before, C.uptime()
                if args.stages == "only":
                    print(f"{arm} repeat {r}: {json.dumps(got['stage_cpu_us_per_comparison'])}", flush=True)
                    cases.append({"case": case, "result": got})
                    continue
                print(
                    f"{arm} repeat {r}: {got['comparisons']} comparisons, steady {got['steady_per_s']}/s, "
                    f"judging {got['judging_per_s']}/s, run {got['run_per_s']}/s, wall {got['wall_s']} s, machine "
                    f"busy {got['machine_cores_busy_during_case']} cores",
                    flush=True,
                )
                cases.append({"case": case, "result": got})
    summary = stage_summary(arms, cases) if args.stages == "only" else run_summary(arms, cases)
    result = {
        "benchmark": name,
        "date": C.now(),
        "judge": "SIMULATED (seconds_per_comparison 0): no model; pairank's own ceiling",
        "machine": C.machine(),
        "summary": summary,
        "cases": cases,
    }
    if args.three_nodes:
        result["nodes"] = NODES
    path = C.write_result(name, result)
    print(f"wrote {path.relative_to(C.ROOT)}")


#: The arms of ``--three-nodes``: where the run's Ray is.
NODES = {
    "1 node": "the run's own local Ray (3 CPUs: pool.size actors of 1 CPU and the Ray Data tasks)",
    "3 nodes": "a LocalCluster: a head of 1 CPU (the Ray Data tasks; the driver joins it) and two worker nodes of "
    "1 CPU each (one judge actor each), on this machine",
}
#: Ports of this benchmark's own (with --three-nodes): the cluster head's (GCS, Jobs API) and the S3 server's.
HEAD_PORTS = range(33000, 33100)
S3_PORTS = range(33100, 33200)


def label(code: str, where: str | None) -> str:
    """An arm's name: its code revision, and with ``--three-nodes`` where it runs."""
    return code if where is None else f"{code}, {where}"


def start_nodes(tmp: Path, stack: contextlib.ExitStack):
    """An S3 server (its settings in this process's environment, which the cases inherit) and a local cluster of a
    head and two worker nodes (:data:`NODES`), both stopped when ``stack`` closes; returns the cluster."""
    from pairank.cluster.local.nodes import LocalCluster

    (tmp / "s3").mkdir()
    s3, _ = C.start_s3(tmp / "s3", C.free_ports(10, S3_PORTS))
    stack.callback(C.stop, s3)
    port, dashboard = C.free_ports(2, HEAD_PORTS)
    cluster = LocalCluster(tmp / "cluster", workers=2, head_cpus=1, worker_cpus=1, port=port, dashboard_port=dashboard)
    stack.callback(cluster.stop)
    started = time.time()
    cluster.start(timeout=900)  # a loaded machine: a node's start is tried again when Ray's 30 s are not enough
    print(f"cluster up in {time.time() - started:.0f} s", flush=True)
    return cluster


def stage_summary(arms: list[str], cases: list[dict]) -> dict:
    """Per arm, the median CPU microseconds per comparison of each stage; with two arms or more, each stage's
    ratio of the first arm's to each other's (above 1: the other is faster)."""
    summary: dict = {}
    for arm in arms:
        mine = [c["result"]["stage_cpu_us_per_comparison"] for c in cases if c["case"]["code"] == arm]
        summary[arm] = {k: statistics.median(m[k] for m in mine) for k in mine[0] if k != "comparisons"}
    for arm in arms[1:]:
        summary[f"speedup {arms[0]} -> {arm}"] = {
            k: round(v / summary[arm][k], 2) for k, v in summary[arms[0]].items() if summary[arm].get(k)
        }
    for k, v in summary.items():
        print(k, json.dumps(v))
    return summary


def run_summary(arms: list[str], cases: list[dict]) -> dict:
    summary = {}
    for arm in arms:
        mine = [c["result"] for c in cases if label(c["case"]["code"], c["case"].get("where")) == arm]
        summary[arm] = {
            "steady_per_s": [m["steady_per_s"] for m in mine],
            "steady_per_s_median": statistics.median(m["steady_per_s"] for m in mine),
            "judging_per_s": [m["judging_per_s"] for m in mine],
            "run_per_s": [m.get("run_per_s") for m in mine],
            "wall_s": [m["wall_s"] for m in mine],
        }
    if len(arms) > 1:
        base = summary[arms[0]]["steady_per_s_median"]
        for arm in arms[1:]:
            summary[arm]["steady_ratio_over_first_arm"] = round(summary[arm]["steady_per_s_median"] / base, 3)
    print(
        C.table(
            [
                [a, s["steady_per_s_median"], s["wall_s"], s.get("steady_ratio_over_first_arm", "")]
                for a, s in summary.items()
            ],
            ["code", "steady comp/s (median)", "wall s", "ratio"],
        )
    )
    return summary


if __name__ == "__main__":
    main()
