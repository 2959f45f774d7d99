"""The driver's bookkeeper (cluster/bookkeeping.py): one actor holds every bookkeeping object of the driver's jobs,
called as each object's own actor would be, from the driver and from the tasks and actors given its handle."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

from pairank.cluster import executor
from pairank.cluster.bookkeeping import bookkeeper, keep
from pairank.cluster.pools.judge_pool import JudgePool, PoolResources
from pairank.jobs.judging.plan_counter import PlanCounter
from tests.helpers import process_titles

pytestmark = pytest.mark.ray


class Echo:
    """Judges every request as 'A' (a runner for the pool)."""

    def run(self, judging_pass: str, batch: pa.Table) -> pa.Table:
        return batch.append_column("label", pa.array(["A"] * batch.num_rows))

    def info(self) -> dict:
        return {}


def bookkeepers() -> list[int]:
    """The bookkeeper processes of this pytest process's Ray."""
    return [pid for pid, title in process_titles(os.getpid()).items() if title.startswith(b"ray::Bookkeeper")]


def test_objects_of_several_jobs_share_one_bookkeeper_and_each_keeps_its_own_state(ray_local):
    import ray

    first, second = keep(PlanCounter, 2), keep(PlanCounter, 3)
    assert first.name != second.name and first.bookkeeper == second.bookkeeper == bookkeeper()
    ray.get(first.add.remote("b0", 10, 4))
    assert ray.get(first.totals.remote())["wanted"] == 10 and ray.get(second.totals.remote())["wanted"] == 0
    assert ray.get(second.totals.remote())["blocks"] == 3

    @ray.remote(num_cpus=0)
    def count_in_a_task(kept) -> int:  # a task given the handle calls the same object
        ray.get(kept.add.remote("b1", 5, 0))
        return ray.get(kept.totals.remote())["wanted"]

    assert ray.get(count_in_a_task.remote(first)) == 15
    held = ray.get(bookkeeper().held.remote())
    first.drop()
    assert ray.get(bookkeeper().held.remote()) == held - 1
    with pytest.raises(ray.exceptions.RayTaskError, match="KeyError"):
        ray.get(first.totals.remote())
    second.drop()
    assert len(bookkeepers()) == 1


def test_a_pool_and_a_plan_counter_start_no_bookkeeping_actor_of_their_own(ray_local):
    before = bookkeepers()
    with JudgePool(Echo, PoolResources(batch_size=4)) as pool:
        counter = executor.shared(PlanCounter, 1)
        table = pa.table({"key": [f"k{i}" for i in range(10)], "context_id": ["c"] * 10})
        rows = sum(b.num_rows for b in pool.judge(table))
        counter.stop()
        assert rows == 10 and pool.losses()["lost"] == 0
    titles = process_titles(os.getpid()).values()
    assert not any(t.startswith((b"ray::PoolMonitor", b"ray::PlanCounter")) for t in titles)
    assert bookkeepers() == before or (not before and len(bookkeepers()) == 1)


def test_a_call_that_cannot_start_holds_back_no_later_call_of_the_same_caller(ray_local):
    """The bookkeeper runs calls as they can start, not in each caller's order: a call waiting for its argument
    (here a task that never ends until the test cancels it) does not hold back the next one. In Ray's in-order queue
    it would, and a call that never arrives holds the caller's later calls for 30 s, then cancels them (the job
    fails)."""
    import threading

    import ray

    @ray.remote(num_cpus=0)
    def later() -> tuple:
        threading.Event().wait()  # an argument that does not arrive: cancelled by the test, not ended by a time
        return ()

    counter = keep(PlanCounter, 2)
    keeper = bookkeeper()
    sleeper = later.remote()
    try:
        waiting = keeper.call.remote(counter.name, "totals", sleeper)  # starts once the sleeper's result exists
        # held back behind ``waiting`` it never answers (Ray's queue would cancel it after 30 s): 300 s bounds a hang
        assert ray.get(keeper.held.remote(), timeout=300) >= 1
        ready, _ = ray.wait([waiting], timeout=0)
        assert not ready  # the first call still waits for its argument
    finally:
        ray.cancel(sleeper, force=True)
        counter.drop()
