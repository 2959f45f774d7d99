"""Inputs that were accepted silently are refused, naming the file, the row and the column (issue 14, item 4)."""

from __future__ import annotations

import errno
import json
import random
import re
import subprocess
import sys

import pyarrow as pa
import pytest
import yaml

from pairank.storage.errors import DiskFull, with_retries
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


@pytest.mark.parametrize("name", ["../../x", "team/x", "", ".", "..", "a b", "x\\y", "n" * 10_000])
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
    assert len(out.stderr) < 2000  # a long name is shown cut, with its length, not echoed whole
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


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (mounting needs root: skipped elsewhere; the injected test below runs everywhere)."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def test_a_full_disk_under_an_import_is_exit_5_naming_the_file_and_the_free_space(tmp_path, tiny_disk, capsys):
    """Before: exit 2 with pyarrow's "[Errno 28] Error writing bytes to file", naming no path."""
    from pairank.jobs.cli.main import main

    src = tmp_path / "big.jsonl"
    noise = random.Random(0)  # texts that do not compress: 3.6 MB of them
    rows = [{"prompt": f"p{i}", "output": noise.randbytes(300).hex(), "model": m} for i in range(3000) for m in "xy"]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["import", "outputs", str(src), str(tiny_disk / "out"), "--format", "table"]) == 5
    err = capsys.readouterr().err
    target = tiny_disk / "out" / "candidates.parquet"
    assert f"{target}: could not write it: no space left on the device (" in err, err
    assert re.search(r"\(\d+(\.\d)? (B|KiB) free of 1\.0 MiB, too little for the write", err), err
    assert "No space left on device" in err and "run again" in err
    assert not list(tiny_disk.rglob("*.tmp"))  # the hidden file is gone


def test_a_full_disk_under_a_delta_append_is_exit_5_naming_the_table_and_the_free_space(tiny_disk):
    """A run's judgments: before, exit 1 "unexpected DeltaError: ... No space left on device (os error 28)"."""
    from pairank.jobs.cli.errors import explain
    from pairank.storage import delta

    table = Location.of(str(tiny_disk / "store" / "tables" / "judgments"))
    noise = random.Random(0)  # keys that do not compress: 2.6 MB of them
    rows = pa.table({"key": [noise.randbytes(64).hex() for _ in range(20_000)]})
    delta.ensure_table(table, rows.schema, [])
    with pytest.raises(DiskFull) as info:
        delta.append(table, rows)
    code, message = explain(info.value)
    assert code == 5, message
    assert message.startswith(f"{table.uri}: could not append to the Delta table: no space left on the device (")
    assert " free of 1.0 MiB, too little for the write" in message and "(os error 28)" in message
    assert delta.open_table(table).version() == 0  # the failed append committed nothing


@pytest.mark.parametrize(
    "cause",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        RuntimeError(
            "Generic LocalFileSystem error: Unable to copy data to file: No space left on device (os error 28)"
        ),
    ],
)
def test_a_full_disk_met_at_the_filesystem_boundary_is_exit_5(tmp_path, cause):
    """The fault injected where pairank's storage layer calls the filesystem (an ENOSPC, or delta-rs' text of one)."""
    from pairank.jobs.cli.errors import explain

    def write():
        raise cause

    uri = str(tmp_path / "runs" / "tables" / "judgments")
    with pytest.raises(DiskFull) as info:
        with_retries(uri, "append to the Delta table", write)
    code, message = explain(info.value)
    assert code == 5 and message.startswith(f"{uri}: could not append to the Delta table: no space left on the device")
    assert re.search(r"\(\d+\.\d (KiB|MiB|GiB|TiB) free of \d+\.\d (KiB|MiB|GiB|TiB), too little", message), message
    assert explain(cause)[0] == 5  # met outside the storage layer, still a full disk
