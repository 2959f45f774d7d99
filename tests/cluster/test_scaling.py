"""A judge pool whose size is a range (``pool.size: min..max``) on the session's local Ray (3 logical CPUs) with
the SIMULATED judge: it grows while calls wait and the cluster has room, stays at ``min`` when it has none, and
stops the actors above ``min`` that had nothing to do, keeping what they did in the report."""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from pairank.cluster.pools.monitor import PoolMonitor
from pairank.jobs.judging.pool_wiring import PoolRecord, judge_pool
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import Feed, Gate, spec_for, write_input

#: What Ray's (v1) autoscaler reads the requests of ``ray.autoscaler.sdk.request_resources`` from.
REQUEST_KEY = b"autoscaler_resource_request"


@pytest.fixture
def input_8x6(tmp_path, summeval_tables):
    """8 SummEval articles x 6 summaries: 240 ordered pairs."""
    return write_input(tmp_path / "input", summeval_tables, 8, 6)


def test_the_monitor_routes_to_the_slot_unless_it_is_gone_or_full_and_lets_only_an_idle_actor_leave():
    fixed, ranged = PoolMonitor(balance=False, capacity=2), PoolMonitor(balance=True, capacity=2)
    for monitor in (fixed, ranged):
        for slot in (0, 1):
            monitor.arrived(slot, pid=10 + slot)
            monitor.joined(slot, f"actor{slot}")
    assert [fixed.route(0, c)[0] for c in "abc"] == [0, 0, 0]  # a fixed pool: the slot's actor, however busy
    assert [ranged.route(0, c)[0] for c in "abc"] == [0, 0, 1]  # slot 0 holds 2 (its capacity): to the idle one
    assert not ranged.leave(1)  # it holds a call
    ranged.started(1, "c")
    ranged.finished(1, "c")
    assert ranged.loads()[1][:2] == (0, 0) and ranged.loads()[1][2] >= 0 and ranged.loads()[0][2] is None
    assert ranged.leave(1) and ranged.slots() == [0] and ranged.route(1, "d") == (0, "actor0")  # gone: a live one
    fixed.mark_dead(0)
    assert fixed.route(0, "e", deaths=3) == (1, "actor1") and fixed.summary()["dead"] == [0]
    fixed.mark_dead(1)
    assert fixed.route(1, "f") is None  # none live: the forwarder fails the rows


def range_spec(input_folder, output, gate: Gate | None = None, **pool) -> dict:
    """A full matrix on a pool of 1..2 actors of 1 CPU each; with ``gate``, its batches held there."""
    return spec_for(
        input_folder,
        output,
        name="scaled",
        scheduler={"name": "full"},
        judge=gate.judge() if gate is not None else {},
        pool={"size": "1..2", "num_cpus": 1, "batch_size": 8, **pool},
        cluster={"num_cpus": 2},
        flush_rows=40,
    )


class Held:
    """``run_job(spec)`` in a thread, its batches held at the SIMULATED judge's gate until :meth:`release`: the test
    acts while the run is at a known point (every actor busy, calls waiting), not within a window of time."""

    def __init__(self, spec: dict, gate: Gate):
        self.gate, self.result, self.error = gate, None, None
        spec["judge"] = {**spec["judge"], **gate.judge(hold_from=0)}
        self.thread = threading.Thread(target=self._run, args=(parse_spec(spec, "test"),), daemon=True)

    def _run(self, spec) -> None:
        try:
            self.result = run_job(spec, progress=lambda m: None)
        except BaseException as exc:  # raised in the test by release()
            self.error = exc

    def __enter__(self) -> Held:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.gate.release()  # a test that failed holding the run lets it end
        self.thread.join(600)

    def release(self):
        """Open the gate; the run's result once it has ended (600 s: a bound on a hang)."""
        self.gate.release()
        self.thread.join(600)
        assert not self.thread.is_alive(), "the run did not end after its gate opened"
        if self.error is not None:
            raise self.error
        return self.result


class Said(logging.Handler):
    """An event: ``logger`` said something containing ``text``."""

    def __init__(self, logger: str, text: str):
        super().__init__(logging.INFO)
        self.text, self.event = text, threading.Event()
        self.logger = logging.getLogger(logger)

    def emit(self, record: logging.LogRecord) -> None:
        if self.text in record.getMessage():
            self.event.set()

    def __enter__(self) -> Said:
        self.level = self.logger.level
        self.logger.setLevel(logging.INFO)
        self.logger.addHandler(self)
        return self

    def __exit__(self, *exc) -> None:
        self.logger.removeHandler(self)
        self.logger.setLevel(self.level)


def stored_keys(output: Path) -> Counter:
    return Counter(JudgmentCache(Location.of(str(output)).join("tables", "judgments")).rows().column("key").to_pylist())


