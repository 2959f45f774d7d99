"""`pairank submit/status/logs/stop` against a real Ray head on 127.0.0.1 (the real Jobs API).

The head is started by this module with its own ports and temp dir, so it does not
meet the in-process Ray other tests start (`ray_local`), and is stopped by the ids
of the processes it started.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from tests.helpers import ROOT, Gate, free_port, free_ports, shell_env, stop_process, write_input

PAIRANK = [sys.executable, "-m", "pairank.jobs.cli.main"]
SECRET = "pairank-test-secret-value-0f9e"


def ray_env(**extra: str) -> dict[str, str]:
    """:func:`~tests.helpers.shell_env` with RAY_AUTH_MODE=token, for the head and for Ray's own clients (the head
    wants the token: Ray's default for a new head where ~/.ray/auth_token exists)."""
    return shell_env(RAY_AUTH_MODE="token", **extra)


def pairank(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*PAIRANK, *args], capture_output=True, text=True, cwd=ROOT, env=env or shell_env(), timeout=timeout
    )


def jobs_api_ready(address: str) -> bool:
    out = subprocess.run(
        [sys.executable, "-c", f"from ray.job_submission import JobSubmissionClient as C; C({address!r}).list_jobs()"],
        capture_output=True,
        env=ray_env(),
        timeout=60,
    )
    return out.returncode == 0


def job_info(address: str, job_id: str) -> dict:
    code = (
        "from ray.job_submission import JobSubmissionClient as C; "
        f"print(C({address!r}).get_job_info({job_id!r}).model_dump_json())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ray_env(), timeout=60)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def stop_tree(proc: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM ``proc`` (``ray start --block`` takes its Ray processes down with it), then SIGKILL, by id,
    whatever below it is still running after ``timeout`` seconds."""
    import psutil

    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    stop_process(proc, timeout)

    def running(p: psutil.Process) -> bool:
        try:
            return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    deadline = time.monotonic() + timeout
    while any(running(p) for p in tree) and time.monotonic() < deadline:
        time.sleep(0.2)  # a poll of the processes' end, not a window
    for p in tree:
        if running(p):
            p.kill()


@pytest.fixture(scope="module")
def ray_head():
    """A Ray head on 127.0.0.1 with its dashboard (the Jobs API); yields the Jobs API's address."""
    temp = Path(tempfile.mkdtemp(prefix="prk-head-", dir="/tmp"))  # short: Ray's socket paths are limited
    names = ["--port", "--dashboard-port", "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port"]
    names += ["--runtime-env-agent-port", "--metrics-export-port", "--ray-client-server-port"]
    ports = dict(zip(names, free_ports(len(names))))  # distinct
    dashboard = ports["--dashboard-port"]
    env = ray_env(
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
        RAY_USAGE_STATS_ENABLED="0",
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",  # on SIGTERM, stop at once instead of draining the node
        # the job's entrypoint (python3 -m pairank.jobs.cli.main ...) finds this venv's interpreter
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    )
    log = open(temp / "ray-start.log", "wb")  # noqa: SIM115 - a server's log, open for its life
    proc = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "ray"),
            "start",
            "--head",
            "--block",
            "--node-ip-address=127.0.0.1",
            "--dashboard-host=127.0.0.1",
            "--include-dashboard=true",
            "--num-cpus=3",
            "--object-store-memory=500000000",
            f"--temp-dir={temp}",
            *(f"{flag}={port}" for flag, port in ports.items()),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    address = f"http://127.0.0.1:{dashboard}"
    try:
        deadline = time.monotonic() + 180
        while not jobs_api_ready(address):
            assert proc.poll() is None, (temp / "ray-start.log").read_text()[-3000:]
            assert time.monotonic() < deadline, f"no Jobs API at {address} after 180 s"  # a hang bound
            time.sleep(1)  # a poll of the Jobs API, not a window
        yield address
    finally:
        stop_tree(proc)
        log.close()
        shutil.rmtree(temp, ignore_errors=True)


