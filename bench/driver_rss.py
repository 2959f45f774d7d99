"""Benchmark (SIMULATED judge): the driver's peak memory on a static full-matrix run, by size.

Issue 13 item 4: requests (pairs, keys, rendered prompts) are made in Ray Data tasks
and stream into the judge pool (:mod:`pairank.jobs.judging.streamed`), so the driver
does not hold the request table. This script measures what the driver process holds.

Each case runs in a fresh child process on a synthetic input of ``contexts`` x 16
candidates (short texts; ``bench/driver_scale.py``'s ``synthetic_candidates``), one
aspect, the ``full`` scheduler (240 ordered pairs per context), the SIMULATED judge
(no model: it measures the plumbing, not a judge), one pool actor, a fresh store.
The job's own steps are composed as ``jobs/run.py: run_job`` composes them, and the
driver's peak private memory (``RssAnon`` of /proc/self/status, sampled every 0.1 s) and
peak RSS (``VmHWM``; ``ru_maxrss`` would keep the forking parent's peak) are read after
each phase. VmHWM also counts the pages of Ray's shared object store that the driver
touched while reading result blocks: they grow with the run up to the store's size,
but they are the store's memory, so the private peak is the figure for what the driver
holds. The phases:

- ``inputs``: after reading the candidates (the ``stream`` arm: their ids only, as
  ``run_job`` reads them for a run scored in tasks) and preparing the judging (the baseline);
- ``judging`` (``stream`` arm): when every comparison is judged and in the store,
  before the blocks' judgments are read back and scored in tasks;
- ``judge``: after the judge step (``stream``: the blocks' scores added up on the driver;
  ``driver``: the run's judgments held for scoring);
- ``score``: after rankings, win rates and the report (the whole run's peak).

Two arms: ``stream`` is the code as it is (``pipeline.judge.judge_one_pass``); ``driver`` is the
former path, rebuilt here from the same functions: the keys of every comparison and
the rendered request table made on the driver, then streamed through the same pool.

The ``driver`` arm runs up to ``--driver-up-to`` contexts and scores up to ``--score-up-to`` (both 5,000 by
default): above that each would need GBs (see BENCHMARKS.md §12). The ``stream`` arm scores at every size.

Run from the repository root:  .venv/bin/python bench/driver_rss.py [--sizes 1000 5000 20000] [--arms stream driver]
Writes bench/results/driver_rss.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C
from driver_scale import SIMULATED, synthetic_candidates

NAME = "driver_rss"
PER_CONTEXT = 16


def peak_mib() -> float:
    """This process's peak resident set (VmHWM), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError("no VmHWM in /proc/self/status")


def status_mib(field: str) -> float:
    """A size field of /proc/self/status (VmRSS, RssAnon: private memory, RssShmem: shared memory pages this
    process touched, such as Ray's object store it reads blocks from), MiB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return round(int(line.split()[1]) / 1024, 1)
    raise RuntimeError(f"no {field} in /proc/self/status")


def rss_mib() -> float:
    return status_mib("VmRSS")


class PrivatePeak(threading.Thread):
    """The highest RssAnon (private memory) seen so far, sampled every 0.1 s: VmHWM also counts the pages of
    Ray's shared object store that the driver touched reading blocks, which grow with the run but are the
    store's memory, not the driver's."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak = status_mib("RssAnon")

    def run(self) -> None:
        while True:
            self.peak = max(self.peak, status_mib("RssAnon"))
            time.sleep(0.1)

    def now(self) -> float:
        self.peak = max(self.peak, status_mib("RssAnon"))
        return self.peak


def judge_on_driver(spec, inputs, setup, progress):
    """The former static path: every key and the rendered request table on the driver, then the pool."""
    import pyarrow as pa

    from pairank.jobs.judging.passes import error_count
    from pairank.jobs.judging.pool_wiring import PoolRecord, judge_pool
    from pairank.jobs.judging.requests import scheduled_requests
    from pairank.jobs.pipeline.judge import Counts, Judged

    wanted = scheduled_requests(setup.maker, inputs.candidates, spec.aspects, spec.scheduler)
    answered = setup.cache.answered(aspects=spec.aspects, contexts=list(setup.maker.context), keys=wanted)
    done = set(answered.column("key").to_pylist())
    todo = {k: req for k, req in wanted.items() if k not in done}
    with judge_pool(spec, PoolRecord()) as pool:
        new = setup.judging.judge(pool, todo, setup.cache, progress)
    counts = Counts(len(wanted), len(wanted) - len(todo), new.num_rows, error_count(new))
    return Judged(pa.concat_tables([answered, new]), counts)


