"""Placement rules of a judge pool, on lists of nodes (no Ray): what a node must hold, and which nodes count."""

from __future__ import annotations

import pytest

from pairank.cluster.pools.placement import Placement, PlacementError, bundles, check_fits, usable
from pairank.cluster.pools.scaling import room_for

HEAD = ("head", True, {"CPU": 8.0})
GPU2 = ("w1", False, {"CPU": 4.0, "GPU": 2.0})
GPU1 = ("w2", False, {"CPU": 4.0, "GPU": 1.0})


def test_an_engine_fits_when_one_usable_node_holds_all_its_gpus():
    check_fits([HEAD, GPU2, GPU1], 1, 1, 2, False, "c")
    check_fits([HEAD, GPU1], 1, 0.5, 1, False, "c")
    with pytest.raises(PlacementError, match="one engine needs 3 GPUs on one node, but .* have at most 2"):
        check_fits([HEAD, GPU2, GPU1], 1, 1, 3, False, "c")  # 3 GPUs in the cluster, but not on one node


def test_the_head_counts_only_when_asked_or_alone():
    assert usable([HEAD, GPU1], on_head=False) == [GPU1]
    with pytest.raises(PlacementError, match=r"pool.num_cpus 6: one engine needs 6 CPUs .* at most 4"):
        check_fits([HEAD, GPU1], 6, 0, 1, False, "c")
    check_fits([HEAD, GPU1], 6, 0, 1, True, "c")  # the head's 8 CPUs, asked for
    check_fits([HEAD], 6, 0, 1, False, "c")  # a Ray of one node is its own head


def test_a_gpu_pool_on_a_cluster_without_gpus_names_the_setting():
    with pytest.raises(PlacementError, match=r"^pool.num_gpus 1: one engine needs 1 GPUs on one node, but .* 0"):
        check_fits([HEAD], 1, 1, 1, False, "this job's Ray")


def test_an_engines_group_has_a_gpu_bundle_per_rank_and_its_cpus_in_the_first():
    assert bundles(2, 1, 2) == [{"GPU": 1, "CPU": 2}, {"GPU": 1}]
    assert Placement(1, 1, 4).grouped and not Placement(1, 1, 1).grouped and not Placement(1, 0, 4).grouped
    assert Placement(1, 1, 4).bundles() == [{"CPU": 1, "GPU": 4}]  # what the autoscaler is asked for, per engine
    assert Placement(1, 1, avoid="abc").selector() == {"ray.io/node-id": "!abc"}


def test_a_range_pool_grows_only_onto_a_node_that_holds_an_engine():
    free = [("w1", False, {"CPU": 1.0, "GPU": 1.0}), ("w2", False, {"CPU": 1.0, "GPU": 1.0})]
    cluster = {"CPU": 3.0, "GPU": 2.0}
    assert room_for(cluster, 1, 1, nodes=free)
    assert not room_for(cluster, 1, 1, nodes=free, ranks=2)  # two free GPUs, on two nodes
    assert not room_for(cluster, 1, 1, nodes=[])  # room on the head only, which the pool keeps off