def simulated_spec(folder: Path, input_dir: Path, name: str, **judge) -> Path:
    """A spec outside the checkout (so `submit` uploads a copy) with the SIMULATED judge."""
    spec = {
        "name": name,
        "input": str(input_dir),
        "output": str(folder / "store"),
        "aspects": ["coherence"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": {"engine": "simulated", **judge},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 4},
        "report": {"bootstrap": 10},
        "flush_rows": 4,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def assert_outputs(store: Path, name: str) -> None:
    run = store / "runs" / name
    assert (run / "report.md").is_file() and (run / "rankings.parquet").is_file(), sorted(store.rglob("*"))
    assert list((store / "tables" / "judgments").glob("**/*.parquet")), sorted(store.rglob("*"))


def test_a_spec_in_the_checkout_runs_from_its_own_path_with_the_overrides_on_the_command_line():
    from pairank.cluster.ray_jobs import EXCLUDES, staged_package
    from pairank.jobs.submit import prepare

    sub = prepare("configs/demo.yaml", ["output=s3://bucket/pairank", "scheduler.name=pairs_greedy"], environ={})
    assert sub.working_dir == ROOT and sub.staged is None and sub.env_vars == {}
    assert sub.entrypoint == (
        "python3 -m pairank.jobs.cli.main run configs/demo.yaml --set output=s3://bucket/pairank "
        "--set scheduler.name=pairs_greedy --set cluster.address=auto"
    )
    assert sub.runtime_env() == {"working_dir": str(ROOT), "excludes": list(EXCLUDES)}
    # the code travels as the pairank package the submitting command runs
    package = staged_package(Path(tempfile.mkdtemp()))
    assert (package / "jobs" / "cli" / "main.py").is_file() and (package / "__init__.py").is_file()
    assert sub.runtime_env(package=package)["py_modules"] == [str(package)] and "/pairank" in EXCLUDES
    # the demo's input ships in data/, which is uploaded with the checkout: nothing to warn about
    assert list(sub.notes) == [] and not any(x in ("/data", "data") for x in EXCLUDES)


def test_a_spec_from_elsewhere_is_uploaded_as_a_validated_copy_that_finds_the_checkouts_prompts(tmp_path):
    from pairank.cluster.ray_jobs import staged_upload
    from pairank.jobs.specs.job import load_spec
    from pairank.jobs.submit import prepare

    spec = simulated_spec(tmp_path, tmp_path / "input", "copied")
    environ = {"AWS_SECRET_ACCESS_KEY": SECRET, "AWS_PROFILE": "laptop", "HOME": "/home/x", "EXTRA": "1"}
    sub = prepare(str(spec), ["subset.contexts=2"], extra_env=["EXTRA"], environ=environ)
    assert (
        sub.entrypoint == "python3 -m pairank.jobs.cli.main run .pairank-submit/copied.yaml --set cluster.address=auto"
    )
    assert sub.env_vars == {"AWS_SECRET_ACCESS_KEY": SECRET, "EXTRA": "1"}
    path, text = sub.staged
    copy = yaml.safe_load(text)
    assert copy["prompts"] == "../configs/prompts/summarization" and copy["subset"] == {"contexts": 2}
    upload = staged_upload(ROOT, sub.staged, tmp_path / "upload")  # the checkout, linked, plus the copy
    assert (upload / "jobs" / "cli" / "main.py").is_file()
    assert load_spec(upload / path) == load_spec(spec, ["subset.contexts=2", "cluster.address=auto"])
    assert prepare(str(spec), forward_env=False, environ=environ).env_vars == {}
    with pytest.raises(ValueError, match="--env MISSING: not set"):
        prepare(str(spec), extra_env=["MISSING"], environ=environ)


def test_a_bad_spec_fails_here_before_anything_is_sent(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text((ROOT / "configs/demo.yaml").read_text() + "\nschedular: {name: full}\n")
    out = pairank("submit", str(spec), "--address", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert out.returncode == 2, out.stderr
    assert str(spec) in out.stderr and "schedular: unknown key" in out.stderr
    assert "Jobs API" not in out.stderr and out.stdout == ""


def test_an_unreachable_cluster_is_named_with_where_its_address_came_from(tmp_path, summeval_tables):
    spec = simulated_spec(tmp_path, write_input(tmp_path / "input", summeval_tables, 1, 2).path, "unreachable")
    address = f"http://127.0.0.1:{free_port()}"
    out = pairank("submit", str(spec), "--address", address)
    assert out.returncode == 2
    assert f"cannot reach the Ray Jobs API at {address} (from --address)" in out.stderr
    out = pairank("status", "some-job", env=shell_env(RAY_ADDRESS=address))
    assert out.returncode == 2 and f"{address} (from RAY_ADDRESS)" in out.stderr
    out = pairank("logs", "some-job")
    assert out.returncode == 2 and "pass --address" in out.stderr


def test_submit_waits_streams_the_log_and_the_outputs_land_under_the_storage_root(ray_head, tmp_path, summeval_tables):
    input_dir = write_input(tmp_path / "input", summeval_tables, 2, 3).path
    spec = simulated_spec(tmp_path, input_dir, "submitted")
    env = shell_env(AWS_SECRET_ACCESS_KEY=SECRET, AWS_ACCESS_KEY_ID="pairank-test", AWS_PROFILE="laptop")
    out = pairank("submit", str(spec), "--address", ray_head, "--set", "scheduler.seed=3", env=env)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    job_id = out.stdout.splitlines()[0]
    report = tmp_path / "store" / "runs" / "submitted" / "report.md"
    assert str(report) in out.stdout  # the job's own output, streamed back
    assert_outputs(tmp_path / "store", "submitted")
    assert "from --address" in out.stderr and f"job {job_id} SUCCEEDED" in out.stderr

    # Credentials reach the job by name; their values are never printed.
    (forwarded,) = [line for line in out.stderr.splitlines() if "forwarding" in line]
    assert "AWS_ACCESS_KEY_ID" in forwarded and "AWS_SECRET_ACCESS_KEY" in forwarded  # other AWS_* may be set too
    assert "AWS_PROFILE" not in out.stderr
    assert SECRET not in out.stdout + out.stderr
    info = job_info(ray_head, job_id)  # what the cluster holds
    assert info["runtime_env"]["env_vars"]["AWS_SECRET_ACCESS_KEY"] == SECRET
    assert ".pairank-submit/submitted.yaml" in info["entrypoint"] and "scheduler.seed" not in info["entrypoint"]

    status = pairank("status", job_id, "--address", ray_head)
    assert status.returncode == 0 and status.stdout.splitlines()[0] == "SUCCEEDED"
    assert SECRET not in status.stdout + status.stderr
    logs = pairank("logs", job_id, "--address", ray_head)
    assert logs.returncode == 0 and str(report) in logs.stdout
    follow = pairank("logs", job_id, "--address", ray_head, "--follow")
    assert follow.returncode == 0 and str(report) in follow.stdout

    refused = pairank("status", job_id, "--address", ray_head, env=shell_env(RAY_AUTH_MODE="disabled"))
    assert refused.returncode == 2 and f"the Ray Jobs API at {ray_head} (from --address) refused" in refused.stderr
    for command in ("status", "logs", "stop"):
        unknown = pairank(command, "raysubmit_nosuchjob", "--address", ray_head)
        assert unknown.returncode == 2, unknown.stderr
        assert f"job raysubmit_nosuchjob: no such job at {ray_head}" in unknown.stderr


def test_stop_stops_a_running_job_and_the_waiting_submit_exits_1(ray_head, tmp_path, summeval_tables):
    input_dir = write_input(tmp_path / "input", summeval_tables, 2, 3).path
    gate = Gate(tmp_path / "gate")  # every batch held until the test is done: the job runs until it is stopped
    spec = simulated_spec(tmp_path, input_dir, "slow", **gate.judge(hold_from=0))
    submit = subprocess.Popen(
        [*PAIRANK, "submit", str(spec), "--address", ray_head],
        cwd=ROOT,
        env=shell_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        job_id = submit.stdout.readline().strip()
        assert job_id.startswith("pairank-slow-"), submit.stderr.read() if submit.poll() is not None else job_id
        deadline = time.monotonic() + 120  # a bound on a hang
        while (status := pairank("status", job_id, "--address", ray_head).stdout.split()[0]) != "RUNNING":
            assert status == "PENDING" and time.monotonic() < deadline, status
            time.sleep(1)  # a poll of the job's status, not a window
        gate.wait_for(1, timeout=240, proc=submit)  # the driver is under way: its first batch is at the gate
        stop = pairank("stop", job_id, "--address", ray_head)
        assert stop.returncode == 0 and stop.stdout.splitlines()[0] == "STOPPED", stop.stdout + stop.stderr
        assert submit.wait(timeout=120) == 1
        assert f"job {job_id} STOPPED" in submit.stderr.read()
        assert pairank("status", job_id, "--address", ray_head).stdout.splitlines()[0] == "STOPPED"
        assert not (tmp_path / "store" / "runs" / "slow" / "report.md").exists()
    finally:
        gate.release()  # a stopped job's engine, if any is left, ends its batch
        if submit.poll() is None:
            stop_tree(submit)


@pytest.mark.engine
def test_the_demo_spec_runs_on_the_cluster_with_the_cpu_judge(ray_head, tmp_path, summeval_tables, default_model):
    """The issue's acceptance: the demo spec (real vLLM CPU judge), submitted through the Jobs API."""
    # 2 articles x 3 summaries (24 comparisons, the demo's own 4 x 4 are 96): the demo spec's path through the Jobs
    # API, not its size; tests/test_fresh_clone.py runs the demo as shipped
    input_dir = write_input(tmp_path / "summeval", summeval_tables, 2, 3).path
    store = tmp_path / "store"
    out = pairank(
        "submit",
        "configs/demo.yaml",
        "--address",
        ray_head,
        "--set",
        f"input={input_dir}",
        "--set",
        f"output={store}",
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
    job_id = out.stdout.splitlines()[0]
    assert str(store / "runs" / "demo" / "report.md") in out.stdout
    assert_outputs(store, "demo")
    assert "entrypoint: python3 -m pairank.jobs.cli.main run configs/demo.yaml --set input=" in out.stderr
    assert pairank("status", job_id, "--address", ray_head).stdout.splitlines()[0] == "SUCCEEDED"


def test_a_nightly_spec_submitted_on_two_nights_commits_both(ray_head, tmp_path, summeval_tables):
    """A nightly job is a spec like any other for the Jobs API: each submission runs one night on the cluster."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    candidates = summeval_tables[0]
    contexts = sorted(set(candidates.column("context_id").to_pylist()))[:2]

    def drop(name: str, systems: list[str]) -> None:
        mask = pc.and_(
            pc.is_in(candidates.column("context_id"), pa.array(contexts)),
            pc.is_in(candidates.column("system"), pa.array(systems)),
        )
        folder = tmp_path / "prefix" / name
        folder.mkdir(parents=True)
        pq.write_table(candidates.filter(mask), folder / "candidates.parquet")

    spec = simulated_spec(tmp_path, tmp_path / "prefix", "board")
    data = yaml.safe_load(spec.read_text())
    spec.write_text(yaml.safe_dump({**data, "scheduler": {"name": "pairs_anchors"}, "nightly": {"n_boot": 10}}))
    store = tmp_path / "store"
    for night, systems in (("n1", ["M0", "M1", "M10"]), ("n2", ["M11"])):
        drop(night, systems)
        out = pairank("submit", str(spec), "--address", ray_head, "--set", f"nightly.night={night}")
        assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
        assert str(store / "runs" / f"board-{night}" / "report.md") in out.stdout
    from pairank.storage.commits import CommitLog, NightlyLayout
    from pairank.storage.fs import Location

    records = [c.record for c in CommitLog(NightlyLayout(Location.of(str(store)), "board")).commits()]
    assert [(r["seq"], r["night"]) for r in records] == [(1, "n1"), (2, "n2")]
    assert records[1]["counts"]["new_outputs"] == 2 and records[1]["counts"]["contexts_extended"] == 2
    history = json.loads((store / "leaderboard/leaderboard.json").read_text())["history"]
    assert {r["night"] for r in history} == {"n1", "n2"}
