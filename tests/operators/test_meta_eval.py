"""operators.meta_eval: LLMBar's published statistics.json, reproduced from the imported verdicts."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.operators.meta_eval import cohen_kappa, markdown, meta_eval
from pairank.storage.fs import Location
from pairank.storage.importers import llmbar
from pairank.storage.importers._records import Record
from pairank.storage.schemas import JUDGMENTS, META_EVAL, PAIRWISE_LABELS
from pairank.storage.validation import TableError
from tests.helpers import KAPPAS, by_evaluator, mismatches, published
from tests.operators.rows import T0, judgment


def table(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=JUDGMENTS)


BLANK = ("Processed/LLMEval^2", 169)  # blank output_2: the import skips it, LLMBar's statistics count it


def blank_record(root: Path) -> tuple[pa.Table, pa.Table]:
    """The label and judgment rows of the record the import skips, built as the importer builds them.

    Only its text fails the import's checks; meta-evaluation reads ids and verdicts, so the rows
    are made without the text check (test only: the importer never writes an empty candidate).
    """
    subset, row = BLANK
    folder = root / subset
    pair = Record("dataset.json", row, json.loads((folder / "dataset.json").read_text())[row])
    label = {
        "context_id": f"{subset}/{row}",
        "candidate_a": f"{subset}/{row}/output_1",
        "candidate_b": f"{subset}/{row}/output_2",
        "preferred": llmbar.PREFERRED[pair.data["label"]],
    }
    judgments = []
    for result in sorted(folder.glob("evaluators/*/*/result.json")):
        verdict = Record(result.name, row, json.loads(result.read_text())[row]["results"][-1])
        judgments += llmbar.judgment_rows(verdict, pair, subset + "/", result.parent.parent.name, result.parent.name)
    return pa.Table.from_pylist([label], schema=PAIRWISE_LABELS), pa.Table.from_pylist(judgments, schema=JUDGMENTS)


@pytest.fixture(scope="module")
def imported(shared_data: Path) -> llmbar.ImportedSet:
    return llmbar.load(Location.of(str(shared_data / "llmbar")), skip_invalid=True)


@pytest.fixture(scope="module")
def complete(imported, shared_data: Path) -> tuple[pa.Table, pa.Table]:
    """(judgments, labels) of every LLMBar record, the skipped blank one included."""
    labels, judgments = blank_record(shared_data / "llmbar")
    return (pa.concat_tables([imported.judgments, judgments]), pa.concat_tables([imported.pairwise_labels, labels]))


def test_every_published_statistics_json_is_reproduced(complete, shared_data: Path) -> None:
    want = published(shared_data / "llmbar")
    table = meta_eval(*complete)
    assert table.schema.equals(META_EVAL) and len(want) == 249 and table.num_rows == 249
    got = by_evaluator(table)
    assert set(got) == set(want)
    bad = {key: diff for key, stats in want.items() if (diff := mismatches(stats, got[key]))}
    assert not bad
    # bit for bit, in fact: the kappa follows scikit-learn's float operations
    assert all(got[key][k] == stats[k] for key, stats in want.items() for k in KAPPAS)
    row = got[("LLMBar/Natural", "GPT-4", "Vanilla")]
    assert row["judge"] == "GPT-4/Vanilla" and row["aspect"] == llmbar.ASPECT and row["engine"] == "published"
    assert (row["n_pairs"], row["n_original"], row["n_swapped"]) == (100, 100, 100)


def test_without_the_blank_record_llmeval2_counts_199(imported, shared_data: Path) -> None:
    """The import leaves out LLMEval^2 record 169, which the published statistics count (200 records)."""
    want = published(shared_data / "llmbar")
    got = by_evaluator(meta_eval(imported.judgments, imported.pairwise_labels))
    for key, stats in want.items():
        if key[0] == BLANK[0]:
            assert got[key]["n_pairs"] == 199 and stats["correct_False"].split(" = ")[0].endswith("/ 200")
            assert mismatches(stats, got[key])
        else:
            assert not mismatches(stats, got[key]), key


def test_one_subset_has_bare_ids_and_subset_empty(shared_data: Path) -> None:
    folder = shared_data / "llmbar/LLMBar/Natural"
    s = llmbar.load(Location.of(str(folder)))
    table = meta_eval(s.judgments, s.pairwise_labels)
    assert set(table.column("subset").to_pylist()) == {""}
    got = {(r["model"], json.loads(r["sampling"])["mode"]): r for r in table.to_pylist()}
    want = {k[1:]: v for k, v in published(shared_data / "llmbar").items() if k[0] == "LLMBar/Natural"}
    assert set(got) == set(want) and not {k: d for k, v in want.items() if (d := mismatches(v, got[k]))}


# ---- the kappa -------------------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=40))
def test_cohen_kappa_is_sklearns(pairs) -> None:
    sklearn = pytest.importorskip("sklearn.metrics")
    y1, y2 = zip(*pairs)
    if len(set(y1) | set(y2)) == 1:
        assert cohen_kappa(y1, y2) is None  # undefined (scikit-learn: nan or its replace_undefined_by)
    else:
        assert cohen_kappa(y1, y2) == sklearn.cohen_kappa_score(y1, y2)


def test_llmbar_kappa_of_a_perfect_judge_is_p_over_1_plus_p() -> None:
    """LLMBar codes a verdict "1" as 1 and "2" as 0 but keeps the label 1/2: only output 1 can agree."""
    for ones, twos in ((5, 5), (3, 7), (9, 1)):
        p = ones / (ones + twos)
        assert cohen_kappa([1] * ones + [0] * twos, [1] * ones + [2] * twos) == pytest.approx(p / (1 + p))


# ---- edge cases ------------------------------------------------------------------------------------------


def labels(*rows: tuple[str, str, str, str]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(PAIRWISE_LABELS.names, r)) for r in rows], schema=PAIRWISE_LABELS)


def vote(ctx: str, a: str, b: str, label: str | None, model: str = "m", at: int = 0) -> dict:
    """A judgment of (a, b) with this label (None: an error row), ``at`` seconds after T0."""
    p = None if label is None else {"A": 1.0, "B": 0.0, "tie": 0.5}[label]
    row = judgment(ctx, "x", a, b, p, error="boom" if label is None else None)
    return row | {"model": model, "label": label, "key": f"{row['key']}/{at}", "created_at": T0 + dt.timedelta(0, at)}


LABELS3 = labels(("s/1", "s/1/a", "s/1/b", "A"), ("s/2", "s/2/a", "s/2/b", "B"), ("s/3", "s/3/a", "s/3/b", "A"))


def test_hand_computed_statistics() -> None:
    rows = [
        vote("s/1", "s/1/a", "s/1/b", "A"),
        vote("s/1", "s/1/b", "s/1/a", "B"),  # right twice
        vote("s/2", "s/2/a", "s/2/b", "A"),
        vote("s/2", "s/2/b", "s/2/a", "A"),  # wrong, right: slot A both times
        vote("s/3", "s/3/a", "s/3/b", None),
        vote("s/3", "s/3/b", "s/3/a", None),  # no verdict twice: "equal"
    ]
    [r] = meta_eval(table(*rows), LABELS3).to_pylist()
    assert (r["subset"], r["judge"], r["n_pairs"], r["n_original"], r["n_swapped"]) == ("s", "m@h", 3, 3, 3)
    assert (r["correct_False"], r["correct_True"], r["correct_both"]) == (
        "1 / 3 = 33.33333333333333%",
        "2 / 3 = 66.66666666666666%",
        "1 / 3 = 33.33333333333333%",
    )
    assert (r["equal"], r["correct_average"]) == ("2 / 3 = 66.66666666666666%", "50.0%")
    # picks output 1: original [1, 1, 0], swapped [1, 0, 0]; labels [1, 2, 1]
    assert r["kappa_False"] == cohen_kappa([1, 1, 0], [1, 2, 1]) == pytest.approx(-1 / 5)
    assert r["kappa_True"] == cohen_kappa([1, 0, 0], [1, 2, 1]) == pytest.approx(1 / 7)
    assert r["kappa_average"] == (r["kappa_False"] + r["kappa_True"]) / 2
    assert r["kappa_agreement"] == cohen_kappa([1, 1, 0], [1, 0, 0]) == pytest.approx(0.4)


def test_a_judge_with_one_order_only() -> None:
    rows = [vote("s/1", "s/1/a", "s/1/b", "A"), vote("s/2", "s/2/a", "s/2/b", "A")]
    [r] = meta_eval(table(*rows), LABELS3).to_pylist()
    assert (r["n_pairs"], r["n_original"], r["n_swapped"]) == (2, 2, 0)
    assert r["correct_False"] == "1 / 2 = 50.0%" and r["n_correct_False"] == 1
    assert r["kappa_False"] is not None
    swapped = (
        "correct_True",
        "n_correct_True",
        "kappa_True",
        "correct_average",
        "correct_both",
        "n_correct_both",
        "equal",
        "n_equal",
        "kappa_average",
        "kappa_agreement",
    )
    assert all(r[c] is None for c in swapped)

    # only the swapped order: the mirror image
    [r] = meta_eval(table(vote("s/2", "s/2/b", "s/2/a", "A")), LABELS3).to_pylist()
    assert (r["n_original"], r["n_swapped"], r["correct_True"], r["correct_False"]) == (0, 1, "1 / 1 = 100.0%", None)
    assert r["kappa_True"] == 0.0  # picks [0] against label [2]: no agreement possible, none expected


def test_a_missing_order_of_one_pair_counts_as_no_winner() -> None:
    rows = [vote("s/1", "s/1/a", "s/1/b", "A"), vote("s/1", "s/1/b", "s/1/a", "B"), vote("s/3", "s/3/a", "s/3/b", "A")]
    [r] = meta_eval(table(*rows), LABELS3).to_pylist()
    assert (r["n_pairs"], r["n_original"], r["n_swapped"]) == (2, 2, 1)
    assert (r["correct_False"], r["correct_True"], r["equal"]) == ("2 / 2 = 100.0%", "1 / 2 = 50.0%", "1 / 2 = 50.0%")


def test_empty_tables() -> None:
    empty = meta_eval(JUDGMENTS.empty_table(), PAIRWISE_LABELS.empty_table())
    assert empty.num_rows == 0 and empty.schema.equals(META_EVAL)
    assert meta_eval(JUDGMENTS.empty_table(), LABELS3).num_rows == 0
    assert meta_eval(table(vote("s/1", "s/1/a", "s/1/b", "A")), PAIRWISE_LABELS.empty_table()).num_rows == 0
    assert markdown(empty).splitlines()[-1].startswith("|---|")


def test_unknown_labels_and_unlabelled_pairs_are_left_out() -> None:
    with_tie = labels(("s/1", "s/1/a", "s/1/b", "A"), ("s/2", "s/2/a", "s/2/b", "tie"))
    rows = [
        vote("s/1", "s/1/a", "s/1/b", "A"),
        vote("s/1", "s/1/b", "s/1/a", "tie"),  # a tie verdict is never right
        vote("s/2", "s/2/a", "s/2/b", "A"),
        vote("s/2", "s/2/b", "s/2/a", "B"),  # a human tie: no truth
        vote("s/9", "s/9/a", "s/9/b", "A"),  # no label at all
        vote("t/1", "t/1/a", "t/1/b", "A", model="other"),  # a judge without any labelled pair: no row
    ]
    [r] = meta_eval(table(*rows), with_tie).to_pylist()
    assert (r["n_pairs"], r["correct_False"], r["correct_True"], r["equal"]) == (
        1,
        "1 / 1 = 100.0%",
        "0 / 1 = 0.0%",
        "0 / 1 = 0.0%",
    )


def test_a_judgment_label_outside_the_schema_is_an_error() -> None:
    bad = table(vote("s/1", "s/1/a", "s/1/b", "A")).to_pylist()
    bad[0]["label"] = "C"
    with pytest.raises(TableError) as e:
        meta_eval(pa.Table.from_pylist(bad), LABELS3)
    assert str(e.value) == "column `label` in judgments row 0: expected one of ['A', 'B', 'tie'] or null, found 'C'"


def test_a_pair_labelled_twice_is_an_error() -> None:
    twice = labels(("s/1", "s/1/a", "s/1/b", "A"), ("s/1", "s/1/b", "s/1/a", "B"))
    with pytest.raises(TableError, match=r"pairwise labels row 1: expected one label per pair.*also .* row 0"):
        meta_eval(JUDGMENTS.empty_table(), twice)


def test_missing_columns_are_named() -> None:
    with pytest.raises(ValueError, match=r"judgments table lacks columns \['created_at'\]"):
        meta_eval(table().drop_columns(["created_at"]), LABELS3)
    with pytest.raises(ValueError, match=r"pairwise labels table lacks columns \['preferred'\]"):
        meta_eval(table(), LABELS3.drop_columns(["preferred"]))


def test_newest_verdict_of_an_order_wins_over_older_and_over_errors() -> None:
    rows = [
        vote("s/1", "s/1/a", "s/1/b", "B", at=0),
        vote("s/1", "s/1/a", "s/1/b", "A", at=5),
        vote("s/1", "s/1/a", "s/1/b", None, at=9),  # a later failed retry does not hide the verdict
    ]
    [r] = meta_eval(table(*rows), LABELS3).to_pylist()
    assert (r["n_pairs"], r["correct_False"]) == (1, "1 / 1 = 100.0%")


def test_judges_aspects_and_subsets_get_a_row_each() -> None:
    rows = [vote("s/1", "s/1/a", "s/1/b", "A", model=m) for m in ("m1", "m2")]
    rows += [vote("s/1", "s/1/a", "s/1/b", "A") | {"aspect": "y", "key": "y"}]
    rows += [vote("u/v/1", "u/v/1/a", "u/v/1/b", "B")]
    t = meta_eval(table(*rows), pa.concat_tables([LABELS3, labels(("u/v/1", "u/v/1/a", "u/v/1/b", "B"))]))
    assert [(r["subset"], r["aspect"], r["judge"]) for r in t.to_pylist()] == [
        ("s", "x", "m1@h"),
        ("s", "x", "m2@h"),
        ("s", "y", "m@h"),
        ("u/v", "x", "m@h"),
    ]


def test_markdown_lists_every_row(complete) -> None:
    t = meta_eval(*complete)
    md = markdown(t)
    row = next(line for line in md.splitlines() if "| LLMBar/Natural | instruction_following | GPT-4/Vanilla |" in line)
    stats = by_evaluator(t)[("LLMBar/Natural", "GPT-4", "Vanilla")]
    assert f"| {stats['kappa_False']:.3f} |" in row and row.count("|") == 14
    assert len([line for line in md.splitlines() if line.startswith("| ") and "instruction_following" in line]) == 249


def test_the_markdown_says_when_the_judge_is_the_embedded_demo_model():
    from pairank.operators.meta_eval import markdown
    from pairank.storage.schemas import META_EVAL

    row = dict.fromkeys(META_EVAL.names) | {
        "subset": "",
        "aspect": "x",
        "judge": "j",
        "n_pairs": 2,
        "model": "gemma-3-270m (embedded default)",
    }
    assert "not a quality claim" in markdown(pa.Table.from_pylist([row], schema=META_EVAL))
    row["model"] = "GPT-4"
    assert "not a quality claim" not in markdown(pa.Table.from_pylist([row], schema=META_EVAL))
