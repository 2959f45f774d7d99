"""Nightly, incremental runs: insert what is new, keep what is ranked, commit the night at once.

A spec with a ``nightly:`` section (``pairank run configs/nightly.yaml``) reads its
``input`` as a *prefix* of input folders (:func:`pairank.storage.inputs.read_prefix`): every
night a new folder lands there with a new system's outputs, new prompts, or both.
For each aspect and context the night then

1. finds what the last committed night placed there (:data:`pairank.storage.schemas.NIGHTLY_STATE`);
2. builds one machine per context with something new: a context never seen is
   ranked from scratch by scaled PAIRS (:class:`pairank.jobs.schedulers.anchors.AnchorInsertion`:
   sort the anchors, binary-insert the rest); a context seen before is
   :meth:`~pairank.jobs.schedulers.anchors.AnchorInsertion.resume`\\ d from its placements and only its
   new outputs are binary-inserted among its sorted anchors (at most
   ``ceil(log2(n + 1))`` probes each, both orders when ``scheduler.symmetric``);
   an unchanged context asks nothing;
3. runs them in lockstep rounds on one warm judge pool (:class:`pairank.jobs.judging.adaptive.Driver`,
   through the same steps as any run, :mod:`pairank.jobs.pipeline`).
   Every request is keyed (judge model, revision, prompt hash, sampling settings,
   both texts), so a comparison in the judgment cache is never paid again;
4. writes the night under a fresh attempt folder (input snapshot, state,
   leaderboard snapshot), then commits it as one Delta commit (:class:`pairank.storage.commits.CommitLog`),
   then writes the run's reports under ``runs/<name>-<night>/`` and the latest
   leaderboard with its history under ``<output>/leaderboard/`` (:func:`publish`).

The state of a context belongs to the judge that placed it: when the judge
identity or an aspect's prompt changes (its hash, :func:`judge_fingerprint`), that
aspect's contexts are ranked again from scratch with the new judge (counted as
``rebuilt``). Inputs are append-only: an output ranked on an earlier night that is
missing from the prefix, or whose text (or its context's) changed, is an error
that names it. A comparison that failed is answered 0.5 (no preference) during
its night, counted in the report, and the placement is kept.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.judging.adaptive import Task
from pairank.jobs.judging.requests import RequestMaker, contexts_of
from pairank.jobs.leaderboard import RunInfo, compute_leaderboard, write_leaderboard
from pairank.jobs.pipeline.inputs import Inputs
from pairank.jobs.pipeline.judge import Judged, judge_adaptive
from pairank.jobs.pipeline.report import report, write_run
from pairank.jobs.pipeline.score import score
from pairank.jobs.pipeline.setup import prepare_judging
from pairank.jobs.pipeline.winrates import win_rates
from pairank.jobs.schedulers import AnchorInsertion, PairsAnchorsSettings
from pairank.jobs.specs.job import JobSpec
from pairank.operators.leaderboard import LeaderboardOptions
from pairank.operators.reports import judgment_totals
from pairank.storage.commits import Commit, CommitLog, NightlyLayout, NightlyTable
from pairank.storage.fs import Location
from pairank.storage.inputs import read_prefix
from pairank.storage.keys import canonical_json, text_hash
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import LEADERBOARD, NIGHTLY_STATE, POSITION_BIAS, RANKINGS, SPEARMAN, WINRATES
from pairank.storage.store.claims import Claims
from pairank.storage.validation import validate

log = logging.getLogger(__name__)

#: The rankings method of a nightly run's placements.
METHOD = "pairs_anchors"


class NightlyError(ValueError):
    """A nightly job that cannot go on; the message says why and what to do."""


@dataclass
class NightlyResult:
    night: str
    commit: Commit
    run: RunLayout
    counts: dict
    report: dict = field(repr=False)

    @property
    def errors(self) -> int:
        return self.counts["errors_now"]

    @property
    def layout(self) -> RunLayout:
        """The night's run folder (``runs/<name>-<night>/``), as a run's result has it."""
        return self.run


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def judge_fingerprint(identity: dict, maker: RequestMaker, aspect: str) -> str:
    """Hash of what decides an aspect's verdicts: the judge identity and the aspect's prompt variants."""
    return text_hash(canonical_json({"judge": identity, "prompts": [v.hash for v in maker.variants[aspect]]}))


def read_state(layout: NightlyLayout, head: Commit | None) -> pa.Table:
    """The placements the head commit left (empty before the first night)."""
    if head is None:
        return NIGHTLY_STATE.empty_table()
    loc = layout.attempt(head.folder).join("state.parquet")
    return validate(loc.read_parquet(), NIGHTLY_STATE, loc.uri)


def _texts(candidates: pa.Table) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Each candidate's text, each context's text, and each candidate's system."""
    ids = candidates.column("candidate_id").to_pylist()
    return (
        dict(zip(ids, candidates.column("text").to_pylist())),
        dict(zip(candidates.column("context_id").to_pylist(), candidates.column("context").to_pylist())),
        dict(zip(ids, candidates.column("system").to_pylist())),
    )


