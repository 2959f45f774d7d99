"""The judgment store as a Delta table (issue 15): concurrent appends, reads scoped to a run, other readers,
migration from the former part folders, and upkeep (compact, vacuum, history, time travel)."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from pairank.jobs.cli.main import main
from pairank.storage import delta
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import BUCKETS, FormerStore, JudgmentCache, context_bucket, scope
from pairank.storage.store.legacy import PartFolder
from pairank.storage.store.maintenance import compact, history, migrate, vacuum

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def rows(n: int, prefix: str, contexts: int = 4, aspects: tuple[str, ...] = ("coherence",), at: int = 0) -> pa.Table:
    out = []
    for i in range(n):
        out.append(
            {
                "key": f"{prefix}-{i}",
                "engine": "simulated",
                "model": "m",
                "revision": "r",
                "prompt_hash": "h",
                "sampling": "{}",
                "context_id": f"c{i % contexts}",
                "aspect": aspects[i % len(aspects)],
                "candidate_a": "x",
                "candidate_b": "y",
                "p_a": (i % 10) / 10,
                "logprob_a": None,
                "logprob_b": None,
                "label": "A",
                "raw_text": None,
                "input_tokens": 3,
                "output_tokens": 1,
                "seconds": 0.1,
                "error": None,
                "created_at": T0 + dt.timedelta(seconds=at + i),
            }
        )
    return pa.Table.from_pylist(out, schema=JUDGMENTS)


def concurrent_appends(cache: JudgmentCache, writers: int = 8, commits: int = 5, n: int = 20) -> list[BaseException]:
    errors: list[BaseException] = []

    def write(w: int) -> None:
        for c in range(commits):
            try:
                cache.append(rows(n, f"w{w}c{c}"))
            except BaseException as exc:
                errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def check_every_row_once(cache: JudgmentCache, writers: int = 8, commits: int = 5, n: int = 20) -> None:
    got = cache.rows().column("key").to_pylist()
    assert len(got) == writers * commits * n and len(set(got)) == len(got)
    assert set(got) == {f"w{w}c{c}-{i}" for w in range(writers) for c in range(commits) for i in range(n)}
    appends = [h for h in delta.open_table(cache.folder).history() if h["operation"] == "WRITE"]
    assert len(appends) == writers * commits  # one commit per append, none lost or doubled


def test_eight_writers_append_to_one_store_every_row_once(tmp_path):
    cache = JudgmentCache(Location.of(str(tmp_path / "store")))
    assert concurrent_appends(cache) == []
    check_every_row_once(cache)


@pytest.mark.s3
def test_eight_writers_append_to_one_store_on_s3_every_row_once(s3_server):
    cache = JudgmentCache(Location.of(f"s3://pairank/delta-{uuid.uuid4().hex[:8]}/tables/judgments"))
    assert concurrent_appends(cache) == []
    check_every_row_once(cache)
    assert cache.read(contexts=["c1"]).num_rows == 8 * 5 * 5  # scoped reads through pyarrow's S3 filesystem


def test_a_read_scoped_to_a_run_reads_only_its_partitions(tmp_path):
    cache = JudgmentCache(Location.of(str(tmp_path / "store")))
    for c in range(6):
        cache.append(rows(64, f"f{c}", contexts=32, aspects=("coherence", "fluency")))
    everything = cache.read()
    mine = cache.read(aspects=["fluency"], contexts=["c3", "c7"])
    want = everything.filter(pa.compute.is_in(everything.column("context_id"), pa.array(["c3", "c7"])))
    want = want.filter(pa.compute.equal(want.column("aspect"), "fluency"))
    assert sorted(mine.column("key").to_pylist()) == sorted(want.column("key").to_pylist()) and mine.num_rows > 0
    keys = mine.column("key").to_pylist()[:3]
    assert sorted(
        cache.read(aspects=["fluency"], contexts=["c3", "c7"], keys=keys).column("key").to_pylist()
    ) == sorted(keys)

    # pruning: only the files of the fluency partition and the two contexts' buckets are opened
    data = delta.dataset(cache.folder)
    every = list(data.get_fragments())
    opened = list(data.get_fragments(filter=scope(["fluency"], ["c3", "c7"], None)))
    buckets = {context_bucket("c3"), context_bucket("c7")}
    assert opened and all("aspect=fluency/" in f.path for f in opened)
    assert {int(f.path.split("bucket=")[1].split("/")[0]) for f in opened} <= buckets
    assert len(opened) < len(every) / 4
    assert all(0 <= context_bucket(f"c{i}") < BUCKETS for i in range(100))


def test_other_tools_read_the_same_rows(tmp_path):
    polars = pytest.importorskip("polars")
    cache = JudgmentCache(Location.of(str(tmp_path / "store")))
    cache.append(rows(50, "a", aspects=("coherence", "fluency")))
    cache.append(rows(30, "b"))
    theirs = polars.read_delta(str(cache.folder.path)).to_arrow()
    ours = cache.rows()
    assert theirs.num_rows == ours.num_rows == 80
    key = [("key", "ascending")]
    theirs = theirs.select(JUDGMENTS.names).sort_by(key)
    assert theirs.cast(JUDGMENTS).equals(ours.sort_by(key))


def test_time_travel_and_history(tmp_path):
    cache = JudgmentCache(Location.of(str(tmp_path / "root" / "tables" / "judgments")), writer="run:nightly-a")
    first = cache.append(rows(10, "a"))
    cache.append(rows(10, "b"))
    assert cache.read(version=first).num_rows == 10 and cache.read().num_rows == 20
    seen = history(str(tmp_path / "root"))
    assert [h["version"] for h in seen] == [2, 1, 0]
    assert [h["rows_added"] for h in seen[:2]] == [10, 10] and seen[0]["job"] == "run:nightly-a"
    assert seen[0]["writer"].count("@") == 1 and seen[-1]["operation"] == "CREATE TABLE"


def test_compact_then_vacuum_keeps_every_row_and_frees_the_old_files(tmp_path, capsys):
    root = tmp_path / "root"
    cache = JudgmentCache(RunLayout.of(str(root), "").judgments)
    for c in range(20):
        cache.append(rows(10, f"k{c}", contexts=2))
    before = cache.read()
    files_before = cache.files()
    assert len(files_before) >= 20

    assert main(["store", "compact", "--root", str(root)]) == 0
    assert "judgments: " in capsys.readouterr().out
    assert len(cache.files()) <= 2 * 2  # one file per partition left (2 contexts, at most 2 buckets, 1 aspect)
    assert cache.read().equals(before)
    assert cache.read(version=20).equals(before)  # the version before compaction still reads (time travel)

    assert vacuum(str(root), retention_hours=168)["judgments"] == []  # nothing old enough
    assert main(["store", "vacuum", "--root", str(root), "--retention-hours", "0", "--dry-run"]) == 0
    assert len(list(root.rglob("*.parquet"))) == len(files_before) + len(cache.files())  # dry run: all still there
    deleted = vacuum(str(root), retention_hours=0)["judgments"]
    assert sorted(deleted) == sorted(files_before)
    assert cache.read().equals(before)  # the newest version's files are never deleted
    assert main(["store", "history", "--root", str(root), "--limit", "3"]) == 0
    out = capsys.readouterr().out
    assert "VACUUM END" in out and "OPTIMIZE" in out


def write_former_parts(folder: Path, tables: list[pa.Table]) -> None:
    """A store of the former format, as the part-folder code wrote it."""
    for i, table in enumerate(tables):
        Location.of(str(folder / f"part-20260101T0000{i:02d}000000Z-{i:08x}.parquet")).write_parquet(table)


def test_migrate_copies_a_former_store_checked_and_leaves_it_untouched(tmp_path, capsys):
    root = tmp_path / "root"
    newer = rows(5, "a", at=100)
    write_former_parts(root / "judgments", [rows(20, "a"), rows(10, "b"), newer])
    digest = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "judgments").iterdir()}
    cache = JudgmentCache(RunLayout.of(str(root), "").judgments)

    with pytest.raises(FormerStore, match="store migrate --root"):
        cache.read()  # a run on the root is told to migrate, not given an empty store
    with pytest.raises(FormerStore):
        cache.append(rows(1, "z"))

    assert main(["store", "migrate", "--root", str(root)]) == 0
    assert "judgments: 35 rows (30 keys)" in capsys.readouterr().out
    former = PartFolder(Location.of(str(root / "judgments"))).read()
    key = [("key", "ascending")]
    assert cache.read().sort_by(key).equals(former.sort_by(key))
    assert cache.rows().num_rows == 35
    assert {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in (root / "judgments").iterdir()} == digest

    with pytest.raises(ValueError, match="already there"):
        migrate(str(root))
    assert main(["store", "migrate", "--root", str(tmp_path / "empty")]) == 0
    assert "nothing to do" in capsys.readouterr().err


def test_compact_on_an_empty_root_does_nothing(tmp_path):
    assert compact(str(tmp_path)) == {} and vacuum(str(tmp_path)) == {} and history(str(tmp_path)) == []


def test_a_run_on_a_migrated_store_gives_the_same_answers_and_asks_nothing(tmp_path, summeval_tables, ray_local):
    from pairank.jobs.run import run_job
    from pairank.jobs.specs.job import parse_spec
    from tests.helpers import spec_for, write_input

    folder = write_input(tmp_path / "input", summeval_tables, 2, 4)
    first = run_job(
        parse_spec(spec_for(folder, tmp_path / "new", name="m", scheduler={"name": "full"}), "t"),
        progress=lambda m: None,
    )
    assert first.judged == 24
    # the same judgments as a store of the former format (parts of 8 rows, as flush_rows 8 wrote them)
    judged = JudgmentCache(first.layout.judgments).rows()
    write_former_parts(tmp_path / "old" / "judgments", [judged.slice(i, 8) for i in range(0, judged.num_rows, 8)])
    spec = parse_spec(spec_for(folder, tmp_path / "old", name="m", scheduler={"name": "full"}), "t")
    with pytest.raises(FormerStore):
        run_job(spec, progress=lambda m: None)
    assert main(["store", "migrate", "--root", str(tmp_path / "old")]) == 0
    again = run_job(spec, progress=lambda m: None)
    assert (again.cached, again.judged, again.errors) == (24, 0, 0)
    key = [("context_id", "ascending"), ("method", "ascending"), ("candidate_id", "ascending")]
    assert again.layout.rankings.read_parquet().sort_by(key).equals(first.layout.rankings.read_parquet().sort_by(key))
