"""``pairank leaderboard``: the leaderboard of the runs under a storage root.

Reads, under ``<root>`` (a local path or ``s3://``)::

    runs/<name>/manifest.json     each run's spec: its input (candidates), subset and aspects
    judgments/part-*.parquet      the judgment cache shared by the runs
    runs/<name>/winrates.parquet, position_bias.parquet, spearman.parquet   (when a run wrote them)

and writes, each file atomically (:meth:`pairank.storage.fs.Location.write_bytes`)::

    leaderboard/leaderboard.parquet   LEADERBOARD rows (operators.leaderboard)
    leaderboard/leaderboard.json      the rows plus when, runs, judges, n_boot, seed, per-aspect counts, the
                                      judge bias of the board's judgments (operators.judge_bias) and the
                                      quality figures per aspect (operators.board_quality)
    leaderboard/index.html            the static page (operators.leaderboard_html)
    leaderboard/categories/<folder>/  the same three files for each category of the candidates' contexts

Quality: separability, the Brier score on held-out contexts and, against each
reference ranking (the systems' mean human scores from the runs' inputs, and any
leaderboard file given), Spearman and agreement. Categories: where the runs' candidates
carry a ``category`` (CANDIDATES' optional column), each category gets the board
of its contexts' judgments alone, computed exactly as for runs restricted to those
contexts, without carried win rates (those are over all contexts).

Which judgments: every judgment in the cache on a (context, aspect) of a selected
run (a context of its input, within its ``subset``, and an aspect of its spec)
whose two candidates are among the run's candidates, whichever judge made it; each
row lists its judges. A candidate id in such a judgment that is not in the runs'
inputs at all is an error. Win rates, position bias and Spearman are read from the
runs, not recomputed; where two runs have a win-rate row for the same (aspect,
system, method), the later run's (by manifest ``started_at``) is carried. The
judge bias (length preference, self-preference, flips when the slots swap) is
computed from the board's own judgments, per judge, so it covers every judge on
the board.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import posixpath
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.human_labels import human_board
from pairank.jobs.judging.requests import subset
from pairank.operators.board_quality import Reference, board_quality, board_reference, human_reference
from pairank.operators.judge_bias import judge_bias
from pairank.operators.leaderboard import Leaderboard, LeaderboardOptions, leaderboard
from pairank.operators.leaderboard_html import render_html
from pairank.operators.style_control import lc_warnings
from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidates, read_human_scores
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import CATEGORY, HUMAN_SCORES, LEADERBOARD, POSITION_BIAS, SPEARMAN, WINRATES
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.lease import is_held
from pairank.storage.validation import validate


@dataclass(frozen=True)
class RunInfo:
    """What the leaderboard needs of one run, from its manifest."""

    name: str
    layout: RunLayout
    input: str
    aspects: list[str]
    subset_contexts: int | None
    subset_candidates: int | None
    started_at: str
    state: str = "done"
    running: bool = False

    @property
    def finished(self) -> bool:
        return self.state == "done"

    def describe(self) -> str:
        """How an unfinished run stands, in words."""
        if self.running:
            return f"run {self.name} is still {self.state} (started {self.started_at})"
        if self.state == "failed":
            return f"run {self.name} failed (started {self.started_at})"
        return (
            f"run {self.name} stopped before it finished (state {self.state!r}, no live lease; "
            f"started {self.started_at})"
        )


@dataclass(frozen=True)
class LeaderboardResult:
    board: Leaderboard
    runs: list[str]
    table: Location
    json: Location
    html: Location
    meta: dict
    categories: list[dict] = field(default_factory=list)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def run_names(root: Location) -> list[str]:
    """Folders under ``<root>/runs`` (names starting '.' or '_' are skipped), sorted."""
    return [posixpath.basename(f.path) for f in RunLayout(root, "").runs.folders()]


def read_run(root: Location, name: str) -> RunInfo:
    """A run's manifest, read and checked; errors name the file and what is missing."""
    layout = RunLayout(root, name)
    if not layout.manifest.exists():
        raise FileNotFoundError(
            f"{layout.manifest.uri}: run {name!r} has no manifest.json (a folder not written by `pairank run`, "
            "or a run that stopped before it started); remove the folder or choose runs with --runs"
        )
    manifest = layout.manifest.read_json()
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    if not isinstance(spec, dict) or not spec.get("input") or not spec.get("aspects"):
        raise ValueError(f"{layout.manifest.uri}: expected a run manifest with spec.input and spec.aspects")
    sub = spec.get("subset") or {}
    return RunInfo(
        name=name,
        layout=layout,
        input=spec["input"],
        aspects=list(spec["aspects"]),
        subset_contexts=sub.get("contexts"),
        subset_candidates=sub.get("candidates"),
        started_at=str(manifest.get("started_at") or ""),
        state=str(manifest.get("state") or "done"),
        running=manifest.get("state") != "done" and is_held(root, name),
    )


