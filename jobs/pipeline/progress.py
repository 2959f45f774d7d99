"""Progress lines of a judging run that carry their numbers, for any console to show."""

from __future__ import annotations

from collections.abc import Callable

#: What a step reports its progress to: one line at a time.
Progress = Callable[[str], None]


class StageProgress(str):
    """A judging stage's progress line that also carries its numbers; a ``str``, so any callback can print it."""

    stage: str
    done: int
    total: int
    errors: int
    final: bool

    def __new__(cls, text: str, *, stage: str, done: int, total: int, errors: int, final: bool) -> StageProgress:
        line = super().__new__(cls, text)
        line.stage, line.done, line.total, line.errors, line.final = stage, done, total, errors, final
        return line
