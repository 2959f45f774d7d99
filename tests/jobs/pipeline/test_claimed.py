"""Judging under claims on the driver (adaptive rounds, static multi-pass runs; issue 30, item 6): two runs that
want the same comparisons at once ask each once, the other waits for the verdict in the store; a claimer that dies
without a verdict leaves its comparisons to the other once its lease expires. The store and the leases are real
(a local folder); the judge is a function that appends its verdicts to the store, as the pool's writer does."""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter

import pyarrow as pa

from pairank.jobs.pipeline.claimed import ClaimedJudging
from pairank.storage.cache import JudgmentCache
from pairank.storage.claims import Claims, Holder, by_bucket
from pairank.storage.fs import Location
from pairank.storage.lease import take
from tests.helpers import leaderboard_judgment, leaderboard_table

CONTEXTS = ["c1", "c2", "c3"]


def requests() -> dict[str, tuple]:
    out = {}
    for ctx in CONTEXTS:
        for a, b in (("x", "y"), ("y", "x"), ("x", "z"), ("z", "x")):
            key = hashlib.sha256(f"{ctx}{a}{b}".encode()).hexdigest()[:32]
            out[key] = ("coherence", ctx, a, b, 0)
    return out


class Judge:
    """Appends a verdict per request to the store after ``seconds``; counts what it was asked."""

    def __init__(self, cache: JudgmentCache, asked: Counter, seconds: float = 0.5):
        self.cache, self.asked, self.seconds = cache, asked, seconds

    def __call__(self, todo: dict[str, tuple]) -> pa.Table:
        self.asked.update(list(todo))
        time.sleep(self.seconds)
        rows = [dict(leaderboard_judgment(ctx, aspect, a, b, "A"), key=k) for k, (aspect, ctx, a, b, _) in todo.items()]
        table = leaderboard_table(rows)
        self.cache.append(table)
        return table


def judging(root: Location, cache: JudgmentCache, lease, lines: list[str]) -> ClaimedJudging:
    return ClaimedJudging(
        Claims(root, Holder.of(lease)), cache, {"coherence"}, set(CONTEXTS), lines.append, time.time(), wait_s=0.2
    )


def test_two_runs_at_once_ask_each_comparison_once_and_the_other_takes_its_verdicts(tmp_path):
    root = Location.of(str(tmp_path))
    cache = JudgmentCache(root.join("tables", "judgments"))
    todo, asked = requests(), Counter()
    results, lines, barrier = {}, {"a": [], "b": []}, threading.Barrier(2)

    def run(name: str) -> None:
        with take(root, name, ttl=30) as lease:
            claimed = judging(root, cache, lease, lines[name])
            barrier.wait()
            tables = claimed(dict(todo), Judge(cache, asked))
            results[name] = (tables, claimed.found)

    threads = [threading.Thread(target=run, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert set(asked) == set(todo) and set(asked.values()) == {1}, "each comparison asked once in all"
    for name, (tables, found) in results.items():  # each run has every verdict: its own, and the other's
        keys = [k for t in [*tables, *found] for k in t.column("key").to_pylist()]
        assert sorted(keys) == sorted(todo), name
    waited = [name for name, said in lines.items() if any("being judged by another run" in s for s in said)]
    assert waited, "neither run waited for the other"
    assert Counter(cache.rows().column("key").to_pylist()) == Counter(dict.fromkeys(todo, 1))


def test_what_a_dead_claimer_left_is_asked_once_its_lease_expires(tmp_path):
    root = Location.of(str(tmp_path))
    cache = JudgmentCache(root.join("tables", "judgments"))
    todo, asked = requests(), Counter()
    dead = take(root, "dead", ttl=1.0)
    first = list(todo)[:5]
    Claims(root, Holder.of(dead)).claim(by_bucket({k: todo[k] for k in first}), since=time.time())
    dead._stop.set()  # killed: its lease is neither renewed nor released, and it judged nothing
    dead._thread.join()
    lines: list[str] = []
    with take(root, "survivor", ttl=30) as lease:
        t0 = time.monotonic()
        tables = judging(root, cache, lease, lines)(dict(todo), Judge(cache, asked, seconds=0.0))
        waited = time.monotonic() - t0
    assert set(asked) == set(todo) and set(asked.values()) == {1}
    assert sum(t.num_rows for t in tables) == len(todo)
    assert any("being judged by another run" in s for s in lines) and 0.3 < waited < 30


def test_verdicts_of_a_run_that_ended_after_the_cache_was_read_are_not_asked_again(tmp_path):
    root = Location.of(str(tmp_path))
    cache = JudgmentCache(root.join("tables", "judgments"))
    todo, asked = requests(), Counter()
    with take(root, "late", ttl=30) as lease:
        late = judging(root, cache, lease, [])  # read the (empty) cache now: nothing answered
        with take(root, "early", ttl=30) as other:  # another run claims, judges and ends meanwhile
            judging(root, cache, other, [])(dict(todo), Judge(cache, asked, seconds=0.0))
        assert late(dict(todo), Judge(cache, asked, seconds=0.0)) == []
    assert set(asked.values()) == {1} and len(asked) == len(todo)
    assert sorted(k for t in late.found for k in t.column("key").to_pylist()) == sorted(todo)