def read_runs(root: Location, names: list[str] | None = None) -> list[RunInfo]:
    """The selected runs (default: every run under the root), in the order they started."""
    present = run_names(root)
    if not present:
        raise FileNotFoundError(
            f"{RunLayout(root, '').runs.uri}: no runs under the storage root {root.uri} "
            f"(run `pairank run <spec>` with output={root.uri} first)"
        )
    names = names or present
    unknown = [n for n in names if n not in present]
    if unknown:
        raise FileNotFoundError(f"runs {unknown} are not under {root.uri}/runs; runs there: {', '.join(present)}")
    runs = [read_run(root, n) for n in dict.fromkeys(names)]
    return sorted(runs, key=lambda r: (r.started_at, r.name))


def run_candidates(runs: list[RunInfo]) -> tuple[pa.Table, dict[str, pa.Table]]:
    """The runs' inputs' candidates (all of them), and per run those it used (within its subset)."""
    full: dict[str, pa.Table] = {}
    used = {}
    for run in runs:
        if run.input not in full:
            full[run.input] = read_candidates(Location.of(run.input))
        used[run.name] = subset(full[run.input], run.subset_contexts, run.subset_candidates)
    return _union(list(full.values()), [r.input for r in runs]), used


def _union(tables: list[pa.Table], inputs: list[str]) -> pa.Table:
    table = pa.concat_tables(tables, promote_options="default")  # inputs with and without categories
    system: dict[str, str] = {}
    keep = []
    for i, (cid, s) in enumerate(zip(table.column("candidate_id").to_pylist(), table.column("system").to_pylist())):
        if cid in system:
            if system[cid] != s:
                raise ValueError(
                    f"candidate {cid!r} has system {system[cid]!r} in one input and {s!r} in another "
                    f"(inputs: {', '.join(dict.fromkeys(inputs))})"
                )
            continue
        system[cid] = s
        keep.append(i)
    return table.take(pa.array(keep, type=pa.int64()))


