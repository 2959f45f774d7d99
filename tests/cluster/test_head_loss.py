"""A lost head is come back from.

The cluster (``tests/multinode.py``): a head of 1 CPU and one worker node of 2 CPUs, which cannot import pairank
or see the driver's HOME or environment; storage the session's S3 server. The test loses the head once, while two
drivers run on it, and starts the cluster again. A worker node that joins mid-run and takes up work is
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
from pairank.storage.store.lease import is_held
from tests.helpers import shell_env, write_input
from tests.multinode import (
    MARKERS,
    NODE_LOSS,
    PAIRANK,
    SharedGate,
    audit,
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
#: 5 SummEval articles x 16 summaries (1,200 comparisons, batches of 64).
ARTICLES = 5
COMPARISONS = ARTICLES * 16 * 15
#: Batches each run judges before its gate holds it (the SIMULATED judge's ``hold``): 192 rows, a commit of 128 at
#: least, then the run waits at the gate until the head is lost. Held, not timed: neither run can end first.
JUDGED_BEFORE_LOSS = 3


def committed(root: str) -> bool:
    """Whether the judgment table under ``root`` has a commit after the one that made it (version 0, empty)."""
    return versions(f"{root}/store/tables/judgments") > 1


def report_of(root: str, run: str) -> dict:
    return Location.of(f"{root}/store/runs/{run}/report.json").read_json()


def submit(cluster, spec: Path, folder: Path, wait: bool = True):
    """``pairank submit spec`` to the cluster's Jobs API, forwarding the short lease; output in ``folder``."""
    args = [*PAIRANK, "submit", str(spec), "--address", cluster.dashboard, "--env", "PAIRANK_LEASE_TTL_S"]
    env = shell_env(PAIRANK_LEASE_TTL_S=LEASE_TTL_S)
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
    # SIGKILLed processes end when the kernel next runs them: on a loaded machine a moment later (a state waited
    # for, the bound only a hang's; a process left for good still fails the test)
    wait_for("the head's processes gone", lambda: not head.processes() and not head.strays(), timeout=60)


def test_after_losing_the_head_the_same_spec_resumes_from_the_store(cluster, tmp_path, summeval_tables):
    root, elsewhere = "s3://pairank/headloss", "s3://pairank/headloss-outside"
    store, table, calls = Location.of(f"{root}/store"), f"{root}/store/tables/judgments", f"{root}/calls/again"
    uri = write_input(f"{root}/input", summeval_tables, ARTICLES, 16).uri
    gates = {"again": SharedGate(f"{root}/gate"), "outside": SharedGate(f"{elsewhere}/gate")}
    settings = {
        "scheduler": {"name": "full"},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 64},
        "flush_rows": 128,
    }

    def spec(name: str, at: str) -> dict:
        return spec_on(name, uri, at, judge=gates[name].judge(hold_from=JUDGED_BEFORE_LOSS), **settings)

    path = write_spec(tmp_path, spec("again", root))
    outside = write_spec(tmp_path, spec("outside", elsewhere))  # a store of its own

    # 1. one loss, two drivers: a submitted job's, which runs on the head and dies with it, and a driver that joined
    # from outside, which is told (each run on the worker node's CPUs)
    following = submit(cluster, path, tmp_path, wait=False)
    proc = start_run(cluster, outside, tmp_path, env=shell_env(PAIRANK_HEAD_GONE_S=HEAD_GONE_S))
    logs = {"submit": tmp_path / "submit.log", "outside": tmp_path / "outside.log"}
    wait_for("a commit of the submitted job", lambda: committed(root), following, logs["submit"], 300)
    wait_for("a commit of the run from outside", lambda: committed(elsewhere), proc, logs["outside"], 300)
    # each run held at its gate, a batch waiting there: the loss falls while both run
    wait_for("the submitted job at its gate", lambda: gates["again"].arrived() > JUDGED_BEFORE_LOSS, following)
    wait_for("the run from outside at its gate", lambda: gates["outside"].arrived() > JUDGED_BEFORE_LOSS, proc)
    address, dashboard = cluster.address, cluster.dashboard
    lose_the_head(cluster)
    assert is_held(store, "again")  # the lost driver released nothing
    # the driver from outside ends with exit 5 naming the cluster, and gives its name up
    assert wait_done(proc, logs["outside"], 300) == 5, logs["outside"].read_text()[-3000:]
    said = " ".join(logs["outside"].read_text().split())
    assert f"pairank: error: lost the Ray cluster at {address}" in said, said[-3000:]
    assert "its head node is gone" in said and "run or submit the same spec" in said
    assert not is_held(Location.of(f"{elsewhere}/store"), "outside")
    # the submitting command ends with exit 5 naming the Jobs API
    assert wait_done(following, logs["submit"], 300) == 5, logs["submit"].read_text()[-3000:]
    said = " ".join(logs["submit"].read_text().split())
    assert f"lost the Ray Jobs API at {dashboard} (from --address), which answered before" in said, said[-3000:]
    assert "the cluster's head node is gone" in said

    # 2. the cluster again, and the same spec once the lease has expired: it judges only what the store lacks
    # (its gate open now: the rerun is not held)
    gates["again"].release()
    cluster.restart()
    # a poll of the lease's state; the 20 s TTL is the subject (time itself), 120 s bounds a hang
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
