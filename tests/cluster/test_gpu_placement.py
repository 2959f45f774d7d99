"""Where judge actors go on a cluster of GPU nodes, checked with declared GPUs and the SIMULATED judge.

Ray schedules on declared resources: worker nodes started with ``--num-gpus 2`` hold GPU actors on a machine
without GPUs, and Ray gives each actor GPU ids as it would on real ones. The cluster (``tests/multinode.py``): a
head of 2 CPUs and no GPU (the driver's node, which Ray prefers for the driver's actors while it has room) and one
worker node of 2 CPUs and 2 GPUs; a second such node joins during the growth test. Each run's report records where
every judge actor ran (``pool[].node_id``, ``gpu_ids``, and a parallel engine's ``group``), which the tests read.

The second GPU node joins in the growth test; the tensor-parallel test after it uses both nodes (and starts the
second itself when it runs alone).
"""

from __future__ import annotations

from collections import Counter

import pytest

from pairank.storage.fs import Location
from tests.helpers import Feed, write_input
from tests.multinode import (
    MARKERS,
    SharedGate,
    audit,
    first_args,
    multinode,
    start_run,
    wait_done,
    wait_for,
    write_spec,
)
from tests.multinode import simulated_spec as spec_on

pytestmark = list(MARKERS)

cluster = multinode(workers=1, worker_cpus=2, worker_gpus=2, head_cpus=2)

ROOT = "s3://pairank/gpus"


@pytest.fixture(scope="module")
def inputs(s3_server, summeval_tables):
    """3 SummEval articles x 6 summaries (90 ordered pairs) and 8 x 16 (1,920) on S3."""
    return {
        "small": write_input(f"{ROOT}/small", summeval_tables, 3, 6).uri,
        "large": write_input(f"{ROOT}/large", summeval_tables, 8, 16).uri,
    }


def nodes(cluster) -> tuple[str, set[str]]:
    """The head's node id and the worker nodes' ids, as Ray counts them alive."""
    alive = cluster.alive_nodes()
    assert alive is not None, "the head does not answer"
    head = next(n["NodeID"] for n in alive if n["is_head"])
    return head, {n["NodeID"] for n in alive if not n["is_head"]}


def run(cluster, tmp_path, name: str, input_uri: str, pool: dict, judge: dict | None = None, timeout=300):
    """A full-matrix run on the cluster, with a store of its own (so it judges everything); its exit code, log and
    report (None when it wrote none)."""
    root = f"{ROOT}/{name}"
    spec = spec_on(name, input_uri, root, scheduler={"name": "full"}, judge=judge or {}, pool=pool)
    proc = start_run(cluster, write_spec(tmp_path, spec), tmp_path)
    log = tmp_path / f"{name}.log"
    code = wait_done(proc, log, timeout)
    report = Location.of(f"{root}/store/runs/{name}/report.json")
    return code, log.read_text(errors="replace"), report.read_json() if code == 0 else None


def test_half_gpus_pack_two_actors_on_each_gpu(cluster, tmp_path, inputs):
    _, (worker,) = nodes(cluster)
    code, log, report = run(cluster, tmp_path, "half", inputs["small"], {"size": 4, "num_gpus": 0.5, "num_cpus": 0.25})
    assert code == 0, log[-3000:]
    actors = report["pool"]
    assert {a["node_id"] for a in actors} == {worker} and len(actors) == 4
    assert all(len(a["gpu_ids"]) == 1 for a in actors)
    assert Counter(a["gpu_ids"][0] for a in actors) == {"0": 2, "1": 2}


def test_no_judge_actor_on_the_head_unless_asked(cluster, tmp_path, inputs):
    """A CPU pool: the head has 2 CPUs free and is the driver's node, which Ray prefers; ``pool.on_head`` false (the
    default) keeps the actors off it; with ``on_head: true`` an actor goes there."""
    head, (worker,) = nodes(cluster)
    code, log, report = run(cluster, tmp_path, "offhead", inputs["small"], {"size": 2, "num_cpus": 0.5})
    assert code == 0, log[-3000:]
    assert [a["node_id"] for a in report["pool"]] == [worker, worker]

    code, log, report = run(cluster, tmp_path, "onhead", inputs["small"], {"size": 1, "num_cpus": 0.5, "on_head": True})
    assert code == 0, log[-3000:]
    assert [a["node_id"] for a in report["pool"]] == [head]  # asked: Ray's preference for the driver's node


