"""A corrupt part of the judgment store is named, and `pairank store verify --quarantine` moves it aside (issue 14, 3).

Before: a truncated, empty or garbage part gave "Could not open Parquet input source '<Buffer>'" for every run
and leaderboard on the root.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from pairank.jobs.cli.main import main
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.errors import CorruptFile
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import spec_for, write_input

DAMAGE = {
    "truncated": lambda data: data[: len(data) // 2],
    "empty": lambda data: b"",
    "garbage": lambda data: b"PAR1 not a parquet file at all " * 40,
}


def quiet(_msg: str) -> None:
    pass


@pytest.fixture
def store(tmp_path, summeval_tables, ray_local):
    """A storage root with one finished full-matrix run (2 contexts x 4 candidates, several parts)."""
    folder = write_input(tmp_path / "input", summeval_tables, 2, 4)
    spec = parse_spec(spec_for(folder, tmp_path / "store", name="full", scheduler={"name": "full"}), "test")
    result = run_job(spec, progress=quiet)
    assert result.errors == 0 and result.judged == 24
    return tmp_path / "store", spec


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_a_corrupt_part_is_named_then_quarantined_and_its_comparisons_asked_again(store, damage, capsys):
    root, spec = store
    cache = JudgmentCache(RunLayout.of(str(root), "x").judgments)
    files = cache.files()
    assert len(files) >= 3  # flush_rows 8
    held = cache.read_files([files[1]]).num_rows
    victim = cache.folder.join(files[1])
    damaged = DAMAGE[damage](victim.read_bytes())
    victim.write_bytes(damaged)

    with pytest.raises(CorruptFile) as info:
        cache.read()
    assert info.value.uri == victim.uri and "store verify" in str(info.value)

    capsys.readouterr()
    assert main(["leaderboard", "--root", str(root), "--n-boot", "0"]) == 2
    err = capsys.readouterr().err
    assert victim.uri in err and "not a readable Parquet file" in err and "<Buffer>" not in err

    assert main(["store", "verify", "--root", str(root)]) == 2
    out = capsys.readouterr()
    lines = out.out.splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        f"bad: {victim.uri}: not a readable Parquet file ({len(damaged)} bytes"
    )
    assert f"{len(files)} data files read, 1 bad, 1 left in place" in out.err
    assert victim.exists()

    assert main(["store", "verify", "--root", str(root), "--quarantine"]) == 0
    moved = Location.of(str(root)).join("quarantine", "judgments", files[1])
    assert not victim.exists() and moved.exists() and f"-> moved to {moved.uri}" in capsys.readouterr().out
    assert moved.read_bytes() == damaged  # kept, not deleted
    assert files[1] not in cache.files() and len(cache.files()) == len(files) - 1  # a version without it

    again = run_job(spec, progress=quiet)
    assert (again.cached, again.judged, again.errors) == (24 - held, held, 0)
    assert main(["store", "verify", "--root", str(root)]) == 0


def test_a_data_file_of_another_schema_is_listed_by_verify(store, capsys):
    root, _ = store
    cache = JudgmentCache(RunLayout.of(str(root), "x").judgments)
    stray = cache.folder.join(cache.files()[0])  # replaced by another tool's file
    stray.write_parquet(pa.table({"key": ["k"], "verdict": [1]}))
    assert main(["store", "verify", "--root", str(root)]) == 2
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"bad: {stray.uri}: ") and "column" in line


def test_a_corrupt_candidates_table_is_named(tmp_path):
    from pairank.storage.inputs import read_candidates

    loc = Location.of(str(tmp_path)).join("candidates.parquet")
    loc.write_bytes(b"")
    with pytest.raises(CorruptFile) as info:
        read_candidates(Location.of(str(tmp_path)))
    assert info.value.uri == loc.uri and "0 bytes" in str(info.value)
