"""The log of a judgment table damaged in ways a run cannot cause (a commit gone, a commit cut short, a commit
of valid JSON that is not Delta actions, a commit before a checkpoint), named and restored; no Ray (issue 30).
And pairank's storage errors pickle whole, as Ray sends a task's error to the driver."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from pairank.jobs.cli.main import main
from pairank.storage import delta
from pairank.storage.errors import CorruptFile, StorageError, StorageUnavailable
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.damage import LOG, CorruptLog, MissingFile, commit_name, damaged_commit
from pairank.storage.store.verify import verify_store
from pairank.storage.validation import TableError
from tests.operators.rows import judgment


def rows(n: int, start: int) -> pa.Table:
    """``n`` judgments of distinct keys (``start`` on), in two contexts."""
    return pa.Table.from_pylist(
        [judgment(f"c{i % 2}", "coherence", f"a{i}", f"b{i}", 0.7) for i in range(start, start + n)]
    )


@pytest.fixture
def store(tmp_path):
    """A judgment table of 5 commits after its creation (versions 1..5), 4 rows each (keys 0..19)."""
    root = Location.of(str(tmp_path / "store"))
    cache = JudgmentCache(RunLayout(root, "").judgments)
    for v in range(5):
        cache.append(rows(4, 4 * v))
    assert cache.version() == 5
    return root, cache


def keys(cache: JudgmentCache) -> list[str]:
    return sorted(cache.read().column("key").to_pylist())


def everything_but(version: int) -> list[str]:
    """The keys of the fixture's table without those of ``version``."""
    return sorted(f"c{i % 2}/coherence/a{i}/b{i}" for i in range(20) if not 4 * (version - 1) <= i < 4 * version)


def test_a_missing_commit_between_two_is_named_and_the_table_restored(store, capsys):
    root, cache = store
    gone = cache.folder.join(LOG, commit_name(3))
    gone.fs.delete_file(gone.path)
    with pytest.raises(CorruptLog) as info:
        cache.read()
    assert info.value.uri == gone.uri and "missing: the log has commits up to 5" in str(info.value)
    assert "restores the table as of version 2 with the commits after it (4..5)" in str(info.value)

    assert main(["store", "verify", "--root", root.uri, "--quarantine"]) == 0
    out = capsys.readouterr().out
    assert "versions 4..5 committed again as version 3; the table is at version 3; 4 rows lost (4 keys)" in out
    assert keys(cache) == everything_but(3)
    cache.append(rows(1, 100))  # writers go on from the restored version
    assert cache.version() == 4 and len(keys(cache)) == 17


def test_a_commit_cut_short_is_named_and_moved_aside(store):
    root, cache = store
    newest = cache.folder.join(LOG, commit_name(5))
    newest.write_bytes(newest.read_bytes()[:-40])
    with pytest.raises(CorruptLog) as info:
        cache.read()
    assert "(its newest)" in str(info.value) and "not JSON (Unterminated string" in info.value.reason
    result = verify_store(root, quarantine=True)
    (bad,) = result.commits
    assert bad.error.version == 5 and bad.restored.recommitted is None and bad.restored.version == 4
    assert bad.restored.lost_rows == 4 and bad.restored.lost_keys == sorted(
        set(everything_but(0)) - set(everything_but(5))
    )
    assert keys(cache) == everything_but(5) and not result.left


def test_a_bad_commit_and_a_corrupt_data_file_are_repaired_together(store, capsys):
    root, cache = store
    victim = cache.folder.join(cache.files(4)[0])  # a file of versions 1..4 (files() sorts uuids: any version)
    victim.write_bytes(b"PAR1 not Parquet")
    held = {f"c{i % 2}/coherence/a{i}/b{i}" for i in range(20)} - set(everything_but(5))
    cache.folder.join(LOG, commit_name(5)).write_bytes(b"")
    assert main(["store", "verify", "--root", root.uri]) == 2
    out = capsys.readouterr()
    assert "commit 5 (of 5) does not read: empty (0 bytes)" in out.out and "(judgments: not read" in out.err
    result = verify_store(root, quarantine=True)
    assert not result.left and result.commits[0].restored.lost_keys == sorted(held)
    (part,) = result.bad
    assert part.uri == victim.uri and part.moved_to is not None and part.listed.rows == 2
    assert len(keys(cache)) == 20 - 4 - 2


