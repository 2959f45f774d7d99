"""What each ``pairank`` subcommand does: one function ``cmd_*`` per command, given the parsed arguments.

Each imports its command module when it runs, so ``pairank --help`` starts neither Ray nor an engine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from pairank.jobs.cli import supervise


def _progress(msg: str) -> None:
    from pairank.jobs.cli.console import console

    console.progress(msg)


def _note(msg: str) -> None:
    _progress(f"note: {msg}")


def cmd_run(args: argparse.Namespace) -> int:
    from pairank.jobs.cli.console import console
    from pairank.jobs.specs.job import load_spec

    notes: list[str] = []  # said by the process that runs the driver: a watched child says them itself
    try:
        spec = load_spec(args.spec, args.set or [], note=notes.append)
    except Exception:
        for note in notes:
            _note(note)
        raise
    address = supervise.watched_address(spec.cluster.address)
    if address is not None:  # a driver joining a cluster from outside: run in a watched child (jobs/cli/supervise)
        return _watched(args, spec, address)
    from pairank.jobs.run import run  # not in a watcher, which only waits: the pipeline's imports are a second

    for note in notes:
        _note(note)
    result = _quietly(args, spec, "", lambda: run(spec, progress=_progress))  # a nightly spec runs one night
    print(result.layout.report_md.uri, file=console.out)
    return 0 if result.errors == 0 else 3


def _watched(args: argparse.Namespace, spec, address: tuple[str, int]) -> int:
    import os

    from pairank.jobs.cli.console import console
    from pairank.jobs.cli.errors import head_lost
    from pairank.storage.fs import Location
    from pairank.storage.store.lease import release_left

    def say(msg: str) -> None:
        print(f"pairank: error: {msg}", file=console.err, flush=True)

    command = [sys.executable, "-m", "pairank.jobs.cli.main", *args.argv]
    return supervise.supervise(
        command,
        address,
        say,
        lambda where: head_lost(where, "the driver ended with it"),
        left=lambda: release_left(Location.of(spec.output), spec.name, os.getpid()),
        gone_after=supervise.head_gone_s(),
    )


def _quietly(args: argparse.Namespace, spec, prefix: str, work):
    """``work()`` with Ray's, the engine's and the libraries' output in a log file under the run (not with -v)."""
    from pairank.jobs.cli.console import console, keep_log, run_log_file

    if args.verbose:
        return work()
    written, kept = run_log_file(spec.output, spec.name, prefix=prefix)
    supervise.tell(log=str(written), kept=kept.uri)  # a watched driver's log, kept by its watcher if Ray ends it
    log_file = console.quiet(written)  # until the process ends: Ray's late output goes there too
    if log_file is not None:
        _progress(f"Ray, engine and library output: {kept.uri} (-v shows it here)")
    try:
        return work()
    finally:
        if log_file is not None:
            keep_log(log_file, kept, _progress)


def cmd_import(args: argparse.Namespace) -> int:
    if args.set_name in ("outputs", "battles"):
        return _import_formats(args)
    from pairank.storage.importers import run_import

    if len(args.paths) != 2:
        raise ValueError(f"pairank import {args.set_name}: expected SRC DST, found {len(args.paths)} paths")
    systems = [x for x in args.systems.split(",") if x] if args.systems else None
    counts = run_import(
        args.set_name,
        args.paths[0],
        args.paths[1],
        skip_invalid=args.skip_invalid,
        systems=systems,
        contexts=args.contexts,
    )
    for message in counts["skipped"]:
        print(f"pairank: skipped: {message}", file=sys.stderr)
    print(json.dumps(counts, indent=2, default=str))
    return 0


def _import_formats(args: argparse.Namespace) -> int:
    """``pairank import outputs`` and ``pairank import battles``."""
    if len(args.paths) < 2:
        raise ValueError(f"pairank import {args.set_name}: expected SRC [SRC ...] DST, found {len(args.paths)} path")
    *src, dst = args.paths
    if args.set_name == "outputs":
        from pairank.storage.importers.outputs import Fields, import_outputs

        if args.format is None:
            raise ValueError("pairank import outputs: give --format alpaca-eval, arena-hard, mt-bench or table")
        given = {
            "context": args.context_field,
            "output": args.output_field,
            "system": args.system_field,
            "id": args.id_field,
            "category": args.category_field,
            "reference": args.reference_field,
            "system_prompt": args.system_prompt_field,
            "system_name": args.system,
        }
        counts = import_outputs(args.format, src, dst, Fields(**{k: v for k, v in given.items() if v}), args.part)
    else:
        from pairank.storage.importers.battles import BattleFields, import_battles

        given = {
            "model_a": args.model_a_field,
            "model_b": args.model_b_field,
            "winner": args.winner_field,
            "id": args.id_field,
            "context": args.context_field,
            "category": args.category_field,
            "judge": args.judge,
        }
        fields = BattleFields(**{k: v for k, v in given.items() if v})
        counts = import_battles(src, dst, fields, args.format or "lmarena")
    print(json.dumps(counts, indent=2, default=str))
    return 0


