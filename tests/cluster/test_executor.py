"""The executor's tasks over blocks (``run_each``, ``each``): at most a stage's concurrency at once, another started
as soon as any ends, results in block order whichever ends first, and a stage's own error raised as itself."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pytest

from pairank.cluster.executor import Resources, Stage, each, put_blocks, run_each
from pairank.storage.validation import TableError

#: Seconds the first block's task waits at most for the others to have run (they all can, while it runs, only where
#: another task starts as soon as any ends).
WAIT = 120


def timed(block: pa.Table, settings: dict, tag: str = "") -> pa.Table:
    """Block 0 waits until every other block's task has run (each leaves a file in ``settings["folder"]``); the
    others run at once. Returns when it ran (this machine's clock, shared by the tasks) and whether block 0 saw the
    others end first."""
    start = time.time()
    folder, n = Path(settings["folder"]), settings["blocks"]
    index = block["block"][0].as_py()
    others_first = None
    if index == 0:
        deadline = time.monotonic() + WAIT
        while len(list(folder.iterdir())) < n - 1 and time.monotonic() < deadline:
            time.sleep(0.02)  # a poll of the barrier, not a window
        others_first = len(list(folder.iterdir())) == n - 1
    else:
        time.sleep(0.05)  # a span for the concurrency count to see; a correct pool passes at any speed
        (folder / str(index)).touch()
    return pa.table(
        {
            "block": [index],
            "start": [start],
            "end": [time.time()],
            "tag": [tag + "x"],
            "others_first": pa.array([others_first], pa.bool_()),
        }
    )


def failing(block: pa.Table, settings: dict) -> pa.Table:
    if block["block"][0].as_py() == 2:
        raise TableError("/in/candidates.parquet", 2, "text", "a string", "None")
    return block


def blocks(n: int) -> list[pa.Table]:
    return [pa.table({"block": [i]}) for i in range(n)]


def stage_of(folder: Path, n: int) -> Stage:
    folder.mkdir()
    return Stage(timed, {"folder": str(folder), "blocks": n}, Resources(num_cpus=0, concurrency=2))


def check_order_and_concurrency(rows: pa.Table, n: int, concurrency: int) -> None:
    assert rows["block"].to_pylist() == list(range(n))  # block order, though block 0 ended last
    spans = list(zip(rows["start"].to_pylist(), rows["end"].to_pylist(), strict=True))
    for start, _ in spans:  # never more than `concurrency` tasks at once
        assert sum(1 for s, e in spans if s <= start < e) <= concurrency
    assert rows["others_first"][0].as_py() is True  # all ran while block 0 held a slot: refilled as any ended


def test_tasks_run_at_most_their_concurrency_refill_as_any_ends_and_come_back_in_block_order(ray_local, tmp_path):
    lazy = each(blocks(6), stage_of(tmp_path / "each", 6), tag="each-")
    rows = pa.concat_tables(list(lazy.tables()))
    check_order_and_concurrency(rows, 6, 2)
    assert set(rows["tag"].to_pylist()) == {"each-x"}

    collected = run_each(stage_of(tmp_path / "run_each", 5), put_blocks(blocks(5)))
    check_order_and_concurrency(pa.concat_tables(collected), 5, 2)


def test_tables_cut_into_rows_keep_each_block_s_rows_together(ray_local):
    stage = Stage(lambda block, settings: block, None, Resources(num_cpus=0, concurrency=3))
    tables = [pa.table({"x": list(range(i * 10, i * 10 + 5))}) for i in range(3)]
    batches = [b["x"].to_pylist() for b in each(tables, stage).tables(rows=2)]
    first, second, third = batches[:3], batches[3:6], batches[6:]
    assert first == [[0, 1], [2, 3], [4]] and second == [[10, 11], [12, 13], [14]]
    assert third == [[20, 21], [22, 23], [24]] and len(batches) == 9


def test_a_stage_s_own_error_reaches_the_caller_as_itself(ray_local):
    stage = Stage(failing, None, Resources(num_cpus=0, concurrency=2))
    for run in (lambda: list(each(blocks(4), stage).tables()), lambda: run_each(stage, put_blocks(blocks(4)))):
        with pytest.raises(TableError, match=r"column `text` in /in/candidates\.parquet row 2: expected a string"):
            run()