@dataclass
class Plan:
    """What a night does per (aspect, context): the machines to run and the placements carried unchanged."""

    tasks: list[Task]
    carried: list[dict]  # state rows of unchanged contexts
    previous: dict[tuple[str, str], dict[str, dict]]  # (aspect, context) -> candidate -> its state row
    counts: dict


def plan_night(state: pa.Table, candidates: pa.Table, spec: JobSpec, fingerprints: dict[str, str], source: str) -> Plan:
    """The night's machines (see the module docstring); errors name the output that was removed or changed."""
    by_ctx = contexts_of(candidates)
    text, context, _ = _texts(candidates)
    placed: dict[tuple[str, str], dict[str, dict]] = defaultdict(dict)
    for row in state.to_pylist():
        placed[(row["aspect"], row["context_id"])][row["candidate_id"]] = row
    kept = [r for (aspect, _), rows in sorted(placed.items()) if aspect not in spec.aspects for r in rows.values()]
    for (aspect, ctx), rows in sorted(placed.items()):
        if aspect not in spec.aspects:
            continue
        for cid, row in sorted(rows.items()):
            if cid not in text:
                raise NightlyError(
                    f"{source}: output {cid!r} (context {ctx!r}, system {row['system']!r}) was ranked on night "
                    f"{row['night']!r} but is no longer in the input prefix; nightly inputs are append-only "
                    "(restore its folder, or start a new nightly name)"
                )
            if text_hash(text[cid]) != row["text_hash"] or text_hash(context[ctx]) != row["context_hash"]:
                what = "text" if text_hash(text[cid]) != row["text_hash"] else f"context {ctx!r}"
                raise NightlyError(
                    f"{source}: the {what} of output {cid!r} changed since night {row['night']!r} ranked it; "
                    "an output that changes needs a new candidate_id (and a changed prompt a new context_id)"
                )
    sched = spec.scheduler
    assert isinstance(sched, PairsAnchorsSettings), "JobSpec requires pairs_anchors with a nightly section"
    tasks, carried, previous = [], kept, {}  # an aspect dropped from the spec keeps its placements for later
    counts = {"new": 0, "extended": 0, "unchanged": 0, "rebuilt": 0, "new_outputs": 0}
    for aspect in spec.aspects:
        for ctx, ids in sorted(by_ctx.items()):
            rows = placed.get((aspect, ctx), {})
            if rows and next(iter(rows.values()))["judge"] != fingerprints[aspect]:
                counts["rebuilt"] += 1
                rows = {}
            elif not rows:
                counts["new"] += 1
            if not rows:
                tasks.append(Task(aspect, ctx, sched.seed, sched.machine(ctx, ids, sched.seed)))
                counts["new_outputs"] += len(ids)
                continue
            new = sorted(set(ids) - set(rows))
            if not new:
                counts["unchanged"] += 1
                carried.extend(rows.values())
                continue
            counts["extended"] += 1
            counts["new_outputs"] += len(new)
            anchors = sorted((r for r in rows.values() if r["role"] == "anchor"), key=lambda r: r["anchor_index"])
            machine = AnchorInsertion.resume(
                ctx,
                [r["candidate_id"] for r in anchors],
                {c: (r["gap"], r["mean_p"]) for c, r in rows.items() if r["role"] == "inserted"},
                [r["candidate_id"] for r in sorted(rows.values(), key=lambda r: r["order"])],
                sched.seed,
                symmetric=sched.symmetric,
            )
            machine.add(new)
            tasks.append(Task(aspect, ctx, sched.seed, machine))
            previous[(aspect, ctx)] = rows
    return Plan(tasks, carried, previous, counts)


