"""The run's own read of a large candidates table streams (issue 28 item 1): parts of a few thousand rows are
validated as they are read, the rules that span parts (unique ids, one text per context, two candidates per
context) kept across them, errors naming the row of the whole table; the Python-side memory of the read stays
that of one part."""

from __future__ import annotations

import tracemalloc

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pairank.jobs.judging.streamed import cut_blocks, read_blocks
from pairank.storage.fs import Location
from pairank.storage.inputs import iter_candidates, read_candidates
from pairank.storage.validation import TableError


def _table(contexts: int, per: int = 2, text: int = 20) -> pa.Table:
    rows = [
        {
            "context_id": f"c{c}",
            "context": f"question {c}",
            "candidate_id": f"c{c}-{k}",
            "system": f"s{k}",
            "text": f"answer {c} {k} " + "x" * text,
        }
        for c in range(contexts)
        for k in range(per)
    ]
    return pa.Table.from_pylist(rows)


def _write(tmp_path, table: pa.Table, group: int) -> Location:
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    pq.write_table(table, folder / "candidates.parquet", row_group_size=group)
    assert pq.ParquetFile(folder / "candidates.parquet").num_row_groups > 1
    return Location.of(str(folder))


def _read_all(folder: Location, rows: int) -> pa.Table:
    return pa.concat_tables(list(iter_candidates(folder, rows)))


def test_parts_read_as_the_whole_table_with_contexts_split_across_parts(tmp_path):
    table = _table(50, per=3)
    folder = _write(tmp_path, table, group=7)  # every third context straddles a row group
    assert _read_all(folder, 10).equals(read_candidates(folder))


def _rewritten(table: pa.Table, column: str, row: int, value) -> pa.Table:
    values = table.column(column).to_pylist()
    values[row] = value
    return table.set_column(table.schema.get_field_index(column), column, pa.array(values, pa.string()))


@pytest.mark.parametrize(
    "column, row, value, message",
    [
        (
            "candidate_id",
            95,
            "c1-0",
            "column `candidate_id` in {uri} row 95: expected a unique candidate id, found 'c1-0' (also in row 2)",
        ),
        (
            "context",
            81,
            "another question",
            "column `context` in {uri} row 81: expected the text of context 'c40' "
            "in row 80, found a different text (a context id names one input)",
        ),
        ("text", 77, "  ", "column `text` in {uri} row 77: expected a non-empty text, found '  '"),
        ("system", 63, None, "column `system` in {uri} row 63: expected a value, found null"),
        (
            "context_id",
            99,
            "c-alone",
            "column `context_id` in {uri} row 98: expected at least 2 candidates per "
            "context, found 'c49' with 1 candidate",
        ),
    ],
)
def test_a_bad_row_in_a_later_part_is_named_by_its_row_in_the_whole_table(tmp_path, column, row, value, message):
    folder = _write(tmp_path, _rewritten(_table(50), column, row, value), group=16)
    uri = folder.join("candidates.parquet").uri
    with pytest.raises(TableError) as err:
        _read_all(folder, 10)
    assert str(err.value) == message.format(uri=uri)
    with pytest.raises(TableError) as whole:  # the same error as the whole-table read
        read_candidates(folder)
    assert str(whole.value) == str(err.value)


def test_the_read_holds_one_part_not_the_table(tmp_path):
    """Python-side peak of reading 20,000 candidates of 2 KB each (40 MB of text): validating the whole table
    holds every text as a Python string at once; the streamed read, a part of 500 rows."""
    folder = _write(tmp_path, _table(10_000, text=2000), group=4096)
    tracemalloc.start()
    rows = sum(part.num_rows for part in iter_candidates(folder, 500))
    _, streamed = tracemalloc.get_traced_memory()
    tracemalloc.reset_peak()
    read_candidates(folder)
    _, whole = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert rows == 20_000
    assert whole > 40e6 and streamed < 8e6, (streamed, whole)


def test_the_run_task_cuts_the_streamed_rows_it_keeps_into_blocks(tmp_path):
    table = _table(30, per=3)
    folder = _write(tmp_path, table, group=10)
    keep = pa.array([c for c in table.column("candidate_id").to_pylist() if not c.endswith("-2")])
    groups = [["c3", "c1"], ["c0", "c2"], [f"c{i}" for i in range(4, 30)]]
    kept, *blocks = read_blocks(folder, keep, groups)
    whole = read_candidates(folder)
    whole = whole.filter(pc.is_in(whole.column("candidate_id"), keep))
    assert kept == whole.num_rows == 60
    assert [b.to_pylist() for b in blocks] == [b.to_pylist() for b in cut_blocks(whole, groups)]
    assert sum(b.num_rows for b in blocks) == 60
