"""Judge pools kept warm between the jobs of one driver process (cluster/pools/warm.py): jobs in a ``warm_pools()``
scope share a pool whose engine and resources equal theirs, each in its own judging mode and with its own report; other
settings get a pool of their own; outside a scope nothing is kept; a restarted actor judges in the calls' mode."""

from __future__ import annotations

import json
import os
import signal
import time
from types import SimpleNamespace

import pytest

import pairank
from pairank.cluster.metrics import Meter
from pairank.cluster.pools.judge_pool import PoolResources
from pairank.cluster.pools.monitor import PoolMonitor
from pairank.cluster.pools.warm import KeptPool, pools_to_stop, warm_scope
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.judges import register, unregister
from pairank.storage.keys import sampling_mode
from pairank.storage.store.cache import JudgmentCache
from tests.cluster.verdict_engine import VERDICTS
from tests.helpers import judge_actor_pids, spec_for


@pytest.fixture
def verdicts():
    """The generating test engine, registered for one test."""
    register(VERDICTS)
    try:
        yield VERDICTS
    finally:
        unregister("verdicts")


def job(tiny_input, out, name: str, engine: dict | None = None, **over):
    """A full matrix of ``tiny_input`` (12 comparisons), by the SIMULATED judge or by ``engine``."""
    data = spec_for(tiny_input, out, name=name, scheduler={"name": "full"}, **over)
    if engine is not None:
        data["judge"] = engine
    return parse_spec(data, f"{name}.yaml")


def actor(result) -> dict:
    (one,) = result.report["pool"]
    return one


def alive(pid: int) -> bool:
    try:
        return (open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def gone(pid: int, seconds: float = 30) -> bool:
    """Whether the process ``pid`` ends within ``seconds``."""
    deadline = time.monotonic() + seconds
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)  # a poll of the process's end, not a window
    return not alive(pid)


@pytest.mark.usefixtures("ray_local")
def test_two_jobs_in_a_scope_run_on_one_engine_and_report_their_own_work(tiny_input, tmp_path):
    lines: list[str] = []
    with pairank.warm_pools():
        first = run_job(job(tiny_input, tmp_path / "one", "first"))
        actors = set(judge_actor_pids(under=os.getpid()))
        second = run_job(job(tiny_input, tmp_path / "two", "second"), progress=lines.append)
        assert set(judge_actor_pids(under=os.getpid())) == actors  # the second job started no engine
        a, b = actor(first), actor(second)
        assert a["pid"] == b["pid"] and alive(a["pid"])  # kept after the job, until the scope ends
        assert (a["warm"], b["warm"]) == (False, True) and a["start_seconds"] == b["start_seconds"]
        assert first.report["engines"]["actors_warm"] == 0 and second.report["engines"]["actors_warm"] == 1
        assert any("1 engine up already (a warm pool)" in line for line in lines)
        assert "1 engine up already as the job began (a warm pool)" in second.layout.report_md.read_text()
        scope = warm_scope()
        assert scope is not None and [k.pool.meter.run for k in scope.kept] == ["second"]  # its metrics: the run's
    assert gone(a["pid"])  # the scope stopped it
    for result in (first, second):  # each report says what its own job did: 2 contexts x 3 x 2 ordered pairs
        assert (result.judged, result.errors) == (12, 0)
        (one,) = result.report["pool"]
        assert one["rows"] == 12 and one["calls"] == {"pairwise": 12} and one["batches"] == 2  # batch_size 8
        engines = result.report["engines"]
        assert engines["lost"] == engines["batches_retried"] == 0 and engines["actors_most"] == 1


@pytest.mark.usefixtures("ray_local")
def test_outside_a_scope_each_job_starts_and_stops_its_own_engine(tiny_input, tmp_path):
    assert warm_scope() is None
    first = run_job(job(tiny_input, tmp_path / "one", "first"))
    assert gone(actor(first)["pid"])
    second = run_job(job(tiny_input, tmp_path / "two", "second"))
    assert actor(second)["pid"] != actor(first)["pid"] and not actor(second)["warm"]
    assert "actors_warm" in second.report["engines"] and second.report["engines"]["actors_warm"] == 0


