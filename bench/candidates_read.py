"""Benchmark: the peak RSS of the run task that reads a large candidates table and cuts it into planning blocks
(`jobs/judging/streamed.py: read_blocks`), read a part at a time against read and validated whole.

Writes a candidates table of ``--contexts`` contexts x 4 candidates with texts of ``--chars`` characters (and a
1 KB context text) to a temporary folder, then in a fresh child process per arm reads it, keeps every row and
cuts it into blocks of 256 contexts, and reports the child's peak RSS (ru_maxrss) and time.

Run from the repository root:  .venv/bin/python bench/candidates_read.py
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, resource, sys, time
import pyarrow as pa, pyarrow.compute as pc
from pairank.jobs.judging import streamed as s
from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidates, read_candidate_ids
folder = Location.of(sys.argv[1])
ids = read_candidate_ids(folder)
keep = ids.column("candidate_id").combine_chunks()
contexts = sorted(set(ids.column("context_id").to_pylist()))
groups = [contexts[i : i + 256] for i in range(0, len(contexts), 256)]
del ids
t = time.time()
if sys.argv[2] == "whole":
    table = read_candidates(folder)
    table = table.filter(pc.is_in(table.column("candidate_id"), keep))
    out = (table.num_rows, *s.cut_blocks(table, groups))
else:
    out = s.read_blocks(folder, keep, groups)
print(json.dumps({"rows": out[0], "s": time.time() - t,
                  "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write(folder: Path, contexts: int, chars: int) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True)
    writer = None
    for start in range(0, contexts, 2000):
        rows = [
            {
                "context_id": f"c{c:07d}",
                "context": f"document {c} " + "d" * 1000,
                "candidate_id": f"c{c:07d}-{k}",
                "system": f"s{k}",
                "text": f"answer {c} {k} " + ("abcdefghij" * (chars // 10 + 1))[:chars],
            }
            for c in range(start, min(contexts, start + 2000))
            for k in range(4)
        ]
        table = pa.Table.from_pylist(rows)
        writer = writer or pq.ParquetWriter(folder / "candidates.parquet", table.schema, compression="zstd")
        writer.write_table(table, row_group_size=8192)
    writer.close()
    return (folder / "candidates.parquet").stat().st_size


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--contexts", type=int, default=50_000)
    parser.add_argument("--chars", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "in"
        size = write(folder, args.contexts, args.chars)
        result = {"contexts": args.contexts, "candidates": 4 * args.contexts, "file_mb": size / 1e6}
        result["texts_mb"] = 4 * args.contexts * (args.chars + 16) / 1e6 + args.contexts * 1.0e-3 * 4
        for arm in ("whole", "streamed"):
            t = time.time()
            out = subprocess.run(
                [sys.executable, "-c", CHILD, str(folder), arm], capture_output=True, text=True, cwd=ROOT, check=True
            )
            result[arm] = json.loads(out.stdout.strip().splitlines()[-1]) | {"wall_s": time.time() - t}
        print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
