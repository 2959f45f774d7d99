"""``pairank leaderboard --human``: an imported human battle log beside a judge's verdicts on the same (context,
system pair) keys gives the board prediction-powered rank-sets, on the page and in its files; bad label files
are exit 2 naming file, row and field."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main
from pairank.storage.fs import Location
from pairank.storage.importers.battles import ASPECT
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import PAIRWISE_LABELS, PREDICTION_POWERED
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.validation import validate
from tests import formats as F
from tests.browser import check_screenshot, render
from tests.helpers import leaderboard_judgment, leaderboard_table

#: Human strengths, best first; the judge instead prefers the long answers of "<i>verbose".
SYSTEMS = {"alpha": 1.0, "beta": 0.5, "gamma": 0.0, "<i>verbose": -0.5}
QUESTIONS = 30
UNJUDGED = "q29"  # the judge compared nothing on this question


def human_log(folder):
    rng = random.Random(7)
    rows = []
    for q in range(QUESTIONS):
        for a, b in itertools.combinations(SYSTEMS, 2):
            p = 1 / (1 + pow(2.718281828, SYSTEMS[b] - SYSTEMS[a]))
            rows.append(
                {
                    "question_id": f"q{q}",
                    "model_a": a,
                    "model_b": b,
                    "winner": "model_a" if rng.random() < p else "model_b",
                    "conversation_a": [
                        {"role": "user", "content": f"question {q}"},
                        {"role": "assistant", "content": f"{a} answers {q}"},
                    ],
                    "conversation_b": [
                        {"role": "user", "content": f"question {q}"},
                        {"role": "assistant", "content": f"{b} answers {q}"},
                    ],
                }
            )
    return F.write_jsonl(folder / "humans.jsonl", rows)


@pytest.fixture(scope="module")
def board_root(tmp_path_factory):
    """An imported human log as a run's input, and a judge that ranks '<i>verbose' first on every other key."""
    base = tmp_path_factory.mktemp("human")
    imported = str(base / "imported")
    assert main(["import", "battles", str(human_log(base)), imported, "--context-field", "question_id"]) == 0
    root = Location.of(str(base / "store"))
    RunLayout(root, "night").manifest.write_json(
        {
            "name": "night",
            "state": "done",
            "started_at": "2026-01-01T00:00:00+00:00",
            "spec": {"input": Location.of(imported).uri, "aspects": [ASPECT], "subset": {}},
        }
    )
    judge_order = ["<i>verbose", "alpha", "beta", "gamma"]
    rows = [
        leaderboard_judgment(
            f"q{q}", ASPECT, f"q{q}/{a}", f"q{q}/{b}", "A" if judge_order.index(a) < judge_order.index(b) else "B"
        )
        for q in range(QUESTIONS - 1)
        for a, b in itertools.permutations(SYSTEMS, 2)
    ]
    JudgmentCache(RunLayout(root, "").judgments).append(leaderboard_table(rows))
    labels = pq.read_table(f"{imported}/pairwise_labels.parquet")
    on_judged = labels.filter(pa.compute.not_equal(labels.column("context_id"), UNJUDGED))
    subset = base / "subset.parquet"
    pq.write_table(on_judged.slice(0, 120), subset)
    return root, subset, labels, Location.of(imported).uri


