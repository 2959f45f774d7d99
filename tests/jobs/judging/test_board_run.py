"""The board scheduler end to end on local Ray with the SIMULATED judge: it stops by confidence with far fewer
comparisons than the full matrix, says so in the report, and a run whose driver is killed between rounds
resumes from the store without asking anything twice."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter

import numpy as np
import pyarrow as pa
import pytest

from pairank.jobs.run import run_job
from pairank.jobs.specs.job import load_spec
from pairank.storage.fs import Location
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import ROOT, Gate, joining, run_killed_at_gate, wait_for_free, write_spec

#: The systems' strengths (the truth); each output's score adds seeded noise, so a context's order may differ.
STRENGTHS = {"alpha": 2.0, "bravo": 1.0, "charlie": 0.0, "delta": -1.0, "echo": -2.0}
CONTEXTS = 60
FULL_MATRIX = CONTEXTS * len(STRENGTHS) * (len(STRENGTHS) - 1)
JUDGE = {"engine": "simulated", "noise": 1.0, "scale": 1.5, "seed": 3}
SCHEDULER = {"name": "board", "confidence": 0.95, "seed": 1}


@pytest.fixture
def board_input(tmp_path):
    """60 contexts x one output of each of 5 systems, with human scores (the SIMULATED judge's quality)."""
    gen = np.random.default_rng(7)
    cands, scores = [], []
    for c in range(CONTEXTS):
        ctx = f"prompt-{c:02d}"
        for s, strength in STRENGTHS.items():
            cid = f"{ctx}/{s}"
            text = f"The answer of {s} to question {c}."
            cands.append(
                {"context_id": ctx, "context": f"Question {c}.", "candidate_id": cid, "system": s, "text": text}
            )
            scores.append({"candidate_id": cid, "aspect": "coherence", "score": strength + 0.3 * gen.normal()})
    folder = Location.of(str(tmp_path / "input"))
    folder.join("candidates.parquet").write_parquet(pa.Table.from_pylist(cands, schema=CANDIDATES))
    folder.join("human_scores.parquet").write_parquet(pa.Table.from_pylist(scores, schema=HUMAN_SCORES))
    return folder


def judge_with_quality(folder: Location, **over) -> dict:
    return {**JUDGE, "quality": folder.uri, **over}


def test_board_stops_by_confidence_with_far_fewer_comparisons_and_says_so(ray_local, board_input, tmp_path):
    said: list[str] = []
    spec = load_spec(
        write_spec(tmp_path, board_input, tmp_path / "out", judge=judge_with_quality(board_input), scheduler=SCHEDULER)
    )
    result = run_job(spec, progress=said.append)
    (board,) = result.report["adaptive"]["boards"]
    assert board["stopped"] == "confident"
    assert [r["system"] for r in board["order"]] == list(STRENGTHS)
    assert result.requests == board["comparisons"] < FULL_MATRIX / 4
    (line,) = [s for s in said if s.startswith("board (order): ")]
    assert "stopped by confidence" in line and line.endswith("order: alpha, bravo, charlie, delta, echo")
    assert "board (order): stopped by confidence" in result.layout.report_md.read_text()
    rankings = [r for r in result.layout.rankings.read_parquet().to_pylist() if r["method"] == "board"]
    assert len(rankings) == CONTEXTS * len(STRENGTHS)
    assert {r["system"] for r in rankings if r["rank"] == 1} == {"alpha"}  # each context in the board's order

    again = run_job(spec, progress=lambda m: None)  # a second run finds every comparison in the store
    assert again.judged == 0 and again.requests == result.requests


def test_board_killed_between_rounds_resumes_without_asking_twice(ray_address, board_input, tmp_path):
    """Killed between rounds 3 and 4, held there by the SIMULATED judge's gate (the batches of rounds 1-3 counted
    in an uninterrupted run first); the re-run replays rounds 1-3 from the store and ends where that run ended."""
    counted, at_round_3 = Gate(tmp_path / "counted"), []

    def progress(line: str) -> None:
        if line.startswith("round 3:"):
            at_round_3.append(counted.arrived())

    judge = judge_with_quality(board_input)
    clean_spec = write_spec(
        tmp_path,
        board_input,
        tmp_path / "clean",
        judge={**judge, **counted.judge(hold_from=10**6)},
        scheduler=SCHEDULER,
    )
    clean = run_job(load_spec(clean_spec), progress=progress)
    (rounds_1_to_3,) = at_round_3
    assert len(clean.report["adaptive"]["rounds"]) > 4  # the kill lands mid-run

    gate = Gate(tmp_path / "gate")
    spec = write_spec(
        tmp_path,
        board_input,
        tmp_path / "killed",
        judge={**judge, **gate.judge(hold_from=rounds_1_to_3)},
        scheduler=SCHEDULER,
    )
    said = run_killed_at_gate(spec, ray_address, gate, rounds_1_to_3 + 1, tmp_path / "run1.log")  # round 4's first held
    assert "round 3:" in said and "round 4:" not in said, said[-3000:]  # between rounds
    cache = JudgmentCache(Location.of(str(tmp_path / "killed" / "tables" / "judgments")))
    before = {r["key"]: r["created_at"] for r in cache.rows().to_pylist()}
    assert before, "nothing was judged before the kill"

    wait_for_free(Location.of(str(tmp_path / "killed")), "adaptive")
    gate.release()
    second = subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(spec), *joining(ray_address)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert second.returncode == 0, second.stderr[-3000:]
    assert "board (order): stopped by confidence" in second.stderr + second.stdout
    rows = cache.rows().to_pylist()
    assert max(Counter(r["key"] for r in rows).values()) == 1  # no comparison asked twice
    assert all(r["created_at"] == before[r["key"]] for r in rows if r["key"] in before)
    assert len(rows) == clean.requests  # the resumed run ends exactly where the uninterrupted one did
    resumed = Location.of(str(tmp_path / "killed" / "runs" / "adaptive" / "rankings.parquet")).read_parquet()

    def rounded(rows: list[dict]) -> list[dict]:  # win ratios sum the store's rows in the order they are read
        return [{**r, "score": round(r["score"], 9)} for r in rows]

    assert rounded(resumed.to_pylist()) == rounded(clean.layout.rankings.read_parquet().to_pylist())
