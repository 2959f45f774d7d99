"""Jobs on a Ray cluster of three nodes whose worker nodes are SIGKILLed, in turn, while the jobs run.

The cluster (``tests/multinode.py``): a head that declares no CPU (the driver's node: the job's bookkeeping lives
there) and two worker nodes of 2 CPUs, none able to import pairank or seeing the driver's HOME or environment.
The driver is a ``pairank run --set cluster.address=...`` on this machine, storage the session's S3 server.

Each run loses, one after the other, a worker node that ran the job's tasks (Ray Data's planning and reading, the
rounds' rendering: what they made is in its object store until the driver takes it; pairank keeps them off the
head) and the worker node holding a judge actor, each with every process it has, and a new worker node joins
after each loss. The forwarding is the driver's (threads on the head), so no worker node holds it. Every run exits
0 with one verdict per key, and no comparison committed before a loss is sent to an engine again (the SIMULATED
judge's ``calls_log`` against the store's commits).
"""

from __future__ import annotations

import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pairank.storage.fs import Location
from tests.helpers import write_input
from tests.multinode import (
    DATA_TASK_NAMES,
    HEALTH_CHECKS,
    MARKERS,
    NODE_LOSS,
    PAIRANK,
    audit,
    driver_env,
    holding,
    multinode,
    ran,
    start_run,
    versions,
    wait_done,
    wait_for,
    worker_logs,
    write_spec,
)
from tests.multinode import (
    simulated_spec as spec_on,
)

pytestmark = list(MARKERS)

cluster = multinode(workers=2, worker_cpus=2, head_cpus=0)

JUDGE = ("ray::JudgeActor",)
#: The job's bookkeeping actor (the pool's monitor, the plan's counter), which must live on the head (the driver's
#: node).
BOOKKEEPING = ("ray::Bookkeeper",)
POOL = {"size": 2, "num_cpus": 1, "batch_size": 64}


@pytest.fixture(scope="module")
def inputs(s3_server, summeval_tables):
    """20 SummEval articles x 16 summaries on S3 (4,800 ordered pairs), and 12 articles x 14 systems as a night."""
    full = write_input("s3://pairank/multinode/input", summeval_tables, 20, 16).uri
    candidates, _ = summeval_tables
    contexts = sorted(set(candidates.column("context_id").to_pylist()))[:12]
    systems = sorted(set(candidates.column("system").to_pylist()))
    prefix = Location.of("s3://pairank/multinode/nights")
    mask = pc.and_(
        pc.is_in(candidates.column("context_id"), pa.array(contexts)),
        pc.is_in(candidates.column("system"), pa.array(systems[:14])),
    )
    prefix.join("n1", "candidates.parquet").write_parquet(candidates.filter(mask))
    return {"full": full, "nights": prefix.uri}


def kill_in_turn(cluster, proc, log, table: str) -> list[str]:
    """Once the run has committed, SIGKILL a worker node that ran one of the job's tasks (what they made and the
    driver has not taken is lost with it); then, once the run has committed again, the worker node that holds a
    judge actor. After each kill start a new worker node, and wait until the head has registered it (a start
    that timed out on a loaded machine is tried again) before the next kill: a kill while the replacement is not
    up would leave the run no worker node. Returns the nodes killed. Before each kill the job's bookkeeping is on
    the head, and on no worker node."""
    since = worker_logs(cluster)  # the run's tasks are those begun from here on
    roles = [
        ("the job's blocks", lambda: ran(cluster, DATA_TASK_NAMES, since)),
        ("a judge actor", lambda: holding(cluster, JUDGE)),
    ]
    killed = []
    for what, nodes in roles:
        committed = versions(table) if Location.of(table).exists() else 0
        wait_for(f"a commit before losing {what}", lambda n=committed: versions(table) > n, proc, log, timeout=300)

        node = wait_for(f"a worker node holding {what}", lambda f=nodes: next(iter(f()), None), proc, log, 180)
        kept = [n.name for n in holding(cluster, BOOKKEEPING, workers_only=False)]
        assert kept == ["head"], f"the pool's bookkeeping is on {kept}, not on the head"
        assert not any(holding(cluster, t) for t in BOOKKEEPING), "bookkeeping on a worker node"
        assert cluster.kill(node), node.name
        killed.append(node.name)
        cluster.add_worker()  # a replacement joins while the job goes on
    return killed


