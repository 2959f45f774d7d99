"""Static requests made in the cluster: the driver never holds the request table.

A static schedule knows every comparison up front, and at scale its rendered prompts
are the biggest thing a run makes (10^7 comparisons are about 20 GB of prompt text).
So for the single-pass modes (``logprob``, ``generate``, ``sample``) the requests are
made by Ray Data tasks, block by block, and stream straight into the judge pool:

1. **Blocks.** The driver groups the contexts into blocks of :data:`CONTEXTS_PER_TASK`
   whole contexts (fewer for contexts with many candidates), taken bucket by bucket of
   the judgment store
   (:func:`pairank.storage.store.cache.context_bucket`), so a block spans one bucket or a few
   (:func:`plan_blocks`). A run's driver reads only the candidates' ids
   (:func:`pairank.storage.inputs.read_candidate_ids`); one task reads the whole
   candidates table, validates it and returns it cut into those blocks
   (:func:`put_blocks`), which stay in Ray's object store.
2. **Plan** (a Ray Data map task per block, :func:`plan_requests`): the static
   scheduler's pairs of the block's contexts (each context draws from its own
   seeded generator, so a block's pairs are the ones the whole run would make),
   their keys per prompt variant, then a join with the store: the keys that
   already have a verdict in the block's buckets of the store (their partitions
   read, no shuffle) are dropped. The rest are rendered into REQUESTS rows, in prefix order,
   and yielded in slices to the pool (:meth:`pairank.cluster.pools.judge_pool.JudgePool.judge`, whose
   forwarders on the driver send each context to one engine). Each task reports how many comparisons
   its block wants and how many were cached to a small counter actor.
3. **Score** (a second set of tasks, :mod:`pairank.jobs.judging.block_scoring`): once
   judging is done, each block reads back from the store one row per key of its
   comparisons, cached or just judged, and scores them there; the driver adds the
   blocks' scores up. A run whose scoring needs every judgment at once reads them
   back whole (:meth:`Streamed.read_back`, :func:`collect_judgments`).

Before anything starts an engine, a ``take(1)`` of the plan says whether anything is
left to judge: a run whose comparisons are all cached starts no engine. The driver
so holds the candidates' ids, counters and the scores; never the texts, the keys to
judge, their prompts or the run's judgments. Keys are computed in the tasks twice (plan,
score).
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pairank.cluster import executor
from pairank.cluster.executor import Handle, Resources, Shared, Stage
from pairank.cluster.metrics import Meter
from pairank.jobs.judging.passes import CacheWriter
from pairank.jobs.judging.plan_counter import PlanCounter
from pairank.jobs.judging.requests import RequestMaker, prefix_key, scheduled_requests
from pairank.jobs.schedulers import StaticSettings
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache, context_bucket
from pairank.storage.store.claims import Claims, by_bucket

#: Contexts per planning task at most, and ordered pairs (per aspect and prompt variant) at most: a block of
#: contexts with many candidates holds fewer of them.
CONTEXTS_PER_TASK = 256
PAIRS_PER_TASK = 65_536
#: Rows per slice a planning task hands on (the pool re-batches them by ``pool.batch_size``).
SLICE_ROWS = 4096
#: Planning (and collecting) tasks at once. They reserve no CPU: the judge actors hold the CPUs.
TASKS = 2
#: The resources of the planning and collecting stages.
PLANNING = Resources(concurrency=TASKS)


@dataclass(frozen=True)
class StaticPlan:
    """What a planning task needs besides its block of candidates (pickled into the tasks)."""

    variants: dict[str, Any]  # aspect -> prompt variants (RequestMaker.variants)
    judge: dict[str, Any]  # the judging identity in every key
    scheduler: StaticSettings
    aspects: tuple[str, ...]
    cache: JudgmentCache
    #: The store's version the planning tasks join with: the one when this sweep over the blocks began (-1: no
    #: store yet), so that a task run again (its node was lost) plans exactly what it planned the first time; see
    #: :func:`plan_requests`.
    as_of: int = -1
    claims: Claims | None = None  # the run's claims: keys another live run claimed are left to it
    #: When (``time.time()``) this sweep began, just before :attr:`as_of` was read: the claims' view of which runs
    #: are live is the one of this moment (:meth:`pairank.storage.store.claims.Claims.claim`, ``fixed``).
    read_at: float = 0.0
    #: The run's sweep over the blocks (with claims, the blocks are planned again until no comparison is left to
    #: another run); what the run claimed in an earlier sweep was asked then, not again.
    sweep_no: int = 1

    @classmethod
    def now(
        cls,
        variants: dict[str, Any],
        judge: dict[str, Any],
        scheduler: StaticSettings,
        aspects: tuple[str, ...],
        cache: JudgmentCache,
        claims: Claims | None = None,
    ) -> StaticPlan:
        """A plan (its first sweep) that joins with the store as it is now."""
        return cls(variants, judge, scheduler, aspects, cache, claims=claims).next_sweep(first=True)

    def next_sweep(self, first: bool = False) -> StaticPlan:
        """This plan for the run's next sweep (``first``: its first): joined with the store as it is now."""
        read_at = time.time()  # before the version: a run whose lease ended after this may be missing from it
        version = self.cache.version()
        return dataclasses.replace(
            self,
            as_of=-1 if version is None else version,
            read_at=read_at,
            sweep_no=1 if first else self.sweep_no + 1,
        )

    def answered(self, maker: RequestMaker, wanted: dict[str, tuple[Any, ...]]) -> set[str]:
        """The keys of ``wanted`` that the store answered at version :attr:`as_of`."""
        if not wanted or self.as_of < 0:
            return set()
        found = self.cache.answered(aspects=self.aspects, contexts=maker.context, keys=wanted, version=self.as_of)
        return set(found.column("key").to_pylist())

    def wanted(self, block: pa.Table) -> tuple[RequestMaker, dict[str, tuple[Any, ...]]]:
        """The block's request maker and ``{key: (aspect, ctx, a, b, variant)}`` of its comparisons."""
        maker = RequestMaker(block, self.variants, self.judge)
        baseline = getattr(self.scheduler, "baseline", None)
        if baseline is not None and baseline not in set(block.column("system").to_pylist()):
            return maker, {}  # one_vs_n: no baseline answer in these contexts (checked for the run as a whole)
        return maker, scheduled_requests(maker, block, list(self.aspects), self.scheduler)


