"""Progress lines of a judging run: lines that carry their numbers, for any console to show, and the heartbeat
that speaks before there are numbers."""

from __future__ import annotations

import threading
import time
import warnings
from collections.abc import Callable

#: What a step reports its progress to: one line at a time.
Progress = Callable[[str], None]


class PassProgress(str):
    """A judging pass's progress line that also carries its numbers; a ``str``, so any callback can print it.

    ``judging_pass`` names the pass (``pairwise``, ``analysis``, ``analysis_pairwise``, ``score``).

    >>> line = PassProgress("pairwise: 4/8 (0 errors)", judging_pass="pairwise", done=4, total=8, errors=0,
    ...     final=False)
    >>> line, line.judging_pass, line.done, line.total
    ('pairwise: 4/8 (0 errors)', 'pairwise', 4, 8)
    """

    judging_pass: str
    done: int
    total: int
    errors: int
    final: bool

    def __new__(cls, text: str, *, judging_pass: str, done: int, total: int, errors: int, final: bool) -> PassProgress:
        line = super().__new__(cls, text)
        line.judging_pass, line.done, line.total, line.errors = judging_pass, done, total, errors
        line.final = final
        return line

    @property
    def stage(self) -> str:
        """Deprecated alias of :attr:`judging_pass`, for progress callbacks written against the former name (in
        pairank a "stage" is a pipeline stage only); warns with a :class:`DeprecationWarning`."""
        warnings.warn(
            "PassProgress.stage is deprecated: use PassProgress.judging_pass", DeprecationWarning, stacklevel=2
        )
        return self.judging_pass


#: Seconds between two lines of a :class:`Heartbeat` saying the same thing.
BEAT_EVERY_S = 10.0


class Heartbeat:
    """What a judging step is doing while it has no numbers yet (engines starting, the first batch running), said
    from the first second: :meth:`say` prints a status at once, and a thread says it again, with how long it has
    lasted, every ``every`` seconds until the next :meth:`say` or :meth:`stop`.

    ``poll`` is called on that thread about every second, for the caller to say
    what it learns meanwhile (the plan line, once the requests are planned); an error of it is said once, not
    raised. ``clock`` is injected for tests.

    >>> said = []
    >>> beat = Heartbeat(said.append, every=3600)
    >>> beat.say("starting 1 engine"); beat.stop(); said
    ['starting 1 engine']
    """

    def __init__(
        self,
        progress: Progress,
        every: float = BEAT_EVERY_S,
        poll: Callable[[], object] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.progress, self.every, self.poll, self.clock = progress, every, poll, clock
        self.status: str | None = None
        self.since = self.said = clock()
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pairank-heartbeat", daemon=True)
        self._thread.start()

    def say(self, status: str | None) -> None:
        """Say ``status`` now and keep saying it (None: say nothing more until the next status)."""
        with self._lock:
            self.status, self.since = status, self.clock()
            self.said = self.since
        if status is not None:
            self.progress(status)

    def elapsed(self) -> float:
        """Seconds the current status has lasted."""
        return self.clock() - self.since

    def _run(self) -> None:
        while not self._stopped.wait(min(1.0, self.every)):
            self._poll()
            with self._lock:
                now = self.clock()
                due = self.status is not None and now - self.said >= self.every
                if due:
                    self.said = now
                    line = f"{self.status} ({now - self.since:.0f} s)"
            if due:
                self.progress(line)

    def _poll(self) -> None:
        if self.poll is None:
            return
        try:
            self.poll()
        except Exception as exc:  # the heartbeat only says things: it never ends a run
            self.poll = None
            self.progress(f"(progress could not be read: {type(exc).__name__}: {exc})")

    def stop(self) -> None:
        """No more lines from the thread."""
        self._stopped.set()
        self._thread.join()
