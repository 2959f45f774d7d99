"""A lost head is come back from.

The cluster (``tests/multinode.py``): a head of 1 CPU and one worker node of 2 CPUs, which cannot import pairank
or see the driver's HOME or environment; storage the session's S3 server. The test loses the head twice (the
cluster is started again after each loss). A worker node that joins mid-run and takes up work is
``tests/cluster/test_gpu_placement.py``'s growth test.

Losing the head ends a driver that joined the cluster from outside (exit 5, naming the cluster), and a ``pairank
submit`` that follows a job on it (exit 5, naming its Jobs API); the submitted job's driver dies with the head and
holds the run's name until its lease expires. The same spec submitted to the cluster started again then finishes:
one verdict per key, and nothing committed before a loss is sent to an engine again.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from pairank.storage.fs import Location
from pairank.storage.lease import is_held
from tests.helpers import write_input
from tests.multinode import (
    MARKERS,
    NODE_LOSS,
    PAIRANK,
    audit,
    driver_env,
    multinode,
    start_run,
    titles,
    versions,
    wait_done,
    wait_for,
    write_spec,
)
from tests.multinode import simulated_spec as spec_on

pytestmark = [*MARKERS, NODE_LOSS]

cluster = multinode(workers=1, worker_cpus=2, head_cpus=1)

#: Seconds a lost driver holds the run's name: short, so that the test need not wait a minute.
LEASE_TTL_S = "20"
#: Seconds the GCS refuses connections before the driver's watcher ends it as a driver whose head is gone (15 by
#: default): a driver on a lost head spins in Ray's threads meanwhile, about a core.
HEAD_GONE_S = "4"
#: 5 SummEval articles x 16 summaries: each run commits its first 128 comparisons within seconds, and the 1,200
#: leave both losses well inside a run (at 0.02 s a comparison, on one actor, a run would take 24 s): few
#: comparisons, each slow, cost little CPU.
ARTICLES = 5
COMPARISONS = ARTICLES * 16 * 15


def report_of(root: str, run: str) -> dict:
    return Location.of(f"{root}/store/runs/{run}/report.json").read_json()


def submit(cluster, spec: Path, folder: Path, wait: bool = True):
    """``pairank submit spec`` to the cluster's Jobs API, forwarding the short lease; output in ``folder``."""
    args = [*PAIRANK, "submit", str(spec), "--address", cluster.dashboard, "--env", "PAIRANK_LEASE_TTL_S"]
    env = driver_env(PAIRANK_LEASE_TTL_S=LEASE_TTL_S)
    if wait:
        return subprocess.run(args, capture_output=True, text=True, cwd=folder, env=env, timeout=600)
    log = open(folder / "submit.log", "ab")  # noqa: SIM115 - the command's log, open while it runs
    try:
        return subprocess.Popen(args, cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    finally:
        log.close()


def lose_the_head(cluster) -> None:
    """SIGKILL every process of the head node (its GCS, raylet, dashboard and workers); none is left."""
    head = cluster.node("head")
    assert any(t.startswith("ray::Bookkeeper") for t in titles(head))  # the job's bookkeeping is there
    assert cluster.kill(head)
    assert not head.processes() and not head.strays()


def test_after_losing_the_head_the_same_spec_resumes_from_the_store(cluster, tmp_path, summeval_tables):
    root = "s3://pairank/headloss"
    store, table, calls = Location.of(f"{root}/store"), f"{root}/store/tables/judgments", f"{root}/calls/again"
    uri = write_input(f"{root}/input", summeval_tables, ARTICLES, 16).uri
    spec = spec_on(
        "again",
        uri,
        root,
        scheduler={"name": "full"},
        judge={"seconds_per_comparison": 0.02},
        pool={"size": 1, "num_cpus": 1, "batch_size": 64},
        flush_rows=128,
    )
    path = write_spec(tmp_path, spec)

    # 1. a driver that joined from outside: it ends with exit 5 naming the cluster, and gives the name up
    env = driver_env(PAIRANK_LEASE_TTL_S=LEASE_TTL_S, PAIRANK_HEAD_GONE_S=HEAD_GONE_S)
    proc = start_run(cluster, path, tmp_path, env=env)
    log = tmp_path / "again.log"
    wait_for("a commit", lambda: store.join("tables/judgments").exists() and versions(table) > 0, proc, log, 300)
    address = cluster.address
    lose_the_head(cluster)
    assert wait_done(proc, log, 300) == 5, log.read_text()[-3000:]
    said = " ".join(log.read_text().split())
    assert f"pairank: error: lost the Ray cluster at {address}" in said, said[-3000:]
    assert "its head node is gone" in said and "run or submit the same spec" in said
    assert not is_held(store, "again")
    first = versions(table)

    # 2. a submitted job, whose driver runs on the head and dies with it, holding the run's name
    cluster.restart()
    following = submit(cluster, path, tmp_path, wait=False)
    log = tmp_path / "submit.log"
    wait_for("a commit of the submitted job", lambda: versions(table) > first, following, log, 300)
    dashboard = cluster.dashboard
    lose_the_head(cluster)
    assert is_held(store, "again")  # the lost driver released nothing
    assert wait_done(following, log, 300) == 5, log.read_text()[-3000:]
    said = " ".join(log.read_text().split())
    assert f"lost the Ray Jobs API at {dashboard} (from --address), which answered before" in said, said[-3000:]
    assert "the cluster's head node is gone" in said

    # 3. the cluster again, and the same spec once the lease has expired: it judges only what the store lacks
    cluster.restart()
    wait_for("the lost driver's lease to expire", lambda: not is_held(store, "again"), timeout=120)
    out = submit(cluster, path, tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    counts = report_of(root, "again")["counts"]
    assert counts["requests"] == COMPARISONS and 0 < counts["judged_now"] < COMPARISONS
    assert counts["cached"] + counts["judged_now"] == COMPARISONS
    a = audit(table, calls)
    assert not a.duplicated, f"keys with more than one row: {list(a.duplicated.items())[:5]}"
    assert not a.asked_again, f"committed, then sent to an engine again: {list(a.asked_again)[:5]}"
    assert a.keys == COMPARISONS
