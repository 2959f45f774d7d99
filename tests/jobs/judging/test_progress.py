"""Progress lines: the heartbeat that speaks before a judging step has numbers (issue 27, item 2), and the lines of
a judging pass, which carry their numbers (issue 25, item 3: named for the pass, ``stage`` a deprecated alias)."""

from __future__ import annotations

import datetime as dt
import threading

import pyarrow as pa
import pytest

from pairank.jobs.judging.passes import judge_into_cache
from pairank.jobs.judging.progress import Heartbeat, PassProgress
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import JudgmentCache


class Ticks:
    """The heartbeat's clock, moved by the test, and its thread's turns counted: each turn reads the clock once
    (after its poll, when it has one), so a test moves the clock and then waits for turns, never for a time."""

    def __init__(self):
        self.now, self.reads = 0.0, 0
        self._cond = threading.Condition()

    def __call__(self) -> float:
        with self._cond:
            self.reads += 1
            self._cond.notify_all()
            return self.now

    def turns(self, n: int) -> None:
        """Until the clock has been read ``n`` more times: the thread's turn in progress ended, and more after it."""
        with self._cond:
            start = self.reads
            assert self._cond.wait_for(lambda: self.reads >= start + n, timeout=120), "the heartbeat stopped"


def test_a_status_is_said_at_once_then_again_every_period_until_the_next():
    said: list[str] = []
    polls: list[float] = []
    clock = Ticks()
    beat = Heartbeat(said.append, every=0.125, poll=lambda: polls.append(clock.now), clock=clock)
    beat.say("starting 1 engine")
    for n in range(1, 4):
        clock.now += 0.0625  # half a period since the last line: nothing said
        clock.turns(2)
        assert len(said) == n, said
        clock.now += 0.0625  # a period since the last line: said again
        clock.turns(2)
        assert len(said) == n + 1, said
    beat.say("1 engine ready in 1 s")
    beat.say(None)
    clock.now += 0.5  # four periods of no status: nothing said
    clock.turns(2)
    beat.stop()
    assert said[0] == "starting 1 engine" and said[-1] == "1 engine ready in 1 s"
    repeats = said[1:-1]
    assert len(repeats) == 3 and all(r.startswith("starting 1 engine (") for r in repeats), said
    assert len(polls) >= 1


def test_a_poll_that_fails_is_said_once_and_never_raised():
    said: list[str] = []

    def broken():
        raise OSError("gone")

    clock = Ticks()
    beat = Heartbeat(said.append, every=0.2, poll=broken, clock=clock)
    clock.turns(10)  # ten turns of the thread: it lives on, and says the error once
    beat.stop()
    assert said == ["(progress could not be read: OSError: gone)"]


class ListPool:
    """A pool that returns the given batches (the pool's part is not under test here)."""

    def __init__(self, batches: list[pa.Table]):
        self.batches, self.passes = batches, []

    def judge(self, todo, judging_pass):
        self.passes.append(judging_pass)
        yield from self.batches


def judgments(n: int, errors: int) -> pa.Table:
    row = dict(engine="simulated", model="m", revision="r", prompt_hash="p", sampling="{}", context_id="c")
    row |= dict(aspect="a", candidate_a="x", candidate_b="y", logprob_a=None, logprob_b=None, raw_text=None)
    row |= dict(input_tokens=0, output_tokens=0, seconds=0.0, created_at=dt.datetime(2026, 1, 1))
    return pa.Table.from_pylist(
        [
            {**row, "key": f"k{i}", "p_a": None if i < errors else 0.5, "label": None if i < errors else "tie"}
            | {"error": "boom" if i < errors else None}
            for i in range(n)
        ],
        schema=JUDGMENTS,
    )


def test_a_pass_reports_lines_that_name_it_and_carry_its_numbers(tmp_path):
    table = judgments(6, errors=1)
    pool = ListPool([table.slice(0, 4), table.slice(4, 2)])
    lines: list[str] = []
    cache = JudgmentCache(Location.of(str(tmp_path / "judgments")))
    judge_into_cache(pool, table, cache, flush_rows=4, progress=lines.append, judging_pass="analysis")
    assert pool.passes == ["analysis"]
    assert all(isinstance(line, PassProgress) for line in lines)
    assert [(p.judging_pass, p.done, p.total, p.errors, p.final) for p in lines] == [
        ("analysis", 4, 6, 1, False),
        ("analysis", 6, 6, 1, True),
    ]
    assert lines[-1] == "analysis: 6/6 (1 errors)"  # the text a console prints, unchanged
    assert sorted(cache.rows().column("key").to_pylist()) == sorted(table.column("key").to_pylist())


def test_stage_is_a_deprecated_alias_of_judging_pass():
    line = PassProgress("score: 2/2 (0 errors)", judging_pass="score", done=2, total=2, errors=0, final=True)
    with pytest.warns(DeprecationWarning, match="judging_pass"):
        former = line.stage
    assert former == line.judging_pass == "score"
