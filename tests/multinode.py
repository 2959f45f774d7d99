"""A Ray cluster of several nodes on this machine for the tests, and what they check on it.

:func:`multinode` is a module-scoped fixture factory: a test module says ``cluster = multinode(workers=2)`` and
its tests get a :class:`~pairank.cluster.local.nodes.LocalCluster` (a head and worker nodes, each a Ray node of its own
that cannot import pairank, with its own HOME and no environment of the driver's; see
:mod:`pairank.cluster.local.nodes`), started once for the module and stopped after it. Storage is the session's
SeaweedFS S3 server (``s3_server``), which every test on the cluster uses.

The rest says what happened in a run: which node holds which of the job's processes (:func:`titles`), the
judgments committed per key and when (:func:`commits`), the calls that reached a simulated engine and when (its
``calls_log``, :func:`engine_calls`), and from both, whether a comparison committed was sent to an engine again
(:func:`audit`).

Tests that use it are marked ``ray`` and ``s3`` by hand (``pytestmark``).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from pairank.cluster.local.nodes import LocalCluster, Node
from pairank.storage.fs import Location
from tests.helpers import ROOT, Gate, shell_env

#: The markers of a test on the cluster (it starts Ray nodes, and its storage is the S3 server).
MARKERS = (pytest.mark.ray, pytest.mark.s3, pytest.mark.cluster)
#: A test that kills nodes mid-run, or the head (minutes each).
NODE_LOSS = pytest.mark.node_loss
#: Variables of the pytest process that the nodes keep: the test tiers' guard (tests/guard), when it is on.
GUARD_ENV = ("PAIRANK_TEST_GUARD", "PYTHONPATH")
PAIRANK = [sys.executable, "-m", "pairank.jobs.cli.main"]
#: Ray's health checks on the tests' clusters (``LocalCluster.health_checks``): a node that is gone is marked dead
#: after 3 checks 0.5 s apart, not Ray's 14 s (the tests' claims are what the job does once Ray knows; the wait
#: itself is BENCHMARKS.md §23's). A live node still fails a check only after Ray's 10 s timeout.
HEALTH_CHECKS = (500, 3)


def multinode(workers: int = 2, worker_cpus: float = 2, head_cpus: float = 0, worker_gpus: float = 0, **kw):
    """A module-scoped fixture: a :class:`LocalCluster` of a head and ``workers`` worker nodes (declared CPUs and
    GPUs per node), started once for the module. ``kw``: more :class:`LocalCluster` settings."""

    @pytest.fixture(scope="module")
    def cluster(tmp_path_factory, s3_server):
        folder = Path(tmp_path_factory.mktemp("cluster"))
        env = {k: os.environ[k] for k in GUARD_ENV if os.environ.get("PAIRANK_TEST_GUARD") and k in os.environ}
        local = LocalCluster(
            folder,
            workers=workers,
            head_cpus=head_cpus,
            worker_cpus=worker_cpus,
            worker_gpus=worker_gpus,
            env=env,
            **{"health_checks": HEALTH_CHECKS, **kw},
        )
        local.start()
        try:
            yield local
        finally:
            local.stop()

    return cluster


def write_spec(folder: Path, spec: dict) -> Path:
    path = folder / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def start_run(
    cluster: LocalCluster, spec: Path, folder: Path, *overrides: str, env: dict[str, str] | None = None
) -> subprocess.Popen:
    """``pairank run spec --set cluster.address=...`` as a driver joining the cluster (from ``folder``, so no
    checkout is on its path; ``env``: its environment, else :func:`~tests.helpers.shell_env`); its output goes to
    ``folder/<spec name>.log``."""
    log = open(folder / f"{spec.stem}.log", "ab")  # noqa: SIM115 - the run's log, open while it runs
    try:
        return subprocess.Popen(
            [*PAIRANK, "run", str(spec), "--set", f"cluster.address={cluster.address}"]
            + [arg for o in overrides for arg in ("--set", o)],
            cwd=folder,
            env=env or shell_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    finally:
        log.close()


def run_log(proc_or_spec: Path, folder: Path) -> str:
    return (folder / f"{proc_or_spec.stem}.log").read_text(errors="replace")


def wait_done(proc: subprocess.Popen, log: Path, timeout: float = 300) -> int:
    """The run's exit code (it is killed after ``timeout`` seconds, and the test fails)."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.wait()
        pytest.fail(f"the run did not end in {timeout:.0f} s:\n{log.read_text(errors='replace')[-4000:]}")