def test_a_range_pool_grows_while_calls_wait_and_judges_each_key_once(ray_local, input_8x6, tmp_path):
    """The run held at its first batch (every call waits): the pool grows, and once the new actor takes calls the
    run is let go; the batches cut after it joined go to it by their contexts (held, not timed: at 0.05 s a
    comparison the run had to outlast the second actor's start)."""
    out = tmp_path / "out"
    with (
        Said("pairank.cluster.pools.scaling", "is up and takes calls") as joined,
        Held(range_spec(input_8x6, out), Gate(tmp_path / "gate")) as run,
    ):
        assert joined.event.wait(240), "the pool did not grow while its calls waited"  # 240 s: a hang bound
        result = run.release()
    total = 8 * 6 * 5
    assert result.errors == 0 and result.judged == result.requests == total
    keys = stored_keys(out)
    assert len(keys) == total and set(keys.values()) == {1}
    engines = result.report["engines"]
    assert engines["actors_most"] == 2 and engines["actors_end"] == 2 and engines["actors_stopped"] == 0
    actors = result.report["pool"]
    assert len(actors) == 2 and all(a["batches"] > 0 for a in actors)  # the new actor took calls
    assert sum(a["rows"] for a in actors) == total
    assert "actors: 2 at most, 2 at the end" in result.layout.report_md.read_text()


def test_a_range_pool_stays_at_min_when_the_cluster_has_no_room_and_asks_the_autoscaler(ray_local, input_8x6, tmp_path):
    """A placement group holds the second CPU (the third stays Ray Data's): the pool keeps 1 actor, asks Ray's
    autoscaler for room for 2 (no autoscaler reads it here), withdraws the request at the end, and finishes."""
    import ray
    from ray.experimental.internal_kv import _internal_kv_del, _internal_kv_get
    from ray.util.placement_group import placement_group, remove_placement_group

    _internal_kv_del(REQUEST_KEY)
    held = placement_group([{"CPU": 1}])
    ray.get(held.ready(), timeout=60)
    try:
        out = tmp_path / "out"
        # the run held at its first batch (its calls wait) until the pool has asked for room, not timed
        with Held(range_spec(input_8x6, out), Gate(tmp_path / "gate")) as run:
            deadline = time.monotonic() + 240  # a bound on a hang
            while not _internal_kv_get(REQUEST_KEY):
                assert time.monotonic() < deadline and run.thread.is_alive(), "the pool did not ask for room"
                time.sleep(0.1)  # a poll of the state waited for, not a window
            result = run.release()
    finally:
        remove_placement_group(held)
    assert result.errors == 0 and result.judged == result.requests == 8 * 6 * 5
    assert set(stored_keys(out).values()) == {1}
    engines = result.report["engines"]
    assert engines["actors_most"] == 1 and engines["actors_end"] == 1 and len(result.report["pool"]) == 1
    assert json.loads(_internal_kv_get(REQUEST_KEY)) == []  # asked (the key exists), then withdrawn


def requests(contexts: int, n: int, first: int = 0) -> pa.Table:
    """Every ordered pair of ``n`` candidates in each of ``contexts`` contexts (numbered from ``first``), as request
    rows."""
    ids = [f"x{i}" for i in range(n)]
    pairs = [(f"ctx{c}", a, b) for c in range(first, first + contexts) for a, b in itertools.permutations(ids, 2)]
    return pa.table(
        {
            "key": [f"{c}|{a}|{b}" for c, a, b in pairs],
            "context_id": [c for c, _, _ in pairs],
            "aspect": ["coherence"] * len(pairs),
            "candidate_a": [a for _, a, _ in pairs],
            "candidate_b": [b for _, _, b in pairs],
            "prompt": [""] * len(pairs),
            "prompt_hash": ["h"] * len(pairs),
        }
    )


def wait_for(condition, timeout: float = 120) -> bool:
    """Until ``condition()`` (``timeout``: a bound on a hang)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)  # a poll of the state waited for, not a window
    return True


class Round:
    """``pool.judge(table)`` in a thread, its calls held at the pool's gate: the keys it returned once it ends."""

    def __init__(self, pool, table: pa.Table):
        self.keys: Counter = Counter()
        self.thread = threading.Thread(target=self._judge, args=(pool, table), daemon=True)
        self.thread.start()

    def _judge(self, pool, table: pa.Table) -> None:
        for batch in pool.judge(table):
            self.keys.update(batch.column("key").to_pylist())

    def done(self) -> bool:
        return not self.thread.is_alive()


def grown_round(pool, feed: Feed, table: pa.Table) -> Round:
    """A round in which the pool grows to 2: it is held at its first call (every call waits), the pool adds an
    actor, and the round goes on in steps until the new actor holds a call (it takes only calls sent after it
    joined) and then to its end."""
    with Said("pairank.cluster.pools.scaling", "is up and takes calls") as joined:
        held = Round(pool, table)
        assert joined.event.wait(240), "the pool did not grow while its calls waited"  # 240 s: a hang bound
    feed.until("a call in each of the 2 actors", lambda: len(feed.gate.pids()) == 2)
    feed.until("the round's end", held.done)
    return held


