"""The ``pairank`` command: one subcommand per function ``cmd_*`` below.

Usage and examples are in ``docs/cli.md`` and in ``pairank <command> --help``
(every option with its default); the job spec keys in ``docs/specs.md``. Every
error ends in one paragraph and an exit code (:data:`EXIT_CODES`).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import traceback


def _progress(msg: str) -> None:
    from pairank.jobs.cli.console import console

    console.progress(msg)


def cmd_run(args: argparse.Namespace) -> int:
    from pairank.jobs.cli.console import console
    from pairank.jobs.run import run
    from pairank.jobs.specs.job import load_spec

    spec = load_spec(args.spec, args.set or [])
    result = _quietly(args, spec, "", lambda: run(spec, progress=_progress))  # a nightly spec runs one night
    print(result.layout.report_md.uri, file=console.out)
    return 0 if result.errors == 0 else 3


def _quietly(args: argparse.Namespace, spec, prefix: str, work):
    """``work()`` with Ray's, the engine's and the libraries' output in a log file under the run (not with -v)."""
    from pairank.jobs.cli.console import console, run_log_file

    if args.verbose:
        return work()
    written, kept = run_log_file(spec.output, spec.name, prefix=prefix)
    with console.quiet(written) as log_file:
        if log_file is not None:
            _progress(f"Ray, engine and library output: {kept.uri} (-v shows it here)")
        try:
            return work()
        finally:
            if log_file is not None and kept.path != str(log_file):
                _keep_log(log_file, kept)


def _keep_log(written, kept) -> None:
    """Copy a run's log written locally to its place under an object-store root (best effort)."""
    try:
        kept.write_bytes(written.read_bytes())
    except Exception as exc:  # noqa: BLE001 - the run's own outcome is what counts
        _progress(f"could not copy the log to {kept.uri} ({exc}); it is at {written}")


def cmd_import(args: argparse.Namespace) -> int:
    from pairank.storage.importers import run_import

    systems = [x for x in args.systems.split(",") if x] if args.systems else None
    counts = run_import(
        args.set_name, args.src, args.dst, skip_invalid=args.skip_invalid, systems=systems, contexts=args.contexts
    )
    for message in counts["skipped"]:
        print(f"pairank: skipped: {message}", file=sys.stderr)
    print(json.dumps(counts, indent=2, default=str))
    return 0