def cmd_winrate(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.compute

    from pairank.jobs.pipeline.winrates import winrate_tables
    from pairank.jobs.specs.job import WinRateSpec
    from pairank.judges.engines.replay_judge import read_judgments
    from pairank.operators.reports import style_control_lines, winrate_lines
    from pairank.operators.style_control import style_control_section
    from pairank.storage.fs import Location
    from pairank.storage.inputs import read_candidates, read_human_scores, read_labels

    folder = Location.of(args.input)
    candidates, human = read_candidates(folder), read_human_scores(folder)
    sources = args.judgments or [folder.join("judgments.parquet").uri]
    judgments = pa.concat_tables([read_judgments(s) for s in sources])
    ws = WinRateSpec(
        baseline=args.baseline,
        systems=args.systems,
        methods=args.methods,
        prior=args.prior,
        gold_fraction=args.gold_fraction,
        ood=args.ood,
        seed=args.seed,
    )
    aspects = args.aspects or sorted(set(judgments.column("aspect").to_pylist()))
    rates, judges = winrate_tables(
        ws, args.baseline, aspects, judgments, candidates, human, read_labels(folder), _progress
    )
    if args.out:
        out = Location.of(args.out)
        out.join("winrates.parquet").write_parquet(rates)
        out.join("winrate_judges.parquet").write_parquet(judges)
        _progress(f"wrote {out.join('winrates.parquet').uri} and winrate_judges.parquet")
    mine = judgments.filter(pa.compute.is_in(judgments.column("aspect"), pa.array(aspects, pa.string())))
    style = style_control_section(mine, candidates, args.baseline)
    if args.out:
        out.join("style_control.json").write_json(style)
    if args.json:
        print(
            json.dumps(
                {"winrates": rates.to_pylist(), "judges": judges.to_pylist(), "style_control": style},
                indent=2,
                default=str,
            )
        )
    else:
        print("\n".join(winrate_lines(rates.to_pylist(), judges.to_pylist()) + style_control_lines(style)).strip())
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from pairank.jobs.leaderboard import build_leaderboard
    from pairank.operators.board_quality import quality_lines

    if args.human is not None and args.root is None:
        raise ValueError("--human goes with --root: the labels are set beside the judgments of the runs there")
    if args.as_of is not None or args.nightly is not None:
        if args.reference:
            raise ValueError("--reference does not go with --as-of: a past night's leaderboard is rebuilt as it was")
        return _leaderboard_as_of(args)
    if (args.root is None) == (args.input is None):
        raise ValueError("pairank leaderboard: give --root (the runs under a storage root) or --input (a folder)")
    if args.input is not None:
        from pairank.jobs.leaderboard_input import input_leaderboard

        meta = input_leaderboard(
            args.input,
            args.judgments or [],
            args.out,
            args.baseline,
            args.n_boot,
            args.seed,
            _progress,
            compat=args.compat or [],
        )
        for line in quality_lines(meta["quality"]):
            _progress(f"quality: {line}")
        print(meta["out"] + "/index.html")
        return 0
    result = build_leaderboard(
        args.root,
        runs=args.runs,
        baseline=args.baseline,
        n_boot=args.n_boot,
        seed=args.seed,
        progress=_progress,
        finished_only=args.finished_only,
        references=args.reference or [],
        compat=args.compat or [],
        human=args.human,
        alpha=args.alpha,
    )
    if "prediction_powered" in result.meta:
        from pairank.jobs.human_labels import human_lines

        for line in human_lines(result.meta["prediction_powered"]):
            _progress(line)
    for aspect, c in result.board.counts.items():
        _progress(f"{aspect}: {c['systems']} systems, {c['used']} comparisons, {c['errors']} error rows skipped")
    for warning in result.meta.get("lc_warnings", []):
        _progress(f"warning: {warning}")
    for line in quality_lines(result.meta["quality"]):
        _progress(f"quality: {line}")
    for c in result.categories:
        where = f"{result.html.uri.rsplit('/', 1)[0]}/{c['folder']}/index.html" if c["folder"] else "no judgments"
        _progress(f"category {c['category']}: {c['contexts']} contexts, {c['judgments']} judgments: {where}")
    print(result.html.uri)
    return 0


def _leaderboard_as_of(args: argparse.Namespace) -> int:
    from pairank.jobs.nightly import publish_as_of
    from pairank.storage.fs import Location

    if args.as_of is None or args.nightly is None:
        raise ValueError("--as-of and --nightly go together: the nightly job's name and the night to rebuild")
    root = Location.of(args.root).not_a_file("leaderboard root")
    commit, out = publish_as_of(root, args.nightly, args.as_of, Location.of(args.out) if args.out else None)
    _progress(f"{args.nightly}: leaderboard as of commit {commit.seq} ({commit.night})")
    print(out.join("index.html").uri)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from pairank.jobs.serve import serve_until_stopped, token_digest
    from pairank.jobs.specs.job import load_spec

    spec = load_spec(args.spec, args.set or [], note=_note)
    token_sha256 = None
    if args.token_env:
        # Out of this process's environment before Ray starts: Ray's processes would inherit it.
        token = os.environ.pop(args.token_env, "")
        if not token:
            raise ValueError(
                f"--token-env {args.token_env}: that environment variable is unset or empty; "
                "export the bearer token in it first"
            )
        token_sha256 = token_digest(token)
    return _quietly(
        args, spec, "serve-", lambda: serve_until_stopped(spec, args.host, args.port, token_sha256, progress=_progress)
    )


def cmd_model_prepare(args: argparse.Namespace) -> int:
    from pairank.judges.models import prepare_default_model

    _progress("preparing the embedded judge model (once; about a minute)")
    print(prepare_default_model(args.dir, force=args.force))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from pairank.jobs.plan import TIME_BUDGET_S, measure_judge, plan, render
    from pairank.jobs.recommend import (
        TABLE,
        recommend_from_table,
        recommend_plan,
        render_from_table,
        render_recommendation,
    )
    from pairank.judges.engines.replay_judge import read_judgments
    from pairank.judges.engines.simulated import SimulatedJudgeSpec

    given = {k: getattr(args, k) for k in ("scale", "noise", "position_bias", "intransitivity")}
    measured = None
    if args.from_judgments:
        measured = measure_judge(read_judgments(args.from_judgments), args.model)
        given = {k: measured[k] if v is None else v for k, v in given.items()}
    judge = SimulatedJudgeSpec(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    candidates = args.candidates or (measured["candidates"] if measured else 16)
    if args.recommend and args.simulate:
        result = recommend_plan(
            judge,
            candidates=candidates,
            target=args.target_spearman,
            contexts=args.contexts,
            seeds=args.seeds,
            verdict=args.verdict,
        )
        text = render_recommendation
    elif args.recommend:
        table = args.frontier_table or TABLE
        result = recommend_from_table(judge, candidates=candidates, target=args.target_spearman, path=table)
        text = render_from_table
    if args.recommend:
        if measured:
            result["measured"] = {"source": args.from_judgments, **measured}
        print(json.dumps(result, indent=2) if args.json else text(result))
        return 0
    if args.simulate or args.frontier_table:
        raise ValueError("plan: --simulate and --frontier-table go with --recommend")
    schedulers = [n for part in args.schedulers or [] for n in part.split(",") if n]
    budget = TIME_BUDGET_S if args.time_budget is None else args.time_budget or None
    result = plan(
        judge,
        candidates=candidates,
        contexts=args.contexts or 100,
        target=args.target_spearman,
        schedulers=schedulers or None,
        verdict=args.verdict,
        time_budget=budget,
    )
    if measured:
        result["measured"] = {"source": args.from_judgments, **measured}
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def _jobs(args: argparse.Namespace):
    from pairank.cluster.ray_jobs import Jobs

    jobs = Jobs.connect(args.address, quiet=not args.verbose)
    _progress(f"Ray Jobs API at {jobs.address} (from {jobs.source})")
    return jobs


def _final(job_id: str, status: str, message: str) -> int:
    _progress(f"job {job_id} {status}" + (f": {message}" if message else ""))
    return 0 if status == "SUCCEEDED" else 1


def cmd_submit(args: argparse.Namespace) -> int:
    from pairank.jobs.submit import prepare

    submission = prepare(
        args.spec,
        args.set or [],
        working_dir=args.working_dir,
        extra_env=args.env or [],
        forward_env=not args.no_forward_env,
    )
    for note in submission.notes:
        _note(note)
    jobs = _jobs(args)
    _progress(f"uploading {submission.working_dir} as the job's working directory (not: .venv, .git, runs, ...)")
    if submission.env_vars:
        _progress(f"forwarding {', '.join(sorted(submission.env_vars))} (values not shown)")
    _progress(f"entrypoint: {submission.entrypoint}")
    job_id = jobs.submit(submission)
    print(job_id, flush=True)
    if args.no_wait:
        _progress(f"submitted; follow with: pairank logs {job_id} --follow --address {jobs.address}")
        return 0
    try:
        return _final(job_id, *jobs.follow(job_id, sys.stdout))
    except KeyboardInterrupt:
        _progress(f"stopped following; the job keeps running (pairank stop {job_id} --address {jobs.address})")
        return 130


def cmd_status(args: argparse.Namespace) -> int:
    status, message = _jobs(args).status(args.job_id)
    print(status)
    if message:
        print(message)
    return 0


def cmd_logs(args: argparse.Namespace) -> int:
    jobs = _jobs(args)
    if not args.follow:
        sys.stdout.write(jobs.logs(args.job_id))
        return 0
    try:
        return _final(args.job_id, *jobs.follow(args.job_id, sys.stdout))
    except KeyboardInterrupt:
        return 130


def cmd_stop(args: argparse.Namespace) -> int:
    status, message = _jobs(args).stop(args.job_id, timeout=args.timeout)
    print(status)
    if message:
        print(message)
    return 0


def cmd_spec_reference(args: argparse.Namespace) -> int:

    from pairank.jobs.specs.reference import render

    text = render()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        _progress(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0
