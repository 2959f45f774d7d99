"""Two runs of different names that want the same comparisons, started together on one store, ask each once
(issue 30, item 6): the one that claims a comparison asks it, the other waits for its verdict; when the claimer
is killed, the other asks what it left once its lease expires.

Real parts: `pairank run` processes that join the session's Ray (as drivers join a cluster) with the SIMULATED
judge (its gate holds the runs' batches until the test lets them go, so the runs overlap), SIGKILLed for real
(Ray then ends the killed driver's actors). Every judgment the engines return is committed to the store, so the
store's rows per key count the engine calls.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import ROOT, Gate, joining, spec_for, write_input

CONTEXTS, PER_CONTEXT = 4, 5
COMPARISONS = CONTEXTS * PER_CONTEXT * (PER_CONTEXT - 1)  # full, one aspect


def stored_keys(out) -> Counter:
    """Rows per key in the store's judgment table (each row one answer of an engine)."""
    return Counter(JudgmentCache(Location.of(str(out)).join("tables", "judgments")).rows().column("key").to_pylist())


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # a poll of the state waited for, not a window


def spec_file(tmp_path, name: str, folder: Location, out, scheduler: str, judge: dict) -> str:
    data = spec_for(folder, out, name=name, scheduler={"name": scheduler}, judge=judge)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def start(spec: str, ttl_s: str, address: str) -> subprocess.Popen:
    """``pairank run`` of ``spec``, its output (stdout and stderr) in ``<spec>.log``, which the test reads while
    it runs."""
    with open(f"{spec}.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pairank.jobs.cli.main", "run", spec, *joining(address)],
            cwd=ROOT,
            env={**os.environ, "PAIRANK_LEASE_TTL_S": ttl_s},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc.log = Path(f"{spec}.log")  # type: ignore[attr-defined]
    return proc


def said(proc: subprocess.Popen) -> str:
    return proc.log.read_text(errors="replace")  # type: ignore[attr-defined]


WAITING = "being judged by another run"


def manifest(out, name: str) -> dict:
    return Location.of(str(out)).join("runs", name, "manifest.json").read_json()


def claimers(out) -> set[str]:
    """The runs with a claim record under ``out``."""
    folders = Location.of(str(out)).join("claims").folders()
    return {f.read_json()["run"] for folder in folders for f in folder.files(".json")}


def two_runs(
    tmp_path,
    summeval_tables,
    address: str,
    gate: Gate,
    hold_from: int,
    scheduler: str = "full",
    ttl_s: str = "20",
    out=None,
) -> tuple[object, list[str], list[subprocess.Popen]]:
    """Two runs of ``scheduler`` on one store, started together; their batches from the ``hold_from``-th on (of
    both runs) held at ``gate`` until the test releases it."""
    folder = write_input(tmp_path / "input", summeval_tables, CONTEXTS, PER_CONTEXT)
    out = out or tmp_path / "store"
    names = ["left", "right"]
    specs = [spec_file(tmp_path, name, folder, out, scheduler, gate.judge(hold_from)) for name in names]
    return out, names, [start(spec, ttl_s, address) for spec in specs]  # started together


def twice(out) -> str:
    """What the store and the claim logs say about keys stored more than once (a failing test's message)."""
    rows = JudgmentCache(Location.of(str(out)).join("tables", "judgments")).rows().to_pylist()
    keys = stored_keys(out)
    lines = [f"{r['key'][:16]} {r['context_id']} {r['created_at']}" for r in rows if keys[r["key"]] > 1]
    for folder in Location.of(str(out)).join("claims").folders():
        for f in folder.files(".json"):
            r = f.read_json()
            lines.append(f"{f.uri.rsplit('/', 2)[-2:]} {r['run']} lease {r['lease']} {r['created_at']} {r['count']}")
    return "\n".join(lines)


def finish(procs: list[subprocess.Popen]) -> list[tuple[int, str]]:
    done = []
    for p in procs:
        p.wait(timeout=900)
        done.append((p.returncode, said(p)))
    return done


def judging_pids(gate: Gate) -> set[int]:
    """The engine processes whose batches reached the gate (one actor a run here: the runs judging)."""
    return {json.loads(f.read_text())["pid"] for f in gate.folder.glob("batch-*.json")}


