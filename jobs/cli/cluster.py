"""``pairank cluster``: a Ray cluster of several nodes on this machine, to try a job across nodes
(:mod:`pairank.cluster.local.nodes`; docs/cluster.md, "Several nodes")."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _say(msg: str) -> None:
    print(f"[pairank] {msg}", file=sys.stderr, flush=True)


def _nodes(cluster) -> None:
    for node in cluster.nodes:
        alive = "up" if node.processes() else "gone"
        gpus = f", {node.gpus:g} GPUs" if node.gpus else ""
        print(f"{node.name}: {alive}, {node.cpus:g} CPUs{gpus}, {node.ip}, {node.folder}")


def _health_checks(value: str) -> tuple[int, int]:
    from pairank.cluster.local.nodes import health_checks_option  # imported when the option is given only

    return health_checks_option(value)


def cmd_cluster_up(args: argparse.Namespace) -> int:
    from pairank.cluster.local.nodes import LocalCluster

    cluster = LocalCluster(
        Path(args.dir),
        workers=args.workers,
        head_cpus=args.head_cpus,
        worker_cpus=args.worker_cpus,
        worker_gpus=args.worker_gpus,
        health_checks=args.health_checks,
    )
    _say(f"starting a head and {args.workers} worker node{'s' * (args.workers != 1)} under {args.dir}")
    cluster.start()
    _nodes(cluster)
    print(f"address: {cluster.address}        pairank run SPEC --set cluster.address={cluster.address}")
    print(f"jobs api: {cluster.dashboard}   pairank submit SPEC --address {cluster.dashboard}")
    _say("pairank sends Ray's token of this machine; Ray's own clients need RAY_AUTH_MODE=token; data on s3://")
    _say(f"stop it with: pairank cluster down {args.dir}")
    return 0


def cmd_cluster_status(args: argparse.Namespace) -> int:
    from pairank.cluster.local.nodes import LocalCluster

    cluster = LocalCluster.load(args.dir)
    _nodes(cluster)
    print(f"address: {cluster.address}")
    print(f"jobs api: {cluster.dashboard}")
    return 0


def cmd_cluster_add(args: argparse.Namespace) -> int:
    from pairank.cluster.local.nodes import LocalCluster

    cluster = LocalCluster.load(args.dir)
    node = cluster.add_worker(cpus=args.cpus, gpus=args.gpus)
    print(f"{node.name} joined")
    return 0


def cmd_cluster_kill(args: argparse.Namespace) -> int:
    from pairank.cluster.local.nodes import LocalCluster

    cluster = LocalCluster.load(args.dir)
    killed = cluster.kill(args.node)
    print(f"{args.node}: {len(killed)} processes killed" if killed else f"{args.node}: nothing running")
    return 0


def cmd_cluster_down(args: argparse.Namespace) -> int:
    from pairank.cluster.local.nodes import LocalCluster

    LocalCluster.load(args.dir).stop()
    _say(f"stopped the cluster of {args.dir}")
    return 0


def add_parser(sub) -> None:
    """``pairank cluster up|status|add|kill|down``."""
    cl = sub.add_parser(
        "cluster",
        help="a Ray cluster of several nodes on this machine (to try jobs across nodes)",
        description="A Ray head and worker nodes on this machine, each a Ray node of its own with its own HOME and "
        "working directory, a Python without pairank (jobs ship it) and none of this shell's environment. "
        "docs/cluster.md, 'Several nodes'.",
    )
    csub = cl.add_subparsers(dest="cluster_command", required=True)
    up = csub.add_parser("up", help="start a head and worker nodes; prints the address to join and the Jobs API")
    up.add_argument("dir", help="the cluster's folder (its nodes' homes, logs, Ray temp dirs; created)")
    up.add_argument("--workers", type=int, default=2, help="worker nodes")
    up.add_argument("--head-cpus", type=float, default=0, help="CPUs the head declares (0: no judge actor there)")
    up.add_argument("--worker-cpus", type=float, default=2, help="CPUs each worker node declares")
    up.add_argument("--worker-gpus", type=float, default=0, help="GPUs each worker node declares (Ray resources only)")
    up.add_argument(
        "--health-checks",
        type=_health_checks,
        default=None,
        metavar="PERIOD_MS:FAILURES",
        help="Ray's checks of the nodes: every PERIOD_MS, a node dead after FAILURES failed in a row (default: "
        "Ray's 3000:5, a lost node seen about 14 s later; 500:3 sees it in about 2 s)",
    )
    up.set_defaults(fn=cmd_cluster_up)
    st = csub.add_parser("status", help="the nodes of the cluster in DIR")
    st.add_argument("dir")
    st.set_defaults(fn=cmd_cluster_status)
    add = csub.add_parser("add", help="start one more worker node (a node joining the running cluster)")
    add.add_argument("dir")
    add.add_argument("--cpus", type=float, default=None, help="CPUs it declares (default: as the others)")
    add.add_argument("--gpus", type=float, default=None, help="GPUs it declares (default: as the others)")
    add.set_defaults(fn=cmd_cluster_add)
    kill = csub.add_parser("kill", help="SIGKILL every process of one node at once (a machine lost)")
    kill.add_argument("dir")
    kill.add_argument("node", help="its name, as `status` lists it (worker-1, ...)")
    kill.set_defaults(fn=cmd_cluster_kill)
    down = csub.add_parser("down", help="stop every node of the cluster in DIR")
    down.add_argument("dir")
    down.set_defaults(fn=cmd_cluster_down)
