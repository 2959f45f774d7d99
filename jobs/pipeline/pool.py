"""The job's judge pool: what its actors run (the engine in its judging mode), where (the spec's
``pool`` section), and what they did."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import pyarrow as pa

from pairank.cluster.pools import JudgePool, PoolResources
from pairank.jobs.pipeline.progress import Heartbeat, Progress
from pairank.jobs.specs.job import JobSpec
from pairank.operators.judges import engine_of, judge_identity
from pairank.operators.judges.engine import JudgeSettings
from pairank.operators.judges.modes import ModeRunner, build_runner, failure_rows


def engine_spec(spec: JobSpec) -> JudgeSettings:
    """The judge settings as the pool's actors run them (:attr:`~pairank.jobs.specs.job.JobSpec.placed_judge`)."""
    return spec.placed_judge


def batches_in_flight(spec: JobSpec) -> int:
    """Calls each actor runs at once: the engine's ``batches_in_flight`` hook of ``pool.max_batches_in_flight``
    (unset: 1; on vLLM's async engine 4; always 1 on vLLM's synchronous engine).

    >>> from pairank.jobs.specs.job import parse_spec
    >>> base = {"name": "n", "input": "i", "output": "o", "aspects": ["a"], "prompts": "p"}
    >>> batches_in_flight(parse_spec({**base, "judge": {"engine": "vllm", "async_engine": True}}, "doc"))
    4
    >>> batches_in_flight(parse_spec({**base, "judge": {"engine": "vllm", "async_engine": False}}, "doc"))
    1
    >>> batches_in_flight(parse_spec({**base, "judge": {"engine": "simulated"}, "pool": {"max_batches_in_flight": 3}},
    ...                              "doc"))
    3
    """
    return engine_of(spec.judge).batches_in_flight(engine_spec(spec), spec.pool.max_batches_in_flight)


def judge_factory(spec: JobSpec) -> Callable[[], ModeRunner]:
    """What a pool runs: a picklable factory of the spec's engine (its builder and placed settings) in its judging
    mode."""
    return partial(build_runner, engine_of(spec.judge).build, engine_spec(spec), spec.judging)


def pool_resources(spec: JobSpec) -> PoolResources:
    """Where a pool runs: the spec's ``pool`` section."""
    p = spec.pool
    low, high = p.sizes
    return PoolResources(
        min_size=low,
        max_size=high,
        num_cpus=p.num_cpus,
        num_gpus=p.num_gpus,
        batch_size=p.batch_size,
        retries=p.retries,
        max_restarts=p.max_restarts,
        batches_in_flight=batches_in_flight(spec),
        idle_seconds=p.idle_seconds,
    )


def failure_factory(spec: JobSpec) -> Callable[[str, pa.Table, str], pa.Table]:
    """What a pool answers for requests no engine could judge: error rows naming the reason."""
    return partial(failure_rows, judge_identity(spec.placed_judge), spec.judging)


@dataclass
class PoolRecord:
    """What the job's pools did: each actor's counters (stopped ones too), the engines lost and replaced, and how
    many actors the pools had at most and at the end."""

    actors: list[dict[str, Any]] = field(default_factory=list)
    engines: dict[str, Any] = field(default_factory=dict)

    def add(self, actors: list[dict[str, Any]], losses: dict[str, Any], sizes: dict[str, Any] | None = None) -> None:
        self.actors.extend(actors)
        for k, v in losses.items():
            self.engines[k] = self.engines.get(k, [] if isinstance(v, list) else 0) + v  # counts add, slots append
        if sizes:
            self.engines["actors_most"] = max(self.engines.get("actors_most", 0), sizes["actors_most"])
            self.engines["actors_end"] = sizes["actors_end"]  # the last pool's
            self.engines["actors_stopped"] = self.engines.get("actors_stopped", 0) + sizes["actors_stopped"]

    def sections(self) -> dict[str, Any]:
        """The report's ``pool`` (per actor) and ``engines`` (losses) sections."""
        return {"pool": self.actors, "engines": self.engines}


@contextmanager
def judge_pool(
    spec: JobSpec,
    record: PoolRecord | None = None,
    progress: Progress | None = None,
    poll: Callable[[], object] | None = None,
) -> Iterator[JudgePool]:
    """The job's judge pool on the job's Ray: engines start once, on entry.

    On exit, each actor's counters (engine prompts per stage) and the engines lost
    are added to ``record``. With ``progress``, a :class:`~pairank.jobs.pipeline.progress.Heartbeat` says what
    happens until the first batch is back ("starting 1 engine", "engine ready in 41 s", "judging: first batch of
    32 running"), at most every 10 s, calling ``poll`` meanwhile (see :class:`WatchedPool`).
    """
    from pairank.cluster.runtime import ensure_ray

    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    beat = Heartbeat(progress, poll=poll) if progress is not None else None
    resources = pool_resources(spec)
    engines = f"{resources.min_size} engine{'s' * (resources.min_size != 1)}"
    if beat is not None:
        beat.say(f"starting {engines}")
    try:
        with JudgePool(judge_factory(spec), resources, failure_factory(spec)) as pool:
            try:
                if beat is None:
                    yield pool
                else:
                    beat.say(f"{engines} ready in {beat.elapsed():.0f} s")
                    yield WatchedPool(pool, beat, resources.batch_size)
            finally:
                if record is not None:
                    record.add(pool.info(), pool.losses(), pool.sizes())
    finally:
        if beat is not None:
            beat.stop()


class WatchedPool:
    """A started :class:`~pairank.cluster.pools.JudgePool` whose first judged batch ends its heartbeat: until it
    is back the heartbeat says that it runs, then how long it took; everything else is the pool's."""

    def __init__(self, pool: JudgePool, beat: Heartbeat, batch_size: int):
        self.pool, self.beat, self.batch_size = pool, beat, batch_size
        self.first: bool | None = None  # None: nothing sent yet; True: the first batch running; False: it is back

    def judge(self, requests: Any, stage: str = "pairwise") -> Iterator[pa.Table]:
        """The pool's :meth:`~pairank.cluster.pools.JudgePool.judge`, watched."""
        if self.first is None:
            self.first = True
            self.beat.say(f"judging: first batch of {self.batch_size} running")
        for batch in self.pool.judge(requests, stage):
            if self.first:
                self.first = False
                self.beat.say(f"judging: first batch back after {self.beat.elapsed():.0f} s")
                self.beat.say(None)
            yield batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)