def cmd_winrate(args: argparse.Namespace) -> int:
    import pyarrow as pa
    import pyarrow.compute  # noqa: F401 - pa.compute

    from pairank.jobs.specs.job import WinRateSpec
    from pairank.jobs.pipeline.steps import winrate_tables
    from pairank.operators.judges.replay_judge import read_judgments
    from pairank.operators.reports import winrate_lines
    from pairank.operators.style_control import style_control_lines, style_control_section
    from pairank.storage.fs import Location
    from pairank.storage.inputs import read_candidates, read_human_scores, read_labels

    folder = Location.of(args.input)
    candidates, human = read_candidates(folder), read_human_scores(folder)
    sources = args.judgments or [folder.join("judgments.parquet").uri]
    judgments = pa.concat_tables([read_judgments(s) for s in sources])
    ws = WinRateSpec(
        baseline=args.baseline, systems=args.systems, methods=args.methods, prior=args.prior,
        gold_fraction=args.gold_fraction, ood=args.ood, seed=args.seed,
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
        print(json.dumps({"winrates": rates.to_pylist(), "judges": judges.to_pylist(), "style_control": style},
                         indent=2, default=str))  # fmt: skip
    else:
        print("\n".join(winrate_lines(rates.to_pylist(), judges.to_pylist()) + style_control_lines(style)).strip())
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from pairank.jobs.leaderboard import build_leaderboard
    from pairank.operators.board_quality import quality_lines

    if args.as_of is not None or args.nightly is not None:
        if args.reference:
            raise ValueError("--reference does not go with --as-of: a past night's leaderboard is rebuilt as it was")
        return _leaderboard_as_of(args)
    result = build_leaderboard(
        args.root, runs=args.runs, baseline=args.baseline, n_boot=args.n_boot, seed=args.seed, progress=_progress,
        finished_only=args.finished_only, references=args.reference or [],
    )  # fmt: skip
    for aspect, c in result.board.counts.items():
        _progress(f"{aspect}: {c['systems']} systems, {c['used']} comparisons, {c['errors']} error rows skipped")
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
    commit, out = publish_as_of(Location.of(args.root), args.nightly, args.as_of,
                                Location.of(args.out) if args.out else None)  # fmt: skip
    _progress(f"{args.nightly}: leaderboard as of commit {commit.seq} ({commit.night})")
    print(out.join("index.html").uri)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import os

    from pairank.jobs.serve import serve_until_stopped, token_digest
    from pairank.jobs.specs.job import load_spec

    spec = load_spec(args.spec, args.set or [])
    token_sha256 = None
    if args.token_env:
        # Out of this process's environment before Ray starts: Ray's processes would inherit it.
        token = os.environ.pop(args.token_env, "")
        if not token:
            raise ValueError(f"--token-env {args.token_env}: that environment variable is unset or empty; "
                             "export the bearer token in it first")  # fmt: skip
        token_sha256 = token_digest(token)
    return _quietly(args, spec, "serve-", lambda: serve_until_stopped(spec, args.host, args.port, token_sha256,
                                                                      progress=_progress))  # fmt: skip


def cmd_model_prepare(args: argparse.Namespace) -> int:
    from pairank.operators.judges.models import prepare_default_model

    _progress("preparing the embedded judge model (once; about a minute)")
    print(prepare_default_model(args.dir, force=args.force))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from pairank.jobs.plan import TIME_BUDGET_S, measure_judge, plan, render
    from pairank.jobs.specs.job import SimulatedJudgeSpec
    from pairank.operators.judges.replay_judge import read_judgments

    given = {k: getattr(args, k) for k in ("scale", "noise", "position_bias", "intransitivity")}
    measured = None
    if args.from_judgments:
        measured = measure_judge(read_judgments(args.from_judgments), args.model)
        given = {k: measured[k] if v is None else v for k, v in given.items()}
    judge = SimulatedJudgeSpec(seed=args.seed, **{k: v for k, v in given.items() if v is not None})
    candidates = args.candidates or (measured["candidates"] if measured else 16)
    schedulers = [n for part in args.schedulers or [] for n in part.split(",") if n]
    budget = TIME_BUDGET_S if args.time_budget is None else args.time_budget or None
    result = plan(
        judge, candidates=candidates, contexts=args.contexts, target=args.target_spearman,
        schedulers=schedulers or None, verdict=args.verdict, time_budget=budget,
    )
    if measured:
        result["measured"] = {"source": args.from_judgments, **measured}
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def _jobs(args: argparse.Namespace):
    from pairank.cluster.ray_jobs import Jobs

    jobs = Jobs.connect(args.address)  # imports Ray, which configures its loggers
    if not args.verbose:  # Ray's client logs each upload step, and that it skips .git and .venv itself
        for name in ("dashboard.modules.dashboard_sdk", "dashboard.modules.job.sdk", "_private.runtime_env.packaging"):
            logging.getLogger(f"ray.{name}").setLevel(logging.WARNING)
        logging.getLogger("ray._private.runtime_env.working_dir").setLevel(logging.ERROR)
    _progress(f"Ray Jobs API at {jobs.address} (from {jobs.source})")
    return jobs


def _final(job_id: str, status: str, message: str) -> int:
    _progress(f"job {job_id} {status}" + (f": {message}" if message else ""))
    return 0 if status == "SUCCEEDED" else 1


def cmd_submit(args: argparse.Namespace) -> int:
    from pairank.jobs.submit import prepare

    submission = prepare(
        args.spec, args.set or [], working_dir=args.working_dir, extra_env=args.env or [],
        forward_env=not args.no_forward_env,
    )  # fmt: skip
    for note in submission.notes:
        _progress(f"note: {note}")
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
    from pathlib import Path

    from pairank.jobs.specs.reference import render

    text = render()
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text, encoding="utf-8")
        _progress(f"wrote {args.out}")
    else:
        sys.stdout.write(text)
    return 0


