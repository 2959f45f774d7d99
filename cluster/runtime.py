"""Starting or joining Ray. Nothing else in pairank calls ``ray.init``.

A local Ray stays on loopback: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes the
node register 127.0.0.1 instead of the machine's network address, and the
dashboard is off.
"""

from __future__ import annotations

import logging
import os
import sys

from pairank.cluster.ray_shim import keep_local_ray_on_loopback

log = logging.getLogger(__name__)


LOOPBACK = "127.0.0.1"
#: Logical CPUs a local Ray gets beyond the cores it is given. A CPU judge pool
#: reserves every core (the engine binds them all), and Ray Data's streaming
#: executor starts nothing while less than one whole CPU is free, even for the
#: pool's zero-CPU forwarding tasks (measured with Ray 2.60: a round hangs with
#: 1.5 of 2 CPUs reserved and runs with 1). The extra CPU is for Ray Data's own
#: bookkeeping, which mostly waits; the cores stay the engines'.
RAY_DATA_CPUS = 1


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join ``address`` (``auto`` or ``ray://...``), or start a local Ray on 127.0.0.1.

    A Ray already initialised in this process is reused as it is. A local Ray
    gets ``num_cpus`` (default: every core) plus :data:`RAY_DATA_CPUS` logical CPUs.
    """
    if not address:
        keep_local_ray_on_loopback()
    import ray

    if ray.is_initialized():
        return
    if address:
        log.info("joining Ray at %s", address)
        ray.init(address=address, log_to_driver=True)
        return
    log.info("starting a local Ray on 127.0.0.1")
    ray.init(
        num_cpus=(num_cpus or os.cpu_count() or 1) + RAY_DATA_CPUS,
        include_dashboard=False,
        configure_logging=True,
        logging_level=logging.WARNING,
        log_to_driver=True,
    )
    nodes = {n["NodeManagerAddress"] for n in ray.nodes()}
    if nodes != {LOOPBACK}:
        ray.shutdown()
        raise RuntimeError(f"local Ray registered {sorted(nodes)}; expected only {LOOPBACK}")
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False


def is_ray_error(exc: BaseException) -> bool:
    """Whether ``exc`` is one of Ray's own errors (a lost actor, node or object; a failed task), without importing
    Ray where it is not loaded yet."""
    if "ray" not in sys.modules:
        return False
    from ray.exceptions import RayError

    return isinstance(exc, RayError)


def shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