def placed_rows(plan: Plan, candidates: pa.Table, fingerprints: dict[str, str], night: str) -> pa.Table:
    """The state after the night: carried rows, and every machine's placements."""
    text, context, system = _texts(candidates)
    rows = list(plan.carried)
    for task in plan.tasks:
        before = plan.previous.get((task.aspect, task.context_id), {})
        assert isinstance(task.machine, AnchorInsertion)  # (plan_night's machines all are)
        for p in task.machine.placements():
            cid = p["candidate_id"]
            rows.append(
                {
                    **p,
                    "aspect": task.aspect,
                    "context_id": task.context_id,
                    "system": system[cid],
                    "night": before[cid]["night"] if cid in before else night,
                    "judge": fingerprints[task.aspect],
                    "text_hash": text_hash(text[cid]),
                    "context_hash": text_hash(context[task.context_id]),
                }
            )
    rows.sort(key=lambda r: (r["aspect"], r["context_id"], r["rank"]))
    return validate(pa.Table.from_pylist(rows, schema=NIGHTLY_STATE), NIGHTLY_STATE, "the night's placements")


def state_rankings(state: pa.Table, judgments: pa.Table) -> pa.Table:
    """RANKINGS rows of the placements: score = 1 - (rank - 1) / (N - 1), comparisons counted in ``judgments``."""
    count: dict[tuple[str, str, str], int] = defaultdict(int)
    for r in judgments.select(["aspect", "context_id", "candidate_a", "candidate_b"]).to_pylist():
        count[(r["aspect"], r["context_id"], r["candidate_a"])] += 1
        count[(r["aspect"], r["context_id"], r["candidate_b"])] += 1
    size: dict[tuple[str, str], int] = defaultdict(int)
    rows = state.to_pylist()
    for r in rows:
        size[(r["aspect"], r["context_id"])] += 1
    out = []
    for r in rows:
        n = size[(r["aspect"], r["context_id"])]
        out.append(
            {
                "context_id": r["context_id"],
                "aspect": r["aspect"],
                "candidate_id": r["candidate_id"],
                "system": r["system"],
                "method": METHOD,
                "score": 1.0 - (r["rank"] - 1) / (n - 1) if n > 1 else 1.0,
                "rank": r["rank"],
                "n_comparisons": count[(r["aspect"], r["context_id"], r["candidate_id"])],
            }
        )
    return pa.Table.from_pylist(out, schema=RANKINGS)


def night_judgments(table: pa.Table, maker: RequestMaker, candidates: pa.Table, aspects: list[str]) -> pa.Table:
    """Of the cache's rows ``table``, every judgment this judge made between the prefix's outputs (all nights):
    the key must match."""
    ids = candidates.column("candidate_id")
    mask = pc.and_(
        pc.and_(
            pc.is_in(table.column("aspect"), pa.array(aspects, pa.string())),
            pc.is_in(table.column("context_id"), candidates.column("context_id")),
        ),
        pc.and_(pc.is_in(table.column("candidate_a"), ids), pc.is_in(table.column("candidate_b"), ids)),
    )
    table = table.filter(mask)
    keep = [
        i
        for i, r in enumerate(table.select(["key", "aspect", "context_id", "candidate_a", "candidate_b"]).to_pylist())
        if r["key"] in maker.keys(r["aspect"], r["context_id"], r["candidate_a"], r["candidate_b"])
    ]
    return table.take(pa.array(keep, type=pa.int64()))


def read_prefix_inputs(spec: JobSpec) -> Inputs:
    """The read step of a night: every drop of the input prefix (see :func:`pairank.storage.inputs.read_prefix`)."""
    prefix = Location.of(spec.input)
    candidates, human, folders = read_prefix(prefix)
    return Inputs(candidates, human, prefix, tuple(folders))


