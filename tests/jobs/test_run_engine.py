"""The `pairank` command end to end on real parts: SummEval imported to a SeaweedFS S3
server, judged by the real vLLM CPU engine in a Ray actor, killed midway and re-run. The rerun runs vLLM's async
engine, whose engine core (a process of its own, a child of the actor) is SIGKILLed in turn: the actor sees the
engine dead and ends, Ray restarts it, and the batches it held are judged again on the new engine.

A SIGKILLed actor (the synchronous engine's whole process) is the same loss to Ray and the pool: the SIMULATED
judge's actors are killed that way in tests/jobs/test_lost_engines.py. One run here saves a Ray, a run and two
engine starts of their own."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.lease import is_held
from tests.helpers import CPU_ENGINE_ENV, ROOT, SHORT_TEXT_WORDS, process_titles, titled_pids, write_input

PAIRANK = [sys.executable, "-m", "pairank.jobs.cli.main"]
CONTEXTS = 4  # the async engine, two batches in flight, once judged all of 3 articles before a part was seen
TOTAL = CONTEXTS * (4 * 3) * 2  # contexts x ordered pairs of 4 candidates x aspects
#: The rerun: vLLM's async engine with two batches in flight (``auto`` picks the synchronous one on CPUs).
ASYNC = ["--set", "judge.async_engine=true", "--set", "pool.max_batches_in_flight=2"]
CORE = b"VLLM::EngineCore"


def write_spec(tmp_path: Path) -> Path:
    spec = {
        "name": "killed",
        "input": "s3://pairank/killed-input",
        "output": "s3://pairank/killstore",
        "aspects": ["coherence", "fluency"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "subset": {"contexts": CONTEXTS, "candidates": 4},
        "judge": {"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV},
        "pool": {"size": 1, "num_cpus": 2, "batch_size": 4},
        "flush_rows": 4,
    }
    path = tmp_path / "killed.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def parts_on_s3(client) -> list[str]:
    """The judgment table's data files on S3 (committed or not)."""
    listing = client.list_objects_v2(Bucket="pairank", Prefix="killstore/tables/judgments/")
    return sorted(o["Key"] for o in listing.get("Contents", []) if "/_delta_log/" not in o["Key"])


def commits_on_s3(client) -> int:
    """Appends committed to the judgment table (its Delta log's versions after the creating one)."""
    listing = client.list_objects_v2(Bucket="pairank", Prefix="killstore/tables/judgments/_delta_log/")
    return sum(1 for o in listing.get("Contents", []) if o["Key"].endswith(".json")) - 1


def all_rows() -> list[dict]:
    cache = JudgmentCache(Location.of("s3://pairank/killstore/tables/judgments"))
    return list(cache.rows().to_pylist())


def one_core(proc: subprocess.Popen, timeout: float = 400) -> int:
    """The one engine core of the run ``proc``, once it has one (an engine starting, or a restarting actor, has
    none for a while); ``timeout`` only bounds a hang, and a run that ends first is an error. A failure lists the
    run's processes."""
    deadline = time.monotonic() + timeout
    while len(pids := titled_pids(CORE, under=proc.pid)) != 1:
        assert proc.poll() is None, f"the run ended ({proc.returncode}) with engine cores {pids}"
        assert time.monotonic() < deadline, f"expected one engine core, found {pids} in {process_titles(proc.pid)}"
        time.sleep(0.1)  # a poll of the run's processes, not a window
    return pids[0]


