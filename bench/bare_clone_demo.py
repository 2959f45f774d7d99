"""Benchmark: the README's first command, ``make demo``, from a bare clone on a machine that never ran pairank.

Each run clones this repository's HEAD into a new folder and runs ``make demo`` there with ``HOME`` a new empty
folder (no uv or pip cache, no prepared model, no Ray token), every line of its output stamped with the seconds
since the start. From the stamps: the install (to ``touch .venv/.installed``), the model's preparation, the run
(make's ``pairank run`` step: Ray, the engine's start, judging), and the whole. Runs one after another; the
folders are removed after each (a venv and uv's cache are about 6 GB).

    .venv/bin/python bench/bare_clone_demo.py --runs 3 --tag avx2
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ROOT, machine, now, table, uptime, write_result

#: Where each step begins, by the line make prints for it (the first line that matches).
MARKS = {
    "install": r" -m venv ",
    "model": r"pairank model prepare$",
    "run": r"pairank run configs/demo\.yaml$",
    "engine": r"\[pairank\] starting 1 engine$",
    "ready": r"\[pairank\] 1 engine ready in",
    "judged": r"\[pairank\] pairwise: 96/96",
}


def one_run(folder: Path) -> dict:
    """A bare clone in ``folder``, ``make demo`` with a new HOME; the seconds at which each of :data:`MARKS` came."""
    subprocess.run(["git", "clone", "-q", str(ROOT), str(folder / "repo")], check=True)
    home = folder / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "RAY_"))}
    env["HOME"] = str(home)
    start = time.monotonic()
    proc = subprocess.Popen(
        ["make", "demo"], cwd=folder / "repo", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    marks: dict[str, float] = {}
    lines: list[str] = []
    assert proc.stdout is not None
    for raw in proc.stdout:
        at = time.monotonic() - start
        for line in filter(str.strip, raw.rstrip("\n").split("\r")):
            lines.append(f"{at:7.1f} {line}")
            for name, pattern in MARKS.items():
                if name not in marks and re.search(pattern, line):
                    marks[name] = round(at, 1)
    code = proc.wait()
    total = round(time.monotonic() - start, 1)
    dtype = next((x.split("judge: ", 1)[1] for x in lines if "[pairank] judge: dtype" in x), None)
    return {"returncode": code, "total_s": total, "marks_s": marks, "dtype": dtype, "tail": lines[-15:]}


def steps(marks: dict[str, float], total: float) -> dict[str, float | None]:
    """The seconds of each step, from :func:`one_run`'s marks."""

    def between(a: str, b: str | None) -> float | None:
        end = total if b is None else marks.get(b)
        return round(end - marks[a], 1) if a in marks and end is not None else None

    return {
        "install": between("install", "model"),
        "model prepare": between("model", "run"),
        "run (make's step)": between("run", None),
        "run: to the engine's start": between("run", "engine"),
        "run: engine start": between("engine", "ready"),
        "run: judging": between("ready", "judged"),
        "total": total,
    }


def cpu_flags() -> list[str]:
    """The flags that decide the judge's dtype (``judge.dtype: auto``), as this CPU has them."""
    text = Path("/proc/cpuinfo").read_text()
    have = set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))
    return [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in have]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tag", default="")
    parser.add_argument("--keep", action="store_true", help="keep each run's folder")
    args = parser.parse_args()
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
    runs = []
    for n in range(args.runs):
        folder = Path(tempfile.mkdtemp(prefix=f"pairank-bare-{n}-"))
        load = uptime()
        try:
            run = one_run(folder)
        finally:
            if not args.keep:
                shutil.rmtree(folder, ignore_errors=True)
        run |= {"load_at_start": load, "steps_s": steps(run["marks_s"], run["total_s"])}
        runs.append(run)
        print(f"run {n + 1}: exit {run['returncode']}, {run['total_s']} s, {run['dtype']}", flush=True)
        if run["returncode"]:
            print("\n".join(run["tail"]), file=sys.stderr)
    names = list(runs[0]["steps_s"])
    print(
        table(
            [[name] + [r["steps_s"][name] for r in runs] for name in names],
            ["step (s)"] + [f"run {i + 1}" for i in range(len(runs))],
        )
    )
    result = {"when": now(), "commit": head.stdout.strip(), "machine": machine() | {"flags": cpu_flags()}, "runs": runs}
    print(write_result(f"bare_clone_demo{'-' + args.tag if args.tag else ''}", result))


if __name__ == "__main__":
    main()