def run_nightly(
    spec: JobSpec,
    progress: Callable[[str], None] = log.info,
    clock: Callable[[], dt.datetime] = _utc_now,
    claims: Claims | None = None,
) -> NightlyResult:
    """One night of ``spec`` (which has a ``nightly`` section); see the module docstring. ``claims``: the night's,
    under its lease (:mod:`pairank.storage.store.claims`)."""
    if spec.nightly is None:
        raise ValueError(f"{spec.name}: not a nightly job (the spec has no nightly section)")
    nightly = spec.nightly
    started_wall = time.perf_counter()
    started = clock()
    night = nightly.night or started.date().isoformat()
    root = Location.of(spec.output)
    layout = NightlyLayout(root, spec.name)
    commits = CommitLog(layout)
    history = commits.commits()
    head = history[-1] if history else None
    done = [c for c in history if c.night == night]
    if done:
        raise NightlyError(
            f"{layout.log.uri}: night {night!r} of {spec.name!r} is already committed (commit {done[0].seq}); "
            "set nightly.night to another label to run again today"
        )
    inputs = read_prefix_inputs(spec)
    candidates, prefix = inputs.candidates, inputs.source
    progress(
        f"{spec.name} night {night}: {len(inputs.folders)} input folders, {candidates.num_rows} outputs; "
        f"on top of {'commit ' + str(head.seq) + ' (' + head.night + ')' if head else 'nothing (first night)'}"
    )
    for line in spec.judge_choices:
        progress(f"judge: {line}")
    run = RunLayout(root, f"{spec.name}-{night}")
    setup = prepare_judging(spec, candidates, run, claims)
    fingerprints = {aspect: judge_fingerprint(setup.identity, setup.maker, aspect) for aspect in spec.aspects}
    plan = plan_night(read_state(layout, head), candidates, spec, fingerprints, prefix.uri)
    c = plan.counts
    progress(
        f"contexts x aspects: {c['new']} new, {c['extended']} with new outputs, {c['unchanged']} unchanged, "
        f"{c['rebuilt']} rebuilt for a changed judge; {c['new_outputs']} outputs to place"
    )
    judged = judge_adaptive(spec, inputs, setup, progress, tasks=plan.tasks)
    state = placed_rows(plan, candidates, fingerprints, night)
    cached = setup.cache.read(
        aspects=spec.aspects, contexts=list(setup.maker.context)
    )  # once after judging: the night's judgments and its leaderboard both read it
    # A night ranks with every verdict its judge gave between the prefix's outputs, on any night.
    judgments = night_judgments(cached, setup.maker, candidates, spec.aspects)
    scored = score(spec, inputs, Judged(judgments, judged.counts, [state_rankings(state, judgments)]))
    rates = win_rates(spec.winrate, spec.baseline, spec.aspects, inputs, judgments, progress)
    counts = {
        "night": night,
        "input_folders": len(inputs.folders),
        "contexts": inputs.contexts,
        "candidates": candidates.num_rows,
        **{f"contexts_{k}" if k != "new_outputs" else k: v for k, v in c.items()},
        **asdict(judged.counts),
    }

    attempt_name = layout.new_attempt(night)
    attempt = layout.attempt(attempt_name)
    info = RunInfo(run.name, run, attempt.join("input").uri, list(spec.aspects), None, None, started.isoformat())
    baseline = nightly.baseline or (spec.winrate.baseline if spec.winrate else None)
    options = LeaderboardOptions(
        n_boot=nightly.n_boot, seed=nightly.seed, baseline=baseline, compat=tuple(nightly.compat)
    )
    # Everything of the night goes under the fresh attempt folder; nothing is read until a commit names it.
    tables = {
        "input/candidates": candidates,
        "input/human_scores": inputs.human,
        "state": state,
        "position_bias": scored.bias,
        "spearman": scored.spearman,
        "winrates": rates.rates if rates else None,
        "winrate_judges": rates.judges if rates else None,
    }
    for name, table in tables.items():
        if table is not None:
            attempt.join(f"{name}.parquet").write_parquet(table)
    carried = rates.rates if rates is not None else WINRATES.empty_table()  # none: not a stale run folder's
    _, board, meta = compute_leaderboard(
        root, [info], options, winrates=carried, clock=clock, progress=progress, strict=False, cached=cached
    )
    attempt.join("leaderboard.parquet").write_parquet(board)
    attempt.join("leaderboard.json").write_json({**meta, "nightly": {"name": spec.name, "night": night}})

    commit = commits.commit(
        head.seq if head else 0,
        {
            "night": night,
            "folder": attempt_name,
            "run": run.name,
            "input": prefix.uri,
            "input_folders": list(inputs.folders),
            "judges": fingerprints,
            "started_at": started.isoformat(),
            "committed_at": clock().isoformat(),
            "counts": counts,
        },
    )
    progress(f"committed night {night} as commit {commit.seq} of {layout.log.uri}")

    # The night's run, for people and for `pairank leaderboard`: written by the writer that committed only.
    extra = {"nightly": {"night": night, "commit": commit.seq, "attempt": attempt.uri, **c}, **judged.extra}
    extra["judge_choices"] = spec.judge_choices
    run_spec = {**spec.model_dump(mode="json"), "input": info.input}
    rep = report(run_spec, setup.identity, judgment_totals(judgments), scored, rates, counts, started_wall, extra)
    manifest = {
        "name": run.name,
        "state": "done",
        "started_at": started.isoformat(),
        "finished_at": clock().isoformat(),
        "spec": run_spec,
        "judge": setup.identity,
        "counts": counts,
        "nightly": {"name": spec.name, "night": night, "commit": commit.seq},
    }
    write_run(run, scored, rates, rep, manifest)
    publish(root, spec.name, progress)
    return NightlyResult(night, commit, run, counts, rep)


