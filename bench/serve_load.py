"""Benchmark: `pairank serve` under many concurrent clients on loopback.

The server is started as ``pairank serve`` starts it (:func:`pairank.jobs.serve.start_server`
on a local Ray, 127.0.0.1, no token) in a child process, over a fresh storage root (a
local folder, or with ``--s3`` a bucket of a SeaweedFS server the benchmark starts on
127.0.0.1), so no request is answered from the cache. The parent is the load
generator: ``--clients`` threads, each sending ``--requests`` ``POST /compare`` one
after another over its own HTTP/1.1 connection, all released at once. Each body is a
different ordered pair of SummEval summaries (context, ids and texts from
data/summeval), so each is judged once.

Each run first waits (up to ``--quiet-wait`` seconds) for the machine to be idle; the
CPU that other processes used during the wave is in the result (``cpu_during_wave``).

Bounded in count and in time: a request gets ``--timeout`` seconds, the wave sends
nothing after ``--deadline`` seconds and is over at the deadline plus one timeout
(what is unanswered then is counted as such), and the server gets ``--start-timeout``
seconds to start.

Reported: latency p50/p90/p99/max over the wave's answers (from the request's first
byte sent to its answer's last byte read), answers (HTTP 200 with a verdict), what
was not answered (by status or error), one request alone before and after the wave;
the judge replica's engine calls (``batches``), rows, commits and compactions; the
Delta table's versions by operation and its data files at the end, and whether every
answered key is in the table; CPU seconds by process during the wave.

Run from the repository root:
  .venv/bin/python bench/serve_load.py                      # SIMULATED judge, 200 clients x 1 request
  .venv/bin/python bench/serve_load.py --requests 10 --s3   # 2,000 requests, the store on S3
  .venv/bin/python bench/serve_load.py --engine vllm --timeout 300   # configs/demo.yaml's CPU judge
Results: bench/results/serve_load[-TAG].json.
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "serve_load"
CONFIGS = {"simulated": C.ROOT / "configs" / "simulated.yaml", "vllm": C.ROOT / "configs" / "demo.yaml"}
APP = "bench"


# ---------------------------------------------------------------- the server (child process)
def child(case: dict) -> None:
    """Start the server, print its URL, wait for a line on stdin, print the judge replica's counters, stop."""
    from pairank.cluster.serve.deployments import judge_info, stop
    from pairank.jobs.serve import start_server
    from pairank.jobs.specs.job import load_spec

    if case["engine"] == "vllm":
        C.quiet_engine_logs()
    spec = load_spec(CONFIGS[case["engine"]], [f"output={case['output']}", *case["set"]])
    try:
        url = start_server(spec, "127.0.0.1", case["port"], None, name=APP)
        print(f"URL {url}", flush=True)
        sys.stdin.readline()
        print(json.dumps({"judge": judge_info(APP)}, default=str), flush=True)
    finally:
        stop(APP)


def start_child(case: dict, env: dict, timeout: float) -> tuple[subprocess.Popen, queue.Queue]:
    """The server's process, once it printed its URL (killed, and the benchmark stopped, after ``timeout`` s)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--child", json.dumps(case)],
        cwd=C.ROOT,
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout] and lines.put(None), daemon=True).start()
    deadline = time.monotonic() + timeout
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
        except queue.Empty:
            line = None
        if line is None:
            proc.kill()
            raise SystemExit(f"the server did not start within {timeout:.0f} s (exit {proc.wait()})")
        if line.startswith("URL "):
            return proc, lines


def stop_child(proc: subprocess.Popen, lines: queue.Queue, timeout: float = 120) -> list[dict] | None:
    """Ask the server for its judge counters and stop it; None when it did not say."""
    judge = None
    try:
        proc.stdin.write("stop\n")
        proc.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            if line is None:
                break
            if line.startswith("{"):
                judge = json.loads(line)["judge"]
        proc.wait(timeout=max(deadline - time.monotonic(), 1))
    except (queue.Empty, subprocess.TimeoutExpired, OSError):
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return judge


# ---------------------------------------------------------------- the load
def bodies(n: int, aspects: list[str]) -> list[bytes]:
    """``n`` compare bodies, each a different ordered pair (contexts in order, then pairs, then aspects)."""
    import pyarrow.parquet as pq

    rows = pq.read_table(C.ROOT / "data" / "summeval" / "candidates.parquet").to_pylist()
    by_context: dict[str, list[dict]] = {}
    for r in rows:
        by_context.setdefault(r["context_id"], []).append(r)
    out = []
    for ctx in sorted(by_context):
        cands = sorted(by_context[ctx], key=lambda r: r["candidate_id"])
        for a, b in itertools.permutations(cands, 2):
            for aspect in aspects:
                body = {
                    "context": a["context"],
                    "context_id": ctx,
                    "candidate_a": {"id": a["candidate_id"], "text": a["text"]},
                    "candidate_b": {"id": b["candidate_id"], "text": b["text"]},
                    "aspect": aspect,
                }
                out.append(json.dumps(body).encode())
                if len(out) == n:
                    return out
    raise SystemExit(f"only {len(out)} distinct pairs in data/summeval; asked for {n}")


def post(conn: http.client.HTTPConnection, body: bytes) -> tuple[int, dict | None]:
    conn.request("POST", "/compare", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    try:
        return resp.status, json.loads(data)
    except ValueError:
        return resp.status, None


def one(port: int, body: bytes, timeout: float) -> dict:
    """One request alone, on a new connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        t0 = time.perf_counter()
        status, answer = post(conn, body)
        out = {"status": status, "seconds": round(time.perf_counter() - t0, 4), "cached": (answer or {}).get("cached")}
        if status != 200:  # what the server said, so a failure can be read from the result
            out["error"] = (answer or {}).get("error")
        return out
    finally:
        conn.close()


