"""Judging under claims on the driver (adaptive rounds, static multi-pass runs; issue 30, item 6): two runs that
want the same comparisons at once ask each once, the other waits for the verdict in the store; a claimer that dies
without a verdict leaves its comparisons to the other once its lease expires. The store and the leases are real
(a local folder); the judge is a function that appends its verdicts to the store, as the pool's writer does."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
from collections import Counter

import pyarrow as pa

from pairank.jobs.judging.under_claims import ClaimedJudging
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.claims import Claims, Holder, by_bucket
from pairank.storage.store.lease import take
from tests.helpers import leaderboard_judgment, leaderboard_table

CONTEXTS = ["c1", "c2", "c3"]


def requests() -> dict[str, tuple]:
    out = {}
    for ctx in CONTEXTS:
        for a, b in (("x", "y"), ("y", "x"), ("x", "z"), ("z", "x")):
            key = hashlib.sha256(f"{ctx}{a}{b}".encode()).hexdigest()[:32]
            out[key] = ("coherence", ctx, a, b, 0)
    return out


class Overlap:
    """Holds each run's verdicts out of the store until the runs overlap: until a run has said it waits for the
    other's, or every run is judging (then each waits for the other's next). An event, not a delay."""

    def __init__(self, runs: int):
        self.runs, self.judging, self.waited = runs, 0, False
        self._cond = threading.Condition()

    def said(self, line: str) -> None:
        with self._cond:
            self.waited |= "being judged by another run" in line
            self._cond.notify_all()

    def hold(self) -> None:
        with self._cond:
            self.judging += 1
            self._cond.notify_all()
            ok = self._cond.wait_for(lambda: self.waited or self.judging >= self.runs, timeout=120)
            assert ok, "the runs never overlapped"


class Judge:
    """Appends a verdict per request to the store (after ``overlap`` lets it); counts what it was asked and logs
    each call in ``events``."""

    def __init__(self, cache: JudgmentCache, asked: Counter, overlap: Overlap | None = None, events=None):
        self.cache, self.asked, self.overlap, self.events = cache, asked, overlap, events

    def __call__(self, todo: dict[str, tuple]) -> pa.Table:
        self.asked.update(list(todo))
        if self.events is not None:
            self.events.append(("asked", set(todo)))
        if self.overlap is not None:
            self.overlap.hold()
        rows = [dict(leaderboard_judgment(ctx, aspect, a, b, "A"), key=k) for k, (aspect, ctx, a, b, _) in todo.items()]
        table = leaderboard_table(rows)
        self.cache.append(table)
        return table


def judging(root: Location, cache: JudgmentCache, lease, lines: list[str], progress=None) -> ClaimedJudging:
    def say(line: str) -> None:
        lines.append(line)
        if progress is not None:
            progress(line)

    return ClaimedJudging(
        Claims(root, Holder.of(lease)), cache, {"coherence"}, set(CONTEXTS), say, time.time(), wait_s=0.2
    )


def test_two_runs_at_once_ask_each_comparison_once_and_the_other_takes_its_verdicts(tmp_path):
    root = Location.of(str(tmp_path))
    cache = JudgmentCache(root.join("tables", "judgments"))
    todo, asked = requests(), Counter()
    results, lines, barrier, overlap = {}, {"a": [], "b": []}, threading.Barrier(2), Overlap(2)

    def run(name: str) -> None:
        with take(root, name, ttl=30) as lease:
            claimed = judging(root, cache, lease, lines[name], overlap.said)
            barrier.wait()
            tables = claimed(dict(todo), Judge(cache, asked, overlap))
            results[name] = (tables, claimed.found)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert set(asked) == set(todo) and set(asked.values()) == {1}, "each comparison asked once in all"
    assert set(results) == {"a", "b"}
    for name, (tables, found) in results.items():  # each run has every verdict: its own, and the other's
        keys = [k for t in [*tables, *found] for k in t.column("key").to_pylist()]
        assert sorted(keys) == sorted(todo), name
    waited = [name for name, said in lines.items() if any("being judged by another run" in s for s in said)]
    assert waited, "neither run waited for the other"
    assert Counter(cache.rows().column("key").to_pylist()) == Counter(dict.fromkeys(todo, 1))


def test_what_a_dead_claimer_left_is_asked_once_its_lease_expires(tmp_path, monkeypatch):
    """The leases' clock is the test's: the dead claimer's lease runs out when the survivor has said it waits."""
    root = Location.of(str(tmp_path))
    cache = JudgmentCache(root.join("tables", "judgments"))
    todo, asked = requests(), Counter()
    now = [dt.datetime.now(dt.UTC)]
    monkeypatch.setattr("pairank.storage.store.lease._now", lambda: now[0])
    dead = take(root, "dead", ttl=1.0)
    first = list(todo)[:5]
    Claims(root, Holder.of(dead)).claim(by_bucket({k: todo[k] for k in first}), since=time.time())
    dead._stop.set()  # killed: its lease is neither renewed nor released, and it judged nothing
    dead._thread.join()
    lines: list[str] = []
    events: list[tuple[str, set]] = []

    def expire(line: str) -> None:  # the survivor waits: now the dead claimer's lease runs out
        events.append(("waiting", set()))
        now[0] += dt.timedelta(seconds=1.5)

    with take(root, "survivor", ttl=30) as lease:
        tables = judging(root, cache, lease, lines, expire)(dict(todo), Judge(cache, asked, events=events))
    assert set(asked) == set(todo) and set(asked.values()) == {1}
    assert sum(t.num_rows for t in tables) == len(todo)
    assert any("being judged by another run" in s for s in lines)
    assert [what for what, _ in events] == ["asked", "waiting", "asked"], events
    assert events[0][1] == set(todo) - set(first) and events[2][1] == set(first)  # the dead one's: after it waited


def test_verdicts_of_a_run_that_ended_after_the_cache_was_read_are_not_asked_again(tmp_path):
    root = Location.of(str(tmp_path))
    cache = JudgmentCache(root.join("tables", "judgments"))
    todo, asked = requests(), Counter()
    with take(root, "late", ttl=30) as lease:
        late = judging(root, cache, lease, [])  # read the (empty) cache now: nothing answered
        with take(root, "early", ttl=30) as other:  # another run claims, judges and ends meanwhile
            judging(root, cache, other, [])(dict(todo), Judge(cache, asked))
        assert late(dict(todo), Judge(cache, asked)) == []
    assert set(asked.values()) == {1} and len(asked) == len(todo)
    assert sorted(k for t in late.found for k in t.column("key").to_pylist()) == sorted(todo)
