"""Benchmark (SIMULATED judge): seconds from a worker node's loss until the judge pool judges again at full size.

A :class:`~pairank.cluster.local.nodes.LocalCluster` on this machine (a head of ``--head-cpus`` CPUs, two worker
nodes of 2 CPUs, each its own Ray node that cannot import pairank), storage on a SeaweedFS S3 server the benchmark
starts, and per run a ``pairank run --set cluster.address=...`` driver on this machine:

* the job: ``--contexts`` SummEval articles x ``--candidates`` summaries, one aspect, ``scheduler.name: full``
  (every ordered pair), the SIMULATED judge at ``--seconds`` per comparison (a sleep: the run judges for about a
  minute), its ``calls_log`` on S3 (when each batch reached an engine, and which process judged it);
  ``pool.size`` 2, batches of 64;
* the loss: ``--kill-after`` seconds after the first batch reached an engine, the worker node holding one judge
  actor is SIGKILLed, its whole process tree (:meth:`LocalCluster.kill`: a machine that vanishes).

Two arms:

* ``replacement``: ``pool.num_cpus`` 2 (an actor takes a whole worker node) and a new worker node is started right
  after the kill (a spot replacement): Ray restarts the actor once the new node has joined;
* ``room``: ``pool.num_cpus`` 1 and no new node: Ray restarts the actor on the surviving worker node.

Measured per run (times are this machine's clock: the benchmark's, the pool monitor's and Ray's):

* ``kill_to_full_s``: from the kill (the benchmark's ``time.time()`` just before the first SIGKILL) to the restarted
  slot's ``judging_at`` in the run's ``report.json`` (``engines.restarts``: the first call in the restarted engine;
  the other actor never stopped, so the pool is judging at full size again);
* its parts: ``kill_to_node_dead_s`` (Ray's GCS marks the node dead: its ``end_time_ms``), ``kill_to_restart_s``
  (the restarted actor arrives, the monitor's ``at``), ``restart_to_judging_s`` (``judging_at - at``) and, in
  the ``replacement`` arm, ``kill_to_node_joined_s`` (the new node's raylet start, Ray's ``start_time_ms``);
* ``calls_log_first_s``: the restarted engine's first batch in the ``calls_log``, from the kill (a check on
  ``judging_at`` from the engine's side);
* the run exits 0, with one verdict per key in the store (checked; a run that does not stops the benchmark).

Arms alternate (``replacement, room``, then ``room, replacement``, ...). Ray's node-death detection runs at Ray's
defaults (no ``RAY_health_check_*`` variable is set: a health check every 3 s, a node dead after 5 failures), or
as ``--health-checks PERIOD_MS:FAILURES`` sets it on every node.

Run from the repository root:  .venv/bin/python bench/node_loss.py
Knobs: --repeats, --arms, --contexts, --candidates, --seconds, --kill-after, --start-seconds (the simulated engine's
start, to mimic a model's load), --head-cpus, --health-checks, --tag. Writes bench/results/node_loss[-TAG].json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

from pairank.cluster.local.nodes import health_checks_option

NAME = "node_loss"
#: Ports of this benchmark's own: the cluster head's (GCS, Jobs API) and the S3 server's.
HEAD_PORTS = range(33000, 33100)
S3_PORTS = range(33100, 33200)
ARMS = {
    "replacement": {"num_cpus": 2, "replace": True},
    "room": {"num_cpus": 1, "replace": False},
}
JUDGE_TITLE = "ray::JudgeActor"


# ---------------------------------------------------------------- the input and the spec
def write_input(uri: str, contexts: int, candidates: int) -> int:
    """``contexts`` SummEval articles x ``candidates`` summaries at ``uri``; returns the comparisons of a full
    matrix on one aspect."""
    from pairank.storage.fs import Location

    base = C.candidates_table()
    table = C.pick(base, C.context_ids(base)[:contexts], candidates)
    Location.of(uri).join("candidates.parquet").write_parquet(table)
    per = Counter(table.column("context_id").to_pylist())
    return sum(n * (n - 1) for n in per.values())


def spec_of(name: str, input_uri: str, root: str, num_cpus: float, args) -> dict:
    return {
        "name": name,
        "input": input_uri,
        "output": f"{root}/store",
        "aspects": ["coherence"],
        "prompts": str(C.PROMPTS),
        "scheduler": {"name": "full"},
        "judge": {
            "engine": "simulated",
            "seconds_per_comparison": args.seconds,
            "start_seconds": args.start_seconds,
            "calls_log": f"{root}/calls",
        },
        "pool": {"size": 2, "num_cpus": num_cpus, "batch_size": 64},
        "flush_rows": 256,
        "report": {"bootstrap": 10},
    }


# ---------------------------------------------------------------- what runs where
def actors_by_node(cluster) -> dict[str, list[int]]:
    """Per live worker node, the ids of its judge actors' processes (Ray titles them ``ray::JudgeActor...``)."""
    out = {}
    for node in cluster.nodes:
        if node.head or node.name in cluster.killed:
            continue
        pids = []
        for p in node.processes():
            try:
                if (p.cmdline() or [""])[0].startswith(JUDGE_TITLE):
                    pids.append(p.pid)
            except Exception:  # gone meanwhile
                continue
        out[node.name] = pids
    return out


