"""The ``pool`` section of a job spec: how many judge actors, what each reserves, and where they may run."""

from __future__ import annotations

import re

from pydantic import Field, field_validator

from pairank.operators.settings import Strict


def pool_sizes(size: int | str) -> tuple[int, int]:
    """The least and most actors of a ``pool.size``: a number, or a range ``min..max``.

    >>> pool_sizes(3), pool_sizes("1..4"), pool_sizes(" 2 .. 2 ")
    ((3, 3), (1, 4), (2, 2))
    >>> pool_sizes("3..1")
    Traceback (most recent call last):
    ...
    ValueError: expected a number of actors (1 or more) or a range 'min..max' with 1 <= min <= max, found '3..1'
    """
    if isinstance(size, int) and not isinstance(size, bool):
        low = high = size
    else:
        found = re.fullmatch(r"\s*(\d+)\s*(?:\.\.\s*(\d+)\s*)?", size) if isinstance(size, str) else None
        low, high = (int(found[1]), int(found[2] or found[1])) if found else (0, 0)
    if not 1 <= low <= high:
        raise ValueError(
            f"expected a number of actors (1 or more) or a range 'min..max' with 1 <= min <= max, found {size!r}"
        )
    return low, high


class PoolSpec(Strict):
    size: int | str = Field(
        1,
        description="Judge actors in the pool, each holding one engine for the whole job: a number (a fixed pool), "
        "or a range `min..max` such as `1..4`: the pool starts `min` actors, adds one while every actor is busy and "
        "more batches wait, when the cluster has room for it (and asks Ray's autoscaler for room up to `max`), and "
        "stops actors above `min` that had nothing to do for `idle_seconds`.",
    )
    idle_seconds: float = Field(
        60,
        gt=0,
        description="A range pool.size: an actor above `min` that had nothing to do for this long is stopped (its "
        "CPUs/GPUs go back to the cluster; a new one starts its engine again when work returns).",
    )
    retries: int = Field(
        2,
        ge=1,
        description="A batch whose engine died while judging it (a killed process, a lost node) is judged again on "
        "the restarted engine, this many times in all; then its comparisons are sent one by one, and one that "
        "kills its engine this many times becomes an error row naming the reason (asked again on the next run).",
    )
    max_restarts: int = Field(
        8,
        ge=-1,
        description="Times Ray restarts each judge actor over the job (-1: no limit); an actor past it is dead and "
        "the others take its batches.",
    )
    num_cpus: float = Field(
        1,
        gt=0,
        description="CPUs Ray reserves per judge actor. Ray sets OMP_NUM_THREADS to this in the actor, so a CPU "
        "engine should reserve every core it binds (VLLM_CPU_OMP_THREADS_BIND).",
    )
    num_gpus: float = Field(
        0,
        ge=0,
        description="GPUs per judge actor (0 for the CPU build of vLLM): 1 puts one actor on each GPU, 0.5 two. An "
        "engine of several ranks (judge.tensor_parallel_size x pipeline_parallel_size above 1) needs 1: each rank "
        "one GPU, all of them on one node, in a placement group of the actor's own.",
    )
    on_head: bool = Field(
        False,
        description="Whether judge actors may run on the Ray cluster's head node. false: on a cluster of several "
        "nodes, none does (the head runs the driver and the job's bookkeeping); a Ray of one node (a local Ray) is "
        "its own head and holds them. true: any node.",
    )
    batch_size: int = Field(64, ge=1, description="Requests per batch sent to one actor.")
    max_batches_in_flight: int | None = Field(
        None,
        ge=1,
        description="Batches each judge actor holds at once (in its engine together, so the engine never waits "
        "between batches). Unset: 4 with vLLM's async engine, 1 otherwise. vLLM's synchronous engine "
        "(judge.async_engine false) takes one at a time.",
    )

    @field_validator("size", mode="before")
    @classmethod
    def _size(cls, v):
        pool_sizes(v)
        return v

    @property
    def sizes(self) -> tuple[int, int]:
        """The least and most actors (equal for a fixed pool)."""
        return pool_sizes(self.size)
