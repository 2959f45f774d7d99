"""The nightly storage pieces: the conditional create, the commit log under racing writers (local and on a
real SeaweedFS S3 server), and the input prefix of drops with its errors."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from pairank.storage.commits import CommitConflict, CommitLog, NightlyLayout
from pairank.storage.fs import Location
from pairank.storage.inputs import read_prefix
from pairank.storage.schemas import CANDIDATES
from pairank.storage.validation import TableError


def race(log: CommitLog, writers: int) -> tuple[list, list]:
    """``writers`` threads commit on top of commit 0 at once; returns the winners and the conflicts."""
    start = threading.Barrier(writers)
    won, lost = [], []

    def write(i: int) -> None:
        start.wait()
        try:
            mine = CommitLog(log.layout)  # each writer its own, as each night is its own process
            mine.commits()
            won.append(mine.commit(0, {"night": f"n{i}", "folder": f"nights/n{i}"}))
        except CommitConflict as exc:
            lost.append(str(exc))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return won, lost


def check_race(log: CommitLog) -> None:
    won, lost = race(log, 8)
    assert len(won) == 1 and len(lost) == 7, (won, lost)
    head = log.head()
    assert head.seq == 1 and head.night == won[0].night and head.record["parent"] == 0
    assert all(f"committed night {won[0].night!r} as commit 1" in m for m in lost)
    # the next commit goes on top of the winner
    log.commits()
    assert log.commit(1, {"night": "next", "folder": "nights/next"}).seq == 2
    assert [c.night for c in log.commits()] == [won[0].night, "next"]


def test_racing_local_writers_commit_once(tmp_path):
    log = CommitLog(NightlyLayout(Location.of(str(tmp_path)), "board"))
    check_race(log)
    # one Delta commit per night; the losers left no version (writers racing to create the log may each
    # commit a CREATE TABLE of the same schema: harmless)
    from deltalake import DeltaTable

    ops = [h["operation"] for h in DeltaTable(str(tmp_path / "nightly/board/log")).history()]
    assert ops.count("WRITE") == 2 and set(ops) == {"WRITE", "CREATE TABLE"}


@pytest.mark.s3
def test_racing_s3_writers_commit_once(s3_server):
    log = CommitLog(NightlyLayout(Location.of("s3://pairank/commit-race"), "board"))
    check_race(log)


def test_create_exclusive_keeps_the_first(tmp_path):
    loc = Location.of(str(tmp_path / "a" / "x.json"))
    assert loc.create_exclusive(b"first") is True
    assert loc.create_exclusive(b"second") is False
    assert loc.read_bytes() == b"first"


def test_a_writer_whose_snapshot_is_stale_conflicts_without_racing(tmp_path):
    layout = NightlyLayout(Location.of(str(tmp_path)), "board")
    slow, fast = CommitLog(layout), CommitLog(layout)
    assert slow.commits() == [] and fast.commits() == []
    fast.commit(0, {"night": "fast", "folder": "nights/fast"})
    with pytest.raises(CommitConflict, match="committed night 'fast' as commit 1"):
        slow.commit(0, {"night": "slow", "folder": "nights/slow"})
    slow.commits()  # read again: on top of the new head
    assert slow.commit(1, {"night": "slow", "folder": "nights/slow"}).seq == 2


def test_a_former_log_is_migrated_checked_and_left_as_it_was(tmp_path):
    from pairank.storage.commits import FormerLog, migrate_log

    layout = NightlyLayout(Location.of(str(tmp_path)), "board")
    for seq in (1, 2):
        record = {"seq": seq, "parent": seq - 1, "night": f"n{seq}", "folder": f"nights/n{seq}", "counts": {"x": seq}}
        layout.former_commits.join(f"{seq:06d}.json").write_json(record)
    with pytest.raises(FormerLog, match="store migrate --root"):
        CommitLog(layout).commits()
    assert migrate_log(layout) == 2
    commits = CommitLog(layout).commits()
    assert [(c.seq, c.night, c.record["counts"]) for c in commits] == [(1, "n1", {"x": 1}), (2, "n2", {"x": 2})]
    assert len(layout.former_commits.files(suffix=".json")) == 2
    layout.former_commits.join("000003.json").write_text("{not json")
    with pytest.raises(ValueError, match="000003.json: not a nightly commit record"):
        migrate_log(NightlyLayout(Location.of(str(tmp_path)), "board"))


def candidates(rows: list[tuple[str, str, str, str]]) -> pa.Table:
    """(context_id, candidate_id, system, text) rows; the context text is 'article <context_id>'."""
    return pa.Table.from_pylist(
        [dict(context_id=c, context=f"article {c}", candidate_id=i, system=s, text=t) for c, i, s, t in rows],
        schema=CANDIDATES,
    )


def drop(prefix, name, rows) -> None:
    Location.of(str(prefix / name)).join("candidates.parquet").write_parquet(candidates(rows))


def test_prefix_union_of_drops(tmp_path):
    drop(tmp_path, "2026-11-20", [("q1", "q1/S1", "S1", "a"), ("q1", "q1/S2", "S2", "b")])
    drop(tmp_path, "2026-11-21", [("q1", "q1/S5", "S5", "e"), ("q2", "q2/S1", "S1", "c"), ("q2", "q2/S5", "S5", "f")])
    drop(tmp_path, "2026-11-22", [("q1", "q1/S5", "S5", "e")])  # a repeat, identical: fine
    table, human, folders = read_prefix(Location.of(str(tmp_path)))
    assert sorted(table.column("candidate_id").to_pylist()) == ["q1/S1", "q1/S2", "q1/S5", "q2/S1", "q2/S5"]
    assert [f.rsplit("/", 1)[-1] for f in folders] == ["2026-11-20", "2026-11-21", "2026-11-22"]
    assert human.num_rows == 0


def test_prefix_changed_output_names_file_row_and_column(tmp_path):
    drop(tmp_path, "a", [("q1", "q1/S1", "S1", "a"), ("q1", "q1/S2", "S2", "b")])
    drop(tmp_path, "b", [("q1", "q1/S3", "S3", "c"), ("q1", "q1/S2", "S2", "b, edited")])
    with pytest.raises(TableError) as err:
        read_prefix(Location.of(str(tmp_path)))
    msg = str(err.value)
    assert "column `text`" in msg and f"{tmp_path}/b/candidates.parquet row 1" in msg and "new candidate_id" in msg


def test_prefix_changed_context_text(tmp_path):
    drop(tmp_path, "a", [("q1", "q1/S1", "S1", "a"), ("q1", "q1/S2", "S2", "b")])
    t = candidates([("q1", "q1/S3", "S3", "c")]).set_column(1, "context", pa.array(["another article"]))
    Location.of(str(tmp_path / "b")).join("candidates.parquet").write_parquet(t)
    with pytest.raises(TableError, match="column `context` in .*b/candidates.parquet row 0"):
        read_prefix(Location.of(str(tmp_path)))


def test_prefix_lone_candidate_and_empty_prefix(tmp_path):
    drop(tmp_path, "a", [("q1", "q1/S1", "S1", "a"), ("q1", "q1/S2", "S2", "b"), ("q9", "q9/S1", "S1", "z")])
    with pytest.raises(TableError, match="'q9' with 1 candidate"):
        read_prefix(Location.of(str(tmp_path)))
    with pytest.raises(FileNotFoundError, match="no candidates.parquet in the input prefix"):
        read_prefix(Location.of(str(tmp_path / "nothing")))


def test_the_history_table_gets_each_night_once_however_many_publish(tmp_path):
    from pairank.storage.commits import Commit, NightlyTable

    layout = NightlyLayout(Location.of(str(tmp_path)), "board")
    schema = pa.schema([pa.field("aspect", pa.string()), pa.field("rank", pa.int64()), pa.field("system", pa.string())])
    commits = [Commit(seq, {"night": f"n{seq}", "folder": f"nights/n{seq}"}) for seq in (1, 2, 3)]

    def snapshot(commit):
        return pa.table(
            {"aspect": ["overall"] * 2, "rank": [1, 2], "system": [f"s{commit.seq}", "base"]}, schema=schema
        )

    added = []
    threads = [
        threading.Thread(
            target=lambda: added.append(NightlyTable(layout, "history", schema).catch_up(commits, snapshot))
        )
        for _ in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(added) == 3  # each night appended by exactly one publisher
    history = NightlyTable(layout, "history", schema)
    assert history.read(upto=3).column("seq").to_pylist() == [1, 1, 2, 2, 3, 3]
    assert history.read(upto=2).column("system").to_pylist() == ["s1", "base", "s2", "base"]
    polars = pytest.importorskip("polars")
    assert polars.read_delta(str(tmp_path / "nightly/board/history")).height == 6  # queryable by other tools


def test_the_history_table_takes_columns_added_to_its_snapshots_later(tmp_path):
    """A history table made before a column was added (as LEADERBOARD gained its style-controlled columns): the
    next night's append merges the new column into the table's schema, and older nights read null there."""
    from pairank.storage.commits import Commit, NightlyTable

    layout = NightlyLayout(Location.of(str(tmp_path)), "board")
    old = pa.schema([pa.field("aspect", pa.string()), pa.field("rank", pa.int64()), pa.field("system", pa.string())])
    new = old.append(pa.field("style_rank", pa.int64(), nullable=True))
    first = [Commit(1, {"night": "n1", "folder": "nights/n1"})]
    NightlyTable(layout, "history", old).catch_up(
        first, lambda c: pa.table({"aspect": ["overall"], "rank": [1], "system": ["a"]}, schema=old)
    )
    history = NightlyTable(layout, "history", new)
    before = history.read(upto=1)  # read with the new schema before any night has the column
    assert before.column("style_rank").to_pylist() == [None] and before.schema.field("style_rank").type == pa.int64()
    second = first + [Commit(2, {"night": "n2", "folder": "nights/n2"})]
    assert (
        history.catch_up(
            second,
            lambda c: pa.table({"aspect": ["overall"], "rank": [1], "system": ["b"], "style_rank": [2]}, schema=new),
        )
        == 1
    )
    after = history.read(upto=2)
    assert after.column("system").to_pylist() == ["a", "b"] and after.column("style_rank").to_pylist() == [None, 2]


def test_the_history_table_takes_nights_after_a_column_description_changed(tmp_path):
    """A history table made while a column's description read otherwise (as LEADERBOARD's `style_low` once said
    "Wald" only): the next night is appended all the same, and reads with the description of today's schema."""
    from pairank.storage.commits import Commit, NightlyTable

    layout = NightlyLayout(Location.of(str(tmp_path)), "board")

    def schema(doc: str) -> pa.Schema:
        low = pa.field("style_low", pa.float64(), nullable=True, metadata={"description": doc})
        return pa.schema(
            [pa.field("aspect", pa.string()), pa.field("rank", pa.int64()), pa.field("system", pa.string()), low]
        )

    old, new = schema("Lower end of its 95% Wald interval."), schema("Lower end of its 95% interval.")
    nights = [Commit(seq, {"night": f"n{seq}", "folder": f"nights/n{seq}"}) for seq in (1, 2)]
    NightlyTable(layout, "history", old).catch_up(
        nights[:1],
        lambda c: pa.table({"aspect": ["overall"], "rank": [1], "system": ["a"], "style_low": [0.1]}, schema=old),
    )
    history = NightlyTable(layout, "history", new)
    assert (
        history.catch_up(
            nights,
            lambda c: pa.table({"aspect": ["overall"], "rank": [1], "system": ["a"], "style_low": [0.2]}, schema=new),
        )
        == 1
    )
    after = history.read(upto=2)
    assert after.column("style_low").to_pylist() == [0.1, 0.2]
    assert after.schema.field("style_low").metadata == {b"description": b"Lower end of its 95% interval."}
