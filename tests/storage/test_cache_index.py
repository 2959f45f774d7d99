"""The server's index of the judgment cache follows the Delta log: it reads each appended file once, reads
nothing for a compaction of files it read, and reads again what it cannot follow; appends go on while a
compaction runs."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from pairank.storage import delta
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.cache_index import CacheIndex
from pairank.storage.store.maintenance import compact_table
from tests.helpers import leaderboard_judgment, leaderboard_table


def judged(i: int, label: str | None = "A", ctx: str | None = None, when: int = 0) -> pa.Table:
    row = leaderboard_judgment(ctx or f"ctx-{i}", "coherence", f"a{i}", f"b{i}", label, error=None if label else "x")
    row["created_at"] += dt.timedelta(seconds=when)
    return leaderboard_table([row])


def store(tmp_path) -> JudgmentCache:
    return JudgmentCache(Location.of(str(tmp_path / "root")).join("tables", "judgments"))


def key(i: int) -> str:
    return judged(i).column("key")[0].as_py()


def test_the_index_reads_each_appended_file_once(tmp_path):
    cache = store(tmp_path)
    index = CacheIndex(cache)
    assert index.refresh() == 0 and index.version is None  # no table yet
    for i in range(3):
        cache.append(judged(i))
    assert index.refresh() == 3 and len(index) == 3 and index.version == cache.version()
    assert index.refresh() == 0  # nothing new: nothing read
    cache.append(judged(3))
    cache.append(judged(4, label=None))  # an error row is not an answer
    assert index.refresh() == 2 and index.files_read == 5
    assert key(3) in index and key(4) not in index
    assert index.get(key(0))["label"] == "A"


def test_a_compaction_of_files_read_is_not_read_again(tmp_path):
    cache = store(tmp_path)
    index = CacheIndex(cache)
    for i in range(6):
        cache.append(judged(i, ctx="ctx-same"))  # one partition: six files to merge
    index.refresh()
    assert compact_table(cache)["files_removed"] == 6
    assert index.refresh() == 0 and index.version == cache.version() and len(index) == 6
    cache.append(judged(6))
    assert index.refresh() == 1 and len(index) == 7


def test_a_compaction_of_files_not_yet_read_is_read(tmp_path):
    """Files appended after the last refresh and compacted before the next: the compacted files hold their rows."""
    cache = store(tmp_path)
    index = CacheIndex(cache)
    for i in range(3):
        cache.append(judged(i, ctx="ctx-same"))
    index.refresh()
    cache.append(judged(3, ctx="ctx-same"))
    cache.append(judged(4, ctx="ctx-same", when=5))
    compact_table(cache)  # the three read files and the two unread ones, into one file
    assert len(cache.files()) == 1
    assert index.refresh() == 1 and len(index) == 5
    assert sum(t.num_rows for t in index._tables) == 5  # the rows read twice are kept once


def test_a_log_it_cannot_follow_is_compared_with_the_files_it_knows(tmp_path):
    """The log's entries before a checkpoint removed (as delta-rs does after the log's retention): the index
    lists the newest version's files and reads those it does not know."""
    cache = store(tmp_path)
    index = CacheIndex(cache)
    cache.append(judged(0))
    index.refresh()
    for i in range(1, 4):
        cache.append(judged(i))
    table = delta.open_table(cache.folder)
    table.alter.set_table_properties({"delta.logRetentionDuration": "interval 0 seconds"})
    cache.append(judged(4))
    table = delta.open_table(cache.folder)
    table.create_checkpoint()
    table.cleanup_metadata()
    assert delta.commit_at(cache.folder, index.version + 1) is None
    assert index.refresh() == 4 and len(index) == 5


def test_appends_commit_while_a_compaction_runs(tmp_path):
    """The server compacts on its own thread while its commits go on: neither fails, and every row is there once."""
    import threading

    cache = store(tmp_path)
    for i in range(10):
        cache.append(judged(i, ctx="ctx-same"))
    failures = []

    def appends():
        for i in range(10, 40):
            try:
                cache.append(judged(i, ctx="ctx-same"))
            except Exception as exc:  # counted, asserted below
                failures.append(exc)

    writer = threading.Thread(target=appends)
    writer.start()
    compacted = [compact_table(cache) for _ in range(3)]
    writer.join()
    assert failures == [] and sum(c["files_removed"] for c in compacted) >= 10
    rows = cache.rows()
    assert rows.num_rows == 40 and len(set(rows.column("key").to_pylist())) == 40
    index = CacheIndex(cache)
    index.refresh()
    assert len(index) == 40
