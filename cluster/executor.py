"""The executor: where the pipeline's declared stages run (on Ray), kept apart from what they do.

A pipeline stage (:class:`Stage`) is a plain function over one block, an Arrow
table, with its own typed settings and its resources (:class:`Resources`)::

    def plan_requests(block: pa.Table, plan: StaticPlan) -> Iterator[pa.Table]: ...

    PLAN = Resources(concurrency=2)
    stream(blocks, Stage(plan_requests, plan, PLAN))

The function never sees Ray: it can be called on a table in a test, and read
without the executor. This module is the one place that turns stages into Ray
work (the way ``ray.data.llm``'s processor runs its stages, or datatrove's
executors run its steps):

- :func:`stream`: a lazy Ray Data pipeline of a stage over blocks, which a judge
  pool (:meth:`pairank.cluster.pools.judge_pool.JudgePool.judge`) can take as its input, or
  which :meth:`Stream.tables` reads back;
- :func:`run_each`: a stage run as one task per block, at most its concurrency at
  once, results in block order;
- :func:`each`: the same, lazy, for a judge pool to take as :func:`stream`'s
  pipeline (:class:`Tasks`): for the few blocks of a round, where a Ray Data
  execution would cost more to start than the round's work;
- :func:`put`, :func:`put_blocks`, :func:`get`: values and blocks in Ray's object
  store, held by :class:`Handle`; :func:`get` works in the driver and inside a
  stage, and re-raises pairank's own error from a failed task (a bad input table's
  :class:`~pairank.storage.validation.TableError` names its file, row and column
  wherever it was read);
- :func:`task`: one function as a task with several results (a block cut into many);
- :func:`shared`: a small bookkeeping object that stages can call (:class:`Shared`),
  held by the driver's bookkeeper actor (:mod:`pairank.cluster.bookkeeping`) on the
  driver's node: the job cannot outlive that node anyway, and there the object
  outlives the loss of any worker node.

Tasks reserve no CPU unless a stage asks: the judge actors hold the nodes' CPUs,
and a task that waited for one would wait for ever. On a cluster of several nodes
they keep off the head, as the judge actors do (:func:`off_head`): it holds the
driver and the job's bookkeeping, and a task that reserves no CPU would otherwise
take the CPU of a head started with none. Tasks lost with their node are run again
by Ray (``max_retries``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import pyarrow as pa

from pairank.cluster.bookkeeping import Kept, keep
from pairank.cluster.ray_shim import arrow_dataset, block_metadata
from pairank.cluster.runtime import raised_in_task

S = TypeVar("S")


@dataclass(frozen=True)
class Resources:
    """What one task of a stage reserves, how many run at once, and how often a lost one runs again."""

    num_cpus: float = 0.0
    concurrency: int = 2
    max_retries: int = 3


@dataclass(frozen=True)
class Stage(Generic[S]):
    """A pipeline stage: ``fn(block, settings, **extra)``, its settings, and its resources (what, not where)."""

    fn: Callable[..., Any]
    settings: S
    resources: Resources = field(default_factory=Resources)

    @property
    def name(self) -> str:
        return getattr(self.fn, "__name__", type(self.fn).__name__)


@dataclass(frozen=True)
class Handle:
    """A value in Ray's object store (an ``ObjectRef``); picklable, so a stage's settings can carry it."""

    ref: Any
    #: Ray Data's metadata of the table behind ``ref`` (:func:`put_blocks`), so that a stream over it starts no task.
    meta: Any = field(default=None, compare=False, repr=False)

    @property
    def id(self) -> str:
        """A stable id of the value, to cache what is built from it in a worker process."""
        return str(self.ref.hex())


def unwrap(exc: BaseException) -> BaseException:
    """pairank's own error that a task (or a Ray Data stage) raised, out of Ray's wrapper; ``exc`` for anything
    else (a foreign error in a task stays Ray's: the cluster or an engine failed). See
    :func:`pairank.cluster.runtime.raised_in_task`."""
    return raised_in_task(exc)


def off_head() -> dict[str, Any]:
    """The Ray option that keeps a task off the head of a cluster of several nodes (none on one node)."""
    from pairank.cluster.pools.placement import NODE_ID_LABEL, avoided_head

    head = avoided_head(False)
    return {"label_selector": {NODE_ID_LABEL: f"!{head}"}} if head else {}


def put(value: Any) -> Handle:
    """``value`` in Ray's object store (the caller's copy stays with the caller)."""
    import ray

    return Handle(ray.put(value))


def put_blocks(tables: Iterable[pa.Table]) -> list[Handle]:
    """Each table as a block in Ray's object store, with its metadata for a stream over it (:func:`stream`)."""
    import ray

    return [Handle(ray.put(t), block_metadata(t)) for t in tables]


