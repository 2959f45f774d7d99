"""The published LLMBar judge verdicts imported as JUDGMENTS (storage.importers.llmbar)."""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main as cli
from pairank.storage.fs import Location
from pairank.storage.importers import ImportedSet, get_importer, llmbar, run_import
from pairank.storage.keys import canonical_json, judgment_key, text_hash
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.validation import TableError
from tests.helpers import topicalchat_rows, write_json

STATS = ("correct_False", "correct_True", "correct_both", "equal")
SKIPPED_ROW = ("Processed/LLMEval^2", 169)  # blank output_2 in the published dataset.json


@pytest.fixture(scope="module")
def imported(shared_data: Path) -> ImportedSet:
    return llmbar.load(Location.of(str(shared_data / "llmbar")), skip_invalid=True)


def counts(winners: dict[str, dict[bool, str | None]], labels: dict[str, str]) -> dict[str, tuple[int, int]]:
    """LLMBar's statistics (its evaluate.py) from the winner per context and swap; winners and labels "1"/"2"."""
    n = Counter()
    for ctx, w in winners.items():
        n["correct_False"] += w[False] == labels[ctx]
        n["correct_True"] += w[True] == labels[ctx]
        n["correct_both"] += w[False] == labels[ctx] == w[True]
        n["equal"] += w[False] == w[True]
    return {k: (n[k], len(winners)) for k in STATS}


def published(path: Path) -> dict[str, tuple[int, int]]:
    """The counts of a statistics.json: "95 / 100 = 95.0%" -> (95, 100)."""
    stats = json.loads(path.read_text())
    return {k: tuple(map(int, re.fullmatch(r"(\d+) / (\d+) = .*%", stats[k]).groups())) for k in STATS}


def test_statistics_reproduced_for_every_evaluator(imported: ImportedSet, shared_data: Path) -> None:
    """The winners read back from the judgments give every published statistics.json: the orientation holds."""
    root = shared_data / "llmbar"
    labels = {p["context_id"]: "1" if p["preferred"] == "A" else "2" for p in imported.pairwise_labels.to_pylist()}
    winners: dict[tuple, dict[str, dict[bool, str | None]]] = defaultdict(lambda: defaultdict(dict))
    columns = ["model", "sampling", "context_id", "candidate_a", "candidate_b", "label"]
    for j in imported.judgments.select(columns).to_pylist():
        swap = j["candidate_a"].endswith("/output_2")
        winner = None if j["label"] is None else (j["candidate_a"] if j["label"] == "A" else j["candidate_b"])[-1]
        evaluator = (j["context_id"].rsplit("/", 1)[0], j["model"], json.loads(j["sampling"])["mode"])
        winners[evaluator][j["context_id"]][swap] = winner

    results = sorted(root.glob("**/evaluators/*/*/result.json"))
    evaluators = {r: (str(r.parents[3].relative_to(root)), r.parent.parent.name, r.parent.name) for r in results}
    assert len(results) == 249 and set(winners) == set(evaluators.values())
    for result, evaluator in evaluators.items():
        want = published(result.parent / "statistics.json")
        if evaluator[0] == SKIPPED_ROW[0]:  # the published counts include the skipped record: take it out
            record = json.loads(result.read_text())[SKIPPED_ROW[1]]
            verdict = record["results"][-1]
            left_out = counts(
                {"x": {s: verdict[f"swap = {s}"]["winner"] for s in (False, True)}}, {"x": str(record["label"])}
            )
            want = {k: (n - left_out[k][0], total - 1) for k, (n, total) in want.items()}
        assert counts(winners[evaluator], labels) == want, result


def test_null_winners_are_error_rows(imported: ImportedSet) -> None:
    rows = imported.judgments.select(["p_a", "label", "error"]).to_pylist()
    errors = [r for r in rows if r["error"] is not None]
    assert len(errors) == 253  # winner null in the published files (none in the skipped record)
    assert all(r == {"p_a": None, "label": None, "error": llmbar.NO_WINNER} for r in errors)
    assert all(r["p_a"] == (1.0 if r["label"] == "A" else 0.0) for r in rows if r["error"] is None)


def test_row_conventions_and_keys(imported: ImportedSet, shared_data: Path) -> None:
    j = imported.judgments
    assert j.schema.equals(JUDGMENTS)
    keys = j.column("key").to_pylist()
    assert len(set(keys)) == len(keys)  # so both swaps and all modes differ
    rows = [r for r in j.to_pylist() if r["context_id"] == "LLMBar/Natural/0" and r["model"] == "GPT-4"]
    by_mode = defaultdict(list)
    for r in rows:
        by_mode[json.loads(r["sampling"])["mode"]].append(r)
    assert {len(v) for v in by_mode.values()} == {2} and len(by_mode) == 15
    record = json.loads((shared_data / "llmbar/LLMBar/Natural/dataset.json").read_text())[0]
    texts = {"LLMBar/Natural/0/output_1": record["output_1"], "LLMBar/Natural/0/output_2": record["output_2"]}
    for mode, (straight, swapped) in by_mode.items():
        assert (straight["candidate_a"], straight["candidate_b"]) == tuple(texts)
        assert (swapped["candidate_a"], swapped["candidate_b"]) == tuple(texts)[::-1]
        assert straight["key"] != swapped["key"]
        assert straight["prompt_hash"] == text_hash(f"LLMBar/{mode}")
        assert straight["sampling"] == canonical_json({"mode": mode})
        judge = {"engine": "published", "model": "GPT-4", "revision": llmbar.REVISION, "sampling": {"mode": mode}}
        a, b = straight["candidate_a"], straight["candidate_b"]
        assert straight["key"] == judgment_key(
            judge,
            straight["prompt_hash"],
            "instruction_following",
            "LLMBar/Natural/0",
            record["input"],
            a,
            texts[a],
            b,
            texts[b],
        )
    assert by_mode["Vanilla"][0]["raw_text"].startswith("Output (")
    assert set(json.loads(by_mode["Rating"][0]["raw_text"])) == {"score_1", "score_2"}
    assert {r["engine"] for r in rows} == {"published"} and {r["created_at"] for r in rows} == {llmbar.CREATED_AT}