def settle(cluster) -> None:
    """Wait until every worker node not killed is registered (the replacements have joined)."""
    for node in [n for n in cluster.nodes if not n.head and n.name not in cluster.killed]:
        cluster.wait_registered(node)


def assert_clean(root: str, name: str, expected: int | None = None) -> None:
    """One row per key of the store, none sent to an engine after its commit; ``expected`` keys."""
    a = audit(f"{root}/store/tables/judgments", f"{root}/calls/{name}")
    assert not a.duplicated, f"keys with more than one row: {list(a.duplicated.items())[:5]}"
    assert not a.asked_again, f"committed, then sent to an engine again: {list(a.asked_again)[:5]}"
    if expected is not None:
        assert a.keys == expected


def report_of(root: str, run: str) -> dict:
    return Location.of(f"{root}/store/runs/{run}/report.json").read_json()


def test_the_nodes_share_nothing_with_the_driver(cluster):
    """Each node's processes have its own HOME and working directory, none of the driver's S3 settings, and a
    Python that cannot import pairank."""
    for node in cluster.nodes:
        raylet = next(p for p in node.processes() if p.name() == "raylet")
        env = raylet.environ()
        assert env["HOME"] == f"{node.folder}/home" and raylet.cwd() == f"{node.folder}/cwd"
        assert not [k for k in env if k.startswith("AWS_")], sorted(env)
        out = subprocess.run(
            [str(cluster.python), "-c", "import pairank"], capture_output=True, env=env, cwd=raylet.cwd()
        )
        assert out.returncode == 1 and b"No module named 'pairank'" in out.stderr
        # the tests' health checks (tests/multinode.py), as `pairank cluster up --health-checks` gives them
        assert env["RAY_health_check_period_ms"] == str(HEALTH_CHECKS[0])
        assert env["RAY_health_check_failure_threshold"] == str(HEALTH_CHECKS[1])
    status = subprocess.run([*PAIRANK, "cluster", "status", str(cluster.folder)], capture_output=True, text=True)
    assert status.returncode == 0, status.stderr
    assert f"address: {cluster.address}" in status.stdout and f"jobs api: {cluster.dashboard}" in status.stdout
    for node in cluster.nodes:
        assert f"{node.name}: up, {node.cpus:g} CPUs, 127.0.0.1, {node.folder}" in status.stdout


def test_a_local_input_or_store_on_several_nodes_is_refused(cluster, tmp_path, summeval_tables, inputs):
    local = write_input(tmp_path / "input", summeval_tables, 1, 2).path
    spec = write_spec(tmp_path, spec_on("local", str(local), "s3://pairank/multinode/local", pool=POOL))
    proc = start_run(cluster, spec, tmp_path)
    assert wait_done(proc, tmp_path / "local.log", 240) == 2
    said = (tmp_path / "local.log").read_text()
    assert f"input {local} is a path on this machine, but the Ray cluster at {cluster.address} has" in said
    assert "use shared storage (s3://bucket/prefix)" in said


@NODE_LOSS
def test_a_static_run_outlives_each_worker_node(cluster, tmp_path, inputs):
    root = "s3://pairank/multinode/static"
    spec = spec_on(
        "static",
        inputs["full"],
        root,
        scheduler={"name": "full"},
        judge={"seconds_per_comparison": 0.004},
        pool=POOL,
        flush_rows=256,
    )
    proc = start_run(cluster, write_spec(tmp_path, spec), tmp_path)
    log = tmp_path / "static.log"
    table = f"{root}/store/tables/judgments"
    killed = kill_in_turn(cluster, proc, log, table)
    assert wait_done(proc, log, 600) == 0, log.read_text()[-3000:]
    assert len(set(killed)) == 2
    report = report_of(root, "static")
    assert report["counts"]["requests"] == report["counts"]["judged_now"] == 4800
    assert report["engines"]["lost"] >= 1 and report["engines"]["dead"] == []
    assert_clean(root, "static", 4800)
    settle(cluster)