def plan_blocks(candidates: pa.Table, per_task: int | None = None) -> list[list[str]]:
    """The context ids of each block: ``per_task`` whole contexts (fewer where their candidates make more than
    :data:`PAIRS_PER_TASK` ordered pairs), taken bucket by bucket of the store, so a block's join reads one
    bucket's partition, or a few (a small run is one block: its requests then reach the engines in full
    batches). Reads the ``context_id`` column only.

    >>> t = pa.table({"context_id": ["c1", "c1", "c2", "c3"], "candidate_id": ["a", "b", "c", "d"]})
    >>> plan_blocks(t, per_task=1)
    [['c2'], ['c1'], ['c3']]
    >>> plan_blocks(t, per_task=2)
    [['c2', 'c1'], ['c3']]
    """
    per_task = per_task or CONTEXTS_PER_TASK
    counts = pc.value_counts(candidates.column("context_id"))
    sizes = dict(zip(counts.field("values").to_pylist(), counts.field("counts").to_pylist()))
    groups: list[list[str]] = [[]]
    pairs = 0
    for ctx in sorted(sizes, key=lambda c: (context_bucket(c), c)):
        n = sizes[ctx] * (sizes[ctx] - 1)  # ordered pairs: the most any static schedule asks
        if groups[-1] and (len(groups[-1]) >= per_task or pairs + n > PAIRS_PER_TASK):
            groups.append([])
            pairs = 0
        groups[-1].append(ctx)
        pairs += n
    return [g for g in groups if g]


