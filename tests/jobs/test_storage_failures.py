"""Storage, cluster and engine failures end with one message and a documented exit code; a stalled object
store is waited out (issue 14, item 2).

Real parts: the session's SeaweedFS server is frozen (SIGSTOP) for 30 s in the middle of a run and thawed
(SIGCONT); "S3 down" is an endpoint where nothing listens; the engine that fails to start is the SIMULATED
judge's constructor failing in its Ray actor on an unreadable quality source.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import psutil
import pytest
import yaml

from pairank.jobs.cli.errors import EXIT_CODES
from pairank.jobs.cli.main import main
from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import Location, StorageError, StorageUnavailable, with_retries
from tests.helpers import ROOT, S3_PORT, spec_for, write_input

STALL_S = 30


def weed_process() -> psutil.Process:
    """This session's S3 server (other test sessions on the machine run their own)."""
    (proc,) = [
        p
        for p in psutil.process_iter(["cmdline"])
        if (p.info["cmdline"] or [""])[0].endswith("weed")
        and p.info["cmdline"][1:2] == ["mini"]
        and f"-s3.port={S3_PORT}" in p.info["cmdline"]
    ]
    return proc


def cli(args: list[str], env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def error_line(stderr: str) -> str:
    """The command's own last word (Ray's workers may print after it)."""
    (line,) = [line for line in stderr.splitlines() if line.startswith("pairank: error: ")]
    return line


def spec_file(tmp_path, data: dict) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_30_s_stall_of_s3_mid_run_is_waited_out(ray_local, summeval_tables, tmp_path, capsys, caplog):
    """SeaweedFS frozen for 30 s just as the first judgments are flushed: the run waits, then finishes (exit 0)."""
    out = "s3://pairank/stall/store"
    folder = write_input("s3://pairank/stall/input", summeval_tables, 3, 5)
    data = spec_for(folder, out, name="stall", scheduler={"name": "full"}, judge={"seconds_per_comparison": 0.1})
    weed = weed_process()
    thawed = threading.Event()

    def freeze() -> None:  # once the run has read its inputs and starts judging
        weed.suspend()
        threading.Timer(STALL_S, lambda: (weed.resume(), thawed.set())).start()

    trigger = threading.Timer(2.0, freeze)
    trigger.start()
    started = time.monotonic()
    try:
        code = main(["run", spec_file(tmp_path, data)])
    finally:
        trigger.cancel()
        if not thawed.wait(STALL_S + 5):
            weed.resume()
    assert code == 0, capsys.readouterr().err[-2000:]
    assert time.monotonic() - started >= STALL_S  # the stall happened inside the run
    assert any("could not" in r.getMessage() and "retrying" in r.getMessage() for r in caplog.records)
    table = JudgmentCache(Location.of(out).join("tables", "judgments")).read()
    assert table.num_rows == 3 * 5 * 4 and Location.of(out).join("runs/stall/report.md").exists()


def test_s3_down_at_start_is_exit_5_naming_the_store_and_endpoint(tmp_path):
    data = spec_for(Location.of("s3://pairank/nowhere/input"), "s3://pairank/nowhere/store", name="down")
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "PAIRANK_STORAGE_RETRY_S": "2"}
    started = time.monotonic()
    run = cli(["run", spec_file(tmp_path, data)], env)
    assert run.returncode == 5, run.stderr[-2000:]
    assert time.monotonic() - started < 60
    last = error_line(run.stderr)
    assert last.startswith("pairank: error: storage unavailable: s3://pairank/nowhere/")
    assert "http://127.0.0.1:9" in last and "PAIRANK_STORAGE_RETRY_S" in last and "Traceback" not in run.stderr


def test_an_output_that_is_a_file_and_an_input_table_that_is_a_folder_are_exit_2(tmp_path, summeval_tables):
    folder = write_input(tmp_path / "input", summeval_tables, 1, 2)
    (tmp_path / "afile").write_text("x")
    run = cli(["run", spec_file(tmp_path, spec_for(folder, tmp_path / "afile"))])
    assert run.returncode == 2 and f"output: {tmp_path / 'afile'} is a file" in run.stderr, run.stderr[-2000:]
    (tmp_path / "odd" / "candidates.parquet").mkdir(parents=True)
    run = cli(["run", spec_file(tmp_path, spec_for(Location.of(str(tmp_path / "odd")), tmp_path / "out"))])
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert f"{tmp_path / 'odd' / 'candidates.parquet'}: could not read it" in run.stderr


@pytest.mark.ray
def test_an_engine_that_fails_to_start_is_exit_5_and_the_manifest_says_failed(tmp_path, summeval_tables):
    folder = write_input(tmp_path / "input", summeval_tables, 1, 3)
    (tmp_path / "q" / "quality.parquet").parent.mkdir()
    (tmp_path / "q" / "quality.parquet").write_bytes(b"garbage")
    data = spec_for(
        folder,
        tmp_path / "out",
        name="nostart",
        scheduler={"name": "full"},
        judge={"quality": str(tmp_path / "q" / "quality.parquet")},
    )
    run = cli(["run", spec_file(tmp_path, data)])
    assert run.returncode == 5, run.stderr[-3000:]
    last = error_line(run.stderr)
    assert last.startswith("pairank: error: a judge engine failed to start: FileNotFoundError: simulated judge")
    manifest = Location.of(str(tmp_path / "out" / "runs" / "nostart" / "manifest.json")).read_json()
    assert manifest["state"] == "failed" and "failed to start" in manifest["error"]
    verbose = cli(["-v", "run", spec_file(tmp_path, data)])
    assert verbose.returncode == 5 and "Traceback" in verbose.stderr


def test_transient_errors_are_retried_with_backoff_and_permanent_ones_are_not():
    calls = []

    def flaky():
        calls.append(time.monotonic())
        if len(calls) < 4:
            raise OSError("AWS Error NETWORK_CONNECTION during GetObject operation: curlCode: 28, Timeout was reached")
        return "ok"

    assert with_retries("s3://b/k", "read it", flaky, window=30) == "ok" and len(calls) == 4
    gaps = [b - a for a, b in zip(calls, calls[1:])]
    assert gaps[2] > gaps[0]  # backing off

    def denied():
        calls.append(0)
        raise OSError("AWS Error ACCESS_DENIED during GetObject operation: Access Denied")

    calls.clear()
    with pytest.raises(StorageError, match="s3://b/k: could not read it: AWS Error ACCESS_DENIED") as info:
        with_retries("s3://b/k", "read it", denied, window=30)
    assert len(calls) == 1 and not isinstance(info.value, StorageUnavailable)

    def down():
        raise OSError("curlCode: 7, Could not connect to server")

    with pytest.raises(StorageUnavailable, match="kept failing"):
        with_retries("s3://b/k", "read it", down, window=0.5)


def test_every_exit_code_is_documented():
    readme = (ROOT / "docs" / "cli.md").read_text()
    for code in EXIT_CODES:
        assert f"| {code} |" in readme, code
