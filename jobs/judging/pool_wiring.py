"""The job's judge pool: what its actors run (the engine in its judging mode), where (the spec's
``pool`` section), and what they did."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any, cast

import pyarrow as pa

from pairank.cluster.metrics import Meter, judge_label
from pairank.cluster.pools.judge_pool import JudgePool, PoolResources
from pairank.cluster.pools.warm import WarmPools, warm_scope
from pairank.jobs.judging.progress import Heartbeat, Progress
from pairank.jobs.specs.job import JobSpec
from pairank.judges import engine_of, judge_identity
from pairank.judges.engine import JudgeSettings
from pairank.judges.modes import EngineModes, build_runner, failure_rows


class LocalPathOnCluster(ValueError):
    """A path of this machine given to a job on a Ray cluster of several nodes, whose tasks would read their own
    disk instead."""


def join_cluster(spec: JobSpec) -> None:
    """The job's Ray: the cluster ``cluster.address`` names (the driver ships its ``pairank`` and the environment
    variables the job needs: :func:`pairank.cluster.runtime.shipped_env`, with the http judge's ``api_key_env``;
    nothing with ``cluster.ship`` false), or a local Ray on 127.0.0.1.

    On a cluster of several nodes, ``input`` and ``output`` must be shared storage (``s3://``): the nodes' tasks read
    the candidates and the judgment store themselves, and a path of this machine would be read from each node's own
    disk. Such a path is refused (:class:`LocalPathOnCluster`, exit 2) before anything is judged, as is a pool
    whose engine no node it may use can hold (:func:`pairank.cluster.pools.placement.check_fits`: the GPUs of a
    tensor-parallel engine on one node, no worker node with ``pool.on_head`` false).
    """
    from pairank.cluster.pools.placement import check_fits, cluster_nodes
    from pairank.cluster.runtime import alive_nodes, ensure_ray

    api_key_env = getattr(spec.judge, "api_key_env", None)
    ensure_ray(
        spec.cluster.address,
        spec.cluster.num_cpus,
        [api_key_env] if api_key_env else [],
        metrics_export_port=spec.cluster.metrics_export_port,
        ship=spec.cluster.ship,
    )
    if spec.cluster.address:
        check_shared_storage(spec, len(alive_nodes()))
    where = f"the Ray cluster at {spec.cluster.address}" if spec.cluster.address else "this job's Ray"
    p = spec.pool
    check_fits(cluster_nodes(), p.num_cpus, p.num_gpus, spec.engine_ranks, p.on_head, where)


def check_shared_storage(spec: JobSpec, nodes: int) -> None:
    """Refuse a local ``input`` or ``output``, or a data file the judge reads (its engine's ``paths``: the
    simulated judge's ``quality``, the replay judge's ``source``), on a cluster of ``nodes`` nodes, when there are
    several. A model folder is not refused: a cluster's image may hold it at the same path on every node.

    >>> from pairank.jobs.specs.job import parse_spec
    >>> base = {"name": "n", "aspects": ["a"], "prompts": "p", "judge": {"engine": "simulated"},
    ...         "cluster": {"address": "10.0.0.1:6379"}}
    >>> check_shared_storage(parse_spec({**base, "input": "s3://b/in", "output": "s3://b/out"}, "doc"), 3)
    >>> check_shared_storage(parse_spec({**base, "input": "/data/in", "output": "/data/out"}, "doc"), 1)
    >>> try:
    ...     check_shared_storage(parse_spec({**base, "input": "s3://b/in", "output": "/data/out"}, "doc"), 3)
    ... except LocalPathOnCluster as exc:
    ...     print(str(exc)[:63])
    output /data/out is a path on this machine, but the Ray cluster
    """
    if nodes <= 1:
        return
    read = [("input", spec.input, "the input"), ("output", spec.output, "the judgment store")]
    read += [(f"judge.{k}", getattr(spec.judge, k), "it") for k in engine_of(spec.judge).paths]
    for key, value, what in read:
        if isinstance(value, str) and "://" not in value:
            raise LocalPathOnCluster(
                f"{key} {value} is a path on this machine, but the Ray cluster at {spec.cluster.address} has "
                f"{nodes} nodes, whose tasks and actors read {what} themselves (each from its own disk): use "
                "shared storage (s3://bucket/prefix)"
            )


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


def judge_factory(spec: JobSpec) -> Callable[[], EngineModes]:
    """What a pool runs: a picklable factory of the spec's engine (its builder and placed settings), in its judging
    mode unless a call names another (:class:`~pairank.judges.modes.EngineModes`)."""
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
        ranks=spec.engine_ranks,
        on_head=p.on_head,
    )


def run_meter(spec: JobSpec) -> Meter:
    """The run's metrics (:mod:`pairank.cluster.metrics`), tagged with its name and its judge."""
    return Meter(spec.name, judge_label(judge_identity(spec.placed_judge)))


def failure_factory(spec: JobSpec) -> Callable[[str, pa.Table, str], pa.Table]:
    """What a pool answers for requests no engine could judge: error rows naming the reason."""
    return partial(failure_rows, judge_identity(spec.placed_judge), spec.judging)


@dataclass
class PoolRecord:
    """What the job's pools did: each actor's counters (stopped ones too), the engines lost and replaced, how
    many actors the pools had at most and at the end, and how many began the job warm (``actors_warm``)."""

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
            # actors whose engines were up before the job began (a warm pool's: an earlier job paid their start)
            self.engines["actors_warm"] = self.engines.get("actors_warm", 0) + sizes.get("actors_warm", 0)

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
    """The job's judge pool on the job's Ray: engines start once, on entry, and stop on exit; inside
    :func:`~pairank.cluster.pools.warm.warm_pools`, a pool an earlier job of the scope started with the same engine and
    pool resources is run again instead (renewed for this job), and this one is kept for the jobs after it.

    On exit, each actor's counters (engine prompts per judging pass) and the engines lost
    are added to ``record``. With ``progress``, a :class:`~pairank.jobs.judging.progress.Heartbeat` says what
    happens until the first batch is back ("starting 1 engine", "engine ready in 41 s", "judging: first batch of
    32 running"), at most every 10 s, calling ``poll`` meanwhile (see :class:`WatchedPool`).
    """
    join_cluster(spec)
    beat = Heartbeat(progress, poll=poll) if progress is not None else None
    resources = pool_resources(spec)
    scope = warm_scope()
    kept = scope if resources.fixed else None  # a range pool grows and shrinks with its job: never kept
    try:
        pool = entered_pool(spec, resources, scope, kept, beat)
        failed = True
        try:
            try:
                if beat is None:
                    yield pool
                else:
                    # the pool, watched: WatchedPool answers every attribute of a JudgePool (judge its own way)
                    yield cast(JudgePool, WatchedPool(pool, beat, resources.batch_size))
                failed = False
            finally:
                if record is not None:
                    record.add(pool.info(), pool.losses(), pool.sizes())
        finally:
            if kept is not None:
                kept.release(pool, failed)
            else:
                pool.stop()
    finally:
        if beat is not None:
            beat.stop()


def entered_pool(
    spec: JobSpec,
    resources: PoolResources,
    scope: WarmPools | None,
    kept: WarmPools | None,
    beat: Heartbeat | None,
) -> JudgePool:
    """The pool a job runs on, started: one ``kept`` (the warm scope, for a fixed pool) holds with the job's engine
    and resources, renewed for the job, or a new one (kept by ``kept`` for the jobs after it; room made in
    ``scope`` first)."""
    engines = f"{resources.min_size} engine{'s' * (resources.min_size != 1)}"
    key = (engine_of(spec.judge).build, engine_spec(spec), resources)
    warm = kept.take(key) if kept is not None else None
    if kept is not None and warm is not None:
        try:
            renewed = warm.renew(failure_factory(spec), run_meter(spec), spec.judging)
        except BaseException:
            kept.release(warm)
            raise
        if renewed:
            if beat is not None:
                beat.say(f"{engines} up already (a warm pool)")
            return warm
        kept.release(warm, failed=True)  # an engine of it is dead for good: a pool of the job's own instead
    if beat is not None:
        beat.say(f"starting {engines}")
    if scope is not None:  # the idle pools it keeps may hold the CPUs this one needs
        scope.make_room(resources)
    pool = JudgePool(judge_factory(spec), resources, failure_factory(spec), run_meter(spec), spec.judging)
    pool.start()
    if kept is not None:
        kept.keep(key, pool)
    if beat is not None:
        beat.say(f"{engines} ready in {beat.elapsed():.0f} s")
    return pool


class WatchedPool:
    """A started :class:`~pairank.cluster.pools.judge_pool.JudgePool` whose first judged batch ends its heartbeat:
    until it is back the heartbeat says that it runs, then how long it took; everything else is the pool's."""

    def __init__(self, pool: JudgePool, beat: Heartbeat, batch_size: int):
        self.pool, self.beat, self.batch_size = pool, beat, batch_size
        self.first: bool | None = None  # None: nothing sent yet; True: the first batch running; False: it is back

    def judge(self, requests: Any, judging_pass: str = "pairwise") -> Iterator[pa.Table]:
        """The pool's :meth:`~pairank.cluster.pools.judge_pool.JudgePool.judge`, watched."""
        if self.first is None:
            self.first = True
            self.beat.say(f"judging: first batch of {self.batch_size} running")
        for batch in self.pool.judge(requests, judging_pass):
            if self.first:
                self.first = False
                self.beat.say(f"judging: first batch back after {self.beat.elapsed():.0f} s")
                self.beat.say(None)
            yield batch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.pool, name)
