"""The local cluster's settings that start nothing: Ray's health checks given to its nodes (``pairank cluster up
--health-checks``), kept in its state file for ``pairank cluster add``, and refused with a clear message when
malformed; and how a node's ``ray start`` process is told from others. The nodes started with them are
``tests/cluster/test_multinode.py``'s."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pairank.cluster.local.nodes import ClusterError, LocalCluster, Node, health_checks


def test_a_cluster_s_health_checks_reach_every_node_s_environment_and_ray_s_own_stay_otherwise(tmp_path):
    node = Node("worker-1", "127.0.0.1", str(tmp_path / "worker-1"))
    fast = LocalCluster(tmp_path, health_checks=(500, 3))._node_env(node)
    assert fast["RAY_health_check_period_ms"] == "500" and fast["RAY_health_check_failure_threshold"] == "3"
    assert fast["HOME"] == f"{node.folder}/home"
    default = LocalCluster(tmp_path)._node_env(node)
    assert not [k for k in default if k.startswith("RAY_health_check")]


def test_the_state_file_keeps_them_for_a_node_added_later(tmp_path):
    LocalCluster(tmp_path, port=6390, dashboard_port=8266, health_checks=(250, 4)).save()
    assert LocalCluster.load(tmp_path).health_checks == (250, 4)
    LocalCluster(tmp_path, port=6390, dashboard_port=8266).save()
    assert LocalCluster.load(tmp_path).health_checks is None


@pytest.mark.parametrize("value", ["500", "500:", ":3", "0:3", "500:0", "half:3", "500:3:1", "-1:3"])
def test_a_malformed_value_is_refused_naming_the_form(value):
    with pytest.raises(ClusterError, match=r"expected PERIOD_MS:FAILURES, two whole numbers of at least 1"):
        health_checks(value)


def test_the_command_takes_period_and_failures_and_refuses_anything_else(tmp_path):
    assert health_checks("500:3") == (500, 3)
    out = subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "cluster", "up", str(tmp_path), "--health-checks", "fast"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2
    assert "--health-checks: health checks 'fast': expected PERIOD_MS:FAILURES" in out.stderr
    assert not (tmp_path / "cluster.json").exists()


def test_each_node_keeps_idle_workers_beyond_one_per_cpu(tmp_path):
    """A node of the local cluster keeps :data:`~pairank.cluster.runtime.KEPT_WORKERS` worker processes beyond its
    CPUs before Ray ends idle ones, as a local Ray does (``tests/cluster/test_runtime.py``)."""
    from pairank.cluster.runtime import KEPT_WORKERS

    cluster = LocalCluster(tmp_path)
    worker = cluster._node_env(Node("worker-1", "127.0.0.1", str(tmp_path / "w"), cpus=2))
    head = cluster._node_env(Node("head", "127.0.0.1", str(tmp_path / "h"), cpus=0))
    assert worker["RAY_num_workers_soft_limit"] == str(2 + KEPT_WORKERS)
    assert head["RAY_num_workers_soft_limit"] == str(KEPT_WORKERS)


def test_a_node_s_process_is_told_from_an_exited_one_and_from_another_s(tmp_path, monkeypatch):
    """A node's ``ray start`` is its process while it runs, though its command line is still empty (the kernel
    sets it late in ``exec``: 4 of 300 processes read at once under load showed none); an exited one (a zombie) is
    not, nor a process whose command line names another temp dir (its id reused)."""
    import psutil

    ray_dir = str(tmp_path / "ray")
    alive = "import signal; signal.pause()"  # runs until the test kills it, not for a time
    here = subprocess.Popen([sys.executable, "-c", alive, f"--temp-dir={ray_dir}"])
    other = subprocess.Popen([sys.executable, "-c", alive, "--temp-dir=/elsewhere"])
    done = subprocess.Popen([sys.executable, "-c", "pass", f"--temp-dir={ray_dir}"])
    try:
        gone = psutil.Process(done.pid)
        deadline = time.monotonic() + 30
        while gone.status() != psutil.STATUS_ZOMBIE:  # exited, not reaped (psutil's wait() would reap it)
            assert time.monotonic() < deadline, gone.status()  # 30 s: a bound on a hang
            time.sleep(0.05)  # a poll of the state waited for, not a window
        node = Node("worker-1", "127.0.0.1", str(tmp_path), ray_dir=ray_dir, pid=here.pid)
        assert [p.pid for p in node.processes()] == [here.pid]
        assert Node("worker-2", "127.0.0.1", str(tmp_path), ray_dir=ray_dir, pid=other.pid).processes() == []
        assert Node("worker-3", "127.0.0.1", str(tmp_path), ray_dir=ray_dir, pid=done.pid).processes() == []
        monkeypatch.setattr(psutil.Process, "cmdline", lambda self: [])  # the moment inside exec
        assert [p.pid for p in node.processes()] == [here.pid]
    finally:
        for proc in (here, other, done):
            proc.kill()
            proc.wait()


def test_a_machine_without_a_ray_token_gets_one_made_once(tmp_path, monkeypatch):
    """`pairank cluster up` on a machine that never ran Ray: the token is made as `ray get-auth-token --generate`
    makes it (Ray's own command, run for real), in this HOME's ~/.ray, and read, not made again, after."""
    from pairank.cluster.local.node_setup import auth_token, ensure_auth_token

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    assert auth_token() is None
    token = ensure_auth_token()
    path = tmp_path / ".ray" / "auth_token"
    assert token and len(token) == 64 and path.read_text().strip() == token
    made = path.stat().st_mtime_ns
    assert ensure_auth_token() == token and path.stat().st_mtime_ns == made
    node = LocalCluster(tmp_path / "cluster")._node_env(Node("head", "127.0.0.1", str(tmp_path / "h"), cpus=0))
    assert node["RAY_AUTH_MODE"] == "token" and node["RAY_AUTH_TOKEN"] == token


def test_the_token_a_ray_token_path_names_is_the_one_the_nodes_get(tmp_path, monkeypatch):
    """``RAY_AUTH_TOKEN_PATH``, where Ray's clients look before ``~/.ray``: its token goes to the nodes and none is
    made beside it; a path that holds no token is an error naming it, not nodes started without authentication."""
    from pairank.cluster.local.node_setup import ensure_auth_token

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("RAY_AUTH_TOKEN", raising=False)
    named = tmp_path / "secrets" / "ray-token"
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(named))
    with pytest.raises(ClusterError, match=f"RAY_AUTH_TOKEN_PATH names {named}, which holds none"):
        ensure_auth_token()
    named.parent.mkdir()
    named.write_text("b" * 64 + "\n")
    assert ensure_auth_token() == "b" * 64
    assert not (tmp_path / ".ray").exists()
    node = LocalCluster(tmp_path / "cluster")._node_env(Node("head", "127.0.0.1", str(tmp_path / "h"), cpus=0))
    assert node["RAY_AUTH_MODE"] == "token" and node["RAY_AUTH_TOKEN"] == "b" * 64


def test_a_token_that_cannot_be_made_is_a_clear_error_naming_the_command(tmp_path, monkeypatch):
    """Where Ray's own command cannot write the token (here ``~/.ray`` is a file, not a folder), ``pairank cluster
    up`` says which command made none, where, and what to do, instead of a bare CalledProcessError."""
    from pairank.cluster.local.node_setup import ensure_auth_token

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".ray").write_text("not a folder")
    with pytest.raises(ClusterError, match=r"get-auth-token --generate` made none in .*\.ray \(.+\); give one as"):
        ensure_auth_token()