def _pair_keys(a: pa.ChunkedArray, b: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(a, b, "\x1f")


def run_judgments(
    root: Location,
    runs: list[RunInfo],
    full: pa.Table,
    used: dict[str, pa.Table],
    strict: bool = True,
    cached: pa.Table | None = None,
):
    """The cache's judgments on the runs' (context, aspect)s between the runs' candidates, and counts.

    ``strict``: a judgment there with a candidate in none of the runs' inputs is an
    error; otherwise it is left out like any judgment outside the runs' candidates (a
    nightly job shares its root, and so its contexts, with other jobs). ``cached``: the
    cache as already read by the caller (default: read it here).
    """
    cache = JudgmentCache(RunLayout(root, "").judgments)
    allowed = set()
    for run in runs:
        contexts = set(used[run.name].column("context_id").to_pylist())
        allowed |= {(c, a) for c in contexts for a in run.aspects}
    if cached is None:
        cached = cache.read(aspects={a for _, a in allowed}, contexts={c for c, _ in allowed})
    table = cached
    if table.num_rows == 0:
        raise FileNotFoundError(f"{cache.folder.uri}: no judgments on the runs' contexts; nothing to rank")
    allowed_keys = {f"{c}\x1f{a}" for c, a in allowed}
    keys = _pair_keys(table.column("context_id"), table.column("aspect"))
    on_runs = table.filter(pc.is_in(keys, pa.array(sorted(allowed_keys), type=pa.string())))
    known = full.column("candidate_id")
    for slot in ("candidate_a", "candidate_b") if strict else ():
        missing = pc.invert(pc.is_in(on_runs.column(slot), known))
        if pc.any(missing).as_py():
            row = pc.index(missing, True).as_py()
            r = on_runs.slice(row, 1).to_pylist()[0]
            raise ValueError(
                f"{cache.folder.uri}: judgment {r['key']} (context {r['context_id']!r}, aspect {r['aspect']!r}): "
                f"{slot} {r[slot]!r} is not in the candidates of the runs' inputs "
                f"({', '.join(dict.fromkeys(run.input for run in runs))}), so its system is unknown"
            )
    ids = pa.concat_tables(list(used.values())).column("candidate_id")
    inside = pc.and_(pc.is_in(on_runs.column("candidate_a"), ids), pc.is_in(on_runs.column("candidate_b"), ids))
    kept = on_runs.filter(inside)
    counts = {
        "cache": table.num_rows,
        "on_runs": on_runs.num_rows,
        "outside_subsets": on_runs.num_rows - kept.num_rows,
        "used": kept.num_rows,
    }
    unfinished = [run for run in runs if not run.finished]
    if unfinished:
        counts["unfinished"] = {run.name: _in_scope(kept, run, used[run.name]) for run in unfinished}
    if kept.num_rows == 0:
        raise ValueError(
            f"{cache.folder.uri}: no judgments on the contexts and aspects of runs {[r.name for r in runs]}"
        )
    return kept, counts


def _in_scope(judgments: pa.Table, run: RunInfo, used: pa.Table) -> int:
    """How many of ``judgments`` lie on ``run``'s contexts and aspects, between its candidates."""
    contexts = pa.array(sorted(set(used.column("context_id").to_pylist())), type=pa.string())
    ids = used.column("candidate_id")
    mask = pc.and_(
        pc.and_(
            pc.is_in(judgments.column("context_id"), contexts),
            pc.is_in(judgments.column("aspect"), pa.array(run.aspects, type=pa.string())),
        ),
        pc.and_(pc.is_in(judgments.column("candidate_a"), ids), pc.is_in(judgments.column("candidate_b"), ids)),
    )
    return int(pc.sum(mask.cast(pa.int64())).as_py() or 0)


def _run_tables(runs: list[RunInfo], attr: str, schema: pa.Schema, with_run: bool) -> pa.Table | None:
    tables = []
    for run in runs:
        loc: Location = getattr(run.layout, attr)
        if not loc.exists():
            continue
        t = validate(loc.read_parquet(), schema, loc.uri)
        if with_run:
            t = t.add_column(0, "run", pa.array([run.name] * t.num_rows, type=pa.string()))
        tables.append(t)
    return pa.concat_tables(tables) if tables else None


@dataclass(frozen=True)
class BoardInputs:
    """What a board is computed from: the judgments, the candidates each run used and their union (which names
    each system), their human scores, and the counts of :func:`run_judgments`."""

    judgments: pa.Table
    used: dict[str, pa.Table]
    candidates: pa.Table
    human: pa.Table
    counts: dict

    def restricted(self, contexts: set[str], runs: list[RunInfo]) -> BoardInputs:
        """The same on ``contexts`` alone: what runs whose inputs held only those contexts would give."""
        keep = pa.array(sorted(contexts), type=pa.string())

        def inside(table: pa.Table) -> pa.Table:
            return table.filter(pc.is_in(table.column("context_id"), keep))

        judgments, candidates = inside(self.judgments), inside(self.candidates)
        used = {name: inside(table) for name, table in self.used.items()}
        human = self.human.filter(pc.is_in(self.human.column("candidate_id"), candidates.column("candidate_id")))
        counts: dict = {"used": judgments.num_rows}
        unfinished = [run for run in runs if not run.finished]
        if unfinished:
            counts["unfinished"] = {run.name: _in_scope(judgments, run, used[run.name]) for run in unfinished}
        return BoardInputs(judgments, used, candidates, human, counts)


def board_inputs(
    loc: Location,
    infos: list[RunInfo],
    strict: bool = True,
    cached: pa.Table | None = None,
    progress: Callable[[str], None] = lambda m: None,
) -> BoardInputs:
    """The judgments, candidates and human scores of ``infos`` under ``loc`` (``strict``, ``cached``: see
    :func:`run_judgments`)."""
    full, used = run_candidates(infos)
    judgments, counts = run_judgments(loc, infos, full, used, strict, cached)
    candidates = _union(list(used.values()), [r.input for r in infos])
    progress(f"{counts['used']} judgments on the runs' contexts and aspects ({counts['cache']} in the cache)")
    return BoardInputs(judgments, used, candidates, run_human_scores(infos, candidates), counts)


def run_human_scores(infos: list[RunInfo], candidates: pa.Table) -> pa.Table:
    """The human scores of the runs' inputs on ``candidates`` (none where the inputs have none); a (candidate,
    aspect) scored in two inputs keeps the first run's score."""
    seen: set[tuple[str, str]] = set()
    rows = []
    ids = set(candidates.column("candidate_id").to_pylist())
    for uri in dict.fromkeys(r.input for r in infos):
        for r in read_human_scores(Location.of(uri)).to_pylist():
            if r["candidate_id"] in ids and (r["candidate_id"], r["aspect"]) not in seen:
                seen.add((r["candidate_id"], r["aspect"]))
                rows.append(r)
    return pa.Table.from_pylist(rows, schema=HUMAN_SCORES)


def compute_leaderboard(
    loc: Location,
    infos: list[RunInfo],
    options: LeaderboardOptions,
    winrates: pa.Table | None = None,
    clock: Callable[[], dt.datetime] = _utc_now,
    progress: Callable[[str], None] = lambda m: None,
    strict: bool = True,
    cached: pa.Table | None = None,
    *,
    references: Sequence[Reference] = (),
    inputs: BoardInputs | None = None,
) -> tuple[Leaderboard, pa.Table, dict]:
    """The leaderboard of ``infos``' judgments under ``loc``: the board, its LEADERBOARD table and its metadata.

    ``winrates``: WINRATES to carry (default: those the runs wrote); ``strict`` and ``cached``: see
    :func:`run_judgments`; ``inputs``: as :func:`board_inputs` reads them (default: read here). The quality
    figures compare the board with the runs' human scores, where the inputs have any, then with ``references``.
    """
    if inputs is None:
        inputs = board_inputs(loc, infos, strict, cached, progress)
    judgments, systems, counts = inputs.judgments, inputs.candidates, inputs.counts
    if winrates is None:
        winrates = _run_tables(infos, "winrates", WINRATES, with_run=False)
    board = leaderboard(judgments, systems, winrates, options)
    table = validate(board.table, LEADERBOARD, "the leaderboard")
    aspects = sorted(set(judgments.column("aspect").to_pylist()))
    human = human_reference(
        inputs.human,
        systems,
        aspects,
        ", ".join(Location.of(u).join("human_scores.parquet").uri for u in dict.fromkeys(r.input for r in infos)),
    )
    meta = {
        "generated_at": clock().isoformat(),
        "root": loc.uri,
        "runs": [r.name for r in infos],
        "inputs": list(dict.fromkeys(r.input for r in infos)),
        "judges": board.judges,
        "n_boot": options.n_boot,
        "seed": options.seed,
        "mass": options.mass,
        "prior_ties": options.prior_ties,
        "baseline": board.baseline,
        "winrate_methods": list(options.winrate_methods),
        "judgments": counts,
        "counts": board.counts,
        "intervals": board.intervals,
        "lc_warnings": lc_warnings(judgments, systems, board.baseline) if board.baseline in systems_of(systems) else [],
        "judge_bias": judge_bias(judgments, systems),
        "quality": board_quality(
            table, judgments, systems, options, [human, *references] if human.scores else list(references)
        ),
        "unfinished": [
            {
                "run": r.name,
                "state": r.state,
                "running": r.running,
                "started_at": r.started_at,
                "judgments": counts.get("unfinished", {}).get(r.name, 0),
                "note": r.describe(),
            }
            for r in infos
            if not r.finished
        ],
    }
    return board, table, meta


def systems_of(candidates: pa.Table) -> set[str]:
    return set(candidates.column("system").to_pylist())


def read_reference(uri: str) -> Reference:
    """A leaderboard of ``pairank leaderboard`` as a reference ranking: its ``leaderboard.parquet`` or
    ``leaderboard.json``, or the folder holding them; the rows are checked against LEADERBOARD."""
    loc = Location.of(uri)
    if loc.is_dir():
        loc = loc.join("leaderboard.parquet")
    if not loc.exists():
        raise FileNotFoundError(
            f"{loc.uri}: no such file (--reference takes a leaderboard.parquet or "
            "leaderboard.json written by `pairank leaderboard`, or their folder)"
        )
    if loc.path.endswith(".json"):
        doc = loc.read_json()
        rows = doc.get("rows") if isinstance(doc, dict) else None
        if not isinstance(rows, list) or not rows or not all(isinstance(r, dict) for r in rows):
            raise ValueError(
                f"{loc.uri}: expected the JSON of `pairank leaderboard`, an object whose `rows` is a "
                "non-empty list of rows"
            )
        table = pa.Table.from_pylist(rows)
    elif loc.path.endswith(".parquet"):
        table = loc.read_parquet()
    else:
        raise ValueError(f"{loc.uri}: --reference takes a leaderboard .parquet or .json file, or their folder")
    return board_reference(validate(table, LEADERBOARD, loc.uri), loc.uri)


def category_contexts(candidates: pa.Table) -> dict[str, list[str]]:
    """The contexts of each category, by category name, from the candidates' optional ``category`` column (none
    without it). A context with two categories (from two inputs) is an error.

    >>> t = pa.table({"context_id": ["c1", "c1", "c2", "c3"], "category": ["news", "news", None, "chat"]})
    >>> category_contexts(t)
    {'chat': ['c3'], 'news': ['c1']}
    """
    if CATEGORY.name not in candidates.column_names:
        return {}
    category: dict[str, str] = {}
    for ctx, name in zip(*(candidates.column(c).to_pylist() for c in ("context_id", CATEGORY.name))):
        if name is not None and category.setdefault(ctx, name) != name:
            raise ValueError(
                f"context {ctx!r} has category {category[ctx]!r} in one of the runs' inputs and {name!r} "
                "in another; a context has one category"
            )
    out: dict[str, list[str]] = {}
    for ctx, name in sorted(category.items()):
        out.setdefault(name, []).append(ctx)
    return dict(sorted(out.items()))


def category_folder(name: str) -> str:
    """The folder of a category's board under ``leaderboard/categories/``: the name where it is safe as a folder
    name, else its safe characters and a short hash of the name (so two names never share a folder).

    >>> category_folder("news"), category_folder("Q&A / hard")
    ('news', 'Q-A-hard-b3be4c4b')
    """
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.")
    if safe == name:
        return name
    return f"{safe or 'category'}-{hashlib.sha256(name.encode('utf-8')).hexdigest()[:8]}"


def write_categories(
    folder: Location,
    loc: Location,
    infos: list[RunInfo],
    inputs: BoardInputs,
    options: LeaderboardOptions,
    references: Sequence[Reference],
    clock: Callable[[], dt.datetime] = _utc_now,
    progress: Callable[[str], None] = lambda m: None,
) -> list[dict]:
    """Each category's board (:meth:`BoardInputs.restricted`, no carried win rates) under
    ``folder/categories/<category_folder>/``; per category what it holds, for the board's JSON."""
    out = []
    options = replace(options, baseline=None)
    for name, contexts in category_contexts(inputs.candidates).items():
        mine = inputs.restricted(set(contexts), infos)
        entry = {"category": name, "contexts": len(contexts), "judgments": mine.judgments.num_rows}
        if mine.judgments.num_rows == 0:
            progress(f"category {name}: no judgments on its {len(contexts)} contexts; no board")
            out.append({**entry, "folder": None, "systems": 0})
            continue
        _, table, meta = compute_leaderboard(
            loc, infos, options, WINRATES.empty_table(), clock, references=references, inputs=mine
        )
        sub = f"categories/{category_folder(name)}"
        write_leaderboard(
            folder.join(*sub.split("/")), table, {**meta, "category": name, "board": "../../index.html"}, None, None
        )
        systems = len(set(table.column("system").to_pylist()))
        out.append({**entry, "folder": sub, "systems": systems})
    return out


def write_leaderboard(
    folder: Location,
    table: pa.Table,
    meta: dict,
    bias: pa.Table | None,
    spearman: pa.Table | None,
    history: pa.Table | None = None,
) -> None:
    """``leaderboard.parquet``, ``leaderboard.json`` and ``index.html`` under ``folder``, each atomically.

    With ``history`` (LEADERBOARD rows plus ``night`` and ``seq``, one block per
    committed night) also ``history.parquet``, the history in the JSON and its plots.
    """
    folder.join("leaderboard.parquet").write_parquet(table)
    doc = {**meta, "rows": table.to_pylist()}
    if history is not None:
        folder.join("history.parquet").write_parquet(history)
        doc["history"] = history.to_pylist()
    folder.join("leaderboard.json").write_json(doc)
    folder.join("index.html").write_text(render_html(table, meta, bias, spearman, history=history))


def build_leaderboard(
    root: str,
    runs: list[str] | None = None,
    baseline: str | None = None,
    n_boot: int = 200,
    seed: int = 0,
    clock: Callable[[], dt.datetime] = _utc_now,
    progress: Callable[[str], None] = lambda m: None,
    finished_only: bool = False,
    references: Sequence[str] = (),
    compat: Sequence[str] = (),
    human: str | None = None,
    alpha: float = 0.1,
) -> LeaderboardResult:
    """Read the runs under ``root``, build the leaderboard and write its three files under ``<root>/leaderboard``
    (and a board per category of the candidates' contexts under ``<root>/leaderboard/categories/``).

    A run whose manifest does not say ``done`` (still judging, stopped, failed) is flagged: the page gets a
    banner naming it with the number of the board's judgments on its contexts; ``finished_only`` leaves such
    runs out instead. ``references``: leaderboard files (:func:`read_reference`) to compare the board with.
    ``compat``: compatibility settings of the style-controlled and LC columns (operators/compat.py).
    ``human``: human pairwise labels (jobs/human_labels.py): the board also gets prediction-powered rank-sets
    and win rates at ``1 - alpha``, written to ``prediction_powered.parquet`` and shown on the page.
    """
    loc = Location.of(root).not_a_file("leaderboard root")
    options = LeaderboardOptions(n_boot=n_boot, seed=seed, baseline=baseline, compat=tuple(compat))
    refs = [read_reference(uri) for uri in references]
    infos = read_runs(loc, runs)
    if finished_only:
        left_out = [r.name for r in infos if not r.finished]
        infos = [r for r in infos if r.finished]
        if left_out:
            progress(f"left out (not finished): {', '.join(left_out)}")
        if not infos:
            raise ValueError(f"{loc.uri}: no finished run to rank (--finished-only left out {', '.join(left_out)})")
    progress(f"runs: {', '.join(r.name for r in infos)}")
    inputs = board_inputs(loc, infos, progress=progress)
    powered = human_board(human, inputs.judgments, inputs.candidates, alpha, n_boot, seed) if human else None
    board, table, meta = compute_leaderboard(loc, infos, options, clock=clock, references=refs, inputs=inputs)
    if powered is not None:
        meta["prediction_powered"] = powered[1]
        RunLayout(loc, "").leaderboard.join("prediction_powered.parquet").write_parquet(powered[0])
    for u in meta["unfinished"]:
        progress(
            f"warning: {u['note']}: {u['judgments']} of the board's {meta['judgments']['used']} judgments are "
            "on its contexts; the board may change when it finishes (--finished-only leaves it out)"
        )
    layout = RunLayout(loc, "")
    categories = write_categories(layout.leaderboard, loc, infos, inputs, options, refs, clock, progress)
    if categories:
        meta["categories"] = categories
        progress(
            f"wrote a board per category under {layout.leaderboard.join('categories').uri}/: "
            f"{', '.join(c['category'] for c in categories)}"
        )
    bias = _run_tables(infos, "position_bias", POSITION_BIAS, with_run=True)
    spearman = _run_tables(infos, "spearman", SPEARMAN, with_run=True)
    write_leaderboard(layout.leaderboard, table, meta, bias, spearman)
    progress(f"wrote {layout.leaderboard.uri}/: leaderboard.parquet, leaderboard.json, index.html")
    return LeaderboardResult(
        board,
        meta["runs"],
        layout.leaderboard_table,
        layout.leaderboard_json,
        layout.leaderboard_html,
        meta,
        categories,
    )
