"""The meta-eval job: LLMBar's judge statistics from an input folder and its judgments.

::

    pairank meta-eval --input runs/data/llmbar                       # the published verdicts imported with it
    pairank meta-eval --input runs/data/llmbar --judgments runs/store/judgments --out runs/meta_eval

Reads ``<input>/candidates.parquet`` and ``<input>/pairwise_labels.parquet`` (the
human-preferred candidate of each pair) and the judgments (a judgments Parquet
file or a judgment cache folder, as :func:`pairank.judges.engines.replay_judge.read_judgments`;
default ``<input>/judgments.parquet``), and returns
:func:`pairank.operators.meta_eval.meta_eval`: one META_EVAL row per (subset, aspect,
judge). With ``out`` it also writes ``meta_eval.parquet`` and ``meta_eval.md``
there (local or s3://).

Heavy imports are inside the functions, so adding the subcommand keeps the
``pairank`` command quick to start.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


def read_input(input_folder: str) -> tuple[pa.Table, pa.Table]:
    """The folder's candidates and pairwise labels, validated; every label must name two of its candidates."""
    from pairank.storage.fs import Location
    from pairank.storage.inputs import read_candidates, read_labels
    from pairank.storage.validation import TableError

    folder = Location.of(input_folder)
    cand, lab = folder.join("candidates.parquet"), folder.join("pairwise_labels.parquet")
    candidates = read_candidates(folder)
    if not lab.exists():
        raise FileNotFoundError(f"{lab.uri}: no pairwise labels; meta-eval compares judges with human A/B labels")
    labels = read_labels(folder)
    known = set(candidates.column("candidate_id").to_pylist())
    for column in ("candidate_a", "candidate_b"):
        for row, cid in enumerate(labels.column(column).to_pylist()):
            if cid not in known:
                raise TableError(lab.uri, row, column, f"a candidate_id of {cand.uri}", repr(cid))
    return candidates, labels


def meta_eval(
    input_folder: str, judgments_source: str | Sequence[str] | None = None, out: str | None = None
) -> pa.Table:
    """META_EVAL of the judgments against the input's labels; written to ``out`` when given."""
    import pyarrow as pa

    from pairank.judges.engines.replay_judge import read_judgments
    from pairank.operators.meta_eval import markdown
    from pairank.operators.meta_eval import meta_eval as evaluate
    from pairank.storage.fs import Location

    _, labels = read_input(input_folder)
    if judgments_source is None:
        judgments_source = Location.of(input_folder).join("judgments.parquet").uri
    sources = [judgments_source] if isinstance(judgments_source, str) else list(judgments_source)
    for source in sources:
        if not Location.of(source).exists():
            raise FileNotFoundError(f"{source}: no judgments (a judgments Parquet file or a judgment cache folder)")
    table = evaluate(pa.concat_tables([read_judgments(s) for s in sources]), labels)
    if out is not None:
        folder = Location.of(out)
        folder.join("meta_eval.parquet").write_parquet(table)
        folder.join("meta_eval.md").write_text(markdown(table))
    return table


def cmd_meta_eval(args: argparse.Namespace) -> int:
    table = meta_eval(args.input, args.judgments, args.out)
    if args.out:
        print(f"[pairank] wrote {args.out.rstrip('/')}/meta_eval.parquet and meta_eval.md", file=sys.stderr)
    if args.json:
        print(json.dumps(table.to_pylist(), indent=2))
    else:
        from pairank.operators.meta_eval import markdown

        print(markdown(table).strip())
    return 0


def cli_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """Add the ``meta-eval`` subcommand to ``pairank``'s subparsers."""
    p = sub.add_parser(
        "meta-eval",
        help="judge accuracy and positional agreement against human pairwise labels (LLMBar's statistics)",
        description="Per subset (context id up to its last '/'), aspect and judge identity: accuracy in the labelled "
        "and the swapped slot order, both right, positional agreement and LLMBar's kappas, exactly as LLMBar's "
        "statistics.json (see operators.meta_eval).",
    )
    p.add_argument("--input", required=True, help="folder with candidates.parquet and pairwise_labels.parquet")
    add_judgments_option(p)
    p.add_argument("--out", default=None, help="folder for meta_eval.parquet and meta_eval.md")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a Markdown table")
    p.set_defaults(fn=cmd_meta_eval)
    return p


def add_judgments_option(p) -> None:
    """The repeatable ``--judgments PATH`` option of the commands that read existing judgments."""
    p.add_argument(
        "--judgments",
        action="append",
        metavar="PATH",
        help="judgments table or cache folder (repeatable; default: <input>/judgments.parquet)",
    )