def test_a_range_pool_stops_idle_actors_above_min_and_keeps_what_they_did(ray_local, tmp_path):
    """Two rounds on one pool (the driver's table of requests): the pool grows in the first, shrinks back to 1 while
    idle, and the second round is judged by the actor left; the record counts the stopped actor's work."""
    gate = Gate(tmp_path / "gate")
    spec = parse_spec(range_spec(Location.of(str(tmp_path / "in")), tmp_path / "out", gate, idle_seconds=1), "test")
    first, second = requests(8, 6), requests(2, 6).slice(0, 40)
    record = PoolRecord()
    with judge_pool(spec, record) as pool:
        keys = grown_round(pool, Feed(gate), first).keys
        gate.release()
        assert len(keys) == first.num_rows and set(keys.values()) == {1}
        assert pool.sizes()["actors_most"] == 2
        # time is the subject: an actor idle for 1 s is stopped (the wait only bounds a hang); one added while the
        # round was held may have been stopped before its first call, and the pool grew again
        assert wait_for(lambda: pool.sizes()["actors_end"] == 1)
        assert pool.sizes()["actors_stopped"] == len(pool.stopped) >= 1
        did = [a for a in pool.info() if a["slot"] in pool.stopped]
        assert any(a["batches"] > 0 for a in did)
        assert wait_for(lambda: not any(Path(f"/proc/{a['pid']}").exists() for a in pool.stopped.values()))
        again = Counter(k for b in pool.judge(second) for k in b.column("key").to_pylist())
        assert len(again) == second.num_rows and set(again.values()) == {1}
    assert sum(a["rows"] for a in record.actors) == first.num_rows + second.num_rows
    assert record.engines["actors_most"] == 2 and record.engines["actors_stopped"] >= 1


def test_a_served_range_pool_is_a_serve_deployment_that_autoscales_between_its_ends(
    ray_local, summeval_tables, tmp_path
):
    """`pairank serve` gives the range to Ray Serve's autoscaling: one replica to begin with, at most two (whether
    Serve adds the second under load is Serve's own, not tested here)."""
    from ray import serve
    from ray.serve.context import _get_global_client

    from pairank.cluster.serve.deployments import stop
    from pairank.jobs.serve import start_server, token_digest
    from tests.helpers import TOKEN, compare_body, free_port, request, spec_dict

    folder = write_input(tmp_path / "input", summeval_tables, 2, 3)
    spec = parse_spec(
        spec_dict(folder.uri, str(tmp_path / "out"), pool={"size": "1..2", "num_cpus": 1, "batch_size": 8}), "test"
    )
    try:
        url = start_server(spec, "127.0.0.1", free_port(), token_digest(TOKEN))
        body = compare_body("An article about owls.", ("owl-1", "Owls hunt at night."), ("owl-2", "Owls are birds."))
        status, answer, _ = request(f"{url}/compare", body)
        assert status == 200 and answer["error"] is None
        info, _ = _get_global_client().get_deployment_info("judge", "pairank")
        scaling = info.deployment_config.autoscaling_config
        assert (scaling.min_replicas, scaling.max_replicas, scaling.initial_replicas) == (1, 2, 1)
        replicas = serve.status().applications["pairank"].deployments["judge"].replica_states
        assert replicas.get("RUNNING") == 1
    finally:
        stop()


def test_a_range_pool_bears_the_loss_of_the_actor_it_added(ray_local, tmp_path):
    """The actor the pool added in a first round is SIGKILLed in the second while it holds a call: Ray restarts it in
    its slot, its batches are judged again, each key is returned once, and the loss is counted."""
    import os
    import signal

    gate = Gate(tmp_path / "gate")
    spec = parse_spec(range_spec(Location.of(str(tmp_path / "in")), tmp_path / "out", gate), "test")
    todo = requests(12, 6, first=100)
    feed = Feed(gate)
    with judge_pool(spec) as pool:
        grown_round(pool, feed, requests(8, 6))
        assert pool.sizes()["actors_end"] == 2
        first, added = (a["pid"] for a in pool.info())  # slot 1's: the actor added
        second = Round(pool, todo)  # held: the added actor is killed while it holds a call of it
        try:
            feed.until("a call of the second round in the added actor", lambda: added in feed.held_pids())
            os.kill(added, signal.SIGKILL)
            feed.dead.add(added)
            # Ray restarts it in its slot: the round goes on until the restarted actor holds a call, then to its end
            feed.until("a call in the restarted actor", lambda: bool(gate.pids() - {first, added}))
        finally:
            gate.release()
        second.thread.join(600)  # a bound on a hang
        losses = pool.losses()
        pids = [a["pid"] for a in pool.info()]
    assert len(second.keys) == todo.num_rows and set(second.keys.values()) == {1}
    assert losses["lost"] == 1 and losses["restarted"] == 1 and losses["rows_failed"] == 0
    assert len(pids) == 2 and added not in pids
