"""The shim of Ray's private APIs: checked against one Ray version, and still doing what pairank needs of it."""

from __future__ import annotations

import pyarrow as pa

from pairank.cluster.ray_shim import RAY_VERSION_CHECKED, ray_version


def test_the_installed_ray_is_the_one_the_shim_was_checked_against():
    assert ray_version() == RAY_VERSION_CHECKED, (
        f"Ray {ray_version()} is installed, but cluster/ray_shim.py was checked against Ray {RAY_VERSION_CHECKED}: "
        "re-read each private API it uses against the new version, then update RAY_VERSION_CHECKED"
    )


def test_the_head_resource_is_rays_own_and_marks_the_head_of_the_sessions_ray(ray_local):
    import ray
    from ray._common.constants import HEAD_NODE_RESOURCE_NAME

    from pairank.cluster.ray_shim import HEAD_NODE_RESOURCE, free_per_node, head_node_id

    assert HEAD_NODE_RESOURCE == HEAD_NODE_RESOURCE_NAME
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert head_node_id(nodes) == ray.get_runtime_context().get_node_id()  # a local Ray is its own head
    free = free_per_node()
    assert set(free) == {n["NodeID"] for n in nodes} and all("CPU" in r or r == {} for r in free.values())


def test_a_stream_over_blocks_starts_while_actors_hold_every_cpu(ray_local):
    """``ray.data.from_arrow`` reads each block's metadata in a task that asks for a whole CPU: with the judge actors
    holding every CPU (three runs on one cluster left half a CPU on each node) it waited for ever. A stream over
    the driver's tables, over blocks put with their metadata, or over handles without it, starts no such task."""
    import threading

    import ray

    from pairank.cluster.executor import Handle, Resources, Stage, put_blocks, stream

    tables = [pa.table({"x": list(range(5))}), pa.table({"x": list(range(5, 12))})]

    @ray.remote
    class Holder:
        def ready(self) -> bool:
            return True

    holder = Holder.options(num_cpus=ray.available_resources().get("CPU", 0)).remote()  # every CPU free now
    try:
        ray.get(holder.ready.remote(), timeout=60)
        assert ray.available_resources().get("CPU", 0) < 1  # a task asking for a CPU is placed nowhere
        handles = put_blocks(tables)
        bare = [Handle(h.ref) for h in handles]  # handles made elsewhere: their metadata read without a CPU
        for blocks in (tables, handles, bare):
            got: list[int] = []
            out = stream(blocks, Stage(_doubled, None, Resources(num_cpus=0)))
            reader = threading.Thread(
                target=lambda o=out, g=got: g.extend(x for t in o.tables() for x in t["x"].to_pylist())
            )
            reader.start()
            reader.join(120)
            assert not reader.is_alive(), f"a stream over {type(blocks[0]).__name__}s waited for a CPU"
            assert sorted(got) == [2 * x for x in range(12)]
    finally:
        ray.kill(holder)


def _doubled(block: pa.Table, _settings) -> pa.Table:
    return pa.table({"x": pa.compute.multiply(block.column("x"), 2)})


def test_a_joining_client_sends_the_token_where_this_machine_has_one_and_the_user_chose_no_mode(tmp_path):
    """Ray's config holds the mode, read when Ray is imported: in a process that imported Ray first, the token is
    sent (Ray's own check says so) where there is one and RAY_AUTH_MODE is unset; a mode the user set is kept; with
    no token anywhere nothing changes. (The joining runs themselves: ``tests/jobs/cli/test_console.py`` and the
    cluster tests, whose drivers have no RAY_AUTH_MODE.)"""
    import os
    import subprocess
    import sys

    code = (
        "import os, ray\n"
        "from ray._private.authentication.authentication_utils import is_token_auth_enabled\n"
        "from pairank.cluster.ray_shim import send_token_where_one_exists as send\n"
        "print(is_token_auth_enabled(), send(), is_token_auth_enabled(), os.environ.get('RAY_AUTH_MODE'))\n"
    )
    base = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    with_token = tmp_path / "with"
    (with_token / ".ray").mkdir(parents=True)
    (with_token / ".ray" / "auth_token").write_text("a" * 64)
    cases = {
        "unset, a token in ~/.ray": ({"HOME": str(with_token)}, "False True True token"),
        "unset, RAY_AUTH_TOKEN": ({"HOME": str(tmp_path), "RAY_AUTH_TOKEN": "b" * 64}, "False True True token"),
        "disabled by the user": ({"HOME": str(with_token), "RAY_AUTH_MODE": "disabled"}, "False False False disabled"),
        "no token anywhere": ({"HOME": str(tmp_path)}, "False False False None"),
    }
    for case, (env, expected) in cases.items():
        out = subprocess.run(
            [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.split("\n")[0] == expected, case