def test_a_commit_of_json_that_is_not_delta_actions_is_named(store):
    root, cache = store
    commit = cache.folder.join(LOG, commit_name(2))
    commit.write_bytes(b'{"commitInfo": {"timestamp": 1}}\n{"add": {"path": "x.parquet", "size": 3}}\n')
    found = damaged_commit(cache.folder)
    assert found.uri == commit.uri
    assert found.reason == "line 2: an add action without partitionValues, modificationTime, dataChange"
    assert verify_store(root).left  # listed, left in place


def test_a_bad_commit_before_a_checkpoint_does_not_stop_readers_and_one_after_it_restores_from_it(store, capsys):
    root, cache = store
    delta.open_table(cache.folder, 3).create_checkpoint()  # the state as of version 3
    before = cache.folder.join(LOG, commit_name(2))
    before.write_bytes(b"garbage\n")
    assert damaged_commit(cache.folder) is None and len(keys(cache)) == 20  # read from the checkpoint
    assert not verify_store(root).left
    assert main(["store", "history", "--root", root.uri]) == 2  # the history reads every commit
    err = capsys.readouterr().err
    assert f"{before.uri}: commit 2 (of 5)" in err and "`--limit 3` lists the versions after it" in err
    assert main(["store", "history", "--root", root.uri, "--limit", "3"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 3

    after = cache.folder.join(LOG, commit_name(4))
    after.write_bytes(b"garbage\n")
    result = verify_store(root, quarantine=True)
    (bad,) = result.commits
    assert bad.error.uri == after.uri and bad.restored.carried == [5] and bad.restored.recommitted == 4
    assert keys(cache) == everything_but(4)  # version 3 from its checkpoint (commit 2 unread), then 5 again
    assert cache.folder.join(LOG, f"{3:020d}.checkpoint.parquet").exists()


def test_a_data_file_that_is_gone_is_named_by_the_store_check(store):
    _, cache = store
    cache.check()
    victim = cache.folder.join(cache.files()[2])
    victim.fs.delete_file(victim.path)
    with pytest.raises(MissingFile) as info:
        cache.check()
    assert info.value.uri == victim.uri and "--quarantine` commits a version without it" in str(info.value)


def test_storage_errors_pickle_whole():
    """Ray sends a task's error to the driver pickled: an error whose constructor takes more than its message came
    back as `UnserializableException`; a delta-rs error as a cause does not pickle at all."""
    from deltalake import DeltaTable

    try:
        DeltaTable("/nonexistent/table", version=3)
    except Exception as exc:
        delta_error = exc
    errors = [
        CorruptFile("/s/t/part-0.parquet", "10 bytes, not Parquet", "a hint"),
        MissingFile("/s/t/part-1.parquet", "a hint"),
        CorruptLog("/s/t/_delta_log/00000000000000000002.json", 2, 3, "line 1: not JSON", "a hint"),
        StorageError("s3://b/t", "open the Delta table", delta_error),
        StorageUnavailable("s3://b/t", "read it", TimeoutError("slow"), 120.0, 9),
        TableError(source="/s/c.parquet", row=3, column="p_a", expected="a float in [0, 1]", found="1.7"),
    ]
    for exc in errors:
        back = pickle.loads(pickle.dumps(exc))
        assert type(back) is type(exc) and str(back) == str(exc) and back.__dict__.keys() == exc.__dict__.keys()
    assert pickle.loads(pickle.dumps(errors[1])).uri == "/s/t/part-1.parquet"
    assert pickle.loads(pickle.dumps(errors[2])).version == 2
    assert isinstance(pickle.loads(pickle.dumps(errors[3])).cause, RuntimeError)  # the delta-rs error, as its text