def test_whole_gpus_hold_one_actor_each_and_a_range_pool_grows_onto_a_gpu_node_that_joins(cluster, tmp_path, inputs):
    """``pool.size: 1..4`` of one GPU each, on one node of 2 GPUs: the pool grows to 2 there, one actor on each
    GPU (off the head, which has none); a second GPU node joins during the run (a replacement or a scale-up: a node
    that joins mid-run), the pool grows onto it, and the actors there judge. The run is held at the SIMULATED
    judge's gate from its first batch until an actor on the joined node holds a batch: the run cannot end before
    the node's actors come, at any speed."""
    _, before = nodes(cluster)
    (first,) = before
    gate = SharedGate(f"{ROOT}/grows/gate")  # every batch held until the test lets it through
    spec = spec_on(
        "grows",
        inputs["large"],
        f"{ROOT}/grows",
        scheduler={"name": "full"},
        judge=gate.judge(hold_from=0),
        pool={"size": "1..4", "num_gpus": 1, "num_cpus": 0.25, "batch_size": 32},
    )
    proc = start_run(cluster, write_spec(tmp_path, spec), tmp_path)
    log = tmp_path / "grows.log"
    feed = Feed(gate, proc)
    try:
        # the first actor holds its first call, the others wait behind it: a backlog, so the pool grows
        gate.wait_for(1, proc=proc)
        (node,) = [n for n in cluster.nodes if not n.head]
        second = wait_for(
            "a second judge actor on the first GPU node", lambda: idle_actors(node) - gate.pids(), proc, log
        )
        # a new actor takes only calls sent after it joined the pool (those sent before wait in the busy one)
        feed.until("a call in the second actor", lambda: gate.pids() & second)
        joined = cluster.add_worker(gpus=2)  # every actor busy, calls waiting: the pool grows onto the new node
        new = wait_for("a judge actor on the joined node", lambda: idle_actors(joined), proc, log, 300)
        feed.until("a call in an actor on the joined node", lambda: gate.pids() & new)
    finally:
        gate.release()
    assert wait_done(proc, log, 600) == 0, log.read_text()[-3000:]
    _, after = nodes(cluster)
    (new,) = after - before
    report = Location.of(f"{ROOT}/grows/store/runs/grows/report.json").read_json()
    on = Counter(a["node_id"] for a in report["pool"])
    assert on[new] >= 1, (joined.name, on)
    # the actors on the node that joined took up work: they judged rows, each key is stored once, and nothing
    # committed was sent to an engine again
    assert sum(a["rows"] for a in report["pool"] if a["node_id"] == new) > 0, report["pool"]
    assert report["engines"]["actors_most"] >= 3 and report["counts"]["judged_now"] == 1920
    assert all(len(a["gpu_ids"]) == 1 for a in report["pool"])
    # a whole GPU each: the first node's two actors hold one GPU each, not the same one
    assert sorted(g for a in report["pool"] if a["node_id"] == first for g in a["gpu_ids"]) == ["0", "1"]
    a = audit(f"{ROOT}/grows/store/tables/judgments", f"{ROOT}/grows/calls/grows")
    assert a.clean() and a.keys == 1920


def test_tensor_parallel_engines_get_a_group_of_gpus_on_one_node(cluster, tmp_path, inputs):
    """``judge.tensor_parallel_size: 2`` on two nodes of 2 GPUs: a pool of 2 engines is one group per node, both
    GPUs of each group on its node; 4 GPUs per engine is refused before judging, naming the setting."""
    _, workers = nodes(cluster)
    if len(workers) < 2:  # the growth test's node has not joined (the test runs alone)
        cluster.add_worker(gpus=2)
        _, workers = nodes(cluster)
    judge = {"tensor_parallel_size": 2}
    code, log, report = run(cluster, tmp_path, "tp2", inputs["small"], {"size": 2, "num_gpus": 1}, judge)
    assert code == 0, log[-3000:]
    groups = [a["group"] for a in report["pool"]]
    assert len(groups) == 2
    for a, group in zip(report["pool"], groups):
        assert a["gpu_ids"] == [] and len(group) == 2  # the actor holds none; its group's two bundles do
        assert {b["node_id"] for b in group} == {a["node_id"]}  # STRICT_PACK: the group on the actor's node
        assert sorted(g for b in group for g in b["gpu_ids"]) == ["0", "1"]
    assert {a["node_id"] for a in report["pool"]} == workers

    code, log, _ = run(
        cluster, tmp_path, "tp4", inputs["small"], {"size": 1, "num_gpus": 1}, {"tensor_parallel_size": 4}
    )
    assert code == 2, log[-3000:]
    assert "judge.tensor_parallel_size x pipeline_parallel_size 4 with pool.num_gpus 1: one engine needs 4 GPUs" in log
    assert "have at most 2" in log


def idle_actors(node) -> set[int]:
    """The judge actors on ``node`` that are up and hold no call: the title Ray gives an actor's process between
    its calls, once it is made."""
    return {pid for pid, first in first_args(node) if first.split()[:1] == ["ray::JudgeActor"]}