@NODE_LOSS
def test_an_adaptive_run_outlives_each_worker_node(cluster, tmp_path, inputs):
    root = "s3://pairank/multinode/greedy"
    spec = spec_on(
        "greedy",
        inputs["full"],
        root,
        scheduler={"name": "pairs_greedy"},
        judge={"seconds_per_comparison": 0.02},
        pool=POOL,
        flush_rows=64,
    )
    proc = start_run(cluster, write_spec(tmp_path, spec), tmp_path)
    log = tmp_path / "greedy.log"
    table = f"{root}/store/tables/judgments"
    kill_in_turn(cluster, proc, log, table)
    assert wait_done(proc, log, 600) == 0, log.read_text()[-3000:]
    report = report_of(root, "greedy")
    assert report["counts"]["requests"] == report["counts"]["judged_now"] > 0
    assert_clean(root, "greedy", report["counts"]["requests"])
    settle(cluster)


@NODE_LOSS
def test_a_night_on_s3_outlives_each_worker_node(cluster, tmp_path, inputs):
    root = "s3://pairank/multinode/nightly"
    spec = spec_on(
        "board",
        inputs["nights"],
        root,
        scheduler={"name": "pairs_anchors"},
        judge={"seconds_per_comparison": 0.02},
        pool=POOL,
        flush_rows=64,
        nightly={"night": "n1", "n_boot": 10},
    )
    proc = start_run(cluster, write_spec(tmp_path, spec), tmp_path)
    log = tmp_path / "board.log"
    table = f"{root}/store/tables/judgments"
    kill_in_turn(cluster, proc, log, table)
    assert wait_done(proc, log, 600) == 0, log.read_text()[-3000:]
    from pairank.storage.commits import CommitLog, NightlyLayout

    (commit,) = CommitLog(NightlyLayout(Location.of(f"{root}/store"), "board")).commits()
    counts = commit.record["counts"]
    assert commit.record["night"] == "n1" and counts["requests"] == counts["judged_now"] > 0
    assert_clean(root, "board", counts["requests"])
    settle(cluster)


def test_a_submitted_job_ships_what_the_nodes_lack_and_ranks_as_one_node_does(
    cluster, tmp_path, summeval_tables, ray_local
):
    """``pairank submit`` to the cluster, whose nodes cannot import pairank and have neither this HOME nor its
    S3 settings: SUCCEEDED, its outputs on S3, the same rankings as the same spec run on one node."""
    small = write_input("s3://pairank/multinode/small", summeval_tables, 3, 6).uri
    spec = spec_on("shipped", small, "s3://pairank/multinode/submit", scheduler={"name": "full"}, pool=POOL)
    path = write_spec(tmp_path, spec)
    out = subprocess.run(
        [*PAIRANK, "submit", str(path), "--address", cluster.dashboard],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=driver_env(),
        timeout=600,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "AWS_ACCESS_KEY_ID" in out.stderr and "pairank-test-secret" not in out.stderr + out.stdout
    shipped = Location.of("s3://pairank/multinode/submit/store/runs/shipped/rankings.parquet").read_parquet()
    # the same spec on one node (this session's local Ray)
    from pairank.jobs.run import run
    from pairank.jobs.specs.job import parse_spec

    alone_spec = {**spec, "output": "s3://pairank/multinode/onenode/store", "judge": {"engine": "simulated"}}
    assert run(parse_spec(alone_spec, "one node")).errors == 0
    alone = Location.of("s3://pairank/multinode/onenode/store/runs/shipped/rankings.parquet").read_parquet()
    order = [("context_id", "ascending"), ("method", "ascending"), ("candidate_id", "ascending")]
    assert shipped.num_rows == alone.num_rows > 0
    assert shipped.sort_by(order).equals(alone.sort_by(order))
