"""Starting or joining Ray. Nothing else in pairank calls ``ray.init``.

A local Ray stays on loopback: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes the
node register 127.0.0.1 instead of the machine's network address, and the
dashboard is off.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import re
import socket
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from pairank.cluster.ray_shim import keep_local_ray_on_loopback, send_token_where_one_exists

log = logging.getLogger(__name__)


LOOPBACK = "127.0.0.1"
#: Logical CPUs a local Ray gets beyond the cores it is given. A CPU judge pool
#: reserves every core (the engine binds them all), and Ray Data's streaming
#: executor starts nothing while less than one whole CPU is free, even for
#: pairank's zero-CPU planning and rendering tasks (measured with Ray 2.60, when the
#: pool's forwarders were zero-CPU tasks too: a round hangs with
#: 1.5 of 2 CPUs reserved and runs with 1). The extra CPU is for Ray Data's own
#: bookkeeping, which mostly waits; the cores stay the engines'.
RAY_DATA_CPUS = 1
#: Worker processes a Ray node keeps beyond one per CPU before it ends idle ones (Ray's ``num_workers_soft_limit``
#: is by default the node's CPUs). pairank's planning and render tasks take no CPU, so more of them run at once than
#: a small node has CPUs, each in a worker process; Ray ended those beyond its limit a second after their tasks, and
#: the next round's tasks started new processes: about 2 CPU s each (a Python, ``import ray.data``) and a second of
#: the round's time. An idle worker costs Ray's signal checks, about 0.4 CPU s a minute, and its memory. Measured
#: here (the SIMULATED judge's pipeline tests, one after another, both in turn): 98 CPU s and 97 s by Ray's default,
#: 94 and 91 with this (a first try, on a colder machine: 118 and 110, 97 and 92).
KEPT_WORKERS = 8
#: The variable of Ray's that sets it instead (a user's own value, which pairank leaves as it is).
SOFT_LIMIT_ENV = "RAY_num_workers_soft_limit"
#: Set by Ray's job manager in a job's driver: the job's runtime environment (``pairank submit`` ships it).
JOB_RUNTIME_ENV = "RAY_JOB_CONFIG_JSON_ENV_VAR"
#: The note Ray Data appends to the message of an error raised in a task ("Failed to apply UDF transform after 1/1
#: attempts ...", and how to configure its retries).
RAY_DATA_NOTE = re.compile(r"\nFailed to [^\n]* after \d+/\d+ attempts \(total backoff")
#: Seconds a driver gives the cluster's GCS (on its head node) to accept a connection before it counts as gone.
GCS_PROBE_SECONDS = 3
#: The address this process joined (``cluster.address``, as the user gave it), for messages.
_joined: str | None = None


def ensure_ray(
    address: str | None = None,
    num_cpus: int | None = None,
    forward_env: Sequence[str] = (),
    metrics_export_port: int | None = None,
    ship: bool = True,
) -> None:
    """Join ``address`` (``auto``, ``HOST:PORT`` or ``ray://...``), or start a local Ray on 127.0.0.1.

    A Ray already initialised in this process is reused as it is. A local Ray
    gets ``num_cpus`` (default: every core) plus :data:`RAY_DATA_CPUS` logical CPUs, and serves its Prometheus
    metrics (:mod:`pairank.cluster.metrics`) on ``metrics_export_port`` (default: a free port Ray picks).
    A driver that joins a cluster ships what the cluster's nodes need (:func:`shipped_env`): the ``pairank``
    package it runs, and the variables of :data:`~pairank.cluster.ray_jobs.FORWARDED_ENV` and ``forward_env``
    that are set here; with ``ship`` false nothing (the nodes have pairank and the settings: the job has no
    runtime environment). It sends Ray's token where this machine has one and ``RAY_AUTH_MODE`` is unset
    (:func:`~pairank.cluster.ray_shim.send_token_where_one_exists`).
    """
    if not address:
        keep_local_ray_on_loopback()
    import ray

    # A map task's own error, not Ray Data's UserCodeException around it (whose cause is lost on the way to the
    # driver): pairank's errors then reach the driver as themselves (raised_in_task).
    ray.data.DataContext.get_current().raise_original_map_exception = True
    if ray.is_initialized():
        return
    if address:
        global _joined
        _joined = address
        log.info("joining Ray at %s", address)
        if send_token_where_one_exists():
            log.info("sending Ray's token of this machine (RAY_AUTH_MODE=token; set RAY_AUTH_MODE=disabled not to)")
        with tempfile.TemporaryDirectory(prefix="pairank-ship-") as tmp:  # uploaded by ray.init
            runtime_env = shipped_env(Path(tmp), forward_env) if ship else None
            ray.init(address=address, log_to_driver=True, runtime_env=runtime_env)
        return
    log.info("starting a local Ray on 127.0.0.1")
    cpus = (num_cpus or os.cpu_count() or 1) + RAY_DATA_CPUS
    start_local(
        lambda: ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            configure_logging=True,
            logging_level=logging.WARNING,
            log_to_driver=True,
            _metrics_export_port=metrics_export_port,
            _system_config={} if os.environ.get(SOFT_LIMIT_ENV) else workers_kept(cpus),
        )
    )
    nodes = {n["NodeManagerAddress"] for n in ray.nodes()}
    if nodes != {LOOPBACK}:
        ray.shutdown()
        raise RuntimeError(f"local Ray registered {sorted(nodes)}; expected only {LOOPBACK}")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False


def workers_kept(cpus: float) -> dict[str, int]:
    """Ray's system settings for a node of ``cpus`` CPUs that pairank starts (a local Ray, ``pairank cluster up``'s
    nodes): it keeps :data:`KEPT_WORKERS` worker processes beyond one per CPU."""
    return {"num_workers_soft_limit": math.ceil(cpus) + KEPT_WORKERS}


class LocalRayStartError(ConnectionError):
    """A local Ray whose node did not come up (exit 5: the machine, not the input)."""


#: What Ray 2.60 raises when a new node's raylet has not registered with its GCS within its fixed 30 s (in
#: ``ray.init`` and ``ray start``).
NODE_START_TIMEOUT = "timed out during startup"


def start_local(init: Callable[[], object], attempts: int = 2) -> None:
    """``init()`` (a local ``ray.init``), again when Ray's node did not register within Ray's fixed 30 s, which a
    busy machine can make it miss. The processes a failed start left behind are ended before the next start; the
    last failure is :class:`LocalRayStartError`."""
    for attempt in range(1, attempts + 1):
        before = _children()
        try:
            init()
            return
        except Exception as exc:
            if NODE_START_TIMEOUT not in str(exc):
                raise
            _end(_children() - before)
            if attempt == attempts:
                raise LocalRayStartError(
                    f"a local Ray did not start: its node did not register within Ray's 30 s, {attempts} times "
                    "(a machine too busy to start Ray's processes in time); run again when it is less busy"
                ) from exc
            log.warning("the local Ray's node did not register within Ray's 30 s; starting it again")


def _children() -> set[int]:
    """PIDs of this process's descendants (none known without psutil)."""
    try:
        import psutil
    except ImportError:
        return set()
    return {child.pid for child in psutil.Process().children(recursive=True)}


