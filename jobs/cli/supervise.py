"""A driver that joined a Ray cluster from outside, watched by the ``pairank`` process that started it.

Ray ends a driver process on its own when the Ray node it is attached to dies: its core worker exits with code 1
("the local Raylet is dead") at its next call to that node, and no Python code of the process runs again (no
``finally``, no ``atexit``). A driver that joins a cluster from this machine attaches to the head when the head
runs here, so losing the head ended ``pairank run --set cluster.address=HOST:PORT`` either with pairank's own
exit 5 and its advice (when pairank met a Ray error first) or with a bare exit 1 and no run log kept (when Ray's
exit came first): a race that went either way, about half the time each on the tests' local cluster.

So ``pairank run`` with ``cluster.address: HOST:PORT`` runs the driver in a child process (the same command) and
waits for it. The child says how it ended in a small file (:data:`STATUS_ENV`): its exit code once it has said its
word, and beforehand where its run log is written and kept. A child that ends without a word was ended from
outside pairank's code: if the cluster's GCS no longer accepts connections, the head is gone and the watcher says
so (exit 5, as pairank would have); otherwise it names the exit. Either way the run log is copied to where the run
keeps it, and the run's name given up (its lease names the watcher's pid), as the child would have at its end.
The watcher does not wait for Ray to end the child: while it runs, the watcher looks at the GCS every few seconds,
and once it has accepted no connection for :data:`HEAD_GONE_S` (:data:`HEAD_GONE_ENV`) the child is ended and the
lost head told (a driver Ray ends waits 60 s for its GCS first).

The child dies with the watcher (``PR_SET_PDEATHSIG`` on Linux), so SIGKILL of the ``pairank`` process ends the
run as before; SIGTERM and SIGHUP are passed on, and SIGINT from a terminal reaches both (one process group): the
watcher ignores it and waits for the child's own answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from pairank.cluster.runtime import GCS_PROBE_SECONDS, accepts

#: The variable that makes a ``pairank`` process the watched child, naming its status file.
STATUS_ENV = "PAIRANK_DRIVER_STATUS"
#: Seconds the GCS may accept no connection while the child runs before the watcher ends the child as a driver whose
#: head is gone. Ray's driver waits 60 s for its GCS (``gcs_rpc_server_reconnect_timeout_s``) before it ends
#: itself, which was most of a head loss's minute on the tests' cluster.
HEAD_GONE_S = 15.0
#: The variable that sets it instead (seconds): longer where the head's GCS restarts in place and a driver may wait
#: for it (KubeRay's GCS fault tolerance), shorter to be told sooner.
HEAD_GONE_ENV = "PAIRANK_HEAD_GONE_S"
#: Seconds between the watcher's looks at the GCS while the child runs.
LOOK_S = 2.0
#: Seconds a child ended by its watcher has to end on SIGTERM (say its word, flush) before SIGKILL.
GRACE_S = 10.0
PR_SET_PDEATHSIG = 1


#: In the watched child: its status file (taken out of the environment, so nothing it starts inherits it).
_status: str | None = None


def head_gone_s() -> float:
    """Seconds the GCS may refuse connections before the watcher ends the child (:data:`HEAD_GONE_ENV`, default
    :data:`HEAD_GONE_S`)."""
    raw = os.environ.get(HEAD_GONE_ENV)
    if raw is None:
        return HEAD_GONE_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{HEAD_GONE_ENV}={raw!r}: expected a positive number of seconds")
    return seconds


def watched_address(address: str | None) -> tuple[str, int] | None:
    """The ``(host, port)`` of a ``cluster.address`` the driver joins from outside (``HOST:PORT``), when this process
    is not already the watched child; None otherwise (a local Ray, ``auto``, or Ray Client's ``ray://``)."""
    if not address or _status or os.environ.get(STATUS_ENV) or "://" in address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host, int(port)


# ---- in the child
def become_child() -> None:
    """In a process started by :func:`supervise` (its environment names a status file): keep that file's name
    (and take it out of the environment), and end when the watcher ends. Nothing in any other process."""
    global _status
    _status = os.environ.pop(STATUS_ENV, None) or _status
    if _status:
        die_with_parent()


def die_with_parent() -> None:
    """End (SIGKILL) when the parent process does, on Linux; nothing elsewhere."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() == 1:  # the watcher was gone before the line above
            os.kill(os.getpid(), signal.SIGKILL)


def tell(**record: str | int) -> None:
    """In the watched child: append ``record`` (one JSON line) to the status file; nothing in another process."""
    if _status:
        with open(_status, "a", encoding="utf-8") as f:
            f.write(json.dumps(record) + "\n")


def told(path: Path) -> dict:
    """What the child told, merged (later lines win); {} when it told nothing."""
    said: dict = {}
    with contextlib.suppress(OSError):
        for line in path.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                said.update(json.loads(line))
    return said


# ---- in the watcher
def supervise(
    command: Sequence[str],
    address: tuple[str, int],
    say: Callable[[str], None],
    head_lost: Callable[[str], str],
    left: Callable[[], object] = lambda: None,
    gone_after: float = HEAD_GONE_S,
    look_every: float = LOOK_S,
) -> int:
    """Run ``command`` (the same ``pairank`` command) as the watched child; its exit code, or 5 when it ended
    without a word while the GCS at ``address`` accepts no connection (``say(head_lost(HOST:PORT))``). ``left()``
    gives up what a child ended without a word could not (the run's lease).

    While the child runs, the watcher looks at the GCS every ``look_every`` seconds; once it has accepted no
    connection for ``gone_after`` seconds the head is gone, and the watcher ends the child (SIGTERM, then SIGKILL
    after :data:`GRACE_S`) and tells the lost head, instead of waiting out Ray's minute."""
    with tempfile.TemporaryDirectory(prefix="pairank-driver-") as tmp:
        status = Path(tmp) / "status.jsonl"
        status.touch()
        from pairank.storage.store.lease import RUN_PID_ENV

        env = {**os.environ, STATUS_ENV: str(status), RUN_PID_ENV: str(os.getpid())}  # its lease names this process
        child = subprocess.Popen(list(command), env=env)
        passed_on = {}
        for sig in (signal.SIGTERM, signal.SIGHUP):
            passed_on[sig] = signal.signal(sig, lambda s, _f: child.send_signal(s))
        passed_on[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's reaches the child
        try:
            code, ended = _wait(child, address, gone_after, look_every)
        finally:
            for sig, handler in passed_on.items():
                signal.signal(sig, handler)
        said = told(status)
        if "exit" in said and not (ended and said["exit"] != 5):  # ended here: the lost head, whatever it said
            return int(said["exit"])
        _keep_log(said, say)
        try:
            left()
        except Exception as exc:  # storage gone too: the lease expires on its own
            say(
                f"could not give up the run's name ({type(exc).__name__}: {exc}): it is free again once its lease "
                "expires"
            )
        where = f"{address[0]}:{address[1]}"
        if not accepts(*address):
            say(head_lost(where))
            return 5
        how = f"signal {-code}" if code < 0 else f"exit {code}"
        say(
            f"the driver process ended without a word ({how}) while the Ray cluster at {where} still answers: Ray "
            "or the system ended it (its run log, if it started one, says more)"
        )
        return 128 - code if code < 0 else code or 1


def _wait(child: subprocess.Popen, address: tuple[str, int], gone_after: float, look_every: float) -> tuple[int, bool]:
    """The child's exit code, and whether the watcher ended it: when the GCS at ``address`` has accepted no
    connection for ``gone_after`` seconds (each look waits at most ``look_every`` seconds for it)."""
    refused_since: float | None = None
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return child.wait(timeout=look_every), False
        if accepts(*address, timeout=min(GCS_PROBE_SECONDS, look_every)):
            refused_since = None
            continue
        now = time.monotonic()
        refused_since = now if refused_since is None else refused_since
        if now - refused_since >= gone_after:
            child.terminate()
            try:
                return child.wait(timeout=GRACE_S), True
            except subprocess.TimeoutExpired:
                child.kill()
                return child.wait(), True


def _keep_log(said: dict, say: Callable[[str], None]) -> None:
    """Copy the child's run log to where the run keeps it, as the child does at its end (``console.keep_log``)."""
    written, kept = said.get("log"), said.get("kept")
    if not written or not kept or not Path(written).is_file():
        return
    from pairank.jobs.cli.console import keep_log
    from pairank.storage.fs import Location

    keep_log(Path(written), Location.of(kept), say)
