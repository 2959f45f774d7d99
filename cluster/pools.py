"""Long-lived judge pools: engines start once and serve every round of a job.

A judge engine is slow to start (about 20 s for the CPU build of vLLM, minutes
for a large model on GPUs), and adaptive schedulers judge in many short rounds.
So the engines live in a fixed set of Ray actors (:class:`JudgeActor`) created
once per job, and each round streams its requests through a Ray Data pipeline
whose map stage only forwards batches to those actors, the way Ray Data LLM
forwards batches to a Serve deployment. Rebuilding the pipeline per round costs
about a second; rebuilding engines would cost a start each.

Routing: the round's requests arrive in prefix order (all pairs of a context
together), are cut into blocks of ``pool.batch_size`` and the blocks are dealt
to the actors in contiguous runs (block i of n goes to actor ``i * size // n``),
so each engine sees whole contexts and its prefix cache stays warm, and every
actor gets the same number of blocks, give or take one.

The forwarding tasks reserve no CPU (``num_cpus=0``): the actors hold the
node's CPUs, and a forwarder that waited for a CPU would wait for ever.

The pool knows nothing of judges: it receives what to run as a factory (a
picklable callable that builds, in the actor, an object with ``run(stage, batch)``
and ``info()``; :func:`pairank.jobs.stages.judge_factory`) and where to run it as
:class:`PoolResources`.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

log = logging.getLogger(__name__)

#: Column that tells a forwarder which actor judges a row (dropped before judging).
SLOT = "__judge_slot"


@dataclass(frozen=True)
class PoolResources:
    """Where a pool runs: how many actors, what each reserves, and the rows sent per batch."""

    size: int = 1
    num_cpus: float = 1
    num_gpus: float = 0
    batch_size: int = 64


class JudgeActor:
    """One engine in one Ray actor, for the life of the pool; it runs every stage it is sent."""

    def __init__(self, factory: Callable[[], object]):
        started = time.perf_counter()
        self.runner = factory()
        self.stats = {"pid": os.getpid(), "start_seconds": time.perf_counter() - started, "batches": 0, "rows": 0}

    def judge_batch(self, batch: pa.Table, stage: str = "pairwise") -> pa.Table:
        out = self.runner.run(stage, batch)
        self.stats["batches"] += 1
        self.stats["rows"] += batch.num_rows
        return out

    def info(self) -> dict:
        """pid, engine start seconds, batches and rows so far, and engine prompts per stage (``calls``)."""
        return {**self.stats, **self.runner.info()}


def _forward(batch: pa.Table, actors: list, stage: str) -> pa.Table:
    """Ray Data map stage: send each row group to the actor its slot names, wait, concatenate."""
    import ray

    slots = batch.column(SLOT)
    refs = []
    for slot in pc.unique(slots).to_pylist():
        rows = batch.filter(pc.equal(slots, slot)).drop_columns([SLOT])
        refs.append(actors[slot].judge_batch.remote(rows, stage))
    return pa.concat_tables(ray.get(refs))


def deal_blocks(n_rows: int, batch_size: int, size: int) -> list[tuple[int, int, int]]:
    """``(offset, length, actor)`` per block: contiguous runs of blocks per actor.

    >>> deal_blocks(10, 3, 2)
    [(0, 3, 0), (3, 3, 0), (6, 3, 1), (9, 1, 1)]
    >>> [a for _, _, a in deal_blocks(5, 1, 3)]
    [0, 0, 1, 1, 2]
    """
    offsets = list(range(0, n_rows, batch_size))
    n = len(offsets)
    return [(off, min(batch_size, n_rows - off), i * size // n) for i, off in enumerate(offsets)]


class JudgePool:
    """``resources.size`` actors, each running ``factory()``, started on entry and stopped on exit.

    ``judge(requests, stage)`` streams one stage of one round through Ray Data and
    yields result batches as the actors finish them; call it as often as needed:
    every stage of a multi-pass mode (analyses, then verdicts) and every round of
    an adaptive schedule runs on the same warm engines.
    """

    def __init__(self, factory: Callable[[], object], resources: PoolResources):
        self.factory, self.resources = factory, resources
        self.actors: list = []

    def __enter__(self) -> JudgePool:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        import ray

        options = {"num_cpus": self.resources.num_cpus, "max_concurrency": 1}
        if self.resources.num_gpus:
            options["num_gpus"] = self.resources.num_gpus
        actor = ray.remote(JudgeActor).options(**options)
        self.actors = [actor.remote(self.factory) for _ in range(self.resources.size)]
        try:
            ray.get([a.info.remote() for a in self.actors])  # engines are up once their constructors return
        except Exception as exc:
            self.stop()
            raise RuntimeError(f"judge pool: an engine failed to start: {exc}") from exc

    def stop(self) -> None:
        import ray

        for a in self.actors:
            ray.kill(a)
        self.actors = []

    def info(self) -> list[dict]:
        """Per actor: pid, engine start seconds, batches and rows so far, engine prompts per stage."""
        import ray

        return ray.get([a.info.remote() for a in self.actors])

    def judge(self, requests: pa.Table, stage: str = "pairwise") -> Iterator[pa.Table]:
        import ray

        if not self.actors:
            raise RuntimeError("judge pool is not started")
        if requests.num_rows == 0:
            return
        blocks = [
            requests.slice(off, length).append_column(SLOT, pa.array([actor] * length, pa.int64()))
            for off, length, actor in deal_blocks(requests.num_rows, self.resources.batch_size, len(self.actors))
        ]
        ds = ray.data.from_arrow(blocks).map_batches(
            _forward,
            fn_kwargs={"actors": self.actors, "stage": stage},
            batch_size=None,
            batch_format="pyarrow",
            zero_copy_batch=True,
            num_cpus=0,
            concurrency=min(2 * len(self.actors), len(blocks)),  # one batch in each engine, one queued behind it
        )
        # prefetch_batches=0: hand each batch over as soon as it is judged, so a kill loses the least.
        yield from ds.iter_batches(batch_format="pyarrow", batch_size=None, prefetch_batches=0)
