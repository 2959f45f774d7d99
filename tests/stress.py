"""The flake hunt (``make test-stress MODULES=...``): each named test module runs several times, one run after
another, while a CPU hog keeps every core busy; then a table of each module's passes and failures.

A test that rests on the machine's speed (a window a busy machine closes, a sleep that "should be enough") fails
here before it fails in CI. The hog is one busy-looping process per core, started here and killed by its pid at
the end, so nothing outside the repository is needed.

    python -m tests.stress [--runs 5] [--hogs N] tests/cluster/test_pools.py tests/jobs/test_run_lease.py

Exit status 0 when every run of every module passed, 1 otherwise. Each run's output goes to
``<--logs>/<module>.<run>.log`` (a temporary folder by default, printed), so a failure can be read afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: One busy loop: what a hog process runs, at the same priority as the tests.
BUSY = "while True: pass"
SUMMARY = re.compile(r"^=*\s*(\d+ (?:passed|failed|error|skipped|deselected).*?) in [\d.]+s", re.M)


def start_hogs(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", BUSY], start_new_session=True) for _ in range(n)]


def stop_hogs(hogs: list[subprocess.Popen]) -> None:
    for hog in hogs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(hog.pid, signal.SIGKILL)
        hog.wait()


def run_module(module: str, log: Path, pytest_args: list[str]) -> tuple[int, str, float]:
    """One pytest run of ``module`` without xdist; its exit status, pytest's summary line and its wall seconds."""
    started = time.monotonic()
    with open(log, "wb") as out:
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "-p", "no:xdist", "-q", *pytest_args, module],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    found = SUMMARY.findall(log.read_text(errors="replace"))
    return code, (found[-1] if found else "no summary"), time.monotonic() - started


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("modules", nargs="+", help="test modules (paths), each run --runs times")
    args.add_argument("--runs", type=int, default=5, help="runs of each module (default 5)")
    args.add_argument("--hogs", type=int, default=os.cpu_count() or 2, help="busy processes (default: one a core)")
    args.add_argument("--logs", type=Path, default=None, help="folder for each run's output (default: a temp folder)")
    args.add_argument("--pytest", default="", help="more pytest arguments, as one string (e.g. '-k lease')")
    opts = args.parse_args(argv)
    missing = [m for m in opts.modules if not (ROOT / m.split("::")[0]).exists()]
    if missing:
        args.error(f"no such test module: {', '.join(missing)}")
    logs = opts.logs or Path(tempfile.mkdtemp(prefix="pairank-stress-"))
    logs.mkdir(parents=True, exist_ok=True)
    print(
        f"test-stress: {len(opts.modules)} modules x {opts.runs} runs beside {opts.hogs} busy processes; logs in {logs}"
    )
    results: dict[str, list[tuple[int, str, float]]] = {}
    hogs = start_hogs(opts.hogs)
    try:
        for module in opts.modules:
            name = module.replace("/", ".").removesuffix(".py")
            for run in range(1, opts.runs + 1):
                result = run_module(module, logs / f"{name}.{run}.log", opts.pytest.split())
                results.setdefault(module, []).append(result)
                print(f"  {module} run {run}: {'pass' if result[0] == 0 else 'FAIL'} ({result[1]}, {result[2]:.0f} s)")
    finally:
        stop_hogs(hogs)
    print("\n| module | passed | failed | seconds a run |\n|---|---|---|---|")
    failed = 0
    for module, runs in results.items():
        bad = sum(code != 0 for code, _, _ in runs)
        failed += bad
        seconds = sorted(round(s) for _, _, s in runs)
        print(f"| {module} | {len(runs) - bad} | {bad} | {seconds[0]}-{seconds[-1]} |")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