def cut_blocks(candidates: pa.Table, groups: list[list[str]]) -> list[pa.Table]:
    """``candidates`` cut into the blocks of ``groups`` (context ids; a context in none is left out), each block's
    rows in table order: the rows are gone through once, not once per block.

    >>> t = pa.table({"context_id": ["c1", "c2", "c1", "c3"], "candidate_id": ["a", "b", "c", "d"]})
    >>> [b.column("candidate_id").to_pylist() for b in cut_blocks(t, [["c3"], ["c1", "c2"]])]
    [['d'], ['a', 'b', 'c']]
    """
    order = pa.array([c for g in groups for c in g], pa.string())
    group_of = np.repeat(np.arange(len(groups)), [len(g) for g in groups])
    at = pc.index_in(candidates.column("context_id"), value_set=order).fill_null(-1).to_numpy()
    block = np.where(at >= 0, group_of[np.maximum(at, 0)], len(groups))
    rows = np.argsort(block, kind="stable")
    bounds = np.searchsorted(block[rows], np.arange(len(groups) + 1))
    return [candidates.take(pa.array(rows[bounds[i] : bounds[i + 1]])) for i in range(len(groups))]


def read_blocks(folder: Location, keep: pa.Array, groups: list[list[str]]) -> tuple[Any, ...]:
    """Ray task: the input folder's candidates (the driver read only their ids), read and validated a part at a
    time (:func:`pairank.storage.inputs.iter_candidates`: the whole table is never held, only the rows kept),
    those in ``keep`` (candidate ids: the run's ``subset``) cut into the blocks of ``groups``. Returns the rows
    kept, then each block (one return each)."""
    from pairank.storage.inputs import iter_candidates

    pieces: list[list[pa.Table]] = [[] for _ in groups]
    rows = 0
    for part in iter_candidates(folder):  # each part cut as it comes: the task holds its blocks and one part
        part = part.filter(pc.is_in(part.column("candidate_id"), keep))
        rows += part.num_rows
        for mine, block in zip(pieces, cut_blocks(part, groups)):
            if block.num_rows:
                mine.append(block)
    schema = part.schema  # iter_candidates yields at least one part or raises
    return (rows, *(pa.concat_tables(p) if p else schema.empty_table() for p in pieces))


def put_blocks(candidates: pa.Table, folder: Location | None = None) -> list[Handle]:
    """The planning blocks of ``candidates``, in the object store. A table with the texts is cut here; a table of
    ids (:func:`pairank.storage.inputs.read_candidate_ids`) is cut by a task that reads the whole of ``folder``'s
    candidates (:func:`read_blocks`), so the driver never holds the texts. A bad input table raises here, as a
    driver-side read would (:class:`~pairank.storage.validation.TableError` naming file, row and column)."""
    groups = plan_blocks(candidates)
    if "text" in candidates.column_names:
        return executor.put_blocks(cut_blocks(candidates, groups))  # the driver keeps no copy
    ids = candidates.column("candidate_id").combine_chunks()
    rows, *handles = executor.task(read_blocks, folder, ids, groups, returns=1 + len(groups))
    kept = executor.get(rows)  # the task's own error: a bad input table names its file, row and column
    if kept != candidates.num_rows:
        raise RuntimeError(
            f"{folder}: the candidates changed while the run read them ({candidates.num_rows} "
            f"ids read, {kept} rows found)"
        )
    return handles