def calls(uri: str) -> list[tuple[float, int]]:
    """(time, engine pid) of each batch that reached an engine, from the names of the ``calls_log`` files
    (``<microseconds>-<pid>-<random>.json``)."""
    from pairank.storage.fs import Location

    folder = Location.of(uri)
    if not folder.exists():
        return []
    out = []
    for f in folder.files(suffix=".json"):
        at_us, pid, _ = f.uri.rsplit("/", 1)[-1].split("-", 2)
        out.append((int(at_us) / 1e6, int(pid)))
    return sorted(out)


def node_times(cluster) -> dict[str, dict]:
    """Per Ray node id (alive or dead): its state and Ray's ``start_time_ms``/``end_time_ms``, asked of the head
    by the cluster's python (as :meth:`LocalCluster.alive_nodes`)."""
    from pairank.cluster.local.node_setup import auth_token, node_env

    code = (
        "import json\n"
        "from ray.util.state import list_nodes\n"
        f"nodes = list_nodes(address={cluster.dashboard!r}, detail=True, raise_on_missing_output=False)\n"
        "print(json.dumps({n.node_id: {'state': n.state, 'start_ms': n.start_time_ms, 'end_ms': n.end_time_ms}"
        " for n in nodes}))\n"
    )
    env = node_env(cluster.python, cluster.folder / "head" / "home", auth_token())
    out = subprocess.run([str(cluster.python), "-c", code], capture_output=True, text=True, env=env, timeout=120)
    if out.returncode != 0:
        return {}
    return json.loads(out.stdout.strip().splitlines()[-1])


def driver_env() -> dict[str, str]:
    """This process's environment (with the S3 server's settings), Ray's token mode, no RAY_ADDRESS (as the tests'
    drivers, tests/multinode.py)."""
    return {**{k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}, "RAY_AUTH_MODE": "token"}


def keep_two_workers(cluster) -> None:
    """Start worker nodes until two are live (a run without a replacement leaves one)."""
    live = [n for n in cluster.nodes if not n.head and n.name not in cluster.killed]
    for node in live:
        cluster.wait_registered(node)
    for _ in range(2 - len(live)):
        cluster.wait_registered(cluster.add_worker(wait=False), timeout=600)