def _end(pids: set[int]) -> None:
    """SIGKILL ``pids`` (the processes of a failed start), those still there."""
    import signal

    for pid in pids:
        with contextlib.suppress(OSError):  # gone already
            os.kill(pid, signal.SIGKILL)


def shipped_env(folder: Path, forward_env: Sequence[str] = (), environ: Mapping[str, str] = os.environ) -> dict | None:
    """The runtime environment a driver that joins a cluster gives its job: the running ``pairank`` package (staged
    in ``folder``) as a ``py_modules`` entry, so that nodes without pairank installed run the driver's code, and
    the variables of :data:`~pairank.cluster.ray_jobs.FORWARDED_ENV` and ``forward_env`` set in ``environ`` (S3
    credentials and endpoint, ...): a node has none of the driver's environment.

    None inside a job that ``pairank submit`` (or any Ray Jobs API client) started: that job's runtime environment
    is the driver's already, and Ray refuses a second one that names the same fields.
    """
    from pairank.cluster.ray_jobs import EXCLUDES, FORWARDED_ENV, staged_package

    if JOB_RUNTIME_ENV in environ:
        return None
    env: dict = {"py_modules": [str(staged_package(folder))], "excludes": list(EXCLUDES)}
    names = dict.fromkeys([*FORWARDED_ENV, *forward_env])
    forwarded = {name: environ[name] for name in names if name in environ}
    if forwarded:
        env["env_vars"] = forwarded
    return env


def alive_nodes() -> list[dict]:
    """The nodes of the joined Ray cluster that are alive (``ray.nodes()`` entries)."""
    import ray

    return [n for n in ray.nodes() if n.get("Alive")]


def lost_cluster() -> str | None:
    """The Ray cluster this process joined, named as the user gave it (and its GCS), if its head node is gone: the
    GCS, which runs on the head, accepts no connection. None when Ray is not up here, or the GCS answers.

    A driver outlives any node but the head: with the head go the GCS and the driver's own node (the job's
    bookkeeping lives there), and the Ray errors it then meets (an actor unavailable, a connection refused)
    say nothing of why. This says it."""
    if "ray" not in sys.modules:
        return None
    import ray

    if not ray.is_initialized():
        return None
    try:
        gcs = ray.get_runtime_context().gcs_address
        host, port = gcs.rsplit(":", 1)
    except Exception:
        return None
    if accepts(host, int(port)):
        return None
    named = _joined if _joined not in (None, "auto") else None
    return f"{named} (GCS {gcs})" if named and named != gcs else gcs


def accepts(host: str, port: int, timeout: float = GCS_PROBE_SECONDS) -> bool:
    """Whether ``host:port`` accepts a TCP connection (a GCS that does not is a head that is gone)."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def is_ray_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Ray's own errors (a lost actor, node or object; a failed task), without importing
    Ray where it is not loaded yet."""
    if "ray" not in sys.modules:
        return False
    from ray.exceptions import RayError

    return isinstance(exc, RayError)


def raised_in_task(exc: BaseException) -> BaseException:
    """pairank's own error that a Ray task or actor raised, taken out of the ``RayTaskError`` Ray wraps it in (Ray
    Data's streams raise that too); ``exc`` itself for anything else.

    pairank's errors say what failed and where (a data file of the store that is gone or corrupt, a bad row of an
    input) and pickle whole (:func:`pairank.storage.errors.rebuilt`), so the driver tells them as it would had it
    read the file itself. A foreign error in a task stays Ray's: the cluster or an engine failed.
    """
    if "ray" not in sys.modules:
        return exc
    from ray.exceptions import RayTaskError

    cause = exc
    while isinstance(cause, RayTaskError) and getattr(cause, "cause", None) not in (None, cause):
        cause = cause.cause
    if not type(cause).__module__.startswith("pairank."):
        return exc
    said = cause.args[0] if cause.args and isinstance(cause.args[0], str) else None
    if said is not None and RAY_DATA_NOTE.search(said):  # Ray Data appends its retry note to a task's error
        cause.args = (RAY_DATA_NOTE.split(said, maxsplit=1)[0], *cause.args[1:])
    return cause


def shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
