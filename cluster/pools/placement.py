"""Where a judge pool's actors go: the GPUs each holds, an engine's group of GPUs on one node, and not the head.

Ray schedules on declared resources, so the rules below are the same on a cluster of GPU machines and on nodes
started with ``--num-gpus N`` that have none (the tests' nodes):

- **GPUs per actor.** An actor reserves ``num_gpus`` (``pool.num_gpus``): 1 puts one actor on each GPU, 0.5 two
  on each (Ray gives both the same GPU id).
- **An engine of several ranks** (tensor x pipeline parallel, the engine's ``ranks`` hook) with GPUs: each actor
  gets a placement group of its own, one bundle per rank with one GPU each, all on one node (``STRICT_PACK``).
  The actor reserves no GPU itself: it sits in the first bundle with its CPUs, and captures the group for what
  it starts, so vLLM's Ray executor puts one worker in each GPU bundle (``ray.data.llm``'s vLLM stage places its
  engines the same way). The group is removed with its actor; a node lost with a group takes the group with it,
  and Ray places it again, whole, on a node that holds it.
- **Not on the head.** On a cluster of several nodes, unless ``on_head``, the actors (and their groups' bundles)
  carry a label selector that excludes the head node by its id (``ray.io/node-id``, a label every Ray 2.60 node
  has): the head runs the driver and the job's bookkeeping, and a judge there would take the cores the job needs.
  Measured with Ray 2.60 on the tests' cluster: without it, an actor of a driver that joins through the head goes
  to the head while it has room (Ray prefers the caller's node). A Ray of one node is its own head and holds
  them.

:func:`check_fits` says before judging, naming the setting, when no node the pool may use holds one engine (a Ray
actor or group that no node can hold waits for ever).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: A node of the cluster as placement sees it: its id, whether it is the head, and its resources (total or free).
Node = tuple[str, bool, Mapping[str, float]]
#: The label every Ray node carries with its own id (Ray 2.60).
NODE_ID_LABEL = "ray.io/node-id"


class PlacementError(ValueError):
    """No node the pool may use holds one engine: the message names the setting and what the nodes have."""


def grouped(num_gpus: float, ranks: int) -> bool:
    """Whether an engine gets a placement group: several ranks, on GPUs.

    >>> grouped(1, 4), grouped(1, 1), grouped(0, 4)
    (True, False, False)
    """
    return ranks > 1 and num_gpus > 0


def engine_needs(num_cpus: float, num_gpus: float, ranks: int) -> dict[str, float]:
    """What one engine takes of one node: the actor's CPUs and every rank's GPUs.

    >>> engine_needs(1, 1, 4), engine_needs(0.5, 0.5, 1), engine_needs(2, 0, 2)
    ({'CPU': 1, 'GPU': 4}, {'CPU': 0.5, 'GPU': 0.5}, {'CPU': 2, 'GPU': 0})
    """
    return {"CPU": num_cpus, "GPU": num_gpus * ranks if num_gpus else 0}


def bundles(num_cpus: float, num_gpus: float, ranks: int) -> list[dict[str, float]]:
    """The bundles of an engine's placement group: one per rank with its GPU; the actor's CPUs in the first.

    >>> bundles(1, 1, 3)
    [{'GPU': 1, 'CPU': 1}, {'GPU': 1}, {'GPU': 1}]
    """
    first = {"GPU": num_gpus, **({"CPU": num_cpus} if num_cpus else {})}
    return [first] + [{"GPU": num_gpus} for _ in range(ranks - 1)]


def usable(nodes: list[Node], on_head: bool) -> list[Node]:
    """The nodes a pool may place actors on: all of them, or on a cluster of several nodes all but the head.

    >>> nodes = [("h", True, {"CPU": 2}), ("w", False, {"CPU": 2})]
    >>> [n[0] for n in usable(nodes, on_head=False)], [n[0] for n in usable(nodes, True)]
    (['w'], ['h', 'w'])
    >>> [n[0] for n in usable(nodes[:1], on_head=False)]  # a Ray of one node is its own head
    ['h']
    """
    if on_head or len(nodes) <= 1:
        return list(nodes)
    return [n for n in nodes if not n[1]]


def holds(resources: Mapping[str, float], needs: Mapping[str, float]) -> bool:
    """Whether a node's ``resources`` cover ``needs`` (a need of 0 always is).

    >>> holds({"CPU": 2, "GPU": 2}, {"CPU": 1, "GPU": 2}), holds({"CPU": 2}, {"CPU": 1, "GPU": 1})
    (True, False)
    """
    return all(resources.get(k, 0) >= v for k, v in needs.items() if v)


def check_fits(nodes: list[Node], num_cpus: float, num_gpus: float, ranks: int, on_head: bool, where: str) -> None:
    """Raise :class:`PlacementError` when no node the pool may use (:func:`usable`) holds one engine (its nodes'
    total resources): the message names the settings and what the largest node has. ``where``: the cluster, as
    the message names it.

    >>> nodes = [("h", True, {"CPU": 4.0}), ("w1", False, {"CPU": 2.0, "GPU": 2.0})]
    >>> check_fits(nodes, 1, 1, 2, False, "the Ray cluster at 10.0.0.1:6379")
    >>> try:
    ...     check_fits(nodes, 1, 1, 4, False, "the Ray cluster at 10.0.0.1:6379")
    ... except PlacementError as exc:
    ...     print(exc)
    judge.tensor_parallel_size x pipeline_parallel_size 4 with pool.num_gpus 1: one engine needs 4 GPUs on one \