class HelpFormatter(argparse.HelpFormatter):
    """Every option's help ends with its default, unless it has none or says it already."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if (
            action.option_strings
            and not any(default is x for x in (None, False, argparse.SUPPRESS))
            and "default" not in text
            and not isinstance(action, argparse._HelpAction)
        ):
            text += " (default: %(default)s)"
        return text


class Parser(argparse.ArgumentParser):
    """pairank's parsers: every option's help shows its default. Subparsers are of the parent's class, so
    every subcommand, nested ones included, gets the same."""

    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)


def _add_address(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--address", default=None,
        help="the cluster's Jobs API, e.g. http://127.0.0.1:8265 (the dashboard port); default: $RAY_ADDRESS",
    )  # fmt: skip


def parser() -> argparse.ArgumentParser:
    from pairank.jobs.meta_eval import add_judgments_option
    from pairank.jobs.meta_eval import cli_parser as meta_eval_parser

    p = Parser(prog="pairank", description="Pairwise LLM-judge comparisons at cluster scale.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging, and Ray's and the engine's output live")
    sub = p.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="run a job spec")
    run.add_argument("spec", help="YAML job spec")
    run.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec field (dotted keys)")
    run.set_defaults(fn=cmd_run)

    imp = sub.add_parser("import", help="import a public evaluation set into pairank tables")
    imp.add_argument("set_name", metavar="set", help="summeval, newsroom, topicalchat, hanna or llmbar")
    imp.add_argument("src", help="source folder (as in shared/data)")
    imp.add_argument("dst", help="destination folder, local or s3://")
    imp.add_argument(
        "--skip-invalid", action="store_true",
        help="leave out source records that fail their checks, reporting each (llmbar only)",
    )
    imp.add_argument("--systems", metavar="S1,S2", help="keep only these systems' outputs (e.g. one night's drop)")
    imp.add_argument("--contexts", type=int, metavar="N", help="keep only the first N contexts (by id)")
    imp.set_defaults(fn=cmd_import)

    wr = sub.add_parser(
        "winrate",
        help="win rates of systems against a baseline from existing judgments (observed, BWRS, Dawid-Skene)",
        description="Every judge identity in the judgments is one judge (annotator). The truth of a pair comes from "
        "the input's pairwise_labels.parquet, else its human_scores.parquet.",
    )
    wr.add_argument("--input", required=True, help="folder with candidates.parquet (+ pairwise labels / human scores)")
    add_judgments_option(wr)
    wr.add_argument("--baseline", required=True, help="baseline system")
    wr.add_argument("--systems", nargs="+", default=None, help="systems to estimate (default: all others)")
    wr.add_argument("--aspects", nargs="+", default=None, help="aspects (default: every aspect judged)")
    wr.add_argument(
        "--methods", nargs="+", default=["human", "observed", "bwrs", "dawid_skene"],
        choices=["human", "observed", "bwrs", "dawid_skene", "dawid_skene_em"], help="estimators",
    )
    wr.add_argument("--prior", choices=["none", "in_dist", "ood"], default="none", help="judge-accuracy prior")
    wr.add_argument("--gold-fraction", type=float, default=0.1, help="in_dist: fraction of labelled pairs revealed")
    wr.add_argument("--ood", default=None, help="ood: labelled set judged by the same judges")
    wr.add_argument("--seed", type=int, default=0, help="seed of the gold choice, tie coin and samplers")
    wr.add_argument("--out", default=None, help="folder for winrates.parquet and winrate_judges.parquet")
    wr.add_argument("--json", action="store_true", help="print JSON instead of Markdown tables")
    wr.set_defaults(fn=cmd_winrate)

    lb = sub.add_parser(
        "leaderboard",
        help="Bradley-Terry leaderboard of the runs under a storage root (Parquet, JSON, static HTML)",
        description="Reads the runs' manifests, the judgment cache and the runs' win-rate, position-bias and "
        "Spearman tables under the root; writes <root>/leaderboard/{leaderboard.parquet,leaderboard.json,index.html}, "
        "with quality figures (separability, held-out Brier score, agreement with human scores and --reference "
        "boards), and the same per category under <root>/leaderboard/categories/ where candidates have a category.",
    )
    lb.add_argument("--root", required=True, help="storage root (the runs' `output`), local or s3://")
    lb.add_argument("--runs", nargs="+", default=None, metavar="NAME", help="runs to include (default: all)")
    lb.add_argument(
        "--baseline", default=None, help="baseline of the carried win rates (needed where the runs have several)"
    )
    lb.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples of contexts (default 200; 0: none)")
    lb.add_argument("--seed", type=int, default=0, help="bootstrap seed and held-out split seed (default 0)")
    lb.add_argument(
        "--reference", action="append", default=None, metavar="PATH",
        help="a leaderboard.parquet or leaderboard.json of `pairank leaderboard` (or their folder) to compare with: "
        "Spearman and agreement per aspect, systems matched by name; may be given more than once (the runs' human "
        "scores are always compared with, where their inputs have any)",
    )  # fmt: skip
    lb.add_argument(
        "--finished-only", action="store_true",
        help="leave out runs whose manifest does not say done (still judging, stopped or failed); by default they "
        "are included and flagged with a banner",
    )  # fmt: skip
    lb.add_argument("--nightly", default=None, metavar="NAME", help="with --as-of: the nightly job's past leaderboard")
    lb.add_argument(
        "--as-of", default=None, metavar="NIGHT",
        help="rebuild the leaderboard of --nightly NAME as it was after this night (label or commit number), from "
        "the job's Delta log, into <root>/leaderboard/as-of/<night>/ (or --out)",
    )  # fmt: skip
    lb.add_argument("--out", default=None, help="with --as-of: the folder to write")
    lb.set_defaults(fn=cmd_leaderboard)

    sv = sub.add_parser(
        "serve",
        help="HTTP server (Ray Serve): POST /compare judges a pair online, GET /leaderboard reads the latest one",
        description="Judges with the spec's judge and mode, keyed and cached exactly as `pairank run` of the same "
        "spec (same cache under the spec's output); serves <output>/leaderboard/ read-only. Binds 127.0.0.1 unless "
        "--host says otherwise.",
    )
    sv.add_argument("spec", help="YAML job spec (its judge, judging, aspects, prompts, output and pool are used)")
    sv.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec field (dotted keys)")
    sv.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    sv.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    sv.add_argument(
        "--token-env", default=None, metavar="NAME",
        help="require `Authorization: Bearer <token>` on every request, the token read from $NAME (never stored)",
    )
    sv.set_defaults(fn=cmd_serve)

    meta_eval_parser(sub)

    sb = sub.add_parser(
        "submit",
        help="submit a job spec to a Ray cluster through the Ray Jobs API and stream its log",
        description="Validates the spec here, uploads the working directory (default: this checkout, without "
        ".venv, .git, runs, bench/results) and runs `python3 -m pairank.jobs.cli.main run SPEC` on the cluster. Exit code: "
        "0 when the job succeeded, 1 when it failed or was stopped, 2 on a bad spec or an unreachable cluster.",
    )
    sb.add_argument("spec", help="YAML job spec (input/output should be s3:// or paths every node sees)")
    _add_address(sb)
    sb.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec field (dotted keys)")
    sb.add_argument("--no-wait", action="store_true", help="print the submission id and return")
    sb.add_argument("--working-dir", default=None, metavar="DIR", help="folder to upload (default: this checkout)")
    sb.add_argument(
        "--env", action="append", metavar="NAME",
        help="also forward this environment variable (the AWS_* credentials, endpoint and region, HF_TOKEN and the "
        "http judge's api_key_env are forwarded when set)",
    )  # fmt: skip
    sb.add_argument(
        "--no-forward-env", action="store_true",
        help="forward only the --env variables (the cluster has its own credentials, e.g. an IAM role)",
    )  # fmt: skip
    sb.set_defaults(fn=cmd_submit)

    st = sub.add_parser("status", help="the status of a submitted job (and its message)")
    st.add_argument("job_id", help="submission id, as `pairank submit` printed it")
    _add_address(st)
    st.set_defaults(fn=cmd_status)

    lg = sub.add_parser("logs", help="the log of a submitted job")
    lg.add_argument("job_id", help="submission id")
    _add_address(lg)
    lg.add_argument(
        "--follow", action="store_true", help="stream until the job ends (exit 0 if it succeeded, 1 if not)"
    )
    lg.set_defaults(fn=cmd_logs)

    sp = sub.add_parser("stop", help="stop a submitted job and wait until it has stopped")
    sp.add_argument("job_id", help="submission id")
    _add_address(sp)
    sp.add_argument("--timeout", type=float, default=60, help="seconds to wait for the job to stop (default 60)")
    sp.set_defaults(fn=cmd_stop)

    from pairank.jobs.cli.store import add_store_commands

    add_store_commands(sub)

    ref = sub.add_parser(
        "spec-reference",
        help="print the job spec reference (every key, type, default and description) as Markdown",
        description="Written from the spec models themselves; docs/specs.md is its output (a test checks it).",
    )
    ref.add_argument("--out", default=None, metavar="FILE", help="write it to FILE instead of printing it")
    ref.set_defaults(fn=cmd_spec_reference)

    model = sub.add_parser("model", help="judge models")
    msub = model.add_subparsers(dest="model_command", required=True)
    prep = msub.add_parser("prepare", help="convert the embedded Gemma-3-270M GGUF for vLLM (cached)")
    prep.add_argument("--dir", default=None, help="target folder (default: ~/.cache/pairank/models/gemma-3-270m)")
    prep.add_argument("--force", action="store_true", help="convert again even if prepared")
    prep.set_defaults(fn=cmd_model_prepare)

    pl = sub.add_parser(
        "plan",
        help="SIMULATED: the comparisons each scheduler needs to reach a target Spearman",
        description="Simulate a judge (operators.judges.simulated) on many contexts and report, per scheduler, the "
        "comparisons per context and the mean Spearman vs latent quality. Unset judge coefficients take the "
        "simulated judge's defaults, or the values measured with --from-judgments.",
    )
    pl.add_argument("--candidates", type=int, default=None, help="candidates per context (16, or the measured table's)")
    pl.add_argument("--contexts", type=int, default=100, help="simulated contexts (default 100)")
    pl.add_argument("--seed", type=int, default=0, help="seed of the simulation and the schedulers")
    pl.add_argument("--scale", type=float, default=None, help="logit per unit of latent quality difference")
    pl.add_argument("--noise", type=float, default=None, help="sd of the Gaussian noise on each comparison's logit")
    pl.add_argument("--position-bias", type=float, default=None, help="logit added in favour of slot A")
    pl.add_argument("--intransitivity", type=float, default=None, help="amplitude of the cyclic logit term")
    pl.add_argument("--target-spearman", type=float, default=0.9, help="mean Spearman to reach (default 0.9)")
    pl.add_argument("--schedulers", nargs="+", default=None, help="names to plan (default: every registered one)")
    pl.add_argument("--verdict", choices=["soft", "hard"], default="soft", help="win ratios of static schedulers")
    pl.add_argument(
        "--time-budget", type=float, default=None,
        help="seconds per adaptive scheduler: a slow one runs fewer contexts (0: every context; default 5)",
    )
    pl.add_argument("--from-judgments", default=None, metavar="PATH", help="measure the judge from this table or cache")
    pl.add_argument("--model", default=None, help="with --from-judgments: use only this judge model's rows")
    pl.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pl.set_defaults(fn=cmd_plan)
    return p


#: The exit codes of every command (the README lists them too).
EXIT_CODES = {
    0: "done",
    1: "an unexpected error (a bug: `-v` shows the traceback)",
    2: "bad input: a spec, a table, a path or a setting; the message names it",
    3: "finished, but some comparisons are error rows (see the report)",
    4: "another writer got there first: a nightly commit race, or a run of that name holding its lease",
    5: "storage or cluster unavailable after retrying: run again when it is back (nothing judged is lost)",
}
#: Longest message of an error from Ray (its errors embed remote tracebacks); `-v` shows all of it.
MAX_MESSAGE = 800


def _ray_error(exc: BaseException) -> bool:
    if "ray" not in sys.modules:
        return False
    from ray.exceptions import RayError

    return isinstance(exc, RayError)


def explain(exc: BaseException) -> tuple[int, str]:
    """The exit code and one-paragraph message for an error that ended a command."""
    from pairank.cluster.pools import EngineStartError
    from pairank.storage.commits import CommitConflict
    from pairank.storage.fs import StorageError, StorageUnavailable
    from pairank.storage.lease import LeaseHeld

    if isinstance(exc, (CommitConflict, LeaseHeld)):
        return 4, str(exc)
    if isinstance(exc, StorageUnavailable):
        return 5, f"storage unavailable: {exc}"
    if isinstance(exc, EngineStartError):
        return 5, (
            f"{exc}. The engine's own log is above (lines from `JudgeActor`): check judge.model, judge.env and the "
            "engine settings, and that the cluster has the CPUs/GPUs pool.num_cpus/num_gpus ask for"
        )
    if _ray_error(exc) or isinstance(exc, ConnectionError):
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


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("pairank: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - every error ends in one message and a documented exit code
        code, message = explain(exc)
        if args.verbose:
            traceback.print_exc()
        print(f"pairank: error: {message}", file=sys.stderr, flush=True)
        return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
