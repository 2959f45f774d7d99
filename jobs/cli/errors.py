"""How an error that ended a command is told: one exit code and one paragraph."""

from __future__ import annotations

import sys

EXIT_CODES = {
    0: "done",
    1: "an unexpected error (a bug: `-v` shows the traceback)",
    2: "bad input: a spec, a table, a path or a setting; the message names it",
    3: "finished, but some comparisons are error rows (see the report)",
    4: "another writer got there first: a nightly commit race, or a run of that name holding its lease",
    5: "storage or cluster unavailable after retrying, or a full disk: run again when it is back (nothing judged "
    "is lost)",
}
#: What to do once a cluster's head is gone (docs/cluster.md, "Losing the head").
AFTER_HEAD_LOSS = (
    "What was judged before is in the judgment store: start the cluster again (or use another) and run or submit "
    "the same spec, which judges only what the store lacks. A driver lost with the head holds the run's name until "
    "its lease expires (PAIRANK_LEASE_TTL_S after its last renewal, 60 s by default): a new run of that name is "
    "refused with exit 4 until then"
)
#: Longest message of an error from Ray (its errors embed remote tracebacks); `-v` shows all of it.
MAX_MESSAGE = 800


def head_lost(where: str, seen: str = "") -> str:
    """What a driver that lost its cluster's head says (``seen``: what it met, e.g. an error's name)."""
    return (
        f"lost the Ray cluster at {where}: its head node is gone (its GCS accepts no connection), and a job "
        f"cannot outlive its head{f' ({seen})' if seen else ''}. {AFTER_HEAD_LOSS}"
    )


def explain(exc: BaseException) -> tuple[int, str]:
    """The exit code and one-paragraph message for an error that ended a command."""
    from pairank.cluster.pools.judge_pool import EngineStartError
    from pairank.cluster.runtime import LocalRayStartError, is_ray_error, lost_cluster, raised_in_task
    from pairank.storage.commits import CommitConflict
    from pairank.storage.errors import DiskFull, StorageError, StorageUnavailable, is_disk_full
    from pairank.storage.store.lease import LeaseHeld

    exc = raised_in_task(exc)  # a corrupt file met in a Ray task is told as if the driver had met it
    if isinstance(exc, (CommitConflict, LeaseHeld)):
        return 4, str(exc)
    if isinstance(exc, StorageUnavailable):
        return 5, f"storage unavailable: {exc}"
    if isinstance(exc, DiskFull):
        return 5, str(exc)
    if is_disk_full(exc):  # met outside pairank's storage layer (a library's own write): named as well as it can be
        path = getattr(exc, "uri", None) or getattr(exc, "filename", None)
        if path:
            return 5, str(DiskFull(str(path), getattr(exc, "action", "write it"), getattr(exc, "cause", exc)))
        return 5, (
            f"no space left on a device ({' '.join(str(exc).split())}). Free some space where the command writes, "
            "or write elsewhere, and run again"
        )
    if isinstance(exc, LocalRayStartError):
        return 5, str(exc)
    if isinstance(exc, EngineStartError):
        return 5, (
            f"{exc}. The engine's own log is above (lines from `JudgeActor`): check judge.model, judge.env and the "
            "engine settings, and that the cluster has the CPUs/GPUs pool.num_cpus/num_gpus ask for"
        )
    # Only `pairank submit` raises it, having imported its module, so no other command needs that module here.
    # (Two CI failures once coincided with importing it here; it imports only the standard library at its top,
    # and no way for the import to cause them was found: possibly flakes. Not imported here either way.)
    jobs_api = sys.modules.get("pairank.cluster.ray_jobs")
    if jobs_api is not None and isinstance(exc, jobs_api.JobsApiLost):
        return 5, f"{exc}. {AFTER_HEAD_LOSS}"
    if (is_ray_error(exc) or isinstance(exc, ConnectionError)) and (lost := lost_cluster()):
        return 5, head_lost(lost, type(exc).__name__)
    if is_ray_error(exc) or isinstance(exc, ConnectionError):
        text = " ".join(str(exc).split())
        if len(text) > MAX_MESSAGE:
            text = text[:MAX_MESSAGE] + " ... (-v shows all of it)"
        return 5, (
            f"the Ray cluster or a judge engine failed ({type(exc).__name__}): {text}. What was judged before "
            "is in the judgment store; check the engine's settings and the cluster (RAY_ADDRESS), then run again"
        )
    if isinstance(exc, (StorageError, ValueError, FileNotFoundError, ImportError, OSError)):
        return 2, str(exc)
    return 1, f"unexpected {type(exc).__name__}: {exc} (run with -v for the traceback)"