def test_blank_record_fails_or_is_skipped(shared_data: Path, tmp_path: Path, capsys) -> None:
    folder = shared_data / "llmbar/Processed/LLMEval^2"
    with pytest.raises(TableError) as e:
        llmbar.load(Location.of(str(folder)))
    assert "LLMEval^2/dataset.json" in str(e.value) and "row 169:" in str(e.value) and "`output_2`" in str(e.value)

    s = llmbar.load(Location.of(str(folder)), skip_invalid=True)
    assert len(s.skipped) == 1 and "dataset.json" in s.skipped[0] and "row 169:" in s.skipped[0]
    assert "`output_2`" in s.skipped[0] and "expected a non-empty text" in s.skipped[0]
    assert "169" not in s.pairwise_labels.column("context_id").to_pylist()
    assert "169" not in s.judgments.column("context_id").to_pylist()
    assert not [c for c in s.candidates.column("candidate_id").to_pylist() if c.startswith("169/")]
    assert s.judgments.num_rows == 8 * 2 * (s.pairwise_labels.num_rows)  # 8 evaluators, both swaps

    assert cli(["import", "llmbar", str(folder), str(tmp_path / "out")]) == 2
    assert "row 169" in capsys.readouterr().err
    assert cli(["import", "llmbar", str(folder), str(tmp_path / "out"), "--skip-invalid"]) == 0
    out = capsys.readouterr()
    assert "pairank: skipped: " in out.err and "row 169" in out.err
    assert json.loads(out.out)["judgments"] == s.judgments.num_rows
    with pytest.raises(ValueError, match="'hanna' cannot skip invalid records; importers that can: llmbar"):
        run_import("hanna", str(folder), str(tmp_path / "h"), skip_invalid=True)


def small_copy(shared_data: Path, folder: Path, n: int = 3, evaluators: bool = True) -> tuple[list, list]:
    """The first ``n`` records of LLMBar/Natural and (optionally) of its GPT-4/Vanilla verdicts under ``folder``."""
    src = shared_data / "llmbar/LLMBar/Natural"
    records = json.loads((src / "dataset.json").read_text())[:n]
    results = json.loads((src / "evaluators/GPT-4/Vanilla/result.json").read_text())[:n]
    write_json(folder / "dataset.json", records)
    if evaluators:
        write_json(folder / "evaluators/GPT-4/Vanilla/result.json", results)
        (folder / "evaluators/Falcon/Vanilla").mkdir(parents=True)  # no result.json: skipped
    return records, results


def test_misaligned_result_fails(shared_data: Path, tmp_path: Path) -> None:
    _, results = small_copy(shared_data, tmp_path)
    assert get_importer("llmbar")(Location.of(str(tmp_path))).judgments.num_rows == 6
    results[1]["output_2"] += " (edited)"
    write_json(tmp_path / "evaluators/GPT-4/Vanilla/result.json", results)
    with pytest.raises(TableError) as e:
        llmbar.load(Location.of(str(tmp_path)), skip_invalid=True)  # a foreign verdict file is never skipped
    msg = str(e.value)
    assert "GPT-4/Vanilla/result.json" in msg and "row 1:" in msg and "`output_2`" in msg and "dataset.json" in msg
    write_json(tmp_path / "evaluators/GPT-4/Vanilla/result.json", results[:2])
    with pytest.raises(TableError, match=r"result\.json.*expected 3 records \(as in dataset\.json\), found 2"):
        llmbar.load(Location.of(str(tmp_path)))


def test_run_import_writes_judgments_and_removes_stale_tables(shared_data: Path, tmp_path: Path) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    small_copy(shared_data, src)
    counts = run_import("llmbar", str(src), str(dst))
    assert counts["judgments"] == 6 and counts["pairwise_labels"] == 3 and counts["skipped"] == []
    written = pq.read_table(dst / "judgments.parquet")
    assert written.schema.equals(JUDGMENTS) and written.equals(llmbar.load(Location.of(str(src))).judgments)

    small_copy(shared_data, tmp_path / "bare", evaluators=False)
    assert run_import("llmbar", str(tmp_path / "bare"), str(dst))["judgments"] == 0
    assert not (dst / "judgments.parquet").exists() and (dst / "pairwise_labels.parquet").exists()

    run_import("llmbar", str(src), str(dst))
    write_json(tmp_path / "tc/topical_chat.json", topicalchat_rows())
    assert run_import("topicalchat", str(tmp_path / "tc"), str(dst))["pairwise_labels"] == 0
    assert sorted(p.name for p in dst.iterdir()) == ["candidates.parquet", "human_scores.parquet"]