# ---------------------------------------------------------------- one run
def one_run(cluster, arm: str, index: int, input_uri: str, comparisons: int, folder: Path, args) -> dict:
    """A run of ``arm`` with a worker node killed mid-run; what it measured (see the module's docstring)."""
    import yaml

    from pairank.storage.fs import Location
    from pairank.storage.store.cache import JudgmentCache

    name = f"{arm}-{index}"
    root = f"s3://bench/nodeloss/{name}"
    settings = ARMS[arm]
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec_of(name, input_uri, root, settings["num_cpus"], args)), encoding="utf-8")
    log_path = folder / f"{name}.log"
    load_before, busy0, t0 = C.uptime(), C.machine_cpu()[0], time.time()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pairank.jobs.cli.main",
                "run",
                str(path),
                "--set",
                f"cluster.address={cluster.address}",
            ],
            cwd=folder,
            env=driver_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.time() + args.timeout
        while not (seen := calls(f"{root}/calls")):
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit(f"{name}: no batch reached an engine\n{log_path.read_text(errors='replace')[-3000:]}")
            time.sleep(0.5)
        judging_from = seen[0][0]
        time.sleep(max(0.0, judging_from + args.kill_after - time.time()))
        placement = actors_by_node(cluster)
        alone = [n for n, pids in placement.items() if len(pids) == 1]
        victim = cluster.node(alone[0] if alone else max(placement, key=lambda n: len(placement[n])))
        victim_id = victim.node_id()
        t_kill = time.time()
        killed = cluster.kill(victim)
        t_killed = time.time()
        replacement = None
        if settings["replace"]:
            replacement = cluster.add_worker(wait=False)
            replacement_id = cluster.wait_registered(replacement, timeout=600)
            seen_joined = time.time()
        code = proc.wait(timeout=max(60.0, deadline - time.time()))
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()
    t_end, busy1 = time.time(), C.machine_cpu()[0]
    said = log_path.read_text(errors="replace")
    if code != 0:
        raise SystemExit(f"{name}: the run exited {code}\n{said[-3000:]}")
    report = Location.of(f"{root}/store/runs/{name}/report.json").read_json()
    keys = Counter(
        JudgmentCache(Location.of(f"{root}/store").join("tables", "judgments")).rows().column("key").to_pylist()
    )
    if len(keys) != comparisons or set(keys.values()) != {1}:
        raise SystemExit(f"{name}: {len(keys)} keys of {comparisons} expected, most stored {keys.most_common(1)}")
    engines = report["engines"]
    restarts = [r for r in engines.get("restarts", []) if r["at"] >= t_kill]
    if not restarts or any(r["judging_at"] is None for r in restarts):
        raise SystemExit(f"{name}: no restart judged after the kill: {engines}")
    back = max(restarts, key=lambda r: r["judging_at"])
    nodes = node_times(cluster)
    dead_ms = (nodes.get(victim_id or "") or {}).get("end_ms")
    first_call = min((at for at, pid in calls(f"{root}/calls") if pid == back["pid"]), default=None)
    out = {
        "arm": arm,
        "repeat": index,
        "victim": victim.name,
        "placement_before_kill": placement,
        "processes_killed": len(killed),
        "kill_seconds": round(t_killed - t_kill, 2),
        "kill_after_first_batch_s": round(t_kill - judging_from, 2),
        "kill_to_full_s": round(back["judging_at"] - t_kill, 2),
        "kill_to_node_dead_s": round(dead_ms / 1000 - t_kill, 2) if dead_ms else None,
        "kill_to_restart_s": round(back["at"] - t_kill, 2),
        "restart_to_judging_s": round(back["judging_at"] - back["at"], 2),
        "calls_log_first_s": round(first_call - t_kill, 2) if first_call else None,
        "restarts_after_kill": restarts,
        "engines": {k: v for k, v in engines.items() if k != "restarts"},
        "comparisons": comparisons,
        "keys_stored_once": len(keys),
        "exit": code,
        "run_s": round(t_end - t0, 1),
        "machine_cores_busy": round((busy1 - busy0) / (t_end - t0), 2),
        "uptime_before": load_before,
        "uptime_after": C.uptime(),
    }
    if replacement is not None:
        joined_ms = (nodes.get(replacement_id) or {}).get("start_ms")
        out["replacement"] = replacement.name
        out["kill_to_node_joined_s"] = round(joined_ms / 1000 - t_kill, 2) if joined_ms else None
        out["kill_to_node_seen_registered_s"] = round(seen_joined - t_kill, 2)
    return out