def first_args(node: Node) -> list[tuple[int, str]]:
    """(id, first argument of its command line) of each of the node's processes; one gone meanwhile is left out.
    Ray sets a worker process's first argument to its title (``ray::JudgeActor``, ...)."""
    out = []
    for p in node.processes():
        try:
            out.append((p.pid, (p.cmdline() or [""])[0]))
        except Exception:  # gone meanwhile
            continue
    return out


def titles(node: Node) -> list[str]:
    """The Ray titles (``ray::JudgeActor``, ``ray::MapBatches(forward)``, ...) of the node's worker processes."""
    return sorted(first.split()[0] for _, first in first_args(node) if first.startswith("ray::"))


def pids_of(node: Node, title: str) -> list[int]:
    """The ids of the node's worker processes whose Ray title starts with ``title``."""
    return [pid for pid, first in first_args(node) if first.startswith(title)]


#: The names Ray gives the tasks of a job's work in the cluster: Ray Data's (a stage's map tasks, reading blocks and
#: their metadata) and the render tasks of its rounds.
DATA_TASK_NAMES = (
    "MapBatches(",
    "Map(",
    "ReadBlocks",
    "read_blocks",
    "block_metadata",
    "render_requests",
    "render_passes",
)


def worker_log_paths(node: Node) -> list[Path]:
    """The logs of the node's Ray workers (each worker's standard output)."""
    return list(Path(node.ray_dir).glob("session_*/logs/worker-*.out"))


def worker_logs(cluster: LocalCluster) -> dict[Path, int]:
    """Every worker log of every node of the cluster, with its size now: what :func:`ran` reads on from."""
    logs = {}
    for node in cluster.nodes:
        for path in worker_log_paths(node):
            with contextlib.suppress(OSError):  # gone meanwhile
                logs[path] = path.stat().st_size
    return logs


def ran(cluster: LocalCluster, names: tuple[str, ...], since: dict[Path, int]) -> list[Node]:
    """The live worker nodes whose workers began a task named with one of ``names`` after ``since`` (the sizes of
    :func:`worker_logs` then). Ray writes ``:task_name:NAME`` to a worker's log as each task begins; a task's
    process shows its title only while it runs, and a job's Ray Data tasks can be over long before its end."""
    found = []
    for node in cluster.nodes:
        if node.head or node.name in cluster.killed:
            continue
        for path in worker_log_paths(node):
            try:
                with path.open("rb") as f:
                    f.seek(since.get(path, 0))
                    said = f.read().decode(errors="replace")
            except OSError:
                continue
            if any(f":task_name:{name}" in said for name in names):
                found.append(node)
                break
    return found


def holding(cluster: LocalCluster, title: str | tuple[str, ...], workers_only: bool = True) -> list[Node]:
    """The nodes (worker nodes only, unless ``workers_only`` is false) with a process whose title starts with
    ``title`` (or one of them)."""
    return [
        n for n in cluster.nodes if (not workers_only or not n.head) and any(t.startswith(title) for t in titles(n))
    ]


def wait_for(what: str, test, proc: subprocess.Popen | None = None, log: Path | None = None, timeout: float = 240):
    """Poll ``test()`` until it returns something true; fails naming ``what`` (with the run's log) after
    ``timeout`` seconds or when ``proc`` ended."""
    deadline = time.monotonic() + timeout
    while True:
        found = test()
        if found:
            return found
        ended = proc is not None and proc.poll() is not None
        if ended or time.monotonic() > deadline:
            if proc is not None and not ended:  # the run is stopped with the test
                os.killpg(proc.pid, 9)
                proc.wait()
            said = log.read_text(errors="replace")[-4000:] if log is not None and log.exists() else ""
            pytest.fail(f"{what}: {'the run ended first' if ended else f'not after {timeout:.0f} s'}\n{said}")
        time.sleep(0.2)  # a poll of the state waited for, not a window


def versions(table: str) -> int:
    """Commits of the Delta table at ``table`` (a URI) so far, its creation (version 0, no rows) included; 0 while
    there is no table."""
    return len(Location.of(table).join("_delta_log").files(suffix=".json"))


