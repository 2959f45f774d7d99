"""``pairank import outputs`` on large JSON lines files: peak RSS and time, for files of growing size.

Generates a JSON lines export (``id``, ``prompt``, ``response``, ``model``; 4 systems per prompt, responses of
1 to 3 KB) of each size in a temporary folder, imports it with ``pairank import outputs --format table`` in a
child process, reads the child's peak RSS (``ru_maxrss``), and deletes the files.

    python bench/import_outputs.py --sizes-mb 100 1000 [--tmp /tmp]
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEMS = ("m1", "m2", "m3", "m4")


def generate(path: Path, size_mb: int, seed: int = 0) -> int:
    """Write about ``size_mb`` MB of records; the number of records."""
    rng = random.Random(seed)
    words = [f"w{k}" for k in range(500)]
    target, written, n, i = size_mb * 1_000_000, 0, 0, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            prompt = " ".join(rng.choices(words, k=40)) + f" ({i})"
            for s in SYSTEMS:
                response = " ".join(rng.choices(words, k=rng.randint(250, 750)))
                line = json.dumps({"id": f"p{i}", "prompt": prompt, "response": response, "model": s}) + "\n"
                f.write(line)
                written += len(line)
                n += 1
            i += 1
    return n


def measure(src: Path, dst: Path) -> tuple[float, float]:
    """(seconds, peak RSS MiB) of one import in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "pairank.jobs.cli.main", "import", "outputs", str(src), str(dst)]
    cmd += ["--format", "table", "--output-field", "response", "--id-field", "id"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    if peak <= before:  # ru_maxrss of children is the largest child's so far: run the sizes smallest first
        print(f"note: this child's peak did not exceed an earlier child's ({before / 1024:.0f} MiB)")
    return seconds, peak / 1024


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--sizes-mb", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--tmp", default=None)
    args = p.parse_args()
    print("| file | records | import s | peak RSS MiB | candidates.parquet MB |")
    print("|---|---|---|---|---|")
    for size in sorted(args.sizes_mb):
        folder = Path(tempfile.mkdtemp(dir=args.tmp, prefix="pairank-import-bench-"))
        try:
            src = folder / "outputs.jsonl"
            n = generate(src, size)
            seconds, rss = measure(src, folder / "out")
            out_mb = (folder / "out" / "candidates.parquet").stat().st_size / 1e6
            print(f"| {src.stat().st_size / 1e6:.0f} MB JSONL | {n:,} | {seconds:.0f} | {rss:.0f} | {out_mb:.0f} |")
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