def free_cpus(seconds: float = 30) -> float:
    """The session Ray's free CPUs, once what earlier tests' actors held is back (Ray frees a killed actor's CPUs
    after its process ends), or after ``seconds``."""
    import ray

    deadline = time.monotonic() + seconds
    while ray.available_resources().get("CPU", 0) < ray.cluster_resources()["CPU"] and time.monotonic() < deadline:
        time.sleep(0.2)  # a poll of the CPUs coming back, not a window
    return ray.available_resources().get("CPU", 0)


@pytest.mark.usefixtures("ray_local")
def test_other_engine_settings_or_resources_get_a_pool_of_their_own(tiny_input, tmp_path):
    # Two pools side by side fill the CPUs free (Ray Data keeps one): a third needs one of them stopped.
    share = (free_cpus() - 1) / 2
    assert share > 0, "the session Ray has no CPU free for two pools"

    def pid(name: str, pool: dict | None = None, **over) -> int:
        spec = job(tiny_input, tmp_path / name, name, pool={"num_cpus": share, **(pool or {})}, **over)
        return actor(run_job(spec))["pid"]

    with pairank.warm_pools():
        a = pid("a", judge={"seed": 3})
        b = pid("b", judge={"seed": 4})  # another engine: a pool of its own, beside a's
        assert b != a and alive(a) and alive(b)
        assert pid("c", judge={"seed": 3}) == a and pid("d", judge={"seed": 4}) == b
        # other pool resources, and no CPU free but Ray Data's: the longest idle kept pool (a's) makes room
        e = pid("e", judge={"seed": 4}, pool={"batch_size": 4})
        assert e not in (a, b) and gone(a) and alive(b)
        assert pid("f", judge={"seed": 4}, pool={"batch_size": 4}) == e
        # a range pool is not kept, but it needs room all the same: b's pool, now the longest idle, makes it
        ranged = pid("g", judge={"seed": 4}, pool={"size": "1..2", "idle_seconds": 1})
        assert ranged not in (b, e) and gone(ranged) and gone(b) and alive(e)
    assert gone(e)


def kept(name: str, since: float, actors: int, busy: bool = False, **resources) -> KeptPool:
    """A kept pool as :func:`pools_to_stop` sees it: its resources, its actors, when its last job ended."""
    pool = SimpleNamespace(name=name, resources=PoolResources(**resources), actors=[object()] * actors)
    return KeptPool(key=name, ray="r", pool=pool, busy=busy, since=since)  # type: ignore[arg-type]


def test_room_is_made_by_the_longest_idle_pools_counting_what_each_of_them_holds():
    old = kept("old", 1, actors=1, num_cpus=0.5)
    big = kept("big", 2, actors=2, num_cpus=1)
    held = kept("held", 0, actors=4, num_cpus=1, busy=True)  # a job runs on it: never stopped
    gpu = kept("gpu", 3, actors=1, num_cpus=1, num_gpus=1)
    pools = [gpu, big, held, old]

    def names(free: dict, **new) -> list[str]:
        return [k.pool.name for k in pools_to_stop(pools, free, PoolResources(**new))]

    assert names({"CPU": 3.0}, num_cpus=2) == []  # room already, Ray Data's CPU left
    assert names({"CPU": 2.0}, num_cpus=1.5) == ["old"]  # 2.5 free once the oldest goes
    # the new pool's own size decides, not the size of the pool just stopped (0.5 CPU would fit after "old")
    assert names({"CPU": 1.0}, num_cpus=2) == ["old", "big"]
    assert names({"CPU": 1.0}, min_size=2, max_size=2, num_cpus=1) == ["old", "big"]
    assert names({"CPU": 9.0, "GPU": 0.0}, num_gpus=1) == ["old", "big", "gpu"]  # only the GPU pool frees a GPU
    assert names({"CPU": 0.0}, num_cpus=64) == ["old", "big", "gpu"]  # never enough: every idle pool