def plan_requests(block: pa.Table, plan: StaticPlan, counter: Shared | None = None) -> Iterator[pa.Table]:
    """Stage: the REQUESTS rows of ``block``'s comparisons that the store had no verdict for when this sweep began
    (version :attr:`StaticPlan.as_of`); ``counter`` (a :class:`PlanCounter`) hears how many the block wants, how many
    were cached and how many another run claimed (with ``plan.claims``: left to it, see :func:`judge_streamed`).

    The same block gives the same rows in the same slices, however often the task runs within a sweep: a task lost
    with its node is run again by Ray, whose streaming tasks hand on only the slices not handed on before, and lost
    slices are made again the same way (Ray's lineage). Joined with a newer version of the store, a task run again
    would slice fewer rows differently, and the slices skipped as handed on would no longer hold the rows handed
    on. So the claim is the sweep's too: the keys the task claimed the first time are the run's own when it claims
    them again (``Claimed.again``, not read again in the store, where its own verdicts may be by now), and a run of
    another lease that was live when the sweep began still holds its keys for this sweep, although it ended since
    (``fixed``). The limits: a sweep that began more than ``RECHECK_AFTER_S`` (5 minutes) before a task claims reads
    the store again for the keys the task claims first (another run that ended in between may have answered them;
    its claims may be forgotten): a task that dropped some so and is run again keeps them; and a record of another
    run forgotten (10 minutes after that run ended) between a task and its re-run frees its keys for the re-run.
    Either changes the re-run's slices: rare, as it needs a node lost besides.
    """
    maker, wanted = plan.wanted(block)
    done = plan.answered(maker, wanted)
    todo = {k: req for k, req in wanted.items() if k not in done}
    cached, deferred = len(wanted) - len(todo), 0
    if plan.claims is not None and todo:  # what another live run claimed is left to it (its verdicts come later)
        claimed = plan.claims.claim(by_bucket(todo), since=plan.read_at, pass_no=plan.sweep_no, fixed=True)
        fresh = claimed.mine - claimed.again  # claimed by this task now, not by a run of it before in this sweep
        if claimed.recheck and fresh:  # a run that ended since the sweep began may have answered some
            found = plan.cache.answered(aspects=plan.aspects, contexts=maker.context, keys=fresh)
            claimed.mine.difference_update(found.column("key").to_pylist())
            cached += found.num_rows
        deferred = len(claimed.others)
        todo = {k: req for k, req in todo.items() if k in claimed.mine}
    if counter is not None:
        counter.call("add", block.column("context_id")[0].as_py(), len(wanted), cached, deferred)
    # rendered a slice at a time (a block of long contexts holds GBs of prompt text), in prefix order throughout
    ordered = sorted(todo.items(), key=lambda kv: prefix_key(*kv[1][:4]))
    for off in range(0, len(ordered), SLICE_ROWS):
        yield maker.table(dict(ordered[off : off + SLICE_ROWS]))


def collect_judgments(block: pa.Table, plan: StaticPlan) -> pa.Table:
    """Stage: one row per key of ``block``'s comparisons from the store (verdicts over errors)."""
    _, wanted = plan.wanted(block)
    if not wanted:
        return plan.cache.schema.empty_table()
    return plan.cache.read(aspects=plan.aspects, contexts=set(block.column("context_id").to_pylist()), keys=wanted)


@dataclass(frozen=True)
class StreamCounts:
    """What a streamed static run used: comparisons, cached, judged now, errors now."""

    requests: int
    cached: int
    judged: int
    errors: int


@dataclass
class Streamed:
    """A streamed static run once judged: its planning blocks (in Ray's object store) and its counts (None when
    nothing was left to judge: the read-back counts the comparisons then, all of them cached)."""

    plan: StaticPlan
    blocks: list[Handle]  # the candidates' blocks
    counts: StreamCounts | None

    def counted(self, comparisons: int, progress: Callable[[str], None]) -> StreamCounts:
        """The run's counts, ``comparisons`` (one row per key, read back) standing in for a run that judged none."""
        if self.counts is None:
            progress(f"{comparisons} comparisons ({comparisons} cached, 0 to judge)")
            self.counts = StreamCounts(comparisons, comparisons, 0, 0)
        return self.counts

    def read_back(self, progress: Callable[[str], None]) -> pa.Table:
        """The run's judgments, one row per key (cached or new), read back from the store by tasks, block by block."""
        progress(f"reading the run's judgments back from the store ({blocks_text(self.blocks)})")
        collected = executor.stream(self.blocks, Stage(collect_judgments, self.plan, PLANNING))
        parts = [b for b in collected.tables() if b.num_rows]
        return pa.concat_tables(parts) if parts else self.plan.cache.schema.empty_table()


def blocks_text(blocks: list[Any]) -> str:
    """``"1 block"``, ``"3 blocks"``: the progress lines' count of ``blocks``."""
    return f"{len(blocks)} block{'s' * (len(blocks) != 1)}"


#: Seconds between looks at the store for the comparisons that another run claimed.
WAIT_S = 2.0


