"""Benchmark: reading a large judgment store (a Delta table) for one run, next to reading all of it.

Builds a synthetic store with the real writer (``JudgmentCache.append``: validation,
context buckets, one Delta commit per append) and measures reads with the real
reader, each in a fresh process so its peak RSS (``ru_maxrss``) is its own:

- ``scoped``: what a run reads: one judge x aspect x context group's keys
  (``--rows / --groups`` of them, 10,000 by default) with
  ``JudgmentCache.read(aspects=, contexts=, keys=)``.
- ``whole``: ``JudgmentCache.read()`` of everything, which is what every run did
  before the store was partitioned (the former part-folder store read every part).
- ``baseline``: the same process importing pairank and opening the table, reading
  nothing: the RSS that is not the read's. Peak RSS is the process's VmHWM.
- ``nightly``: 30 nights committed one after another to a nightly log (local
  disk): seconds per commit, and of reading the log.
- ``compact``: a second store of ``--small-commits`` appends of 50 rows (a
  run with a tiny ``flush_rows``), then ``pairank.storage.store.maintenance.compact``:
  files before and after, seconds, and a scoped read's seconds before and after.

Rows: ``--groups`` groups = 10 judges x 2 aspects x (groups / 20) contexts, each of
``--rows / --groups`` judgments with random 32-hex keys, written in commits of
``--commit-rows`` rows (each holds whole groups, as a run's flushes hold its own
contexts). Synthetic rows only; no judge runs.

Run from the repository root:  .venv/bin/python bench/store_scale.py [--quick]
Writes bench/results/store_scale[-quick].json. The store is built under --dir
(default a temporary folder, removed at the end; 10M rows take about 1 GB).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

JUDGES, ASPECTS = 10, ("coherence", "fluency")


def group_table(judge: int, aspect: str, context: int, n: int, seed: int):
    """``n`` synthetic judgments of one judge x aspect x context group (vectorised)."""
    import datetime as dt

    import numpy as np
    import pyarrow as pa

    from pairank.storage.schemas import JUDGMENTS

    rng = np.random.default_rng(seed)
    raw = rng.bytes(16 * n).hex().encode("ascii")
    keys = pa.Array.from_buffers(pa.binary(32), n, [None, pa.py_buffer(raw)]).cast(pa.binary()).cast(pa.string())
    cands = rng.integers(0, 200, size=(n, 2))
    p = rng.random(n)

    def const(v):
        return pa.array([v] * n, pa.string())

    cols = {
        "key": keys,
        "engine": const("vllm"),
        "model": const(f"judge-{judge}"),
        "revision": const("r1"),
        "prompt_hash": const("0123456789abcdef"),
        "sampling": const('{"temperature":0}'),
        "context_id": const(f"ctx-{context:05d}"),
        "aspect": const(aspect),
        "candidate_a": pa.array([f"ctx-{context:05d}/c{a:03d}" for a in cands[:, 0]]),
        "candidate_b": pa.array([f"ctx-{context:05d}/c{b:03d}" for b in cands[:, 1]]),
        "p_a": pa.array(p),
        "logprob_a": pa.array(np.log(p)),
        "logprob_b": pa.array(np.log1p(-p)),
        "label": pa.array(np.where(p > 0.5, "A", "B")),
        "raw_text": pa.nulls(n, pa.string()),
        "input_tokens": pa.array(rng.integers(300, 600, n)),
        "output_tokens": pa.array(np.ones(n, dtype=np.int64)),
        "seconds": pa.array(rng.random(n) * 0.1),
        "error": pa.nulls(n, pa.string()),
        "created_at": pa.array([dt.datetime(2026, 1, 1, tzinfo=dt.UTC)] * n, pa.timestamp("us", tz="UTC")),
    }
    return pa.table(cols, schema=JUDGMENTS)


def groups(n_groups: int) -> list[tuple[int, str, int]]:
    contexts = max(1, n_groups // (JUDGES * len(ASPECTS)))
    return [(j, a, c) for c in range(contexts) for a in ASPECTS for j in range(JUDGES)]


def build(store: Path, rows: int, n_groups: int, commit_rows: int) -> dict:
    import pyarrow as pa

    from pairank.storage.fs import Location
    from pairank.storage.store.cache import JudgmentCache

    cache = JudgmentCache(Location.of(str(store)))
    per = rows // n_groups
    pending, commits, t0 = [], 0, time.perf_counter()
    for i, (j, a, c) in enumerate(groups(n_groups)):
        pending.append(group_table(j, a, c, per, seed=i))
        if sum(t.num_rows for t in pending) >= commit_rows:
            cache.append(pa.concat_tables(pending))
            pending, commits = [], commits + 1
    if pending:
        cache.append(pa.concat_tables(pending))
        commits += 1
    size = sum(f.stat().st_size for f in store.rglob("*") if f.is_file())
    return {
        "rows": per * n_groups,
        "groups": n_groups,
        "rows_per_group": per,
        "commits": commits,
        "files": len(cache.files()),
        "bytes": size,
        "build_seconds": round(time.perf_counter() - t0, 1),
    }


def measure(store: str, case: str, group: list | None) -> dict:
    """One read in this (fresh) process: seconds, rows and peak RSS."""
    from pairank.storage import delta
    from pairank.storage.fs import Location
    from pairank.storage.store.cache import JudgmentCache

    cache = JudgmentCache(Location.of(store))
    keys = None
    if case == "scoped":
        j, a, c = group
        keys = group_table(j, a, c, int(os.environ["BENCH_PER"]), seed=int(os.environ["BENCH_SEED"])).column("key")
        keys = keys.to_pylist()
    delta.open_table(cache.folder)
    base = high_water_mib()
    t0 = time.perf_counter()
    if case == "scoped":
        table = cache.read(aspects=[a], contexts=[f"ctx-{c:05d}"], keys=keys)
    elif case == "whole":
        table = cache.read()
    else:
        table = None
    seconds = time.perf_counter() - t0
    return {
        "case": case,
        "seconds": round(seconds, 3),
        "rows": 0 if table is None else table.num_rows,
        "peak_rss_mib": high_water_mib(),
        "rss_before_read_mib": base,
    }


def high_water_mib() -> float:
    """This process's peak RSS (VmHWM). Not ``ru_maxrss``: on Linux that keeps the forking parent's peak across
    the exec of a child."""
    status = Path("/proc/self/status").read_text()
    return round(int(status.split("VmHWM:")[1].split()[0]) / 1024, 1)


def in_child(store: Path, case: str, group, per: int, seed: int) -> dict:
    env = {**os.environ, "BENCH_PER": str(per), "BENCH_SEED": str(seed)}
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, "--store", str(store), "--group", json.dumps(group)],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
    )
    if out.returncode != 0:
        return {"case": case, "failed": out.returncode, "stderr": out.stderr[-2000:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def compaction(store: Path, commits: int) -> dict:

    from pairank.storage.fs import Location
    from pairank.storage.store.cache import JudgmentCache
    from pairank.storage.store.maintenance import compact

    root = store / "root"
    cache = JudgmentCache(Location.of(str(root / "tables" / "judgments")))
    t0 = time.perf_counter()
    for i in range(commits):
        j, a, c = groups(1000)[i % 1000]
        cache.append(group_table(j, a, c % 5, 50, seed=10_000 + i))
    append_s = time.perf_counter() - t0

    def timed_read() -> float:
        t = time.perf_counter()
        cache.read(aspects=["coherence"], contexts=["ctx-00001"])
        return time.perf_counter() - t

    before_files, before_read = len(cache.files()), timed_read()
    t0 = time.perf_counter()
    compact(str(root))
    compact_s = time.perf_counter() - t0
    assert cache.rows().num_rows == commits * 50
    return {
        "commits": commits,
        "rows": commits * 50,
        "append_seconds_each": round(append_s / commits, 4),
        "files_before": before_files,
        "files_after": len(cache.files()),
        "compact_seconds": round(compact_s, 2),
        "scoped_read_seconds_before": round(before_read, 3),
        "scoped_read_seconds_after": round(timed_read(), 3),
    }


def night_commits(work: Path, nights: int = 30) -> dict:
    """Seconds of one nightly commit (one row of the Delta log, as an application transaction), by night."""
    from pairank.storage.commits import CommitLog, NightlyLayout
    from pairank.storage.fs import Location

    log = CommitLog(NightlyLayout(Location.of(str(work / "nightly-root")), "board"))
    seconds = []
    for n in range(nights):
        log.commits()
        t0 = time.perf_counter()
        log.commit(n, {"night": f"night-{n:03d}", "folder": f"nights/night-{n:03d}", "counts": {"judged": n}})
        seconds.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    assert len(log.commits()) == nights
    return {
        "nights": nights,
        "commit_seconds_median": round(sorted(seconds)[nights // 2], 4),
        "commit_seconds_max": round(max(seconds), 4),
        "read_log_seconds": round(time.perf_counter() - t0, 4),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="100,000 rows, 200 small commits")
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--commit-rows", type=int, default=100_000)
    ap.add_argument("--small-commits", type=int, default=2000)
    ap.add_argument("--dir", default=None, help="where to build the stores (default: a temporary folder)")
    ap.add_argument("--skip-whole", action="store_true", help="do not read the whole store")
    ap.add_argument("--reuse", action="store_true", help="with --dir: read the store built there by an earlier run")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--store", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--group", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.store, args.child, json.loads(args.group))))
        return
    if args.quick:
        args.rows, args.groups, args.commit_rows, args.small_commits = 100_000, 100, 10_000, 200
    work = Path(args.dir or tempfile.mkdtemp(prefix="pairank-store-scale-"))
    store = work / "store"
    try:
        if args.reuse and (store / "_delta_log").is_dir():
            built = json.loads((work / "built.json").read_text())
        else:
            built = build(store, args.rows, args.groups, args.commit_rows)
            (work / "built.json").write_text(json.dumps(built))
        print("built", built, flush=True)
        gs = groups(args.groups)
        pick = len(gs) // 2
        per = args.rows // args.groups
        reads = [in_child(store, case, list(gs[pick]), per, pick) for case in ("baseline", "scoped", "scoped")]
        if not args.skip_whole:
            reads.append(in_child(store, "whole", list(gs[pick]), per, pick))
        for r in reads:
            print(r, flush=True)
        small = compaction(work, args.small_commits)
        print("compaction", small, flush=True)
        nightly = night_commits(work)
        print("nightly", nightly, flush=True)
        result = {
            "store": built,
            "reads": reads,
            "compaction": small,
            "nightly": nightly,
            "note": "synthetic rows; reads each in a fresh process; peak RSS includes the imports "
            "(see the baseline case)",
        }
        name = "store_scale-quick.json" if args.quick else "store_scale.json"
        out = ROOT / "bench" / "results" / name
        out.write_text(json.dumps(result, indent=2) + "\n")
        print(out)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