@dataclass
class Commits:
    """The judgment rows of a Delta table: per key, how many rows and the time (s) of its first commit."""

    rows: dict[str, int]
    first: dict[str, float]

    @property
    def duplicated(self) -> dict[str, int]:
        return {k: n for k, n in self.rows.items() if n != 1}


def commits(table: str) -> Commits:
    """Every row of the Delta table at ``table``, read from its log's commits (each file with its commit's time)."""
    log = Location.of(table).join("_delta_log")
    rows: dict[str, int] = defaultdict(int)
    first: dict[str, float] = {}
    for commit in log.files(suffix=".json"):
        actions = [json.loads(line) for line in commit.read_text().splitlines() if line.strip()]
        at = next(a["commitInfo"]["timestamp"] for a in actions if "commitInfo" in a) / 1000
        for add in (a["add"] for a in actions if "add" in a):
            data = Location.of(table).join(add["path"]).read_bytes()
            for key in pq.read_table(io.BytesIO(data), columns=["key"]).column("key").to_pylist():
                rows[key] += 1
                first[key] = min(first.get(key, at), at)
    return Commits(dict(rows), first)


def engine_calls(folder: str) -> dict[str, list[float]]:
    """Per key, the times it reached a simulated engine (its ``judge.calls_log``)."""
    calls: dict[str, list[float]] = defaultdict(list)
    for f in Location.of(folder).files(suffix=".json"):
        record = f.read_json()
        for key in record["keys"]:
            calls[key].append(record["at"])
    return dict(calls)


def calls_by_pid(folder: str) -> dict[int, int]:
    """Per engine process (a judge actor's pid), the comparisons that reached it (its ``judge.calls_log``)."""
    calls: dict[int, int] = defaultdict(int)
    for f in Location.of(folder).files(suffix=".json") if Location.of(folder).exists() else []:
        record = f.read_json()
        calls[record["pid"]] += len(record["keys"])
    return dict(calls)


@dataclass
class Audit:
    """A run's store and its engine calls, side by side."""

    keys: int  # keys in the store
    duplicated: dict[str, int]  # keys with more than one row
    asked_again: dict[str, list[float]]  # keys sent to an engine after they were committed
    sent_twice: int  # keys sent to an engine more than once (the batches in flight when an engine was lost)

    def clean(self) -> bool:
        return not self.duplicated and not self.asked_again


def audit(table: str, calls_log: str) -> Audit:
    """Whether each key of the store has one row, and whether any was sent to an engine after its commit."""
    done, calls = commits(table), engine_calls(calls_log)
    again = {k: ts for k, ts in calls.items() if k in done.first and max(ts) > done.first[k]}
    return Audit(len(done.rows), done.duplicated, again, sum(1 for ts in calls.values() if len(ts) > 1))


def simulated_spec(name: str, input_uri: str, root: str, **extra) -> dict:
    """A SIMULATED-judge spec on S3 whose engine calls are logged under ``root/calls/<name>``."""
    judge = {"engine": "simulated", "calls_log": f"{root}/calls/{name}", **extra.pop("judge", {})}
    return {
        "name": name,
        "input": input_uri,
        "output": f"{root}/store",
        "aspects": ["coherence"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": judge,
        "report": {"bootstrap": 10},
        **extra,
    }


class SharedGate(Gate):
    """A :class:`~tests.helpers.Gate` on shared storage (``s3://...``), which every node's engines reach: a cluster
    of several nodes refuses a local ``judge.hold``, as it refuses any local path its actors read."""

    def __init__(self, uri: str):
        self.location = Location.of(uri)
        self.folder = uri  # named in wait_for's errors

    def judge(self, hold_from: int = 0) -> dict:
        return {"hold": self.location.uri, "hold_from": hold_from}

    def _batches(self) -> list[Location]:
        return [f for f in self.location.files(suffix=".json") if Path(f.path).name.startswith("batch-")]

    def arrived(self) -> int:
        return len(self._batches())

    def records(self) -> dict[int, dict]:
        return {int(Path(f.path).stem[6:]): f.read_json() for f in self._batches()}

    def release(self) -> None:
        self.location.join("release").write_bytes(b"")

    def open_to(self, batches: int) -> None:
        self.location.join(f"open-{batches}").write_bytes(b"")