def judge_streamed(
    plan: StaticPlan,
    blocks: list[Handle],
    pool: Callable[..., Any],
    flush_rows: int,
    progress: Callable[[str], None],
    wait_s: float = WAIT_S,
    meter: Meter | None = None,
) -> Streamed:
    """Judge every comparison of ``plan`` the store lacks, streaming the requests made from the candidates'
    ``blocks`` (:func:`put_blocks`) by the planning stage into the pool that ``pool(poll=...)`` enters (only when
    something is left to judge; ``poll`` says the plan line as soon as every block is planned). The run's
    judgments stay in the store: read them back (:meth:`Streamed.read_back`) or score them block by block
    (:mod:`pairank.jobs.judging.block_scoring`).

    With claims (``plan.claims``), a comparison that another live run claimed is not asked. Once this run's own
    are judged and committed, the blocks are planned again every ``wait_s`` seconds (a sweep): that finds the
    other run's verdicts in the store, or claims what it left unanswered when its lease ended (a run killed), and
    judges that; until no comparison is left to another run. Each sweep joins with the store as it was when that
    sweep began (:meth:`StaticPlan.next_sweep`), so a planning task run again within a sweep plans what it planned
    the first time (:func:`plan_requests`).

    With a ``meter``, the comparisons judged, errored and cached are recorded as metrics
    (:mod:`pairank.cluster.metrics`): the cached ones once every block is planned, and at the end those another run
    answered meanwhile."""

    def requests(counter: Shared, planned: StaticPlan) -> executor.Stream:
        return executor.stream(blocks, Stage(plan_requests, planned, PLANNING), counter=counter)

    counter = executor.shared(PlanCounter, len(blocks))
    said: list[bool] = []
    metered: list[int] = []  # the cached comparisons recorded as a metric
    saying = threading.Lock()  # asked by the writer and by the pool's heartbeat thread

    def total() -> int | None:
        t = counter.call("totals")
        if t["planned"] < t["blocks"]:
            return None
        with saying:
            if not said:
                said.append(True)
                left = f", {t['deferred']} being judged by another run" if t["deferred"] else ""
                todo = t["wanted"] - t["cached"] - t["deferred"]
                metered.append(t["cached"])
                if meter is not None:
                    meter.add("pairank_comparisons_cached_total", t["cached"])
                progress(f"{t['wanted']} comparisons ({t['cached']} cached, {todo} to judge{left})")
        return int(t["wanted"] - t["cached"] - t["deferred"])

    judged = errors = sweeps = 0
    first: dict[str, Any] | None = None
    waited = False
    try:
        with ExitStack() as stack:
            judge_pool = None
            this = plan  # this sweep's plan: its store version and claims' view taken when it began
            while True:
                sweeps += 1
                if sweeps > 1:
                    counter.call("next_sweep")
                    this = this.next_sweep()
                # anything to judge? (a run whose comparisons are all cached, or all claimed, starts no engine)
                if requests(counter, this).any():
                    if judge_pool is None:
                        judge_pool = stack.enter_context(pool(poll=total))
                    writer = CacheWriter(
                        plan.cache,
                        flush_rows,
                        progress,
                        "pairwise",
                        judge_pool.losses,
                        total,
                        keep=False,
                        meter=meter,
                    )
                    writer.run(judge_pool.judge(requests(counter, this), "pairwise"))
                    judged, errors = judged + writer.judged, errors + writer.errors
                total()
                t = counter.call("totals")
                first = first or t
                if not t["deferred"]:
                    break
                if not waited:
                    waited = True
                    progress(
                        f"{t['deferred']} comparisons are being judged by another run on this store: waiting for "
                        f"its verdicts (looking every {wait_s:g} s; a run that was killed gives its claims up when "
                        "its lease expires)"
                    )
                time.sleep(wait_s)
    finally:
        counter.stop()
    wanted = first["wanted"]
    if meter is not None:  # another run's verdicts found in later sweeps
        meter.add("pairank_comparisons_cached_total", max(0, wanted - judged - sum(metered)))
    return Streamed(plan, blocks, StreamCounts(wanted, wanted - judged, judged, errors))