def wave(port: int, work: list[list[bytes]], timeout: float, deadline_s: float) -> dict:
    """Every client sends its bodies one after another; all start together. Outcomes per request."""
    results: list[dict] = []
    lock = threading.Lock()
    start = threading.Barrier(len(work) + 1)
    stop_at: list[float] = []

    def client(mine: list[bytes]) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        start.wait()
        for body in mine:
            if time.monotonic() > stop_at[0]:
                out = {"status": "not sent (deadline)"}
            else:
                t0 = time.perf_counter()
                try:
                    status, answer = post(conn, body)
                    ok = status == 200 and answer is not None and answer.get("error") is None
                    out = {"status": status, "seconds": time.perf_counter() - t0, "ok": ok}
                    if ok:
                        out["key"] = answer["key"]
                except (OSError, http.client.HTTPException) as exc:  # TimeoutError is an OSError
                    out = {"status": f"no answer ({type(exc).__name__})", "seconds": time.perf_counter() - t0}
                    conn.close()
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
            with lock:
                results.append(out)
        conn.close()

    threads = [threading.Thread(target=client, args=(mine,), daemon=True) for mine in work]
    for t in threads:
        t.start()
    stop_at.append(time.monotonic() + deadline_s)
    t0 = time.perf_counter()
    start.wait()
    for t in threads:
        t.join(max(stop_at[0] + timeout + 5 - time.monotonic(), 0))
    wall = time.perf_counter() - t0
    with lock:
        done = list(results)
    sent = sum(len(m) for m in work)
    return {"results": done, "wall_s": round(wall, 2), "sent": sent, "unfinished": sent - len(done)}


def quantile(xs: list[float], q: float) -> float | None:
    """The ``q`` quantile (nearest rank) of ``xs``.

    >>> quantile([float(x) for x in range(1, 101)], 0.99), quantile([], 0.5)
    (99.0, None)
    """
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[max(int(round(q * len(xs))) - 1, 0)], 3)


def summarise(w: dict, slow_s: float) -> dict:
    answered = [r for r in w["results"] if r.get("ok")]
    lat = [r["seconds"] for r in answered]
    missing: dict[str, int] = {}
    for r in w["results"]:
        if not r.get("ok"):
            missing[str(r["status"])] = missing.get(str(r["status"]), 0) + 1
    if w["unfinished"]:
        missing["unfinished at the deadline"] = w["unfinished"]
    return {
        "requests": w["sent"],
        "answers": len(answered),
        "distinct_keys_answered": len({r["key"] for r in answered}),
        "not_answered": missing,
        "p50_s": quantile(lat, 0.5),
        "p90_s": quantile(lat, 0.9),
        "p99_s": quantile(lat, 0.99),
        "max_s": round(max(lat), 3) if lat else None,
        "mean_s": round(statistics.fmean(lat), 3) if lat else None,
        f"answers_over_{slow_s:g}s": sum(1 for x in lat if x > slow_s),
        "wall_s": w["wall_s"],
        "answers_per_s": round(len(answered) / w["wall_s"], 1) if w["wall_s"] else None,
        "keys": sorted({r["key"] for r in answered}),
    }


def store_figures(output: str, keys: list[str]) -> dict:
    from pairank.storage.fs import Location
    from pairank.storage.store import maintenance
    from pairank.storage.store.cache import JudgmentCache

    hist = maintenance.history(output)
    cache = JudgmentCache(Location.of(output).join("tables", "judgments"))
    rows = cache.rows()
    stored = set(rows.column("key").to_pylist())
    ops: dict[str, int] = {}
    for h in hist:
        ops[h["operation"] or "?"] = ops.get(h["operation"] or "?", 0) + 1
    return {
        "versions": len(hist),
        "operations": ops,
        "data_files_now": len(cache.files()),
        "rows_in_table": rows.num_rows,
        "answered_keys_missing_from_table": len(set(keys) - stored),
    }


