"""Several batches in flight per judge actor: what the pool's monitor counts, the gate that lets a retried batch
run alone, and a whole run on the SIMULATED judge whose actor is SIGKILLed while it holds several batches."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import pytest

from pairank.cluster.pools.judge_actor import Gate
from pairank.cluster.pools.monitor import PoolMonitor
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import Gate as TestGate
from tests.helpers import full_matrix_spec, judge_actor_pids, run_and_kill, write_input


def test_every_call_running_when_its_engine_died_counts_and_one_that_waited_does_not():
    monitor = PoolMonitor()
    monitor.arrived(0, pid=10)
    monitor.started(0, "a")
    monitor.started(0, "b")
    monitor.started(0, "c")
    monitor.finished(0, "c")  # done before the engine died
    monitor.arrived(0, pid=11)  # the restarted engine
    assert [monitor.was_running(0, c) for c in "abcd"] == [True, True, False, False]
    assert monitor.summary()["restarts"][0]["judging_at"] is None  # nothing in the restarted engine yet
    monitor.started(0, "e")
    assert monitor.was_running(0, "e") and not monitor.was_running(1, "d")
    monitor.started(0, "f")  # a later call: the slot was judging again already
    summary = monitor.summary()
    assert summary["lost"] == 1 and summary["restarted"] == 1
    (restart,) = summary["restarts"]
    assert restart["slot"] == 0 and restart["pid"] == 11 and restart["at"] <= restart["judging_at"] <= time.time()


class CountingGate(Gate):
    """The actor's gate, counting the calls that have come to it (``arrived``, under its lock as each call enters):
    the test knows a call waits in ``enter`` without timing it."""

    arrived = 0

    def enter(self, alone: bool) -> None:
        with self.cond:  # re-entrant: ``Gate.enter`` takes it again, and its wait lets go of both
            self.arrived += 1
            self.cond.notify_all()
            super().enter(alone)


def test_a_call_that_runs_alone_waits_for_the_others_and_holds_new_ones_back():
    """Every call holds the engine until the test lets it go: a and b run together, the lone call comes while
    they run, and a late one comes while the lone call waits; then all are let go at once, and the gate alone
    decides the order."""
    gate, log = CountingGate(), []
    lock, go = threading.Lock(), threading.Event()

    def call(name: str, alone: bool) -> None:
        gate.enter(alone)
        with lock:
            log.append(("in", name, gate.running))
        go.wait(60)  # held until the test lets it go (60 s: a bound on a hang)
        with lock:
            log.append(("out", name, gate.running))
        gate.leave(alone)

    def arrive(name: str, alone: bool, state) -> threading.Thread:
        thread = threading.Thread(target=call, args=(name, alone))
        thread.start()
        with gate.cond:
            assert gate.cond.wait_for(state, timeout=60), name  # a state waited for; 60 s bounds a hang
        return thread

    threads = [arrive("a", False, lambda: gate.running == 1)]
    threads.append(arrive("b", False, lambda: gate.running == 2))  # a and b run together
    threads.append(arrive("alone", True, lambda: gate.alone_waiting == 1))  # it waits for both
    threads.append(arrive("late", False, lambda: gate.arrived == 4))  # arrives while the lone call waits
    go.set()
    for t in threads:
        t.join(60)
    order = [(kind, name) for kind, name, _ in log]
    alone_in = order.index(("in", "alone"))
    assert {("out", "a"), ("out", "b")} <= set(order[:alone_in])  # it waited for both
    assert order[alone_in + 1] == ("out", "alone") and order[-2:] == [("in", "late"), ("out", "late")]
    assert {(k, n): r for k, n, r in log}[("in", "alone")] == 1 and gate.most == 2


def only_actor(run_pid: int) -> int:
    """The judge actor of the run ``run_pid`` (not another run's on the machine); it has one."""
    (actor,) = judge_actor_pids(under=run_pid)
    return actor


@pytest.mark.ray
def test_a_pool_with_batches_in_flight_judges_each_key_once_and_survives_a_sigkill(summeval_tables, tmp_path):
    """`pairank run` (its own local Ray) on the SIMULATED judge, 3 batches in flight per actor: its actor is
    SIGKILLed mid-run with batches in it; Ray restarts it, the batches are judged again, exit 0, each key once."""
    data = write_input(tmp_path / "input", summeval_tables, 8, 6)
    out = tmp_path / "out"
    gate = TestGate(tmp_path / "gate")  # every batch held: the run goes on only as far as the test lets it
    spec = full_matrix_spec(
        data,
        out,
        name="in-flight",
        seconds_per_comparison=0,
        pool={"size": 1, "num_cpus": 1, "batch_size": 6, "max_batches_in_flight": 3},
        flush_rows=12,
        judge=gate.judge(),
    )
    # the calls the killed engine held come again: the restarted engine holds one before the run goes on (how many
    # it is handed at once depends on where the stream was when the kill fell: waiting for 3 hung a clean-clone run)
    victim = run_and_kill(spec, tmp_path, only_actor, gate, after_kill=lambda feed: len(feed.held()) >= 1)
    total = 8 * 6 * 5
    cache = JudgmentCache(Location.of(str(out)).join("tables", "judgments"))
    keys = Counter(cache.rows().column("key").to_pylist())
    assert len(keys) == total and set(keys.values()) == {1}, keys.most_common(3)
    report = json.loads((out / "runs" / "in-flight" / "report.json").read_text())
    engines = report["engines"]
    assert engines["lost"] == 1 and engines["restarted"] == 1 and engines["rows_failed"] == 0
    # the batches running in the killed engine, at most 3 (none when the kill fell while the stream of requests
    # made in Ray Data tasks was refilling the engine)
    assert 0 <= engines["batches_retried"] <= 3
    assert report["counts"]["judged_now"] == total and report["counts"]["errors_now"] == 0
    (actor,) = report["pool"]
    assert actor["pid"] != victim and actor["most_in_flight"] == 3  # the restarted engine held 3 batches at once
    # the restarted engine judged again once the actor was up (a SIMULATED engine starts at once)
    (restart,) = engines["restarts"]
    assert restart["slot"] == actor["slot"] and restart["pid"] == actor["pid"]
    assert 0 <= restart["judging_at"] - restart["at"] < 60, restart
