"""Starting or joining Ray. Nothing else in pairank calls ``ray.init``.

A local Ray stays on loopback: ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` makes the
node register 127.0.0.1 instead of the machine's network address, and the
dashboard is off.
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> None:
    """Join ``address`` (``auto`` or ``ray://...``), or start a local Ray on 127.0.0.1.

    A Ray already initialised in this process is reused as it is.
    """
    import ray

    if ray.is_initialized():
        return
    if address:
        log.info("joining Ray at %s", address)
        ray.init(address=address, log_to_driver=True)
        return
    os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    log.info("starting a local Ray on 127.0.0.1")
    ray.init(
        num_cpus=num_cpus,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        configure_logging=True,
        logging_level=logging.WARNING,
        log_to_driver=True,
    )
    ctx = ray.data.DataContext.get_current()
    ctx.enable_progress_bars = False


def shutdown_ray() -> None:
    import ray

    if ray.is_initialized():
        ray.shutdown()