def rows_of(result) -> list[dict]:
    rows = JudgmentCache(result.layout.judgments).read().to_pylist()
    mode = result.report["settings"]["judging"]["mode"]
    return [r for r in rows if (sampling_mode(r["sampling"]) or "logprob") == mode]


@pytest.mark.usefixtures("ray_local")
def test_jobs_of_two_modes_share_a_warm_engine_and_a_restarted_one_judges_in_the_calls_mode(
    verdicts, tiny_input, tmp_path
):
    store = tmp_path / "store"
    engine = {"engine": {"engine": "verdicts"}}
    with pairank.warm_pools():
        logprob = run_job(job(tiny_input, store, "logprob", **engine))
        generate = run_job(job(tiny_input, store, "generate", judging={"mode": "generate"}, **engine))
        first = actor(logprob)["pid"]
        assert actor(generate)["pid"] == first and actor(generate)["warm"]
        for result in (logprob, generate):
            rows = rows_of(result)
            assert result.judged == len(rows) == 12 and result.errors == 0
            assert {r["raw_text"].split(":")[0] for r in rows} == {f"built in {first}"}
            assert actor(result)["calls"] == {"pairwise": 12} and actor(result)["rows"] == 12
        assert all(r["p_a"] == pytest.approx(0.7) and r["label"] == "A" for r in rows_of(logprob))
        assert {(r["label"], r["p_a"]) for r in rows_of(generate)} == {("A", 1.0)}
        assert all(json.loads(r["sampling"])["mode"] == "generate" for r in rows_of(generate))
        scope = warm_scope()
        assert scope is not None
        (kept,) = scope.kept  # renewed for the generate job: what its calls say, and its error rows' identity
        assert kept.pool.mode.mode == "generate" and kept.pool.on_failure.args[1].mode == "generate"

        # the engine dies between jobs: Ray restarts its actor with the arguments it was built with (the logprob
        # job's), and the next job's calls still say generate
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 60
        while not [p for p in judge_actor_pids(under=os.getpid()) if p != first]:
            assert time.monotonic() < deadline, "the killed actor was not restarted"  # 60 s: a hang bound
            time.sleep(0.2)  # a poll of the restart, not a window
        again = run_job(job(tiny_input, tmp_path / "again", "again", judging={"mode": "generate"}, **engine))
        restarted = actor(again)["pid"]
        assert restarted != first
        rows = rows_of(again)
        assert len(rows) == 12 == again.judged and {(r["label"], r["p_a"]) for r in rows} == {("A", 1.0)}
        assert {r["raw_text"] for r in rows} == {f"built in {restarted}: [[A]]"}
        assert actor(again)["calls"] == {"pairwise": 12}
    assert gone(restarted)


def test_a_renewed_monitor_counts_the_next_job_from_zero_with_its_meter_and_keeps_its_actors():
    first, second = Meter("first", "simulated:simulated"), Meter("second", "simulated:simulated")
    monitor = PoolMonitor(meter=first)
    monitor.arrived(0, pid=10)
    monitor.joined(0, "actor")
    monitor.started(0, "a")
    monitor.arrived(0, pid=11)  # an engine lost under call a, and restarted
    monitor.count("batches_retried")
    monitor.tally(
        0,
        {
            "judging_pass": "pairwise",
            "rows": 4,
            "calls": {"pairwise": 4},
            "input_tokens": 40,
            "output_tokens": 4,
            "seconds": 0.1,
        },
    )
    assert monitor.summary()["restarted"] == 1 and monitor.totals()[0]["rows"] == 4
    monitor.renew(second)
    assert monitor.meter is second and monitor.totals() == {} and monitor.slots() == [0]
    assert monitor.summary() == PoolMonitor().summary()  # nothing lost, retried or failed in the new job
    monitor.started(0, "b")
    monitor.arrived(0, pid=12)  # a loss in the new job is the new job's
    assert monitor.summary()["restarted"] == 1 and monitor.was_running(0, "b") and not monitor.was_running(0, "a")