# ---------------------------------------------------------------- the parent
def summary(runs: list[dict]) -> dict:
    """Per arm, each measure's values and median."""
    out: dict = {}
    measures = (
        "kill_to_full_s",
        "kill_to_node_dead_s",
        "kill_to_restart_s",
        "restart_to_judging_s",
        "kill_to_node_joined_s",
        "calls_log_first_s",
    )
    for arm in dict.fromkeys(r["arm"] for r in runs):
        mine = [r for r in runs if r["arm"] == arm]
        out[arm] = {"runs": len(mine)}
        for m in measures:
            values = [r[m] for r in mine if r.get(m) is not None]
            if values:
                out[arm][m] = {"values": values, "median": round(statistics.median(values), 2)}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--arms", default="replacement,room", help=f"comma-separated, of {', '.join(ARMS)}")
    ap.add_argument("--contexts", type=int, default=20)
    ap.add_argument("--candidates", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=0.03, help="judge.seconds_per_comparison")
    ap.add_argument("--start-seconds", type=float, default=0.0, help="judge.start_seconds (an engine's load)")
    ap.add_argument("--kill-after", type=float, default=20.0, help="seconds after the first batch reached an engine")
    ap.add_argument("--head-cpus", type=float, default=1, help="the head's CPUs (the job's Ray Data tasks)")
    ap.add_argument("--timeout", type=float, default=900, help="seconds a run may take")
    ap.add_argument(
        "--start-timeout", type=float, default=900, help="seconds the cluster's start may take (a loaded machine)"
    )
    ap.add_argument(
        "--health-checks",
        type=health_checks_option,
        default=None,
        metavar="PERIOD_MS:FAILURES",
        help="Ray's health checks of the nodes (pairank cluster up --health-checks); default: Ray's own (3000:5)",
    )
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    arms = args.arms.split(",")
    unknown = [a for a in arms if a not in ARMS]
    if unknown:
        raise SystemExit(f"unknown arms {unknown}: choose among {', '.join(ARMS)}")
    os.chdir(C.ROOT)
    C.ensure_summeval()
    from pairank.cluster.local.nodes import LocalCluster

    started, load_start, runs = C.now(), C.uptime(), []
    print(f"uptime: {load_start}", flush=True)
    with tempfile.TemporaryDirectory(prefix="pairank-nodeloss-") as tmp:
        (Path(tmp) / "s3").mkdir()
        s3, _ = C.start_s3(Path(tmp) / "s3", C.free_ports(10, S3_PORTS))
        try:
            input_uri = "s3://bench/nodeloss/input"
            comparisons = write_input(input_uri, args.contexts, args.candidates)
            port, dashboard = C.free_ports(2, HEAD_PORTS)
            cluster = LocalCluster(
                Path(tmp) / "cluster",
                workers=2,
                head_cpus=args.head_cpus,
                worker_cpus=2,
                port=port,
                dashboard_port=dashboard,
                health_checks=args.health_checks,
            )
            t = time.time()
            cluster.start(args.start_timeout)
            print(f"cluster up in {time.time() - t:.0f} s", flush=True)
            try:
                for r in range(args.repeats):
                    for arm in arms if r % 2 == 0 else arms[::-1]:
                        keep_two_workers(cluster)
                        got = one_run(cluster, arm, r, input_uri, comparisons, Path(tmp), args)
                        print(
                            f"{arm} {r}: kill -> judging at full size {got['kill_to_full_s']} s (node dead "
                            f"{got['kill_to_node_dead_s']} s, actor restarted {got['kill_to_restart_s']} s, "
                            f"joined {got.get('kill_to_node_joined_s', '-')} s); run {got['run_s']} s, "
                            f"{got['uptime_after']}",
                            flush=True,
                        )
                        runs.append(got)
                        write(args, arms, comparisons, started, load_start, runs)  # so far (a stopped bench keeps it)
            finally:
                cluster.stop()
        finally:
            C.stop(s3)
    path = write(args, arms, comparisons, started, load_start, runs)
    print(json.dumps(summary(runs), indent=1))
    print(f"wrote {path.relative_to(C.ROOT)}")


def write(args, arms: list[str], comparisons: int, started: str, load_start: str, runs: list[dict]) -> Path:
    """The results so far, in bench/results/node_loss[-TAG].json."""
    result = {
        "benchmark": NAME + (f"-{args.tag}" if args.tag else ""),
        "date": started,
        "judge": f"SIMULATED ({args.seconds} s per comparison, start {args.start_seconds} s): no model",
        "job": {
            "contexts": args.contexts,
            "candidates": args.candidates,
            "comparisons": comparisons,
            "pool": "size 2, batch_size 64",
            "kill_after_first_batch_s": args.kill_after,
            "head_cpus": args.head_cpus,
            "worker_cpus": 2,
        },
        "arms": {a: ARMS[a] for a in arms},
        "ray_node_death_detection": (
            f"RAY_health_check_period_ms={args.health_checks[0]}, "
            f"RAY_health_check_failure_threshold={args.health_checks[1]} on every node"
            if args.health_checks
            else "Ray's defaults: no RAY_health_check_* variable set"
        ),
        "uptime_start": load_start,
        "uptime_end": C.uptime(),
        "machine": C.machine(),
        "summary": summary(runs),
        "runs": runs,
    }
    return C.write_result(result["benchmark"], result)


if __name__ == "__main__":
    main()
