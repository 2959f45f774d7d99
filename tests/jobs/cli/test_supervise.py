"""The watcher of a driver that joined a cluster from outside (``jobs/cli/supervise.py``), with real child
processes: a child that Ray ends without a word (as Ray's core worker ends a driver whose node died: exit 1, no
Python code after it) is told as a lost head when the cluster's address no longer answers, and its run log is kept;
a child that said its word is answered with its own code; the child ends with its watcher. The whole path, a head
SIGKILLed under a driver, is ``tests/cluster/test_head_loss.py``."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pairank.jobs.cli.supervise import HEAD_GONE_ENV, HEAD_GONE_S, STATUS_ENV, head_gone_s, supervise, watched_address
from tests.helpers import ROOT


def child(code: str) -> list[str]:
    """A watched child running ``code`` after ``become_child()`` (``sv`` is the supervise module)."""
    body = "import os, sys, time, signal\nfrom pairank.jobs.cli import supervise as sv\nsv.become_child()\n"
    return [sys.executable, "-c", body + textwrap.dedent(code)]


def closed_port() -> tuple[str, int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "127.0.0.1", s.getsockname()[1]  # nothing listens once it is closed


@pytest.mark.parametrize(
    ("address", "watched"),
    [
        ("127.0.0.1:6390", ("127.0.0.1", 6390)),
        ("head.internal:6379", ("head.internal", 6379)),
        (None, None),
        ("", None),
        ("auto", None),
        ("ray://127.0.0.1:10001", None),
        ("127.0.0.1", None),
        ("127.0.0.1:port", None),
    ],
)
def test_only_a_host_and_port_joined_from_outside_is_watched(address, watched):
    assert watched_address(address) == watched


def test_a_child_is_not_watched_again(monkeypatch):
    monkeypatch.setenv(STATUS_ENV, "/tmp/status")
    assert watched_address("127.0.0.1:6390") is None


def test_a_child_ended_without_a_word_while_the_cluster_is_gone_is_a_lost_head_and_its_log_is_kept(tmp_path):
    written, kept = tmp_path / "cache" / "run.log", tmp_path / "store" / "runs" / "r" / "logs" / "run.log"
    address, said = closed_port(), []
    code = supervise(
        child(f"""
            log = {str(written)!r}
            os.makedirs(os.path.dirname(log)); open(log, "w").write("the engine's lines\\n")
            sv.tell(log=log, kept={str(kept)!r})
            os._exit(1)  # as Ray's core worker exits once its raylet is dead
        """),
        address,
        said.append,
        lambda where: f"head lost at {where}",
    )
    assert code == 5
    assert said == [f"head lost at {address[0]}:{address[1]}"]
    assert kept.read_text() == "the engine's lines\n"


def test_what_a_child_ended_without_a_word_left_is_given_up_and_only_then():
    given_up: list[str] = []
    for command, expected in ((child("os._exit(1)"), ["lease"]), (child("sv.tell(exit=0)"), [])):
        given_up.clear()
        supervise(command, closed_port(), lambda _: None, str, left=lambda: given_up.append("lease"))
        assert given_up == expected


def test_a_child_that_said_its_word_is_answered_with_its_code(tmp_path):
    said: list[str] = []
    code = supervise(child("sv.tell(exit=3); sys.exit(3)"), closed_port(), said.append, str)
    assert code == 3 and said == []


@contextmanager
def answering(looked: Path | None = None, after: int = 0, until: Path | None = None) -> Iterator[tuple[str, int]]:
    """A cluster address that answers: every connection accepted and closed (a listening socket nobody accepts on
    fills its backlog and then looks refused). With ``looked``, that file is created once ``after`` looks came;
    with ``until``, the address refuses connections from when that file exists on."""
    server = socket.create_server(("127.0.0.1", 0))
    address = server.getsockname()
    stop = threading.Event()

    def serve() -> None:
        seen = 0
        server.settimeout(0.05)
        while not stop.is_set():
            if until is not None and until.exists():
                server.close()  # the head is gone: nothing listens on its port
                return
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue  # a look at the files above, not a window
            conn.close()
            seen += 1
            if looked is not None and seen >= after:
                looked.touch()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield address
    finally:
        stop.set()
        thread.join()
        server.close()


def test_a_child_ended_without_a_word_while_the_cluster_answers_is_named_not_blamed_on_the_head():
    with answering() as address:
        said: list[str] = []
        code = supervise(child("os._exit(7)"), address, said.append, lambda where: "head lost")
    assert code == 7
    (line,) = said
    assert "the driver process ended without a word (exit 7) while the Ray cluster at 127.0.0.1:" in line


def catches(pid: int, sig: signal.Signals) -> bool:
    """Whether process ``pid`` has a handler of ``sig`` installed (its SigCgt mask in /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("SigCgt:"):
            return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    return False


def watcher(tmp_path: Path, address: tuple[str, int], setup: str = "") -> tuple[subprocess.Popen, Path]:
    """A watcher process (``supervise``) of a child that runs ``setup``, then writes its pid to a file and waits
    to be ended; returned once the child is there and the watcher passes SIGTERM on (its handler installed).
    ``address`` answers (:func:`answering`): the watcher never ends the child for a lost head meanwhile."""
    pid_file = tmp_path / "child.pid"
    tmp = f"{pid_file}.tmp"
    ready = f"open({tmp!r}, 'w').write(str(os.getpid())); os.rename({tmp!r}, {str(pid_file)!r})"
    wait = "time.sleep(600)  # a hang bound: the test ends it\n"
    command = child(textwrap.dedent(setup) + "\n" + ready + "\n" + wait)
    script = textwrap.dedent(f"""
        import sys
        from pairank.jobs.cli.supervise import supervise
        sys.exit(supervise({command!r}, {tuple(address)!r}, print, str))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + 120
    while not (pid_file.exists() and catches(proc.pid, signal.SIGTERM)):
        assert proc.poll() is None and time.monotonic() < deadline, "the child did not start"
        time.sleep(0.05)  # a poll of the child's pid file and the watcher's handler, not a window
    return proc, pid_file


def gone(pid: int, within: float = 60) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True
        time.sleep(0.05)  # a poll of the process's state, not a window (the child itself waits 600 s)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_ends_with_a_sigkilled_watcher(tmp_path):
    with answering() as address:
        proc, pid_file = watcher(tmp_path, address)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert gone(int(pid_file.read_text()))


def test_sigterm_to_the_watcher_reaches_the_child_and_its_answer_is_the_watcher_s(tmp_path):
    with answering() as address:
        proc, _ = watcher(
            tmp_path,
            address,
            """
            def stop(*_):
                sv.tell(exit=143)
                sys.exit(143)
            signal.signal(signal.SIGTERM, stop)
            """,
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143


def test_a_child_whose_cluster_stops_answering_is_ended_and_told_as_a_lost_head(tmp_path):
    """Ray ends a driver whose GCS is gone only after a minute; the watcher, looking at the GCS while the child
    runs, ends the child once the GCS has refused connections for ``gone_after`` seconds, and says the head is lost.
    A child that answers SIGTERM with a word of its own other than 5 (stopped) is still the lost head.

    The cluster answers until the child is ready (its SIGTERM handler installed), then stops: the child's
    handler, not a time, shows that the watcher ended it."""
    ready, ended, said = tmp_path / "ready", tmp_path / "ended", []
    with answering(until=ready) as address:
        code = supervise(
            child(f"""
                def stop(*_):
                    open({str(ended)!r}, "w").close()
                    sv.tell(exit=143)
                    os._exit(143)
                signal.signal(signal.SIGTERM, stop)
                open({str(ready)!r}, "w").close()
                time.sleep(600)  # a driver waiting on a Ray whose head is gone (a hang bound: the watcher ends it)
            """),
            address,
            said.append,
            lambda where: f"head lost at {where}",
            gone_after=1.0,
            look_every=0.2,
        )
    assert code == 5 and said == [f"head lost at {address[0]}:{address[1]}"]
    assert ended.exists(), "the watcher did not end the child"


def test_a_child_whose_cluster_answers_is_not_ended(tmp_path):
    """The child ends on its own once the watcher has looked 10 times (2 s, 4 ``gone_after``) at an answering
    cluster: looks counted, not a time."""
    looked = tmp_path / "looked"
    with answering(looked, after=10) as address:
        said: list[str] = []
        code = supervise(
            child(f"""
                while not os.path.exists({str(looked)!r}):
                    time.sleep(0.05)  # a poll of the looks counted, not a window
                sv.tell(exit=0)
            """),
            address,
            said.append,
            lambda where: f"head lost at {where}",
            gone_after=0.5,
            look_every=0.2,
        )
    assert code == 0 and said == []


def test_the_wait_for_a_lost_head_is_15_s_or_the_variable_s(monkeypatch):
    monkeypatch.delenv(HEAD_GONE_ENV, raising=False)
    assert head_gone_s() == HEAD_GONE_S == 15
    monkeypatch.setenv(HEAD_GONE_ENV, "60")
    assert head_gone_s() == 60
    for bad in ["0", "-1", "soon", "", "inf", "nan"]:
        monkeypatch.setenv(HEAD_GONE_ENV, bad)
        with pytest.raises(ValueError, match=rf"^PAIRANK_HEAD_GONE_S='{bad}': expected a positive number of seconds$"):
            head_gone_s()


def test_a_driver_joining_a_cluster_refuses_a_malformed_wait_before_it_starts(tmp_path):
    env = {**os.environ, HEAD_GONE_ENV: "soon"}
    out = subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(ROOT / "configs/simulated.yaml")]
        + ["--set", "cluster.address=127.0.0.1:1"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=60,
    )
    assert out.returncode == 2, out.stderr
    assert "PAIRANK_HEAD_GONE_S='soon': expected a positive number of seconds" in out.stderr
