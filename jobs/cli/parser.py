"""The ``pairank`` argument parser: every subcommand, its options and their defaults."""

from __future__ import annotations

import argparse

from pairank.jobs.cli.cluster import add_parser as add_cluster_parser
from pairank.jobs.cli.commands import (
    cmd_import,
    cmd_leaderboard,
    cmd_logs,
    cmd_model_prepare,
    cmd_plan,
    cmd_run,
    cmd_serve,
    cmd_spec_reference,
    cmd_status,
    cmd_stop,
    cmd_submit,
    cmd_winrate,
)


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
        "--address",
        default=None,
        help="the cluster's Jobs API, e.g. http://127.0.0.1:8265 (the dashboard port); default: $RAY_ADDRESS",
    )


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

    imp = sub.add_parser(
        "import",
        help="import a public evaluation set, outputs in the field's formats, or battles into pairank tables",
        description="pairank import <set> SRC DST (summeval, newsroom, topicalchat, hanna, llmbar); "
        "pairank import outputs SRC [SRC ...] DST --format alpaca-eval|arena-hard|mt-bench|table; "
        "pairank import battles SRC [SRC ...] DST (LMArena battle logs or mapped columns). DST is local or s3://.",
    )
    imp.add_argument(
        "set_name", metavar="set", help="summeval, newsroom, topicalchat, hanna, llmbar, outputs or battles"
    )
    imp.add_argument("paths", nargs="+", metavar="SRC ... DST", help="source file(s) or folder, then the destination")
    imp.add_argument(
        "--skip-invalid",
        action="store_true",
        help="leave out source records that fail their checks, reporting each (llmbar only)",
    )
    imp.add_argument("--systems", metavar="S1,S2", help="keep only these systems' outputs (e.g. one night's drop)")
    imp.add_argument("--contexts", type=int, metavar="N", help="keep only the first N contexts (by id)")
    out = imp.add_argument_group("outputs and battles")
    out.add_argument(
        "--format",
        default=None,
        help="outputs: alpaca-eval, arena-hard, mt-bench or table (JSONL, JSON, CSV or Parquet by suffix; '_' for "
        "'-' is accepted too: alpaca_eval); battles: lmarena (default) or table",
    )
    out.add_argument(
        "--context-field",
        default=None,
        help="outputs table: the field of the context (a text or messages); battles: the field naming the prompt "
        "that several battles share (e.g. question_id, where every model meets a baseline on each question)",
    )
    out.add_argument("--output-field", default=None, help="table: the field of the output")
    out.add_argument("--system-field", default=None, help="table: the field naming the system (model)")
    out.add_argument("--system", default=None, help="one system name for every record (e.g. a file per model)")
    out.add_argument(
        "--id-field",
        default=None,
        help="outputs table: the field of the context id (default: a text hash); battles: the battle id "
        "(default question_id; the line without one)",
    )
    out.add_argument("--category-field", default=None, help="table: the field of the context's category")
    out.add_argument("--reference-field", default=None, help="table: the field of a reference answer")
    out.add_argument("--system-prompt-field", default=None, help="table: the field of a system prompt")
    out.add_argument(
        "--part",
        action="store_true",
        help="outputs: the destination is one drop of a nightly input prefix (a context may have 1 candidate)",
    )
    out.add_argument("--judge", default=None, help="battles: who voted (the judgments' model; default: human)")
    out.add_argument("--winner-field", default=None, help="battles table: the field of the winner")
    out.add_argument("--model-a-field", default=None, help="battles table: the field of model A")
    out.add_argument("--model-b-field", default=None, help="battles table: the field of model B")
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
        "--methods",
        nargs="+",
        default=["human", "observed", "bwrs", "dawid_skene"],
        choices=["human", "observed", "bwrs", "dawid_skene", "dawid_skene_em"],
        help="estimators",
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
    lb.add_argument("--root", default=None, help="storage root (the runs' `output`), local or s3://")
    lb.add_argument(
        "--input",
        default=None,
        metavar="DIR",
        help="instead of --root: an input folder whose own judgments are ranked (e.g. `pairank import battles`); "
        "writes --out (default DIR/leaderboard), with a baseline also alpaca_eval.csv and arena_hard.csv",
    )
    lb.add_argument(
        "--judgments",
        action="append",
        default=None,
        metavar="PATH",
        help="with --input: judgments tables (default DIR/judgments.parquet); may be given more than once",
    )
    lb.add_argument("--runs", nargs="+", default=None, metavar="NAME", help="runs to include (default: all)")
    lb.add_argument(
        "--baseline", default=None, help="baseline of the carried win rates (needed where the runs have several)"
    )
    lb.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples of contexts (default 200; 0: none)")
    lb.add_argument("--seed", type=int, default=0, help="bootstrap seed and held-out split seed (default 0)")
    lb.add_argument(
        "--reference",
        action="append",
        default=None,
        metavar="PATH",
        help="a leaderboard.parquet or leaderboard.json of `pairank leaderboard` (or their folder) to compare with: "
        "Spearman and agreement per aspect, systems matched by name; may be given more than once (the runs' human "
        "scores are always compared with, where their inputs have any)",
    )
    lb.add_argument(
        "--finished-only",
        action="store_true",
        help="leave out runs whose manifest does not say done (still judging, stopped or failed); by default they "
        "are included and flagged with a banner",
    )
    lb.add_argument("--nightly", default=None, metavar="NAME", help="with --as-of: the nightly job's past leaderboard")
    lb.add_argument(
        "--as-of",
        default=None,
        metavar="NIGHT",
        help="rebuild the leaderboard of --nightly NAME as it was after this night (label or commit number), from "
        "the job's Delta log, into <root>/leaderboard/as-of/<night>/ (or --out)",
    )
    lb.add_argument("--out", default=None, help="with --as-of or --input: the folder to write")
    lb.add_argument(
        "--compat",
        action="append",
        default=None,
        choices=["lmarena", "alpaca-eval"],
        help="compute a statistic as a peer tool does (docs/leaderboards.md): lmarena (the strengths and Elo, and "
        "the style-controlled columns, as arena-rank fits them: ties half, no prior, a bootstrap of battles or with "
        "--n-boot 0 its sandwich interval), alpaca-eval (the LC win rates as AlpacaEval's GLM); may be given twice",
    )
    lb.add_argument(
        "--human",
        default=None,
        metavar="PATH",
        help="human pairwise labels (a pairwise_labels.parquet, e.g. of `pairank import battles`, or its folder) on "
        "some of the judged (context, system pair) keys: the board also gets prediction-powered rank-sets and win "
        "rates beside the judge-only ones (docs/leaderboards.md)",
    )
    lb.add_argument(
        "--alpha", type=float, default=0.1, help="with --human: rank-sets and intervals at 1 - alpha (default 0.1)"
    )
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
        "--token-env",
        default=None,
        metavar="NAME",
        help="require `Authorization: Bearer <token>` on every request, the token read from $NAME (never stored)",
    )
    sv.set_defaults(fn=cmd_serve)

    meta_eval_parser(sub)

    sb = sub.add_parser(
        "submit",
        help="submit a job spec to a Ray cluster through the Ray Jobs API and stream its log",
        description="Validates the spec here, uploads the working directory (default: this checkout, without "
        ".venv, .git, runs, bench/results) and runs `python3 -m pairank.jobs.cli.main run SPEC` on the cluster. "
        "Exit code: "
        "0 when the job succeeded, 1 when it failed or was stopped, 2 on a bad spec or an unreachable cluster.",
    )
    sb.add_argument("spec", help="YAML job spec (input/output should be s3:// or paths every node sees)")
    _add_address(sb)
    sb.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a spec field (dotted keys)")
    sb.add_argument("--no-wait", action="store_true", help="print the submission id and return")
    sb.add_argument("--working-dir", default=None, metavar="DIR", help="folder to upload (default: this checkout)")
    sb.add_argument(
        "--env",
        action="append",
        metavar="NAME",
        help="also forward this environment variable (the AWS_* credentials, endpoint and region, HF_TOKEN and the "
        "http judge's api_key_env are forwarded when set)",
    )
    sb.add_argument(
        "--no-forward-env",
        action="store_true",
        help="forward only the --env variables (the cluster has its own credentials, e.g. an IAM role)",
    )
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

    add_cluster_parser(sub)

    model = sub.add_parser("model", help="judge models")
    msub = model.add_subparsers(dest="model_command", required=True)
    prep = msub.add_parser("prepare", help="convert the embedded Gemma-3-270M GGUF for vLLM (cached)")
    prep.add_argument("--dir", default=None, help="target folder (default: ~/.cache/pairank/models/gemma-3-270m)")
    prep.add_argument("--force", action="store_true", help="convert again even if prepared")
    prep.set_defaults(fn=cmd_model_prepare)

    pl = sub.add_parser(
        "plan",
        help="SIMULATED: the comparisons each scheduler needs to reach a target Spearman",
        description="Simulate a judge (judges.engines.simulated_judge) on many contexts and report, per scheduler, the "
        "comparisons per context and the mean Spearman vs latent quality. Unset judge coefficients take the "
        "simulated judge's defaults, or the values measured with --from-judgments.",
    )
    pl.add_argument("--candidates", type=int, default=None, help="candidates per context (16, or the measured table's)")
    pl.add_argument(
        "--contexts",
        type=int,
        default=None,
        help="simulated contexts (default 100; with --recommend --simulate 2000 // N per seed, at least 1)",
    )
    pl.add_argument("--seed", type=int, default=0, help="seed of the simulation and the schedulers")
    pl.add_argument("--scale", type=float, default=None, help="logit per unit of latent quality difference")
    pl.add_argument("--noise", type=float, default=None, help="sd of the Gaussian noise on each comparison's logit")
    pl.add_argument("--position-bias", type=float, default=None, help="logit added in favour of slot A")
    pl.add_argument("--intransitivity", type=float, default=None, help="amplitude of the cyclic logit term")
    pl.add_argument("--target-spearman", type=float, default=0.9, help="mean Spearman to reach (default 0.9)")
    pl.add_argument("--schedulers", nargs="+", default=None, help="names to plan (default: every registered one)")
    pl.add_argument("--verdict", choices=["soft", "hard"], default="soft", help="win ratios of static schedulers")
    pl.add_argument(
        "--time-budget",
        type=float,
        default=None,
        help="seconds per adaptive scheduler: a slow one runs fewer contexts (0: every context; default 5)",
    )
    pl.add_argument("--from-judgments", default=None, metavar="PATH", help="measure the judge from this table or cache")
    pl.add_argument("--model", default=None, help="with --from-judgments: use only this judge model's rows")
    pl.add_argument(
        "--recommend",
        action="store_true",
        help="name the scheduler and budget that reach --target-spearman most cheaply, from the measured "
        "cost-quality frontier (BENCHMARKS.md) at the nearest measured N and judge",
    )
    pl.add_argument(
        "--frontier-table",
        default=None,
        metavar="CSV",
        help="with --recommend: read this frontier table (bench/frontier.py's) instead of the packaged one",
    )
    pl.add_argument(
        "--simulate",
        action="store_true",
        help="with --recommend: sweep the frontier's schedulers afresh at exactly this N and judge (slower)",
    )
    pl.add_argument(
        "--seeds",
        type=int,
        default=3,
        help="with --recommend --simulate: seeds per point (judge noise, scheduler seed)",
    )
    pl.add_argument("--json", action="store_true", help="print JSON instead of a table")
    pl.set_defaults(fn=cmd_plan)
    return p


#: The exit codes of every command (the README lists them too).
