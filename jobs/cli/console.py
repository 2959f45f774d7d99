"""The console of a command: pairank's own lines on the terminal, everything else in a log file.

A run starts Ray (its daemons, workers and Ray Data's executor), vLLM and torch,
and each of them writes warnings and progress of its own to the process's
standard streams: about forty lines around pairank's six in the demo. In quiet
mode (:meth:`Console.quiet`, the default of ``pairank run`` and ``pairank serve``)
file descriptors 1 and 2 of the process point at a log file, until it exits, so
whatever any library, thread or child process (Ray's raylet, GCS, workers) writes
lands there, late output too, while pairank's own lines, its last error among them,
go to the terminal through :attr:`Console.out` and :attr:`Console.err` (duplicates
of the original descriptors). Warnings of
pairank's own loggers (a storage retry, say) reach the terminal too.

``-v`` leaves the streams alone. So does a process whose ``sys.stdout`` or
``sys.stderr`` was replaced (pytest's capture): there pairank's lines go where
those point.

Progress (:meth:`Console.progress`): a judging pass reports :class:`PassProgress`
lines. On a terminal each pass gets one bar (done/total, rate, ETA, errors);
elsewhere (a log, CI, a job on a cluster) the plain line is printed at most every
:data:`PLAIN_EVERY_S` seconds per pass, and always at its end.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import secrets
import sys
import time
from pathlib import Path
from typing import TextIO

from pairank.jobs.judging.progress import PassProgress
from pairank.storage.fs import Location

#: Seconds between two plain progress lines of one judging pass when the console is not a terminal.
PLAIN_EVERY_S = 10.0


class Console:
    """Where pairank's own output goes; see the module docstring."""

    def __init__(self) -> None:
        self._out: TextIO | None = None
        self._err: TextIO | None = None
        self._bars: dict = {}
        self._printed: dict[str, float] = {}

    def progress(self, msg: str) -> None:
        """Show one progress message: a bar per judging pass on a terminal, throttled plain lines elsewhere."""
        if isinstance(msg, PassProgress):
            if self.err.isatty():
                self._bar(msg)
                return
            now = time.monotonic()
            if not msg.final and now - self._printed.get(msg.judging_pass, -PLAIN_EVERY_S) < PLAIN_EVERY_S:
                return
            self._printed[msg.judging_pass] = now
        line = f"[pairank] {msg}"
        if self._bars:
            from tqdm import tqdm

            tqdm.write(line, file=self.err)
        else:
            print(line, file=self.err, flush=True)

    def _bar(self, msg: PassProgress) -> None:
        from tqdm import tqdm

        bar = self._bars.get(msg.judging_pass)
        if bar is None:
            bar = self._bars[msg.judging_pass] = tqdm(
                total=msg.total,
                desc=f"[pairank] {msg.judging_pass}",
                unit=" comparisons",
                file=self.err,
                dynamic_ncols=True,
            )
        bar.update(msg.done - bar.n)
        bar.set_postfix(errors=msg.errors, refresh=True)
        if msg.final:
            bar.close()
            del self._bars[msg.judging_pass]

    @property
    def out(self) -> TextIO:
        return self._out or sys.stdout

    @property
    def err(self) -> TextIO:
        return self._err or sys.stderr

    def quiet(self, log_file: Path) -> Path | None:
        """Point the process's descriptors 1 and 2 at ``log_file`` for the rest of its life; returns it (None when
        not quiet: a replaced ``sys.stdout`` or ``sys.stderr``, as under pytest).

        They are not given back when the command's work ends: Ray's threads that forward its workers' output (a
        failed task's traceback comes late), its exit handler and the collection of its objects write after that,
        and what they write belongs in the log, not after pairank's last line. pairank's own lines, the error
        that ends a command among them, go to :attr:`out` and :attr:`err` (the console).
        """
        if sys.stdout is not sys.__stdout__ or sys.stderr is not sys.__stderr__:
            return None
        if sys.stdout is None or sys.stderr is None:  # a process started without them
            return None
        log_file.parent.mkdir(parents=True, exist_ok=True)
        sys.stdout.flush()
        sys.stderr.flush()
        fd = os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._out = os.fdopen(os.dup(1), "w", buffering=1)
        self._err = os.fdopen(os.dup(2), "w", buffering=1)
        handler = logging.StreamHandler(self._err)
        handler.setLevel(logging.WARNING)
        handler.setFormatter(logging.Formatter("pairank: %(levelname)s %(message)s"))
        logging.getLogger("pairank").addHandler(handler)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
        return log_file


#: The console of this process.
console = Console()


def run_log_file(output: str, name: str, now: dt.datetime | None = None, prefix: str = "") -> tuple[Path, Location]:
    """Where a run's log is written (a local file) and where it is kept (``<output>/runs/<name>/logs/``).

    On a local output root the two are the same file; on ``s3://`` the log is
    written under ``~/.cache/pairank/logs/<name>/`` and copied to the root at the end.
    The name is the UTC time, this process's id and a random word: two runs of a name started in the same second
    (one of them refused) each write their own log.
    """
    when = (now or dt.datetime.now(dt.UTC)).strftime("%Y%m%dT%H%M%SZ")
    stamp = f"{prefix}{when}-{os.getpid()}-{secrets.token_hex(2)}"
    kept = Location.of(output).join("runs", name, "logs", f"{stamp}.log")
    if kept.is_local and not Path(output).is_file():
        return Path(kept.path), kept
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pairank" / "logs" / name
    return cache / f"{stamp}.log", kept


def keep_log(written: Path, kept: Location, say) -> None:
    """Copy a run's log written locally (``written``) to where the run keeps it (``kept``), when the two differ
    (:func:`run_log_file`), best effort: a failure is ``say``-ed, naming both."""
    if kept.is_local and Path(kept.path) == Path(written):
        return
    try:
        kept.write_bytes(Path(written).read_bytes())
    except Exception as exc:
        say(f"could not copy the log to {kept.uri} ({exc}); it is at {written}")
