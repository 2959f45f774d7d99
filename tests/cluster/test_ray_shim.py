"""The shim of Ray's private APIs: checked against one Ray version, and still doing what pairank needs of it."""

from __future__ import annotations

import pyarrow as pa

from pairank.cluster.ray_shim import RAY_VERSION_CHECKED, cheap_repartition, ray_version


def test_the_installed_ray_is_the_one_the_shim_was_checked_against():
    assert ray_version() == RAY_VERSION_CHECKED, (
        f"Ray {ray_version()} is installed, but cluster/ray_shim.py was checked against Ray {RAY_VERSION_CHECKED}: "
        "re-read each private API it uses against the new version, then update RAY_VERSION_CHECKED"
    )


def test_a_cheap_repartition_reserves_no_cpu_and_cuts_blocks_of_at_most_the_rows_asked(ray_local):
    import ray

    ds = ray.data.from_arrow([pa.table({"x": list(range(10))}), pa.table({"x": list(range(10, 25))})])
    out = cheap_repartition(ds, 4)
    op = out._logical_plan.dag
    assert op.ray_remote_args["num_cpus"] == 0 and op.compute.size == 1
    blocks = list(out.iter_batches(batch_size=None, batch_format="pyarrow"))
    assert max(b.num_rows for b in blocks) == 4 and len(blocks) >= 7  # no block over the rows asked
    assert pa.concat_tables(blocks).column("x").to_pylist() == list(range(25))


def test_the_head_resource_is_rays_own_and_marks_the_head_of_the_sessions_ray(ray_local):
    import ray
    from ray._common.constants import HEAD_NODE_RESOURCE_NAME

    from pairank.cluster.ray_shim import HEAD_NODE_RESOURCE, free_per_node, head_node_id

    assert HEAD_NODE_RESOURCE == HEAD_NODE_RESOURCE_NAME
    nodes = [n for n in ray.nodes() if n["Alive"]]
    assert head_node_id(nodes) == ray.get_runtime_context().get_node_id()  # a local Ray is its own head
    free = free_per_node()
    assert set(free) == {n["NodeID"] for n in nodes} and all("CPU" in r or r == {} for r in free.values())