def process_labels(server_pid: int, s3_pid: int | None) -> dict[int, str]:
    """The server's processes by role (the rest are classed by :func:`_common.cpu_snapshot`)."""
    import psutil

    roles = {
        f"ServeReplica:{APP}:ingress": "Serve ingress replica",
        f"ServeReplica:{APP}:judge": "Serve judge replica",
        "ProxyActor": "Serve HTTP proxy",
        "ServeController": "Serve controller",
    }
    out = {server_pid: "server driver (start_server)"}
    if s3_pid is not None:
        out[s3_pid] = "S3 server (SeaweedFS)"
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = " ".join(p.info["cmdline"] or [])
        for needle, role in roles.items():
            if needle in cmd:
                out[p.info["pid"]] = role
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--engine", choices=sorted(CONFIGS), default="simulated")
    ap.add_argument("--clients", type=int, default=200)
    ap.add_argument("--requests", type=int, default=1, help="requests per client, sent one after another")
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a request may take")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds after which the wave sends nothing more")
    ap.add_argument("--start-timeout", type=float, default=600.0, help="seconds the server may take to start")
    ap.add_argument("--slow", type=float, default=2.0, help="count the answers slower than this (seconds)")
    ap.add_argument("--s3", action="store_true", help="the store on a SeaweedFS S3 server on 127.0.0.1")
    ap.add_argument("--set", action="append", default=[], help="a spec override KEY=VALUE (repeatable)")
    ap.add_argument("--quiet-wait", type=float, default=900.0, help="wait up to this long for an idle machine first")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    if args.child:
        child(json.loads(args.child))
        return

    from pairank.jobs.specs.job import load_spec

    spec = load_spec(CONFIGS[args.engine], [*args.set])
    all_bodies = bodies(args.clients * args.requests + 2, list(spec.aspects))
    before_body, after_body, load = all_bodies[0], all_bodies[1], all_bodies[2:]
    work = [load[i :: args.clients] for i in range(args.clients)]
    port = C.free_ports(1)[0]

    with tempfile.TemporaryDirectory(prefix="pairank-serve-load-") as tmp:
        s3 = None
        env = C.cpu_engine_env() if args.engine == "vllm" else {}
        output = str(Path(tmp) / "store")
        if args.s3:
            (Path(tmp) / "s3").mkdir()
            s3, s3_env = C.start_s3(Path(tmp) / "s3")
            env.update(s3_env)
            output = "s3://bench/store"
        try:
            case = {"engine": args.engine, "output": output, "port": port, "set": args.set}
            waited = C.wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else 0.0
            started = time.time()
            proc, lines = start_child(case, env, args.start_timeout)
            start_s = round(time.time() - started, 1)
            print(f"server at 127.0.0.1:{port} after {start_s} s; {args.clients} clients x {args.requests}", flush=True)
            try:
                before = one(port, before_body, args.timeout)
                labels = process_labels(proc.pid, s3.pid if s3 else None)
                t_cpu, t0 = C.cpu_snapshot("load generator (this process)", labels), time.time()
                w = wave(port, work, args.timeout, args.deadline)
                cpu = C.cpu_delta(t_cpu, C.cpu_snapshot("load generator (this process)", labels), time.time() - t0)
                after = one(port, after_body, args.timeout)
            finally:
                judge = stop_child(proc, lines)
            summary = summarise(w, args.slow)
            store = store_figures(output, summary.pop("keys"))
        finally:
            if s3 is not None:
                s3.terminate()
                try:
                    s3.wait(20)
                except subprocess.TimeoutExpired:
                    s3.kill()

    replica = (judge or [{}])[0]
    counters = ("batches", "rows", "commits", "batches_committed", "failed_commits", "files_written", "compactions")
    result = {
        "benchmark": NAME,
        "when": C.now(),
        "machine": C.machine(),
        "engine": args.engine,
        "spec": str(CONFIGS[args.engine].relative_to(C.ROOT)),
        "overrides": args.set,
        "store": "s3 (SeaweedFS on 127.0.0.1)" if args.s3 else "local folder",
        "pool_batch_size": spec.pool.batch_size,
        "clients": args.clients,
        "requests_per_client": args.requests,
        "timeout_s": args.timeout,
        "deadline_s": args.deadline,
        "waited_for_idle_machine_s": waited,
        "server_start_s": start_s,
        "single_request_before": before,
        "wave": summary,
        "single_request_after": after,
        "judge_replica": {k: replica.get(k) for k in counters},
        "judge_replica_info": replica,
        "table": store,
        "cpu_during_wave": cpu,
    }
    path = C.write_result(NAME + (f"-{args.tag}" if args.tag else ""), result)
    print(json.dumps({k: result[k] for k in ("single_request_before", "wave", "single_request_after")}, indent=1))
    print(json.dumps({"judge_replica": result["judge_replica"], "table": store}, indent=1))
    print(json.dumps(cpu["cores_busy"], indent=1))
    print(f"-> {path}")


if __name__ == "__main__":
    main()
