"""A job survives lost engines: judge actors SIGKILLed mid-run are restarted by Ray, the batches they held
are judged again, nothing is stored twice, and a comparison that kills its engine every time becomes an
error row while the rest of the job goes on.

The judge is the SIMULATED engine in real Ray actors; the processes are killed for real (SIGKILL), found
by their Ray process titles. The real CPU vLLM engine loses its engine core in ``test_run_engine.py``'s rerun.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from pairank.jobs.judging.passes import judge_into_cache
from pairank.jobs.nightly import run_nightly
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.commits import CommitLog, NightlyLayout
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import ROOT, Feed, Gate, full_matrix_spec, joining, judge_actor_pids, overlaid, write_input


def stored_keys(output: str | Path) -> Counter:
    """How often each key is stored in the judgment cache, over every part."""
    cache = JudgmentCache(Location.of(str(output)).join("tables", "judgments"))
    return Counter(k for k in cache.rows().column("key").to_pylist())


class Killer(threading.Thread):
    """SIGKILLs a judge actor ``times`` times while a job runs held at ``gate`` (its judge's ``gate.judge()``),
    letting the run through in steps (:class:`~tests.helpers.Feed`) to each kill: once a part is stored since the
    last kill (the first: since the start) and the last killed actor is back (its restarted process holds a call),
    it kills an actor that holds a call no killed engine held (so no batch is killed twice). It releases the run
    once the last killed actor is back; every wait is for a state."""

    def __init__(self, output: str | Path, gate: Gate, times: int):
        super().__init__(daemon=True)
        self.cache = JudgmentCache(Location.of(str(output)).join("tables", "judgments"))
        self.gate, self.feed, self.times = gate, Feed(gate, most=80), times
        self.killed: list[int] = []
        self.error: str | None = None

    def parts(self) -> int:
        """Flushes committed so far (version 0 creates the table)."""
        return self.cache.version() or 0

    def victim(self) -> int | None:
        """An actor that holds a call at the gate none of whose comparisons a killed engine held."""
        records = self.gate.records().values()
        lost = {k for r in records if r["pid"] in self.feed.dead for k in r["keys"]}
        return next((r["pid"] for _, r in sorted(self.feed.held().items()) if lost.isdisjoint(r["keys"])), None)

    def run(self) -> None:
        try:
            seen, known = 0, set()  # known: the actors alive at the last kill; one not among them is a restart
            for _ in range(self.times):
                self.feed.until(
                    "a part stored since the last kill, the killed actor back, a fresh call to kill",
                    lambda seen=seen, known=known: (
                        self.parts() > seen
                        and (not self.killed or bool(self.gate.pids() - known))
                        and self.victim() is not None
                    ),
                )
                victim = self.victim()
                known = set(judge_actor_pids(under=os.getpid())) | self.gate.pids()
                os.kill(victim, signal.SIGKILL)
                self.killed.append(victim)
                self.feed.dead.add(victim)
                seen = self.parts()
            self.feed.until("the last killed actor back", lambda: bool(self.gate.pids() - known))
        except Exception as exc:  # the test reads it; the run is released either way
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            self.gate.release()


@pytest.fixture
def ten_input(tmp_path, summeval_tables):
    """10 SummEval articles x 8 summaries."""
    return write_input(tmp_path / "input", summeval_tables, 10, 8)


def pool_spec(input_folder, output, **over) -> dict:
    """A full matrix on 2 simulated actors, a part stored every batch."""
    base = full_matrix_spec(
        input_folder,
        output,
        name="lost",
        seconds_per_comparison=0,
        pool={"size": 2, "num_cpus": 1, "batch_size": 16, "retries": 2},
        flush_rows=16,
    )
    return overlaid(base, over)


def test_an_actor_killed_three_times_during_a_run_loses_nothing_and_stores_each_key_once(
    ray_local, ten_input, tmp_path
):
    out = tmp_path / "out"
    gate = Gate(tmp_path / "gate")  # every batch held: the run goes on only as far as the killer lets it
    spec = parse_spec(pool_spec(ten_input, out, judge=gate.judge()), "test")
    killer = Killer(out, gate, times=3)
    killer.start()
    result = run_job(spec, progress=lambda m: None)
    killer.join(timeout=5)
    assert killer.error is None and len(killer.killed) == 3
    assert result.errors == 0 and result.judged == result.requests == 10 * 8 * 7
    keys = stored_keys(out)
    assert len(keys) == result.requests and set(keys.values()) == {1}, keys.most_common(3)
    engines = result.report["engines"]
    assert engines["lost"] == 3 and engines["restarted"] == 3 and engines["rows_failed"] == 0
    assert "engines lost: 3 (3 restarted, 0 dead)" in result.layout.report_md.read_text()


def test_a_comparison_that_kills_its_engine_every_time_is_an_error_row_and_the_job_goes_on(
    ten_input, tmp_path, ray_address
):
    """`pairank run` (joining the session's Ray): one comparison kills its engine every time it is judged. It becomes an
    error row naming the reason, every other comparison is judged, exit 3, in bounded time."""
    out = tmp_path / "out"
    cands = pq.read_table(Path(ten_input.path) / "candidates.parquet").to_pylist()
    ctx = sorted({c["context_id"] for c in cands})[3]
    a, b = sorted(c["candidate_id"] for c in cands if c["context_id"] == ctx)[:2]
    data = pool_spec(
        ten_input,
        out,
        judge={"seconds_per_comparison": 0.0, "crash_on": [[ctx, a, b]]},
        pool={"batch_size": 8, "retries": 2},
    )
    spec = tmp_path / "poison.yaml"
    spec.write_text(yaml.safe_dump(data))
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(spec), *joining(ray_address)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert run.returncode == 3, run.stderr[-3000:]
    assert time.monotonic() - started < 300
    table = JudgmentCache(Location.of(str(out)).join("tables", "judgments")).read()
    errors = table.filter(pc.invert(pc.is_null(table.column("error")))).to_pylist()
    assert [(e["context_id"], e["candidate_a"], e["candidate_b"]) for e in errors] == [(ctx, a, b)]
    assert "the engine died 2 times while judging this comparison" in errors[0]["error"]
    assert table.num_rows - len(errors) == 10 * 8 * 7 - 1  # every other comparison has its verdict
    assert set(stored_keys(out).values()) == {1}
    report = (out / "runs" / "lost" / "report.md").read_text()
    assert "engines lost: 4 (4 restarted, 0 dead)" in report and "1 failed" in report  # 2 for the batch, 2 alone


class FailingPool:
    """Returns ``good`` batches, then fails the stream as a crashed Ray Data job does (a fault only a fake can
    cause on demand)."""

    def __init__(self, batches: list[pa.Table]):
        self.batches = batches

    def judge(self, todo, judging_pass):
        yield from self.batches
        raise RuntimeError("Dataset execution will now abort")


def test_what_the_pool_returned_is_stored_before_a_failing_stream_propagates(tmp_path):
    rows = [
        {
            "key": f"k{i}",
            "engine": "simulated",
            "model": "m",
            "revision": "r",
            "prompt_hash": "p",
            "sampling": "{}",
            "context_id": "c",
            "aspect": "a",
            "candidate_a": "x",
            "candidate_b": "y",
            "p_a": 0.5,
            "label": "tie",
            "logprob_a": None,
            "logprob_b": None,
            "raw_text": None,
            "input_tokens": 0,
            "output_tokens": 0,
            "seconds": 0.0,
            "error": None,
            "created_at": dt.datetime(2026, 1, 1),
        }
        for i in range(30)
    ]
    table = pa.Table.from_pylist(rows, schema=JUDGMENTS)
    cache = JudgmentCache(Location.of(str(tmp_path / "judgments")))
    batches = [table.slice(0, 10), table.slice(10, 10), table.slice(10, 10)]  # the last is a batch sent twice
    with pytest.raises(RuntimeError, match="abort"):
        judge_into_cache(FailingPool(batches), table, cache, flush_rows=8192, progress=lambda m: None)
    keys = list(cache.rows().column("key").to_pylist())
    assert sorted(keys) == sorted(f"k{i}" for i in range(20))  # returned, stored once each, before the error


@pytest.mark.s3
def test_a_night_on_s3_with_an_engine_killed_mid_night_commits(ray_local, summeval_tables, tmp_path):
    prefix, out = "s3://pairank/lost-night/inputs", "s3://pairank/lost-night/store"
    write_input(prefix + "/2026-11-20", summeval_tables, 6, 8)
    gate = Gate(tmp_path / "gate")  # every batch held: the night goes on only as far as the killer lets it
    spec = pool_spec(
        Location.of(prefix),
        out,
        name="board",
        scheduler={"name": "pairs_anchors"},
        judge=gate.judge(),
        nightly={"night": "2026-11-20", "n_boot": 10},
    )
    killer = Killer(out, gate, times=1)
    killer.start()
    night = run_nightly(parse_spec(spec, "test"), progress=lambda m: None)
    killer.join(timeout=5)
    assert killer.error is None and len(killer.killed) == 1
    assert night.commit.seq == 1 and night.errors == 0
    assert night.report["engines"]["lost"] == 1
    assert set(stored_keys(out).values()) == {1}
    (head,) = CommitLog(NightlyLayout(Location.of(out), "board")).commits()
    assert head.night == "2026-11-20" and head.record["counts"]["judged_now"] == night.counts["judged_now"] > 0
