"""The ``pairank`` command: parse (:mod:`~pairank.jobs.cli.parser`), run the subcommand
(:mod:`~pairank.jobs.cli.commands`), and end any error in one paragraph and an exit code
(:data:`~pairank.jobs.cli.errors.EXIT_CODES`).

Usage and examples are in ``docs/cli.md`` and in ``pairank <command> --help``
(every option with its default); the job spec keys in ``docs/specs.md``.
"""

from __future__ import annotations

import logging
import sys
import traceback

from pairank.jobs.cli import supervise
from pairank.jobs.cli.errors import explain
from pairank.jobs.cli.parser import parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # a watched driver runs the same command (supervise)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.WARNING, format="%(levelname)s %(message)s")
    supervise.become_child()
    code = _run(args)
    supervise.tell(exit=code)  # a watched driver's word said (supervise)
    return code


def _run(args) -> int:
    try:
        return args.fn(args)
    except KeyboardInterrupt:
        print("pairank: interrupted", file=_console(), flush=True)
        return 130
    except Exception as exc:
        code, message = explain(exc)
        if args.verbose:
            traceback.print_exc()
        print(f"pairank: error: {message}", file=_console(), flush=True)
        return code


def _console():
    """Where pairank's last word goes: the console's stderr (descriptor 2 may be a run's log by then)."""
    from pairank.jobs.cli.console import console

    return console.err


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
