"""Benchmark: what claims cost (issue 30, item 6).

Two parts:

1. **A claim** (no Ray): :meth:`pairank.storage.store.claims.Claims.claim` of one planning block's keys, on a local
   folder and on a SeaweedFS S3 server the benchmark starts on 127.0.0.1: with an empty log, and with
   ``--others`` live records of another run of the same size in the log (a claimer reads them). Sizes: 1,440 keys
   (the issue's run) and 65,536 (``PAIRS_PER_TASK``, the most one block holds per aspect and variant). Reported:
   seconds per claim (median of ``--repeats``) and the record's bytes.
2. **A run** (local Ray, SIMULATED judge, no delay): the same static run (``full``, 1,440 comparisons) with the
   run's claims (``pairank run`` as it is) and without them (``run_job(spec)`` without claims, as before), arms
   alternated, each on a fresh local store. Reported: seconds from start to the manifest written, per arm.

Run from the repository root: ``.venv/bin/python bench/claims_cost.py`` (about 5 minutes; ``--no-run`` skips part 2).
Results: bench/results/claims_cost.json.
"""

from __future__ import annotations

import argparse
import hashlib
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C
import serve_load

NAME = "claims_cost"


def keys(n: int, salt: str) -> list[str]:
    return [hashlib.sha256(f"{salt}:{i}".encode()).hexdigest()[:32] for i in range(n)]


def claim_case(root, n: int, others: int, repeats: int) -> dict:
    from pairank.storage.store.claims import Claims, Holder
    from pairank.storage.store.lease import take

    seconds, size = [], None
    for r in range(repeats):
        base = root.join(f"case-{n}-{others}-{r}-{uuid.uuid4().hex[:6]}")
        wanted = keys(n, f"{n}-{r}")
        holders = [take(base, f"other{i}", ttl=600) for i in range(others)]
        try:
            for i, lease in enumerate(holders):  # live records of other runs, of other keys
                Claims(base, Holder.of(lease)).claim({0: keys(n, f"other{i}-{r}")}, since=time.time())
            with take(base, "me", ttl=600) as lease:
                claims = Claims(base, Holder.of(lease))
                t0 = time.perf_counter()
                got = claims.claim({0: wanted}, since=time.time())
                seconds.append(time.perf_counter() - t0)
                assert len(got.mine) == n and got.added == 1
                newest = max(claims.folder(0).files(".json"), key=lambda f: f.path)
                size = len(newest.read_bytes())
        finally:
            for lease in holders:
                lease.release()
    return {
        "keys": n,
        "other_live_records": others,
        "seconds_median": round(statistics.median(seconds), 4),
        "seconds": [round(s, 4) for s in seconds],
        "record_bytes": size,
    }


def run_case(tmp: Path, claims: bool, rep: int) -> dict:
    """One static run: 16 SummEval contexts x 10 summaries, full, one aspect (1,440 comparisons)."""
    from pairank.jobs.run import run, run_job
    from pairank.jobs.specs.job import parse_spec

    out = tmp / f"store-{'claims' if claims else 'none'}-{rep}"
    spec = parse_spec(
        {
            "name": "cost",
            "input": str(C.ROOT / "data" / "summeval"),
            "subset": {"contexts": 16, "candidates": 10},
            "output": str(out),
            "aspects": ["coherence"],
            "prompts": str(C.PROMPTS),
            "judge": {"engine": "simulated"},
            "scheduler": {"name": "full"},
            "pool": {"size": 1, "num_cpus": 1, "batch_size": 256},
            "report": {"bootstrap": 0},
            "flush_rows": 4096,
        },
        "bench",
    )
    t0 = time.perf_counter()
    result = run(spec) if claims else run_job(spec)
    return {
        "claims": claims,
        "rep": rep,
        "seconds": round(time.perf_counter() - t0, 2),
        "requests": result.requests,
        "judged": result.judged,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--others", type=int, default=4)
    ap.add_argument("--runs", type=int, default=3, help="runs per arm in part 2")
    ap.add_argument("--no-run", action="store_true")
    ap.add_argument("--quiet-wait", type=float, default=120.0)
    args = ap.parse_args()

    from pairank.storage.fs import Location

    result: dict = {"benchmark": NAME, "when": C.now(), "machine": C.machine()}
    waited = C.wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else 0.0
    result["waited_for_idle_machine_s"] = waited
    claims_rows = []
    with tempfile.TemporaryDirectory(prefix="pairank-claims-cost-") as tmp:
        tmp = Path(tmp)
        (tmp / "s3").mkdir()
        s3, _ = serve_load.start_s3(tmp / "s3")  # its endpoint and credentials go into os.environ
        try:
            for where, root in (("local", Location.of(str(tmp / "local"))), ("s3", Location.of("s3://bench/claims"))):
                for n in (1440, 65536):
                    for others in (0, args.others):
                        row = {"store": where, **claim_case(root, n, others, args.repeats)}
                        print(row, flush=True)
                        claims_rows.append(row)
        finally:
            s3.terminate()
            s3.wait(20)
        result["claim"] = claims_rows
        if not args.no_run:
            from pairank.cluster.runtime import ensure_ray

            ensure_ray(num_cpus=2)
            runs = []
            for rep in range(args.runs):
                for claims in (True, False) if rep % 2 == 0 else (False, True):
                    row = run_case(tmp, claims, rep)
                    print(row, flush=True)
                    runs.append(row)
            result["runs"] = runs
            for arm in (True, False):
                xs = [r["seconds"] for r in runs if r["claims"] is arm and r["rep"] > 0]  # the first is warm-up
                result[f"run_seconds_median_{'claims' if arm else 'no_claims'}"] = statistics.median(xs) if xs else None
    path = C.write_result(NAME, result)
    print(f"-> {path}")


if __name__ == "__main__":
    main()