def arrow_blocks(blocks: Sequence[Handle] | Sequence[pa.Table]) -> Any:
    """A Ray Data dataset of ``blocks`` (handles of :func:`put_blocks`, or tables the caller holds), one block
    each. Unlike ``ray.data.from_arrow``, it starts no task for the blocks' metadata: those ask for a whole CPU
    each, and waited for ever where the judge actors held every node's CPUs but half of one (``ray_shim``)."""
    import ray

    handles = [b for b in blocks if isinstance(b, Handle)] or put_blocks(b for b in blocks if isinstance(b, pa.Table))
    missing = [h.ref for h in handles if h.meta is None]  # handles made elsewhere: read in tasks that reserve no CPU
    found = {}
    if missing:
        read = ray.remote(block_metadata).options(num_cpus=0, **off_head())
        found = dict(zip(missing, ray.get([read.remote(ref) for ref in missing]), strict=True))
    return arrow_dataset([h.ref for h in handles], [found[h.ref] if h.meta is None else h.meta for h in handles])


def get(handles: Handle | Sequence[Handle]) -> Any:
    """The value (or values) behind ``handles``; a failed task's own error is raised, not Ray's wrapper."""
    import ray
    from ray.exceptions import RayTaskError

    refs = handles.ref if isinstance(handles, Handle) else [h.ref for h in handles]
    try:
        return ray.get(refs)
    except RayTaskError as exc:
        cause = unwrap(exc)
        if cause is exc:
            raise
        raise cause from None


def task(fn: Callable[..., Any], *args: Any, returns: int = 1, resources: Resources | None = None) -> list[Handle]:
    """``fn(*args)`` as one task whose ``returns`` results stay in the object store, one handle each."""
    out = _remote(fn, resources or Resources(), num_returns=returns).remote(*args)
    return [Handle(ref) for ref in (out if returns > 1 else [out])]


def _remote(fn: Callable[..., Any], r: Resources, **options: Any) -> Any:
    """``fn`` as a Ray remote function with ``r``'s CPUs and retries, kept off the head (:func:`off_head`)."""
    import ray

    return ray.remote(fn).options(num_cpus=r.num_cpus, max_retries=r.max_retries, **off_head(), **options)


def run_each(stage: Stage[Any], blocks: Sequence[Handle]) -> list[Any]:
    """``stage.fn(block, stage.settings)`` for each block, one task each and at most ``concurrency`` at once;
    the results in block order, whichever task ends first."""
    return list(_in_order(stage, [b.ref for b in blocks], {}))


def _in_order(stage: Stage[Any], blocks: Sequence[Any], extra: dict[str, Any]) -> Iterator[Any]:
    """``stage.fn(block, stage.settings, **extra)`` for each of ``blocks`` (tables or object refs) as one task each,
    at most the stage's concurrency running, another started as soon as any ends; each result as soon as it and all
    before it are there (the first task's error raised as itself, :func:`get`)."""
    import ray

    remote = _remote(stage.fn, stage.resources)
    running: dict[Any, int] = {}
    done: dict[int, Any] = {}
    started = given = 0
    while given < len(blocks):
        while started < len(blocks) and len(running) < max(1, stage.resources.concurrency):
            running[remote.remote(blocks[started], stage.settings, **extra)] = started
            started += 1
        (ref,), _ = ray.wait(list(running), num_returns=1)
        done[running.pop(ref)] = get(Handle(ref))
        while given in done:
            yield done.pop(given)
            given += 1


