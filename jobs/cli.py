"""The ``pairank`` command.

::

    pairank run configs/demo.yaml [--set output=s3://bucket/runs] [--set judge.model=/models/x]
    pairank import summeval ../shared/data/summeval data/summeval
    pairank import llmbar ../shared/data/llmbar data/llmbar --skip-invalid   # + published verdicts
    pairank model prepare          # convert the embedded Gemma-3-270M once, for the vllm judge
    pairank plan --candidates 16 --noise 0.8 --position-bias 0.5 --target-spearman 0.9   # SIMULATED
    pairank plan --from-judgments runs/x/judgments --target-spearman 0.9 --json          # measure, then plan
    pairank meta-eval --input data/llmbar [--judgments runs/store/judgments] [--out runs/meta_eval]
    pairank winrate --input data/x --judgments runs/store/judgments --baseline M0 --prior in_dist
    pairank leaderboard --root runs/store [--runs demo winrate] [--baseline M0] [--n-boot 200] [--seed 0]
"""

from __future__ import annotations

import argparse
import json
import logging
import sys


def _progress(msg: str) -> None:
    print(f"[pairank] {msg}", file=sys.stderr, flush=True)


def cmd_run(args: argparse.Namespace) -> int:
    from jobs.run import run_job
    from jobs.spec import load_spec

    spec = load_spec(args.spec, args.set or [])
    result = run_job(spec, progress=_progress)
    print(result.layout.report_md.uri)
    return 0 if result.errors == 0 else 3


def cmd_import(args: argparse.Namespace) -> int:
    from storage.importers import run_import

    counts = run_import(args.set_name, args.src, args.dst, skip_invalid=args.skip_invalid)
    for message in counts["skipped"]:
        print(f"pairank: skipped: {message}", file=sys.stderr)
    print(json.dumps(counts, indent=2, default=str))
    return 0


def cmd_winrate(args: argparse.Namespace) -> int:
    import pyarrow as pa

    from jobs.run import read_input_folder, winrate_tables
    from jobs.spec import WinRateSpec
    from operators.judges.replay_judge import read_judgments
    from operators.reports import winrate_lines
    from storage.fs import Location
    from storage.inputs import read_labels

    folder = Location.of(args.input)
    candidates, human = read_input_folder(folder)
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
    if args.json:
        print(json.dumps({"winrates": rates.to_pylist(), "judges": judges.to_pylist()}, indent=2, default=str))
    else:
        print("\n".join(winrate_lines(rates.to_pylist(), judges.to_pylist())).strip())
    return 0


def cmd_leaderboard(args: argparse.Namespace) -> int:
    from jobs.leaderboard import build_leaderboard

    result = build_leaderboard(
        args.root, runs=args.runs, baseline=args.baseline, n_boot=args.n_boot, seed=args.seed, progress=_progress
    )
    for aspect, c in result.board.counts.items():
        _progress(f"{aspect}: {c['systems']} systems, {c['used']} comparisons, {c['errors']} error rows skipped")
    print(result.html.uri)
    return 0


def cmd_model_prepare(args: argparse.Namespace) -> int:
    from operators.judges.models import prepare_default_model

    _progress("preparing the embedded judge model (once; about a minute)")
    print(prepare_default_model(args.dir, force=args.force))
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from jobs.plan import TIME_BUDGET_S, measure_judge, plan, render
    from jobs.spec import SimulatedJudgeSpec
    from operators.judges.replay_judge import read_judgments

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


def parser() -> argparse.ArgumentParser:
    from jobs.meta_eval import add_judgments_option
    from jobs.meta_eval import cli_parser as meta_eval_parser

    p = argparse.ArgumentParser(prog="pairank", description="Pairwise LLM-judge comparisons at cluster scale.")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
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
        "Spearman tables under the root; writes <root>/leaderboard/{leaderboard.parquet,leaderboard.json,index.html}.",
    )
    lb.add_argument("--root", required=True, help="storage root (the runs' `output`), local or s3://")
    lb.add_argument("--runs", nargs="+", default=None, metavar="NAME", help="runs to include (default: all)")
    lb.add_argument(
        "--baseline", default=None, help="baseline of the carried win rates (needed where the runs have several)"
    )
    lb.add_argument("--n-boot", type=int, default=200, help="bootstrap resamples of contexts (default 200; 0: none)")
    lb.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    lb.set_defaults(fn=cmd_leaderboard)

    meta_eval_parser(sub)

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


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    try:
        return args.fn(args)
    except (ValueError, FileNotFoundError, ImportError) as exc:
        print(f"pairank: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
