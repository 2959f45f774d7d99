"""Storage, cluster and engine failures end with one message and a documented exit code; a stalled object
store is waited out (issue 14, item 2).

Real parts: the session's SeaweedFS server is frozen (SIGSTOP) for 30 s in the middle of a run and thawed
(SIGCONT); "S3 down" is an endpoint where nothing listens; the engine that fails to start is the SIMULATED
judge's constructor failing in its Ray actor on an unreadable quality source.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import psutil
import pytest
import yaml

from pairank.jobs.cli.errors import EXIT_CODES
from pairank.jobs.cli.main import main
from pairank.storage.errors import StorageError, StorageUnavailable, with_retries
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import ROOT, S3_PORT, Gate, joining, spec_for, write_input

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
    """SeaweedFS frozen for 30 s just as the first judgments are flushed: the run waits, then finishes (exit 0).

    The run's first batch is judged and flushed, the next held at the SIMULATED judge's gate; then SeaweedFS is
    frozen and the gate opened, so the run's next flush meets the stall (an event, not a time after the start)."""
    out = "s3://pairank/stall/store"
    folder = write_input("s3://pairank/stall/input", summeval_tables, 3, 5)
    gate = Gate(tmp_path / "gate")
    data = spec_for(folder, out, name="stall", scheduler={"name": "full"}, judge=gate.judge(hold_from=1))
    weed = weed_process()
    log = Location.of(out).join("tables", "judgments", "_delta_log")
    thawed, stop = threading.Event(), threading.Event()
    frozen: list[float] = []

    def freeze() -> None:  # once the run's first judgments are flushed and its next batch is held
        while not stop.is_set() and not (gate.arrived() >= 2 and len(log.files(".json")) >= 2):
            time.sleep(0.2)  # a poll of the gate and the store, not a window
        if stop.is_set():
            return
        weed.suspend()
        frozen.append(time.monotonic())
        gate.release()
        threading.Timer(STALL_S, lambda: (weed.resume(), thawed.set())).start()  # the stall's length: the subject

    trigger = threading.Thread(target=freeze, daemon=True)
    trigger.start()
    try:
        code = main(["run", spec_file(tmp_path, data)])
    finally:
        stop.set()
        trigger.join()
        if frozen and not thawed.wait(STALL_S + 5):
            weed.resume()
    assert code == 0, capsys.readouterr().err[-2000:]
    assert frozen and time.monotonic() - frozen[0] >= STALL_S  # the stall happened inside the run
    assert any("could not" in r.getMessage() and "retrying" in r.getMessage() for r in caplog.records)
    table = JudgmentCache(Location.of(out).join("tables", "judgments")).read()
    assert table.num_rows == 3 * 5 * 4 and Location.of(out).join("runs/stall/report.md").exists()


def test_s3_down_at_start_is_exit_5_naming_the_store_and_endpoint(tmp_path):
    data = spec_for(Location.of("s3://pairank/nowhere/input"), "s3://pairank/nowhere/store", name="down")
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "PAIRANK_STORAGE_RETRY_S": "2"}
    started = time.monotonic()
    run = cli(["run", spec_file(tmp_path, data)], env)
    assert run.returncode == 5, run.stderr[-2000:]
    assert time.monotonic() - started < 60  # kept: the 2 s retry window is the subject (gives up, a 30x bound)
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


def test_an_engine_that_fails_to_start_is_exit_5_and_the_manifest_says_failed(tmp_path, summeval_tables, ray_address):
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
    run = cli(["run", spec_file(tmp_path, data), *joining(ray_address)])  # the session's Ray: its own is not the point
    assert run.returncode == 5, run.stderr[-3000:]
    last = error_line(run.stderr)
    assert last.startswith("pairank: error: a judge engine failed to start: FileNotFoundError: simulated judge")
    manifest = Location.of(str(tmp_path / "out" / "runs" / "nostart" / "manifest.json")).read_json()
    assert manifest["state"] == "failed" and "failed to start" in manifest["error"]
    verbose = cli(["-v", "run", spec_file(tmp_path, data), *joining(ray_address)])
    assert verbose.returncode == 5 and "Traceback" in verbose.stderr


