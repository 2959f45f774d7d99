"""Inputs that were accepted silently are refused, naming the file, the row and the column (issue 14, item 4)."""

from __future__ import annotations

import subprocess
import sys

import pyarrow as pa
import pytest
import yaml

from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidate_ids, read_candidates, read_human_scores
from pairank.storage.validation import TableError
from tests.helpers import ROOT


def candidates(**override) -> pa.Table:
    rows = {
        "context_id": ["c1", "c1", "c2", "c2"],
        "context": ["doc one", "doc one", "doc two", "doc two"],
        "candidate_id": ["a", "b", "c", "d"],
        "system": ["s1", "s2", "s1", "s2"],
        "text": ["x", "y", "z", "w"],
    }
    rows.update(override)
    return pa.table(rows)


def write(folder, name: str, table: pa.Table) -> str:
    loc = Location.of(str(folder)).join(name)
    loc.write_parquet(table)
    return loc.uri


def refused(fn, *args) -> TableError:
    with pytest.raises(TableError) as info:
        fn(*args)
    return info.value


def test_a_context_id_with_two_texts_is_refused_naming_both_rows(tmp_path):
    uri = write(tmp_path, "candidates.parquet", candidates(context=["doc one", "doc ONE", "doc two", "doc two"]))
    err = refused(read_candidates, Location.of(str(tmp_path)))
    assert (err.source, err.row, err.column) == (uri, 1, "context")
    assert "context 'c1'" in str(err) and "row 0" in str(err)


def test_a_text_column_of_numbers_is_refused_not_cast(tmp_path):
    uri = write(tmp_path, "candidates.parquet", candidates(text=[1, 2, 3, 4]))
    err = refused(read_candidates, Location.of(str(tmp_path)))
    assert (err.source, err.column) == (uri, "text") and "int64" in str(err) and "string" in str(err)


def test_an_empty_candidates_table_is_refused(tmp_path):
    uri = write(tmp_path, "candidates.parquet", candidates().slice(0, 0))
    err = refused(read_candidates, Location.of(str(tmp_path)))
    assert err.source == uri and "at least one candidate" in str(err)


def test_the_ids_a_driver_reads_are_checked_naming_file_row_and_column(tmp_path):
    """A run scored in tasks reads the id columns only (its task validates the rest): a null id or a missing id
    column is refused there, with the message a whole-table read gives."""
    folder = Location.of(str(tmp_path))
    uri = write(tmp_path, "candidates.parquet", candidates(candidate_id=["a", None, "c", "d"]))
    err = refused(read_candidate_ids, folder)
    assert str(err) == f"column `candidate_id` in {uri} row 1: expected a value, found null"
    assert str(err) == str(refused(read_candidates, folder))
    write(tmp_path, "candidates.parquet", candidates().drop_columns(["system"]))
    err = refused(read_candidate_ids, folder)
    assert (err.source, err.column) == (uri, "system") and "missing ['system']" in str(err)
    write(tmp_path, "candidates.parquet", candidates(system=[1, 2, 1, 2]))
    err = refused(read_candidate_ids, folder)
    assert (err.source, err.column) == (uri, "system") and "int64" in str(err)


def test_conflicting_duplicate_human_scores_are_refused_and_equal_ones_kept(tmp_path):
    scores = pa.table({"candidate_id": ["a", "b", "a"], "aspect": ["coherence"] * 3, "score": [3.0, 4.0, 3.5]})
    uri = write(tmp_path, "human_scores.parquet", scores)
    err = refused(read_human_scores, Location.of(str(tmp_path)))
    assert (err.source, err.row, err.column) == (uri, 2, "score") and "row 0" in str(err)
    same = pa.table({"candidate_id": ["a", "a"], "aspect": ["coherence"] * 2, "score": [3.0, 3.0]})
    write(tmp_path, "human_scores.parquet", same)
    assert read_human_scores(Location.of(str(tmp_path))).num_rows == 2


@pytest.mark.parametrize("name", ["../../x", "team/x", "", ".", "..", "a b", "x\\y"])
def test_a_run_name_that_is_not_one_safe_path_segment_exits_2(tmp_path, name):
    spec = yaml.safe_load((ROOT / "configs/demo.yaml").read_text())
    spec.update(
        name=name,
        input=str(tmp_path / "nothing"),
        output=str(tmp_path / "out"),
        prompts=str(ROOT / "configs/prompts/summarization"),
    )
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(spec))
    out = subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(path)], capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2, out.stderr
    assert str(path) in out.stderr and "name:" in out.stderr and "one path segment" in out.stderr
    assert not (tmp_path / "out").exists() and not (tmp_path.parent / "x").exists()


@pytest.mark.parametrize(("key", "value"), [("judge.noise", ".inf"), ("judge.scale", ".nan"), ("winrate.mass", ".inf")])
def test_non_finite_numbers_in_a_spec_are_refused(key, value):
    from pairank.jobs.specs.job import SpecError, load_spec

    with pytest.raises(SpecError) as info:
        load_spec(ROOT / "configs/simulated.yaml", [f"{key}={value}", "winrate.baseline=M0"])
    assert key in str(info.value) and "finite" in str(info.value)


def test_a_table_error_keeps_its_message_through_a_context_manager():
    """It was a frozen dataclass: contextlib's __exit__ setting __traceback__ turned it into FrozenInstanceError."""
    from contextlib import ExitStack, contextmanager

    @contextmanager
    def pool():
        yield

    with pytest.raises(TableError, match="column `text` in f.parquet row 3: expected text, found 7"):
        with ExitStack() as stack:
            stack.enter_context(pool())
            raise TableError("f.parquet", 3, "text", "text", "7")