@dataclass
class Stream:
    """A lazy Ray Data pipeline: nothing runs until a judge pool or :meth:`tables` reads it."""

    dataset: Any  # ray.data.Dataset

    def any(self) -> bool:
        """Whether the stream yields any row (runs it until the first one)."""
        try:
            return bool(self.dataset.take(1))
        except Exception as exc:
            raise _unwrapped(exc) from None

    def tables(self, rows: int | None = None) -> Iterator[pa.Table]:
        """The stream's output as it comes: its blocks, or batches of ``rows`` rows (the last one fewer); a stage's
        own error is raised, not Ray's wrapper."""
        try:
            yield from self.dataset.iter_batches(batch_size=rows, batch_format="pyarrow")
        except Exception as exc:
            raise _unwrapped(exc) from None

    def then(self, stage: Stage[Any], **extra: Any) -> Stream:
        """This stream through one more stage."""
        return Stream(_map(self.dataset, stage, 1 << 30, extra))


def _unwrapped(exc: BaseException) -> BaseException:
    cause = unwrap(exc)
    return cause if cause is not exc else exc


def _map(dataset: Any, stage: Stage[Any], blocks: int, extra: dict[str, Any]) -> Any:
    r = stage.resources
    return dataset.map_batches(
        stage.fn,
        fn_args=(stage.settings,),
        fn_kwargs=extra,
        batch_size=None,
        batch_format="pyarrow",
        num_cpus=r.num_cpus,
        concurrency=max(1, min(r.concurrency, blocks)),
        max_retries=r.max_retries,
        **off_head(),
    )


@dataclass
class Tasks:
    """A stage over blocks as one task per block, at most its concurrency at once: lazy, nothing runs until a judge
    pool or :meth:`tables` reads it.

    What a :class:`Stream` does for a few blocks, without a Ray Data execution: measured with Ray 2.60 on this
    machine, a stream of one block of 500 rows cost its driver and Ray about 0.09 CPU s and 0.18 s to run, a task
    0.01 CPU s and 0.01 s, and an adaptive run has a round per step of its schedule. A task lost with its node runs
    again (``max_retries``), and a result lost with one is made again from its lineage, as Ray Data's would be."""

    blocks: Sequence[pa.Table]
    stage: Stage[Any]
    extra: dict[str, Any] = field(default_factory=dict)

    def tables(self, rows: int | None = None) -> Iterator[pa.Table]:
        """Each block's result in block order, as they come (or cut into batches of at most ``rows`` rows; a batch
        holds rows of one block); a stage's own error is raised, not Ray's wrapper."""
        for table in _in_order(self.stage, self.blocks, self.extra):
            if rows is None:
                yield table
            else:
                for offset in range(0, table.num_rows, rows):
                    yield table.slice(offset, rows)


def each(blocks: Sequence[pa.Table], stage: Stage[Any], **extra: Any) -> Tasks:
    """``stage`` over ``blocks``, one task per block (:class:`Tasks`); lazy."""
    return Tasks(list(blocks), stage, extra)


def stream(blocks: Sequence[Handle] | Sequence[pa.Table], stage: Stage[Any], **extra: Any) -> Stream:
    """``stage`` over ``blocks`` (handles of tables in the object store, or tables the caller holds), one block per
    call of ``stage.fn(block, stage.settings, **extra)``; lazy."""
    return Stream(_map(arrow_blocks(blocks), stage, len(blocks), extra))


class Shared:
    """A bookkeeping object held by the driver's bookkeeper (:mod:`pairank.cluster.bookkeeping`), on the driver's
    node; callable from the driver and from stages."""

    def __init__(self, kept: Kept) -> None:
        self.kept = kept

    def call(self, method: str, *args: Any) -> Any:
        """Call ``method`` and wait for its result."""
        import ray

        return ray.get(getattr(self.kept, method).remote(*args))

    def stop(self) -> None:
        self.kept.drop()


def shared(cls: type, *args: Any) -> Shared:
    """An instance of ``cls(*args)`` held by the driver's bookkeeper, on the driver's node, reserving no CPU."""
    return Shared(keep(cls, *args))