def group_alive(group: int) -> list[int]:
    """The live (not zombie) processes of process group ``group``."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == group:
            alive.append(int(stat.parent.name))
    return alive


def wait_gone(group: int, timeout: float = 120) -> None:
    """Until no process of process group ``group`` is left (a killed run's Ray daemons and workers: then none of
    them writes to S3 any more); ``timeout`` only bounds a hang."""
    deadline = time.monotonic() + timeout
    while alive := group_alive(group):
        assert time.monotonic() < deadline, f"processes {alive} of group {group} still alive after {timeout} s"
        time.sleep(0.1)  # a poll of the processes, not a window


def test_import_to_s3_with_the_cli(s3_server, shared_data):
    out = subprocess.run(
        [*PAIRANK, "import", "summeval", str(shared_data / "summeval"), "s3://pairank/data/summeval"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["candidates"] == 1600
    keys = {o["Key"] for o in s3_server.list_objects_v2(Bucket="pairank", Prefix="data/summeval/")["Contents"]}
    assert keys == {"data/summeval/candidates.parquet", "data/summeval/human_scores.parquet"}


@pytest.mark.ray
def test_killed_run_loses_no_judgment_and_rerun_asks_none_twice_though_its_engine_core_is_killed(
    s3_server, default_model, tmp_path, summeval_tables
):
    assert parts_on_s3(s3_server) == []
    # the shipped SummEval on S3, each text cut short: the claim is the kill and the rerun, not the reading
    write_input("s3://pairank/killed-input", summeval_tables, CONTEXTS, 4, words=SHORT_TEXT_WORDS)
    spec = write_spec(tmp_path)
    log = open(tmp_path / "run1.log", "wb")  # noqa: SIM115 - a server's log, open for its life
    proc = subprocess.Popen(
        [*PAIRANK, "run", str(spec)],
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env={**os.environ, "PAIRANK_LEASE_TTL_S": "2"},
    )
    try:
        deadline = time.monotonic() + 400
        while commits_on_s3(s3_server) < 1:
            assert proc.poll() is None, (tmp_path / "run1.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no judgment part written in time"
            time.sleep(0.1)  # a poll of the store, not a window
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        log.close()
    # Ray's own daemons were in the killed process group too: once they are all gone nothing of the killed run
    # writes to S3; and its name is taken until its lease (2 s) runs out
    wait_gone(proc.pid)
    killstore = Location.of("s3://pairank/killstore")
    deadline = time.monotonic() + 120
    while is_held(killstore, "killed"):
        assert time.monotonic() < deadline, "the killed run's lease was still held after 120 s"
        time.sleep(0.1)  # a poll of the lease, not a window
    before = all_rows()
    parts_before = parts_on_s3(s3_server)
    assert 0 < len(before) < TOTAL, f"kill came too late to test anything ({len(before)} of {TOTAL} judged)"
    assert len(before) % 4 == 0  # whole parts only: nothing half-written is visible

    # the rerun, on the async engine: once it has stored a part of its own its engine core is SIGKILLed; the actor
    # sees its engine dead and ends, Ray restarts it, the batches it held are judged again on the new engine, and the
    # run ends as if nothing happened. Its part is one committed after its engine core is up (the states waited for;
    # the core is not looked for in a window of time after the commit)
    err = tmp_path / "run2.err"
    cores: set[int] = set()  # every engine core of the rerun seen, the killed one's replacement too
    done, missed = threading.Event(), []

    def watch(run: int) -> None:
        while not done.is_set():
            try:
                cores.update(titled_pids(CORE, under=run))
            except Exception as exc:  # a daemon thread's error would go unseen
                missed.append(repr(exc))
            time.sleep(0.5)  # a poll, not a window: each look reads /proc (hundreds of processes beside it under xdist)

    with open(err, "wb") as stderr:
        second = subprocess.Popen(
            [*PAIRANK, "run", str(spec), *ASYNC],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        threading.Thread(target=watch, args=(second.pid,), daemon=True).start()
        try:
            core = one_core(second)  # its engine is up
            committed = commits_on_s3(s3_server)
            deadline = time.monotonic() + 400
            while commits_on_s3(s3_server) <= committed:
                assert second.poll() is None, err.read_text()[-3000:]
                assert time.monotonic() < deadline, "the rerun stored nothing in time"
                time.sleep(0.1)  # a poll of the store, not a window
            assert one_core(second) == core, "the rerun's engine core changed before the kill"
            os.kill(core, signal.SIGKILL)
            assert second.wait(timeout=600) == 0, err.read_text()[-3000:]
        finally:
            done.set()
            if second.poll() is None:
                os.killpg(second.pid, signal.SIGKILL)
                second.wait()
    # No engine core outlives its actor: the killed one, and every other the watcher saw (the replacement's, ended
    # with its actor when the run stopped its pool). Under load the watcher has missed the replacement's core (two
    # CI runs, the old test of its own and this one), though the report says it judged: it is not required here.
    assert core in cores and not missed, (sorted(cores), missed)
    deadline = time.monotonic() + 120  # a hang bound
    while (alive := [p for p in cores if Path(f"/proc/{p}").exists()]) and time.monotonic() < deadline:
        time.sleep(0.2)  # a poll of the cores' processes, not a window
    assert not alive, "an engine core outlived its actor"
    assert set(parts_before) <= set(parts_on_s3(s3_server))  # every written part is still there
    rows = all_rows()
    counts = Counter(r["key"] for r in rows)
    assert len(counts) == TOTAL and max(counts.values()) == 1  # no comparison was asked twice
    old = {r["key"]: r["created_at"] for r in before}
    assert all(r["created_at"] == old[r["key"]] for r in rows if r["key"] in old)
    report = Location.of("s3://pairank/killstore/runs/killed/report.json").read_json()
    assert report["counts"]["cached"] == len(before)
    assert report["counts"]["judged_now"] == TOTAL - len(before)
    assert report["counts"]["with_verdict"] == TOTAL and report["counts"]["errors_now"] == 0
    assert report["engines"]["lost"] == 1 and report["engines"]["restarted"] == 1
    (actor,) = report["pool"]
    assert actor["most_in_flight"] == 2  # the async engine held two batches at once
    assert (
        "engines lost: 1 (1 restarted, 0 dead)"
        in Location.of("s3://pairank/killstore/runs/killed/report.md").read_text()
    )
    # A quiet console (issue 17): the engine's and Ray's lines are in the run's log on S3, not on the console.
    lines = err.read_text().splitlines()
    assert lines and all(line.startswith("[pairank] ") for line in lines), [x for x in lines if "[pairank]" not in x]
    (log,) = [
        loc for loc in Location.of("s3://pairank/killstore/runs/killed/logs").files(".log") if loc.uri in lines[0]
    ]
    text = log.read_text()
    assert "vllm" in text.lower() and "JudgeActor" in text and "ray" in text.lower()
    # A third run would find everything cached and start no engine: test_static_stream.py's rerun shows that (on
    # the session's Ray), where it costs no Ray of its own.