def release_once_they_overlap(gate: Gate, procs: list[subprocess.Popen]) -> None:
    """Every batch is held until the runs overlap: one said it waits for the other's verdicts, or both judge (each
    then waits for the other's once its own are in). Then the gate opens for good."""
    deadline = time.monotonic() + 600  # a hang bound
    while not (any(WAITING in said(p) for p in procs) or len(judging_pids(gate)) >= 2):
        assert all(p.poll() is None for p in procs), "a run ended while every batch was held"
        assert time.monotonic() < deadline, "the runs did not overlap"
        time.sleep(0.2)  # a poll of the runs' logs and the gate, not a window
    gate.release()


@pytest.mark.parametrize(
    "scheduler, where", [("full", "local"), ("pairs_greedy", "local"), pytest.param("full", "s3", marks=pytest.mark.s3)]
)
def test_two_runs_started_together_ask_each_comparison_once(
    tmp_path, summeval_tables, ray_address, scheduler, where, request
):
    out = None
    if where == "s3":  # the runs reach the S3 server through the AWS settings the fixture put in the environment
        request.getfixturevalue("s3_server")
        out = f"s3://pairank/claims-runs-{uuid.uuid4().hex[:8]}"
    gate = Gate(tmp_path / "gate")
    out, names, procs = two_runs(tmp_path, summeval_tables, ray_address, gate, 0, scheduler=scheduler, out=out)
    try:
        release_once_they_overlap(gate, procs)
        results = finish(procs)
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    for (code, said), name in zip(results, names):
        assert code == 0, f"{name}: {said[-3000:]}"
    keys = stored_keys(out)
    assert set(keys.values()) == {1}, f"each comparison judged once in all:\n{twice(out)}"
    if scheduler == "full":
        assert len(keys) == COMPARISONS
    counts = [manifest(out, name)["counts"] for name in names]
    assert [c["requests"] for c in counts] == [len(keys), len(keys)]  # each run used every comparison
    assert sum(c["judged_now"] for c in counts) == len(keys)
    assert any(WAITING in said for _, said in results), "the runs did not overlap"
    for name in names:  # complete outputs
        assert manifest(out, name)["state"] == "done"
        run = Location.of(str(out)).join("runs", name)
        assert run.join("report.md").exists()
        ranked = set(run.join("rankings.parquet").read_parquet().column("candidate_id").to_pylist())
        assert len(ranked) == CONTEXTS * PER_CONTEXT


def test_a_killed_claimers_comparisons_are_asked_by_the_other_once_its_lease_expires(
    tmp_path, summeval_tables, ray_address
):
    gate = Gate(tmp_path / "gate")  # the claimer's first batch (8) judged, the rest held until it is killed
    out, names, procs = two_runs(tmp_path, summeval_tables, ray_address, gate, 1, ttl_s="6")
    by_name = dict(zip(names, procs))
    try:
        wait_for(lambda: (out / "claims").exists() and claimers(out), 600, "a claim")
        (claimer,) = claimers(out)  # one block: one run claimed every comparison
        survivor = next(n for n in names if n != claimer)
        gate.wait_for(2, proc=by_name[claimer])
        wait_for(lambda: len(stored_keys(out)) >= 8, 600, "the claimer's first commit")
        os.killpg(by_name[claimer].pid, signal.SIGKILL)
        by_name[claimer].wait(timeout=60)
        committed = len(stored_keys(out))
        gate.release()  # the survivor judges what the killed one left once its lease expires
        code, said = finish([by_name[survivor]])[0]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
    assert code == 0, said[-3000:]
    assert committed < COMPARISONS, "the claimer finished before it was killed"
    keys = stored_keys(out)
    assert len(keys) == COMPARISONS and set(keys.values()) == {1}, f"each comparison judged once:\n{twice(out)}"
    counts = manifest(out, survivor)["counts"]
    assert counts["requests"] == COMPARISONS and counts["judged_now"] == COMPARISONS - committed
    assert manifest(out, claimer)["state"] == "judging"  # killed mid-judging