node, but the nodes the pool may use (2 nodes but the head, pool.on_head false) have at most 2 (the Ray cluster \
at 10.0.0.1:6379)
    """
    needs = engine_needs(num_cpus, num_gpus, ranks)
    candidates = usable(nodes, on_head)
    if any(holds(resources, needs) for _, _, resources in candidates):
        return
    which = (
        f"{len(nodes)} nodes but the head, pool.on_head false"
        if len(candidates) < len(nodes)
        else f"{len(nodes)} node{'s' * (len(nodes) != 1)}"
    )
    if not candidates:
        raise PlacementError(
            f"pool.on_head false: no node of {where} but the head ({which}) can hold a judge actor; start a worker "
            "node or set pool.on_head: true"
        )
    for kind, setting in (("GPU", "pool.num_gpus"), ("CPU", "pool.num_cpus")):
        most = max(r.get(kind, 0) for _, _, r in candidates)
        if needs[kind] and most < needs[kind]:
            if kind == "GPU" and ranks > 1:
                setting = f"judge.tensor_parallel_size x pipeline_parallel_size {ranks} with pool.num_gpus"
            raise PlacementError(
                f"{setting} {num_gpus if kind == 'GPU' else num_cpus:g}: one engine needs {needs[kind]:g} "
                f"{kind}s on one node, but the nodes the pool may use ({which}) have at most {most:g} ({where})"
            )
    raise PlacementError(
        f"pool.num_cpus {num_cpus:g} and pool.num_gpus {num_gpus:g}: no node the pool may use ({which}) has both "
        f"{needs['CPU']:g} CPUs and {needs['GPU']:g} GPUs ({where})"
    )


def cluster_nodes() -> list[Node]:
    """The live nodes of the joined Ray: id, whether the head, total resources."""
    import ray

    from pairank.cluster.ray_shim import head_node_id

    alive = [n for n in ray.nodes() if n.get("Alive")]
    head = head_node_id(alive)
    return [(n["NodeID"], n["NodeID"] == head, n.get("Resources", {})) for n in alive]


def avoided_head(on_head: bool) -> str | None:
    """The head's id when a pool keeps off it (a cluster of several nodes, ``on_head`` false), else None."""
    nodes = cluster_nodes()
    if on_head or len(nodes) <= 1:
        return None
    return next((node for node, head, _ in nodes if head), None)


def free_nodes(avoid: str | None) -> list[Node]:
    """Each live node's free resources, but the node ``avoid`` names."""
    from pairank.cluster.ray_shim import free_per_node

    return [(node, False, free) for node, free in free_per_node().items() if node != avoid]


def room_on_a_node(free: list[Node], needs: Mapping[str, float]) -> bool:
    """Whether one of the nodes (their free resources) holds ``needs``.

    >>> room_on_a_node([("a", False, {"GPU": 1.0}), ("b", False, {"GPU": 1.0})], {"GPU": 2})
    False
    """
    return any(holds(resources, needs) for _, _, resources in free)


@dataclass
class Placement:
    """How the actors of one pool are placed (see the module's docstring); made on the driver as the pool starts.

    ``avoid``: the head node's id when the pool keeps off it (None: any node).
    """

    num_cpus: float
    num_gpus: float
    ranks: int = 1
    avoid: str | None = None
    groups: dict[int, Any] = field(default_factory=dict)  # slot -> its placement group, while it has one

    @property
    def grouped(self) -> bool:
        return grouped(self.num_gpus, self.ranks)

    def selector(self) -> dict[str, str]:
        """The label selector that keeps an actor or bundle off the head (empty: anywhere)."""
        return {NODE_ID_LABEL: f"!{self.avoid}"} if self.avoid else {}

    def options(self, slot: int) -> dict[str, Any]:
        """The Ray options of the actor of ``slot``: its CPUs and GPUs, or a placement group of its own (made
        here) that it reserves them in, and the selector that keeps it off the head."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        if not self.grouped:
            options: dict[str, Any] = {"num_cpus": self.num_cpus}
            if self.num_gpus:
                options["num_gpus"] = self.num_gpus
            if self.avoid:
                options["label_selector"] = self.selector()
            return options
        specs = bundles(self.num_cpus, self.num_gpus, self.ranks)
        selectors = [self.selector() for _ in specs] if self.avoid else None
        group = ray.util.placement_group(specs, strategy="STRICT_PACK", bundle_label_selector=selectors)
        self.groups[slot] = group
        strategy = PlacementGroupSchedulingStrategy(
            group, placement_group_bundle_index=0, placement_group_capture_child_tasks=True
        )
        return {"num_cpus": self.num_cpus, "num_gpus": 0, "scheduling_strategy": strategy}

    def release(self, slot: int) -> None:
        """Remove the placement group of ``slot``'s actor (stopped), if it has one."""
        import ray

        group = self.groups.pop(slot, None)
        if group is not None:
            ray.util.remove_placement_group(group)

    def release_all(self) -> None:
        for slot in list(self.groups):
            self.release(slot)

    def needs(self) -> dict[str, float]:
        return engine_needs(self.num_cpus, self.num_gpus, self.ranks)

    def bundles(self) -> list[dict[str, float]]:
        """What to ask Ray's autoscaler for, for one engine: one bundle of all it takes of its node."""
        return [{k: v for k, v in self.needs().items() if v}]