def test_the_board_gets_prediction_powered_rank_sets_beside_the_judge_only_ones(board_root, capsys):
    root, subset, _, _ = board_root
    assert main(["leaderboard", "--root", root.uri, "--human", str(subset), "--n-boot", "20", "--alpha", "0.1"]) == 0
    err = capsys.readouterr().err
    assert f"human labels: 120 from {Location.of(str(subset)).uri} on 120 of the 174 judged" in err
    folder = RunLayout(root, "").leaderboard
    table = validate(folder.join("prediction_powered.parquet").read_parquet(), PREDICTION_POWERED, "pp")
    rows = {r["system"]: r for r in table.to_pylist()}
    assert set(rows) == set(SYSTEMS) and all(r["n_human"] > 0 for r in rows.values())
    # the judge puts "<i>verbose" first with no doubt; the humans' rank-set of it reaches down to the last place
    assert (rows["<i>verbose"]["judge_rank_low"], rows["<i>verbose"]["judge_rank_high"]) == (1, 1)
    assert rows["<i>verbose"]["rank_high"] == 4 and rows["<i>verbose"]["rectifier"] < -0.3
    doc = json.loads(folder.join("leaderboard.json").read_text())
    pp = doc["prediction_powered"]
    assert pp["labels"] == 120 and pp["labelled"] == 120 and 0.3 < pp["disagree"] < 0.7
    page = folder.join("index.html").read_text()
    assert "Human labels: prediction-powered rank-sets" in page and "120 human labels" in page
    assert "&lt;i&gt;verbose" in page and "<i>verbose" not in page
    r = rows["alpha"]
    assert f"{r['win_rate']:.3f} [{r['win_low']:.3f}, {r['win_high']:.3f}]" in page


@pytest.mark.browser
def test_the_page_renders_the_rank_sets_in_a_browser(board_root, tmp_path):
    root, subset, _, _ = board_root
    assert main(["leaderboard", "--root", root.uri, "--human", str(subset), "--n-boot", "20"]) == 0
    folder = RunLayout(root, "").leaderboard
    dom, shot = render(Path(folder.path) / "index.html", tmp_path / "page")
    assert "Human labels: prediction-powered rank-sets" in dom and "&lt;i&gt;verbose" in dom
    for r in folder.join("prediction_powered.parquet").read_parquet().to_pylist():
        ranks = str(r["rank_low"]) if r["rank_low"] == r["rank_high"] else f"{r['rank_low']}–{r['rank_high']}"
        assert f"{r['win_rate']:.3f} [{r['win_low']:.3f}, {r['win_high']:.3f}]</td>" in dom
        assert f"<td>{ranks}</td>" in dom
    check_screenshot(shot)


def test_a_folder_of_an_import_is_read_for_its_labels_and_a_key_not_judged_is_refused(board_root, capsys):
    root, _, labels, folder = board_root
    assert main(["leaderboard", "--root", root.uri, "--human", folder, "--n-boot", "0"]) == 2
    err = capsys.readouterr().err
    row = labels.column("context_id").to_pylist().index(UNJUDGED)
    assert f"column `context_id` in {folder}/pairwise_labels.parquet row {row}" in err
    assert f"context '{UNJUDGED}' with systems" in err and "which no judgment there compares" in err


@pytest.mark.parametrize(
    "change, field, expected",
    [
        ({"candidate_b": "q1/nobody"}, "candidate_b", "a candidate of the board's runs"),
        ({"candidate_b": "q2/alpha"}, "candidate_b", "a candidate of context 'q1'"),
        ({"preferred": "A>B"}, "preferred", "one of"),
    ],
)
def test_bad_label_files_name_file_row_and_field(board_root, tmp_path, capsys, change, field, expected):
    root, _, _, _ = board_root
    rows = [{"context_id": "q1", "candidate_a": "q1/alpha", "candidate_b": "q1/beta", "preferred": "A"}] * 3
    rows[2] = {**rows[2], **change}
    bad = tmp_path / "bad.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=PAIRWISE_LABELS), bad)
    assert main(["leaderboard", "--root", root.uri, "--human", str(bad), "--n-boot", "0"]) == 2
    err = capsys.readouterr().err
    assert f"column `{field}` in {Location.of(str(bad)).uri} row 2" in err and expected in err


def test_human_goes_with_root_and_a_missing_file_is_named(board_root, tmp_path, capsys):
    root, _, _, _ = board_root
    assert main(["leaderboard", "--input", str(tmp_path), "--human", str(tmp_path / "h.parquet")]) == 2
    assert "--human goes with --root" in capsys.readouterr().err
    assert main(["leaderboard", "--root", root.uri, "--human", str(tmp_path / "none.parquet")]) == 2
    assert "none.parquet: no such file" in capsys.readouterr().err