def history_table(layout: NightlyLayout, commits: list[Commit]) -> pa.Table:
    """Every committed night's leaderboard rows up to the last of ``commits``, oldest first, with ``night`` and
    ``seq`` columns: from the job's history table, appended first with the nights it lacks (as is the state
    table with the nights' placements)."""
    tables = {
        "history": (LEADERBOARD, "leaderboard.parquet", "night", ("aspect", "rank", "system")),
        "state": (NIGHTLY_STATE, "state.parquet", "committed_night", ("aspect", "context_id", "rank")),
    }
    for table, (schema, file, night_column, order) in tables.items():

        def snapshot(commit: Commit, file=file, schema=schema) -> pa.Table:
            loc = layout.attempt(commit.folder).join(file)
            return validate(loc.read_parquet(), schema, loc.uri)

        NightlyTable(layout, table, schema, night_column, order).catch_up(commits, snapshot)
    return NightlyTable(layout, "history", LEADERBOARD).read(upto=commits[-1].seq)


def publish(root: Location, name: str, progress: Callable[[str], None] = lambda m: None) -> Commit | None:
    """Write ``<root>/leaderboard/`` (latest snapshot, history, page) from the highest commit of ``name``.

    The view is a function of the commits, so writing it twice is harmless. A
    writer that finishes after a newer commit appeared would leave a stale view:
    so after writing, the head is read again and, if it moved, the view is
    written again from the new head (whose own writer does the same).
    """
    layout = NightlyLayout(root, name)
    written = None
    while True:
        commits = CommitLog(layout).commits()
        if not commits or commits[-1].seq == written:
            return commits[-1] if commits else None
        out = RunLayout(root, "").leaderboard
        write_view(layout, commits, out)
        progress(
            f"wrote {out.uri}/ from commit {commits[-1].seq} ({commits[-1].night}), history of {len(commits)} nights"
        )
        written = commits[-1].seq


def write_view(layout: NightlyLayout, commits: list[Commit], out: Location) -> None:
    """The leaderboard (snapshot, history, page) as of the last of ``commits``, written to ``out``."""
    head = commits[-1]
    folder = layout.attempt(head.folder)
    table = validate(folder.join("leaderboard.parquet").read_parquet(), LEADERBOARD, folder.uri)
    meta = {
        **folder.join("leaderboard.json").read_json(),
        "nightly": {"name": layout.name, "night": head.night, "commit": head.seq, "nights": [c.night for c in commits]},
    }
    bias = validate(folder.join("position_bias.parquet").read_parquet(), POSITION_BIAS, folder.uri)
    spearman = validate(folder.join("spearman.parquet").read_parquet(), SPEARMAN, folder.uri)
    write_leaderboard(out, table, meta, bias, spearman, history=history_table(layout, commits))


def publish_as_of(root: Location, name: str, as_of: str, out: Location | None = None) -> tuple[Commit, Location]:
    """The leaderboard of nightly ``name`` as it was after night ``as_of`` (a night label or a commit number),
    rebuilt from the log into ``out`` (default ``<root>/leaderboard/as-of/<night>/``)."""
    commits = CommitLog(NightlyLayout(root, name)).commits()
    if not commits:
        raise ValueError(f"{NightlyLayout(root, name).log.uri}: nightly {name!r} has no committed night")
    found = [i for i, c in enumerate(commits) if c.night == as_of or str(c.seq) == as_of]
    if not found:
        nights = ", ".join(f"{c.seq} ({c.night})" for c in commits)
        raise ValueError(f"--as-of {as_of!r}: nightly {name!r} has no such night or commit; it has {nights}")
    upto = commits[: found[-1] + 1]
    out = out or RunLayout(root, "").leaderboard.join("as-of", upto[-1].night)
    write_view(NightlyLayout(root, name), upto, out)
    return upto[-1], out
