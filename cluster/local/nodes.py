"""A Ray cluster of several nodes on this machine: a head and worker nodes that share no more than real ones would.

``pairank cluster up`` starts one (and ``pairank cluster down`` stops it); the tests start one per module
(``tests/multinode.py``). Each node is its own ``ray start --block`` process tree, with its own Ray temp dir,
ports, HOME and working directory under the cluster's folder. What a node of a real cluster would not share
with the driver, these nodes do not share either:

- **no pairank**: each node runs a Python environment of its own (``node_venv``), whose only ``.pth`` line
  points at the site-packages that hold Ray, vLLM and the other dependencies. Python does not read the ``.pth``
  files of a folder added by a ``.pth``, so an editable install of pairank (a ``.pth`` there) is not seen:
  ``import pairank`` fails on the nodes unless the job ships it (``py_modules``);
- **no HOME**: ``~`` of a node is ``<node>/home``: no ``~/.cache/pairank`` (the embedded model), no
  ``~/.ray/auth_token`` (the Ray token is given as ``RAY_AUTH_TOKEN``);
- **no environment**: a node starts with a few variables only (``node_env``): ``PATH`` to its own
  interpreter, ``HOME``, Ray's token; S3 settings reach its workers only through the job's runtime environment.

What a node is given before its start is :mod:`pairank.cluster.local.node_setup`'s.

Networking: every node is started with ``--node-ip-address 127.0.0.1`` (with Ray's several-nodes-on-one-machine
setting, Ray registers it under this machine's own address), a raylet of its own with ports of its own (found free
at start). Network namespaces (a veth per node, an address each) would make the nodes' addresses differ too, but a
node in one does not reach this machine's 127.0.0.1, where the storage (a local SeaweedFS, the tests' S3 server)
listens: the nodes would need routes and a storage endpoint that is not loopback, which the tests' rule (traffic on
127.0.0.1 only) does not allow.

Losing a node: :meth:`LocalCluster.kill` SIGKILLs the node's whole process tree at once (its ``ray start``, raylet,
agents and every worker process), as a machine that vanishes, and again what its raylet started while it was killed.
Only the processes this cluster started are ever signalled, by process id, and checked to be ours (their command
line names the cluster's folder) before a later ``down``.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pairank.cluster.local.node_setup import (
    ClusterError,
    auth_token,
    ensure_auth_token,
    imports_pairank,
    node_env,
    node_venv,
    ray_dir,
    site_folders,
)
from pairank.cluster.runtime import NODE_START_TIMEOUT, workers_kept

#: The file in the cluster's folder that says what runs (read by ``pairank cluster down``).
STATE = "cluster.json"
LOOPBACK = "127.0.0.1"
#: Starts of a node that failed for a reason worth another start (:data:`RETRYABLE`) before giving up.
STARTS = 5
#: Kills of a lost node's processes at most, each of what is left of it (a worker started meanwhile, :meth:`kill`).
KILL_PASSES = 5
#: What a ``ray start`` that failed for a reason worth another start says: its raylet did not register in Ray's
#: 30 s (a loaded machine), or a port chosen free was taken meanwhile (by another program of this machine).
RETRYABLE = (NODE_START_TIMEOUT, "is trying to use a port number", "address already in use")
#: The line a node's ``ray start`` log gets when its start is tried again.
RETRIED = "[pairank cluster] the start failed"


def health_checks(value: str) -> tuple[int, int]:
    """``PERIOD_MS:FAILURES`` (``pairank cluster up --health-checks``) as :attr:`LocalCluster.health_checks`."""
    period, sep, failures = value.partition(":")
    try:
        checks = (int(period), int(failures))
    except ValueError:
        checks = (0, 0)
    if not sep or min(checks) < 1:
        raise ClusterError(
            f"health checks {value!r}: expected PERIOD_MS:FAILURES, two whole numbers of at least 1 (e.g. 500:3)"
        )
    return checks


def health_checks_option(value: str) -> tuple[int, int]:
    """:func:`health_checks` as an argparse ``type`` (its message becomes the option's error)."""
    import argparse

    try:
        return health_checks(value)
    except ClusterError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def free_ports(count: int, avoid: set[int] | frozenset[int] = frozenset(), host: str = LOOPBACK) -> list[int]:
    """``count`` ports free now, none of ``avoid``: held open together while chosen, so no two are the same (ports
    found one at a time can repeat, and Ray refuses a node whose components are given one port twice)."""
    held: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket()
            held.append(s)
            s.bind((host, 0))
            port = s.getsockname()[1]
            if port not in avoid and port not in ports:
                ports.append(port)
    finally:
        for s in held:
            s.close()
    return ports


@dataclass
class Node:
    """One Ray node of the cluster: its name, address, folder, and the ``ray start --block`` process."""

    name: str
    ip: str
    folder: str
    ray_dir: str = ""  # Ray's temp dir of the node (its sockets' paths must be short)
    pid: int = 0
    attempts: int = 1  # starts so far (a start that timed out is tried again)
    cpus: float = 1
    gpus: float = 0
    resources: dict[str, float] = field(default_factory=dict)

    @property
    def head(self) -> bool:
        return self.name == "head"

    def strays(self) -> list:
        """The node's processes that left its ``ray start`` process tree (its ``ray start`` ended while they ran):
        found by the node's own Ray temp dir on their command line."""
        import psutil

        found = []
        for p in psutil.process_iter(["cmdline"]):
            with contextlib.suppress(psutil.Error):
                if self.ray_dir and any(_names(arg, self.ray_dir) for arg in p.info["cmdline"] or ()):
                    found.append(p)
        return found

    def node_id(self) -> str | None:
        """The Ray node id of the node's raylet (from its command line), or None while it has none."""
        for p in self.processes():
            with contextlib.suppress(Exception):  # gone meanwhile
                if p.name() == "raylet":
                    return next((a.split("=", 1)[1] for a in p.cmdline() if a.startswith("--node_id=")), None)
        return None

    def processes(self) -> list:
        """The node's processes (its ``ray start`` and everything below it) that are still ours.

        A ``ray start`` a moment old may show no command line yet: the kernel sets it late in ``exec``, after the
        process that started it has gone on. That is still ours (under load, a node taken for gone then was both
        an error and a node left running); an exited one (a zombie until reaped) is not: psutil raises
        ``ZombieProcess``, a ``NoSuchProcess``, for its command line."""
        import psutil

        try:
            top = psutil.Process(self.pid)
            said = top.cmdline()
            if said and f"--temp-dir={self.ray_dir}" not in said:
                return []  # the id was reused by another process: not ours
            return [top, *top.children(recursive=True)]
        except psutil.NoSuchProcess:
            return []


@dataclass
class LocalCluster:
    """A Ray head and ``workers`` worker nodes on this machine, under ``folder`` (see the module's docstring).

    ``head_cpus``/``worker_cpus``/``worker_gpus``: what each node declares (GPUs are declared resources only:
    Ray schedules on them, nothing checks a device). ``env``: more variables every node starts with. ``port`` and
    ``dashboard_port``: the head's GCS and Jobs API ports (0: free ones found at start). ``health_checks``: Ray's
    checks of each node, ``(period_ms, failures)``: the head checks every node every ``period_ms`` and counts it
    dead after ``failures`` failed checks in a row; None keeps Ray's (3,000 ms x 5: a lost node is marked dead
    about 14 s later, BENCHMARKS.md §23). A node that is gone fails a check at once (its port refuses); a slow
    one fails only by Ray's timeout of 10 s a check, so short periods still leave a loaded node its 10 s.
    """

    folder: Path
    workers: int = 2
    head_cpus: float = 1
    worker_cpus: float = 2
    worker_gpus: float = 0
    object_store_bytes: int = 300_000_000
    env: dict[str, str] = field(default_factory=dict)
    nodes: list[Node] = field(default_factory=list)
    port: int = 0
    dashboard_port: int = 0
    killed: set[str] = field(default_factory=set)  # nodes lost on purpose (kill)
    health_checks: tuple[int, int] | None = None

    # ---- addresses
    @property
    def head_ip(self) -> str:
        return LOOPBACK

    @property
    def address(self) -> str:
        """The GCS address a driver joins (``cluster.address``)."""
        return f"{self.head_ip}:{self.port}"

    @property
    def dashboard(self) -> str:
        """The Jobs API (``pairank submit --address``)."""
        return f"http://{self.head_ip}:{self.dashboard_port}"

    @property
    def python(self) -> Path:
        return self.folder / "venv" / "bin" / "python"

    # ---- start and stop
    def start(self, timeout: float = 180) -> LocalCluster:
        """Start the head and the worker nodes; wait until all of them have joined."""
        self.folder = Path(self.folder).resolve()
        self.folder.mkdir(parents=True, exist_ok=True)
        node_venv(self.folder / "venv")
        if not (self.port and self.dashboard_port):
            self.port, self.dashboard_port = free_ports(2)
        try:
            self._start_node(Node("head", self.head_ip, str(self.folder / "head"), cpus=self.head_cpus))
            self.wait_nodes(1, timeout)
            for _ in range(self.workers):
                self.add_worker(wait=False)
            self.wait_nodes(1 + self.workers, timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def add_worker(self, cpus: float | None = None, gpus: float | None = None, wait: bool = True) -> Node:
        """Start one more worker node (a node that joins a running cluster); returns it once it has joined."""
        index = sum(1 for n in self.nodes if not n.head) + 1
        name = f"worker-{index}"
        node = Node(
            name,
            LOOPBACK,
            str(self.folder / name),
            cpus=self.worker_cpus if cpus is None else cpus,
            gpus=self.worker_gpus if gpus is None else gpus,
        )
        self._start_node(node)
        if wait:
            self.wait_registered(node)
        return node

    def restart(self, timeout: float = 180) -> LocalCluster:
        """Stop what is left of the cluster and start it afresh, on new ports (a head and ``workers`` worker
        nodes): how a cluster whose head was lost comes back (as ``pairank cluster down`` and ``up`` do)."""
        self.stop()
        self.nodes, self.killed, self.port, self.dashboard_port = [], set(), 0, 0
        return self.start(timeout)

    def _start_node(self, node: Node) -> None:
        folder = Path(node.folder)
        for sub in ("home", "cwd"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        node.ray_dir = str(ray_dir(folder))
        env = self._node_env(node)
        if imports_pairank(self.python, folder / "cwd", env):
            raise ClusterError(
                f"{self.python} imports pairank without the job shipping it (is pairank installed into "
                f"{', '.join(site_folders())} rather than editable?): its nodes would not be like a real cluster's"
            )
        self.nodes.append(node)
        self._launch(node, env)

    def _node_env(self, node: Node) -> dict[str, str]:
        """The whole environment of ``node``'s ``ray start`` (:func:`node_env`, with :attr:`health_checks`)."""
        ray = {f"RAY_{k}": str(v) for k, v in workers_kept(node.cpus).items()}
        if self.health_checks:
            period_ms, failures = self.health_checks
            ray |= {"RAY_health_check_period_ms": str(period_ms), "RAY_health_check_failure_threshold": str(failures)}
        return node_env(self.python, Path(node.folder) / "home", ensure_auth_token(), {**ray, **self.env})

    def _launch(self, node: Node, env: dict[str, str]) -> None:
        """``ray start --block`` of ``node``, in a session of its own; its log is ``<node>/ray-start.log``."""
        folder, host = Path(node.folder), node.ip
        flags = (
            "--node-manager-port",
            "--object-manager-port",
            "--dashboard-agent-listen-port",
            "--dashboard-agent-grpc-port",
            "--runtime-env-agent-port",
            "--metrics-export-port",
            "--ray-client-server-port",
        )
        ports = dict(zip(flags, free_ports(len(flags), avoid={self.port, self.dashboard_port})))
        client_port = ports.pop("--ray-client-server-port")
        args = [
            str(self.python),
            "-m",
            "ray.scripts.scripts",
            "start",
            "--block",
            f"--node-ip-address={host}",
            f"--num-cpus={node.cpus:g}",
            f"--object-store-memory={self.object_store_bytes}",
            f"--temp-dir={node.ray_dir}",
            "--disable-usage-stats",
            *(f"{flag}={port}" for flag, port in ports.items()),
        ]
        if node.gpus:
            args.append(f"--num-gpus={node.gpus:g}")
        if node.resources:
            args.append(f"--resources={json.dumps(node.resources)}")
        if node.head:
            args += [
                "--head",
                f"--port={self.port}",
                "--include-dashboard=true",
                f"--dashboard-host={host}",
                f"--dashboard-port={self.dashboard_port}",
                f"--ray-client-server-port={client_port}",
            ]
        else:
            args.append(f"--address={self.address}")
        log = open(folder / "ray-start.log", "ab")  # noqa: SIM115 - the node's log, open for its life
        try:
            proc = subprocess.Popen(
                args, cwd=folder / "cwd", env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        finally:
            log.close()
        node.pid = proc.pid
        self.save()

    def wait_nodes(self, count: int, timeout: float = 180) -> None:
        """Wait until ``count`` nodes are alive (asked of the head by the nodes' python), starting again a node
        whose start timed out (:meth:`_start_again`)."""
        deadline = time.monotonic() + timeout
        while True:
            alive = self.alive_nodes()
            if alive is not None and len(alive) >= count:
                return
            self._start_again()
            if time.monotonic() > deadline:
                raise ClusterError(f"{count} nodes expected, {len(alive or [])} joined after {timeout:.0f} s")
            time.sleep(1)

    def wait_registered(self, node: Node, timeout: float = 240) -> str:
        """Wait until the head counts ``node`` alive (by its Ray node id), starting it again if its start timed
        out (:meth:`_start_again`); returns its node id. Unlike a count of nodes, this is not fooled by a node
        killed a moment ago that the head still counts alive."""
        deadline = time.monotonic() + timeout
        while True:
            node_id = node.node_id()
            alive = self.alive_nodes() if node_id else None
            if node_id and alive is not None and any(n["NodeID"] == node_id for n in alive):
                return node_id
            self._start_again()
            if time.monotonic() > deadline:
                raise ClusterError(f"node {node.name} not registered after {timeout:.0f} s:\n{self._log_tail(node)}")
            time.sleep(1)

    def _start_again(self) -> None:
        """Start again, on new ports, each node (not killed on purpose) whose ``ray start`` ended for a reason of
        :data:`RETRYABLE` (its raylet did not register within Ray's 30 s, which a loaded machine can exceed; a
        port taken meanwhile), up to :data:`STARTS` starts: what is left of the half-started node (a raylet that
        outlived its ``ray start``) is SIGKILLed first, by process id. A node that ended for another reason, or
        too often, is an error naming it, with its log."""
        for node in [n for n in self.nodes if not n.processes() and n.name not in self.killed]:
            said = self._log_tail(node)
            latest = said.rsplit(RETRIED, 1)[-1]
            if node.attempts >= STARTS or not any(why in latest for why in RETRYABLE):
                raise ClusterError(f"node {node.name} exited while starting:\n{said}")
            stopped = self._reap(node)
            node.attempts += 1
            with open(Path(node.folder) / "ray-start.log", "a", encoding="utf-8") as log:
                log.write(f"\n{RETRIED}: stopped pids {stopped}; start {node.attempts}\n")
            self._launch(node, self._node_env(node))

    def _reap(self, node: Node) -> list[int]:
        """SIGKILL what is left of ``node`` (its process tree and its strays); returns their process ids."""
        import psutil

        procs = node.processes() + node.strays()
        for p in procs:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        return [p.pid for p in procs]

    def _log_tail(self, node: Node) -> str:
        """The end of the node's ``ray start`` log (of every start of it)."""
        path = Path(node.folder) / "ray-start.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def alive_nodes(self) -> list[dict] | None:
        """The nodes Ray counts alive (``NodeManagerAddress``, ``NodeID``, ``Resources``), or None when the head
        does not answer. Asked of the head's state API over HTTP from this process (what ``ray.util.state``'s
        ``list_nodes`` sends): the waits poll it every second, and a Python importing Ray per poll cost about a
        CPU second each."""
        import urllib.parse
        import urllib.request

        query = urllib.parse.urlencode(
            {
                "limit": 1000,
                "timeout": 30,
                "detail": "false",
                "filter_keys": "state",
                "filter_predicates": "=",
                "filter_values": "ALIVE",
            }
        )
        request = urllib.request.Request(f"{self.dashboard}/api/v0/nodes?{query}")
        token = auth_token()
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                body = json.loads(response.read())
        except (OSError, ValueError):  # URLError is an OSError
            return None
        data = body.get("data") if isinstance(body, dict) else None
        listed = data.get("result") if isinstance(data, dict) else None
        nodes = listed.get("result") if isinstance(listed, dict) else None
        if not body.get("result") or not isinstance(nodes, list):
            return None
        return [
            {
                "NodeID": n.get("node_id"),
                "NodeManagerAddress": n.get("node_ip"),
                "is_head": n.get("is_head_node"),
                "Resources": n.get("resources_total") or {},
            }
            for n in nodes
        ]

    def node(self, name: str) -> Node:
        return next(n for n in self.nodes if n.name == name)

    def kill(self, node: Node | str) -> list[int]:
        """SIGKILL every process of ``node`` at once (as a machine that vanishes); returns their ids. The head may
        go too: the cluster and its drivers end with it."""
        import psutil

        node = self.node(node) if isinstance(node, str) else node
        killed: list[int] = []
        # Again while any is left: a process its raylet started while the tree was being killed is no longer in
        # the tree (its parent gone), only among the node's strays (a head loss once left one such worker).
        for _ in range(KILL_PASSES):
            procs = [p for p in node.processes() + node.strays() if p.pid not in killed or _running(p)]
            if not procs:
                break
            for p in procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    p.send_signal(signal.SIGKILL)
            killed += [p.pid for p in procs if p.pid not in killed]
            time.sleep(0.2)
        self.killed.add(node.name)
        self.save()
        return killed

    def stop(self, timeout: float = 15) -> None:
        """Stop every node (SIGTERM, then SIGKILL of what is left of its process tree)."""
        import psutil

        trees = {n.name: n.processes() + n.strays() for n in self.nodes}
        for _, procs in sorted(trees.items(), key=lambda kv: kv[0] == "head"):  # the head last
            if procs:
                with contextlib.suppress(psutil.NoSuchProcess):
                    procs[0].terminate()
        deadline = time.monotonic() + timeout
        rest = [p for procs in trees.values() for p in procs]
        while rest and time.monotonic() < deadline:
            rest = [p for p in rest if _running(p)]
            time.sleep(0.2)
        for p in rest:
            with contextlib.suppress(psutil.NoSuchProcess):
                p.kill()
        for node in self.nodes:
            link = Path(node.folder) / "ray"
            if link.is_symlink():  # its Ray temp dir under /tmp (see ray_dir)
                shutil.rmtree(link.resolve(), ignore_errors=True)
                link.unlink()
        (self.folder / STATE).unlink(missing_ok=True)

    # ---- the state file
    def save(self) -> None:
        state = {
            "port": self.port,
            "dashboard_port": self.dashboard_port,
            "address": self.address,
            "dashboard": self.dashboard,
            "nodes": [asdict(n) for n in self.nodes],
            "killed": sorted(self.killed),
            "health_checks": list(self.health_checks) if self.health_checks else None,
        }
        (self.folder / STATE).write_text(json.dumps(state, indent=1), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> LocalCluster:
        """The cluster that ``pairank cluster up`` started in ``folder``."""
        folder = Path(folder).resolve()
        path = folder / STATE
        if not path.is_file():
            raise ClusterError(f"{folder}: no local cluster runs there (no {STATE})")
        state = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            folder=folder,
            nodes=[Node(**n) for n in state["nodes"]],
            port=state["port"],
            dashboard_port=state["dashboard_port"],
            killed=set(state.get("killed", [])),
            health_checks=(int(checks[0]), int(checks[1])) if (checks := state.get("health_checks")) else None,
        )


def _names(arg: str, folder: str) -> bool:
    """Whether a command-line argument names ``folder`` or a path below it."""
    return arg.endswith(folder) or f"{folder}/" in arg


def _running(p) -> bool:
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