def run_case(case: dict) -> dict:
    import gc
    from dataclasses import asdict

    import pyarrow as pa

    from pairank.jobs.pipeline.inputs import read_inputs, scored_in_tasks
    from pairank.jobs.pipeline.judge import judge_one_pass
    from pairank.jobs.pipeline.report import report, utc_now
    from pairank.jobs.pipeline.score import score
    from pairank.jobs.pipeline.setup import prepare_judging
    from pairank.jobs.pipeline.winrates import win_rates
    from pairank.jobs.specs.job import parse_spec
    from pairank.storage.fs import Location
    from pairank.storage.layout import RunLayout

    out: dict = {"case": case}
    with tempfile.TemporaryDirectory(prefix="pairank-driver-rss-") as tmp:
        folder = Location.of(str(Path(tmp) / "input"))
        folder.join("candidates.parquet").write_parquet(synthetic_candidates(case["contexts"], PER_CONTEXT))
        spec = parse_spec(
            {
                "name": "rss",
                "input": folder.uri,
                "output": str(Path(tmp) / "out"),
                "aspects": ["coherence"],
                "prompts": str(C.PROMPTS),
                "judge": SIMULATED,
                "scheduler": {"name": "full"},
                "pool": {"size": 1, "num_cpus": 1, "batch_size": 1024},
                "report": {"bootstrap": 0},
                "cluster": {"num_cpus": 2},
                "flush_rows": 200_000,
            },
            NAME,
        )
        private = PrivatePeak()
        private.start()
        started = time.perf_counter()
        layout = RunLayout.of(spec.output, spec.name)
        inputs = read_inputs(
            spec.input, spec.subset, texts=case["arm"] != "stream" or not scored_in_tasks(spec)
        )  # as run_job
        setup = prepare_judging(spec, inputs.candidates, layout)
        out["peak_mib_inputs"], out["private_mib_inputs"] = peak_mib(), private.now()
        t = time.perf_counter()
        judge = judge_one_pass if case["arm"] == "stream" else judge_on_driver

        timeline = out[
            "rss_timeline"
        ] = []  # (s, VmRSS, RssAnon, RssShmem, Arrow MiB, Python objects, line) at every progress line

        def progress(message: str) -> None:  # the peak before the run's judgments are read back for scoring
            arrow = round(pa.total_allocated_bytes() / 2**20, 1)  # live Arrow buffers, beside the resident set
            timeline.append(
                (
                    round(time.perf_counter() - t, 1),
                    rss_mib(),
                    status_mib("RssAnon"),
                    status_mib("RssShmem"),
                    arrow,
                    len(gc.get_objects()),
                    str(message)[:80],
                )
            )
            if message.startswith(("reading the run's judgments back", "scoring the run's judgments")):
                out["peak_mib_judging"], out["private_mib_judging"] = peak_mib(), private.now()

        judged = judge(spec, inputs, setup, progress)
        out["judge_seconds"] = round(time.perf_counter() - t, 1)
        out["peak_mib_judge"], out["private_mib_judge"] = peak_mib(), private.now()
        if not case["score"]:
            out["comparisons"], out["judged"] = judged.counts.requests, judged.counts.judged_now
            out["judgments_held_mib"] = round(judged.judgments.nbytes / 2**20, 1)
            return out
        t = time.perf_counter()
        scored = score(spec, inputs, judged)
        rates = win_rates(spec.winrate, spec.baseline, spec.aspects, inputs, judged.judgments, lambda m: None)
        counts = {"contexts": inputs.contexts, "candidates": inputs.candidates.num_rows, **asdict(judged.counts)}
        report(
            spec.model_dump(mode="json"), setup.identity, judged.totals, scored, rates, counts, started, judged.extra
        )
        out["score_seconds"] = round(time.perf_counter() - t, 1)
        out["peak_mib_score"], out["private_mib_score"] = peak_mib(), private.now()
        out["comparisons"] = judged.counts.requests
        out["judged"] = judged.counts.judged_now
        out["judgments_held_mib"] = round(judged.judgments.nbytes / 2**20, 1)
        out["finished_at"] = utc_now().isoformat()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--arms", nargs="+", default=["stream", "driver"], choices=["stream", "driver"])
    ap.add_argument(
        "--driver-up-to",
        type=int,
        default=5000,
        help="run the driver arm only up to this many contexts (its request table at 20k is GBs)",
    )
    ap.add_argument(
        "--score-up-to",
        type=int,
        default=5000,
        help="score the driver arm only up to this many contexts (its scoring holds Python rows of "
        "every judgment: ~16 GB at 20k); the stream arm scores block by block at every size",
    )
    args = ap.parse_args()
    if args.child is not None:
        print(json.dumps(run_case(json.loads(args.child))))
        return
    env = {"PYTHONUNBUFFERED": "1", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    cases = []
    for contexts in args.sizes:
        for arm in args.arms:
            if arm == "driver" and contexts > args.driver_up_to:
                continue
            score = arm == "stream" or contexts <= args.score_up_to
            case = C.run_child(__file__, {"contexts": contexts, "arm": arm, "score": score}, env)
            print(json.dumps(case), flush=True)
            cases.append(case)
    rows = []
    for arm in args.arms:
        mine = [c for c in cases if c["case"]["arm"] == arm]
        base = mine[0]
        for c in mine:

            def ratio(k, c=c, base=base):
                return round(c[k] / base[k], 2) if k in c and k in base else "–"

            rows.append(
                [
                    arm,
                    c["case"]["contexts"],
                    c["comparisons"],
                    c["private_mib_inputs"],
                    c.get("private_mib_judging", "–"),
                    ratio("private_mib_judging"),
                    c["private_mib_judge"],
                    ratio("private_mib_judge"),
                    c.get("private_mib_score", "–"),
                    ratio("private_mib_score"),
                    c.get("peak_mib_judging", c["peak_mib_judge"]),
                    c["judgments_held_mib"],
                    c["judge_seconds"],
                    c.get("score_seconds", "–"),
                ]
            )
    head = [
        "arm",
        "contexts",
        "comparisons",
        "private MiB inputs",
        "private MiB judging",
        "x smallest",
        "private MiB judge step",
        "x smallest",
        "private MiB whole run",
        "x smallest",
        "VmHWM MiB judging",
        "judgments held MiB",
        "judge s",
        "score s",
    ]
    print(C.table(rows, head))
    path = C.write_result(
        NAME, {"machine": C.machine(), "at": C.now(), "cases": cases, "table": [head, *rows], "pid": os.getpid()}
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
