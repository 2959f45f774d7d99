"""Progress lines: the heartbeat that speaks before a judging step has numbers (issue 27, item 2), and the lines of
a judging pass, which carry their numbers (issue 25, item 3: named for the pass, ``stage`` a deprecated alias)."""

from __future__ import annotations

import datetime as dt
import time

import pyarrow as pa
import pytest

from pairank.jobs.pipeline.passes import judge_into_cache
from pairank.jobs.pipeline.progress import Heartbeat, PassProgress
from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS


def test_a_status_is_said_at_once_then_again_every_period_until_the_next():
    said: list[str] = []
    polls: list[float] = []
    beat = Heartbeat(said.append, every=0.3, poll=lambda: polls.append(time.monotonic()))
    beat.say("starting 1 engine")
    time.sleep(1.05)
    beat.say("1 engine ready in 1 s")
    beat.say(None)
    time.sleep(0.7)
    beat.stop()
    assert said[0] == "starting 1 engine" and said[-1] == "1 engine ready in 1 s"
    repeats = said[1:-1]
    assert 2 <= len(repeats) <= 4 and all(r.startswith("starting 1 engine (") for r in repeats), said
    assert len(polls) >= 1


def test_a_poll_that_fails_is_said_once_and_never_raised():
    said: list[str] = []

    def broken():
        raise OSError("gone")

    beat = Heartbeat(said.append, every=0.2, poll=broken)
    time.sleep(2.3)
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
