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
import time
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


def test_a_child_ended_without_a_word_while_the_cluster_answers_is_named_not_blamed_on_the_head():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        said: list[str] = []
        code = supervise(child("os._exit(7)"), server.getsockname(), said.append, lambda where: "head lost")
    assert code == 7
    (line,) = said
    assert "the driver process ended without a word (exit 7) while the Ray cluster at 127.0.0.1:" in line


def watcher(tmp_path: Path, code: str) -> tuple[subprocess.Popen, Path]:
    """A watcher process (``supervise``) of a child running ``code``; the child writes its pid to a file."""
    pid_file = tmp_path / "child.pid"
    command = child(f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n" + textwrap.dedent(code))
    script = textwrap.dedent(f"""
        import sys
        from pairank.jobs.cli.supervise import supervise
        sys.exit(supervise({command!r}, ("127.0.0.1", 1), print, str))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT)
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "the child did not start"
        time.sleep(0.05)
    return proc, pid_file


def gone(pid: int, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if Path(f"/proc/{pid}/stat").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
            return True
        time.sleep(0.05)
    return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_child_ends_with_a_sigkilled_watcher(tmp_path):
    proc, pid_file = watcher(tmp_path, "time.sleep(120)")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert gone(int(pid_file.read_text()))


def test_sigterm_to_the_watcher_reaches_the_child_and_its_answer_is_the_watcher_s(tmp_path):
    proc, _ = watcher(
        tmp_path,
        """
        def stop(*_):
            sv.tell(exit=143)
            sys.exit(143)
        signal.signal(signal.SIGTERM, stop)
        time.sleep(120)
        """,
    )
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 143


def test_a_child_whose_cluster_stops_answering_is_ended_and_told_as_a_lost_head(tmp_path):
    """Ray ends a driver whose GCS is gone only after a minute; the watcher, looking at the GCS while the child
    runs, ends the child once the GCS has refused connections for ``gone_after`` seconds, and says the head is lost.
    A child that answers SIGTERM with a word of its own other than 5 (stopped) is still the lost head."""
    address, said = closed_port(), []
    started = time.monotonic()
    code = supervise(
        child("""
            signal.signal(signal.SIGTERM, lambda *_: (sv.tell(exit=143), os._exit(143)))
            time.sleep(60)  # a driver waiting on a Ray whose head is gone
        """),
        address,
        said.append,
        lambda where: f"head lost at {where}",
        gone_after=1.0,
        look_every=0.2,
    )
    assert code == 5 and said == [f"head lost at {address[0]}:{address[1]}"]
    assert time.monotonic() - started < 30


def test_a_child_whose_cluster_answers_is_not_ended():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        said: list[str] = []
        code = supervise(
            child("time.sleep(2); sv.tell(exit=0)"),
            server.getsockname(),
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