class Gateway:
    """A TCP relay on 127.0.0.1 in front of the session's S3 server. :meth:`close` ends it and every connection
    through it: from then on the store is gone (connections refused), as when an S3 gateway goes away."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.closed = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            if self.closed.is_set():  # accepted as it closed: relayed, it would reach the store
                client.close()
                return
            upstream = socket.create_connection(("127.0.0.1", S3_PORT))
            self.sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        for sock in (a, b):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.closed.set()
        with contextlib.suppress(OSError):
            self.server.shutdown(socket.SHUT_RDWR)  # wakes the accept (a close alone leaves it listening)
        self.server.close()
        for sock in self.sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


@pytest.mark.ray  # its `pairank run` starts a Ray of its own
def test_the_retry_window_is_a_deadline_for_the_whole_run_not_for_each_step(s3_server, tmp_path, summeval_tables):
    """S3 goes away for good mid-run with a 30 s window: the run says so (exit 5) about 30 s later, and nothing
    after that line. Its clean-up (the lease, the log's copy) fails at once instead of waiting out a window of
    its own: before, each step did, and the error came three or four windows after the store went away."""
    window = 30
    out = "s3://pairank/deadline/store"
    folder = write_input("s3://pairank/deadline/input", summeval_tables, 6, 6)
    gate = Gate(tmp_path / "gate")  # the first batch judged and flushed, the next held until the store is gone
    data = spec_for(folder, out, name="deadline", scheduler={"name": "full"}, judge=gate.judge(hold_from=1))
    gateway = Gateway()
    env = {**os.environ, "AWS_ENDPOINT_URL": f"http://127.0.0.1:{gateway.port}", "PAIRANK_STORAGE_RETRY_S": str(window)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", spec_file(tmp_path, data)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[tuple[float, str]] = []  # (when, line) of the run's console
    reader = threading.Thread(target=lambda: lines.extend((time.monotonic(), x) for x in proc.stderr), daemon=True)
    reader.start()
    log = Location.of(out).join("tables", "judgments", "_delta_log")
    try:
        deadline = time.monotonic() + 300
        while len(log.files(".json")) < 2 or gate.arrived() < 2:  # a first flush committed, the next batch held
            assert proc.poll() is None and time.monotonic() < deadline, "the run ended or never judged"
            time.sleep(0.5)  # a poll of the store and the gate, not a window
        gateway.close()
        gone = time.monotonic()
        gate.release()  # the run goes on, and meets the store gone
        code = proc.wait(timeout=8 * window)
        ended = time.monotonic()
    finally:
        if proc.poll() is None:
            proc.kill()
    reader.join(10)
    text = "".join(line for _, line in lines)
    assert code == 5, text[-3000:]
    ((said_at, said),) = [(t, x) for t, x in lines if x.startswith("pairank: error: ")]
    assert said.startswith("pairank: error: storage unavailable: s3://pairank/deadline/store/")
    assert lines[-1][1] == said  # Ray's late output went to the run's log
    assert "the storage kept failing for" in said and f"127.0.0.1:{gateway.port}" in said
    # kept: the retry window's deadline is the subject (one window for the run, against 3-4 when each step had one)
    assert said_at - gone < 1.75 * window, f"the error came {said_at - gone:.0f} s after the store went away"
    assert ended - gone < 2.5 * window, f"exit 5 came {ended - gone:.0f} s after the store went away"


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


def test_operations_failing_one_after_another_share_one_window():
    """The window runs from when the store began failing: a second operation on a store that has failed for the
    whole window gives up after one try; one that reaches the store ends the outage, and the next failure gets a
    window of its own. Another bucket is another store."""
    calls = []

    def down():
        calls.append(time.monotonic())
        raise OSError("curlCode: 7, Could not connect to server")

    with pytest.raises(StorageUnavailable):
        with_retries("s3://outage-a/one", "read it", down, window=1.0)
    first = len(calls)
    calls.clear()
    with pytest.raises(StorageUnavailable, match=r"kept failing for 1 s \(1 attempt\)"):
        with_retries("s3://outage-a/two", "list it", down, window=1.0)
    assert first > 1 and len(calls) == 1
    calls.clear()
    with pytest.raises(StorageUnavailable):
        with_retries("s3://outage-b/one", "read it", down, window=1.0)  # another bucket: a window of its own
    assert len(calls) > 1
    assert with_retries("s3://outage-a/three", "read it", lambda: "back", window=1.0) == "back"
    calls.clear()
    started = time.monotonic()
    with pytest.raises(StorageUnavailable):
        with_retries("s3://outage-a/four", "read it", down, window=1.0)
    assert len(calls) > 1 and time.monotonic() - started >= 1.0  # kept: retried until its 1 s window ran out


def test_every_exit_code_is_documented():
    readme = (ROOT / "docs" / "cli.md").read_text()
    for code in EXIT_CODES:
        assert f"| {code} |" in readme, code
