"""The ``pairank`` command.

::

    pairank run configs/demo.yaml [--set output=s3://bucket/runs] [--set judge.model=/models/x]
    pairank import summeval ../shared/data/summeval data/summeval
    pairank model prepare          # convert the embedded Gemma-3-270M once, for the vllm judge
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

    counts = run_import(args.set_name, args.src, args.dst)
    print(json.dumps(counts, indent=2, default=str))
    return 0


def cmd_model_prepare(args: argparse.Namespace) -> int:
    from operators.judges.models import prepare_default_model

    _progress("preparing the embedded judge model (once; about a minute)")
    print(prepare_default_model(args.dir, force=args.force))
    return 0


def parser() -> argparse.ArgumentParser:
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
    imp.set_defaults(fn=cmd_import)

    model = sub.add_parser("model", help="judge models")
    msub = model.add_subparsers(dest="model_command", required=True)
    prep = msub.add_parser("prepare", help="convert the embedded Gemma-3-270M GGUF for vLLM (cached)")
    prep.add_argument("--dir", default=None, help="target folder (default: ~/.cache/pairank/models/gemma-3-270m)")
    prep.add_argument("--force", action="store_true", help="convert again even if prepared")
    prep.set_defaults(fn=cmd_model_prepare)
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
