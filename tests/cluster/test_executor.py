"""The executor's tasks over blocks (``run_each``, ``each``): at most a stage's concurrency at once, another started
as soon as any ends, results in block order whichever ends first, and a stage's own error raised as itself."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest

from pairank.cluster.executor import Resources, Stage, each, put_blocks, run_each
from pairank.storage.validation import TableError

#: Seconds the first block's task sleeps: the others (0.05 s each) all end while it runs.
SLOW = 2.0


def timed(block: pa.Table, settings: dict, tag: str = "") -> pa.Table:
    """Sleeps as long as the block says; returns when it ran (this machine's clock, shared by the tasks)."""
    start = time.time()
    time.sleep(block["sleep"][0].as_py())
    return pa.table({"block": block["block"], "start": [start], "end": [time.time()], "tag": [tag + settings["tag"]]})


def failing(block: pa.Table, settings: dict) -> pa.Table:
    if block["block"][0].as_py() == 2:
        raise TableError("/in/candidates.parquet", 2, "text", "a string", "None")
    return block


def blocks(n: int) -> list[pa.Table]:
    return [pa.table({"block": [i], "sleep": [SLOW if i == 0 else 0.05]}) for i in range(n)]


def check_order_and_concurrency(rows: pa.Table, n: int, concurrency: int) -> None:
    assert rows["block"].to_pylist() == list(range(n))  # block order, though block 0 ended last
    spans = list(zip(rows["start"].to_pylist(), rows["end"].to_pylist(), strict=True))
    for start, _ in spans:  # never more than `concurrency` tasks at once
        assert sum(1 for s, e in spans if s <= start < e) <= concurrency
    slow_end = spans[0][1]
    assert all(s < slow_end for s, _ in spans[1:])  # each started while the slow one ran: refilled as any ended


def test_tasks_run_at_most_their_concurrency_refill_as_any_ends_and_come_back_in_block_order(ray_local):
    stage = Stage(timed, {"tag": "x"}, Resources(num_cpus=0, concurrency=2))
    lazy = each(blocks(6), stage, tag="each-")
    rows = pa.concat_tables(list(lazy.tables()))
    check_order_and_concurrency(rows, 6, 2)
    assert set(rows["tag"].to_pylist()) == {"each-x"}

    collected = run_each(stage, put_blocks(blocks(5)))
    check_order_and_concurrency(pa.concat_tables(collected), 5, 2)


def test_tables_cut_into_rows_keep_each_block_s_rows_together(ray_local):
    stage = Stage(lambda block, settings: block, None, Resources(num_cpus=0, concurrency=3))
    tables = [pa.table({"x": list(range(i * 10, i * 10 + 5))}) for i in range(3)]
    batches = list(each(tables, stage).tables(rows=2))
    assert [b["x"].to_pylist() for b in batches] == [
        [0, 1], [2, 3], [4], [10, 11], [12, 13], [14], [20, 21], [22, 23], [24]
    ]  # fmt: skip


def test_a_stage_s_own_error_reaches_the_caller_as_itself(ray_local):
    stage = Stage(failing, None, Resources(num_cpus=0, concurrency=2))
    for run in (lambda: list(each(blocks(4), stage).tables()), lambda: run_each(stage, put_blocks(blocks(4)))):
        with pytest.raises(TableError, match=r"column `text` in /in/candidates\.parquet row 2: expected a string"):
            run()
