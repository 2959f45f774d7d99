"""`pairank store verify --quarantine` killed at each of its steps, then run again: the table holds exactly the rows
an uninterrupted repair leaves (issue 49, chaos hole 7a: a kill between moving the log's files aside and writing
the carried commit lost every carried judgment). The kill is a real SIGKILL of a repair in a process of its own, at
a step the repair reports (``on_step``); no Ray."""

from __future__ import annotations

import json
import shutil

import pyarrow as pa
import pytest

from pairank.jobs.cli.main import main
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.damage import LOG, commit_name
from pairank.storage.store.repair import Plan, UnfinishedRepair, refuse_unfinished_repair
from pairank.storage.store.verify import quarantine_folder, verify_store
from tests.helpers import kill_repair_at
from tests.operators.rows import judgment


def damaged_store(folder, bad: int) -> Location:
    """A judgment table of versions 0..5 (4 rows a commit after the first), with commit ``bad`` garbage and, when
    ``bad`` is not the first, a data file of commit 4 truncated and one of commit 1 deleted."""
    root = Location.of(str(folder))
    cache = JudgmentCache(RunLayout(root, "").judgments)
    added = {}
    for v in range(5):
        before = set(cache.files()) if cache.exists() else set()
        rows = [judgment(f"c{i % 2}", "coherence", f"a{i}", f"b{i}", 0.7) for i in range(4 * v, 4 * v + 4)]
        cache.append(pa.Table.from_pylist(rows))
        added[cache.version()] = sorted(set(cache.files()) - before)
    if bad:
        cut = cache.folder.join(added[4][0])
        cut.write_bytes(cut.read_bytes()[:100])
        gone = cache.folder.join(added[1][0])
        gone.fs.delete_file(gone.path)
    cache.folder.join(LOG, commit_name(bad)).write_bytes(b'{"commitInfo": {"timestamp": 1}}\n{"add": garbage\n')
    return root


def table_rows(root: Location) -> list[dict]:
    """Every row the judgment table holds, in key order (duplicates kept)."""
    table = JudgmentCache(RunLayout(root, "").judgments).read()
    return sorted(table.to_pylist(), key=lambda r: (r["key"], json.dumps(r, sort_keys=True, default=str)))


def steps_of_a_whole_repair(root: Location) -> list[str]:
    steps: list[str] = []
    verify_store(root, quarantine=True, on_step=steps.append)
    return steps


@pytest.fixture(scope="module", params=[2, 0], ids=["a-middle-commit", "the-first-commit"])
def uninterrupted(request, tmp_path_factory):
    """The damaged store (commit 2 bad, or commit 0), a copy of it left damaged, and what an uninterrupted repair
    leaves: its steps and the table's rows."""
    folder = tmp_path_factory.mktemp(f"bad-{request.param}")
    pristine = folder / "damaged"
    damaged_store(pristine, request.param)
    whole = folder / "whole"
    shutil.copytree(pristine, whole)
    root = Location.of(str(whole))
    steps = steps_of_a_whole_repair(root)
    assert not verify_store(root).left
    return request.param, pristine, steps, table_rows(root)


def test_a_whole_repair_reports_each_step_it_takes(uninterrupted):
    bad, _, steps, rows = uninterrupted
    moved_log = [f"moved {commit_name(v)}" for v in range(bad, 6)]
    if bad:
        assert steps[: len(moved_log) + 3] == ["planned", *moved_log, "committed", "restored"]
        assert [s.split(" ")[0] for s in steps[len(moved_log) + 3 :]] == ["moved", "dropped"]  # the truncated file
        assert len(rows) == 20 - 4 - 2 - 2  # commit 2's rows, then the truncated file's and the deleted file's
    else:
        assert steps == ["planned", *moved_log, "created", "committed", "restored"]
        assert len(rows) == 20  # commit 0 made the table and held no rows; 1..5 are carried


@pytest.mark.parametrize("at", range(1, 12))
def test_a_repair_killed_at_any_step_then_run_again_leaves_what_a_whole_repair_leaves(uninterrupted, at, tmp_path):
    bad, pristine, steps, rows = uninterrupted
    if at > len(steps):
        pytest.skip(f"the repair has {len(steps)} steps")
    shutil.copytree(pristine, tmp_path / "store")
    root = Location.of(str(tmp_path / "store"))
    kill_repair_at(root.uri, at)

    aside = quarantine_folder(root, "judgments").join(LOG)
    if steps[at - 1] != "restored" and at <= steps.index("restored"):  # stopped inside the log's restore
        assert Plan.read(aside) is not None
        assert verify_store(root).left  # a plain check says the repair is unfinished
    assert main(["store", "verify", "--root", root.uri, "--quarantine"]) == 0
    assert Plan.read(aside) is None
    assert table_rows(root) == rows
    assert not verify_store(root).left
    assert main(["store", "verify", "--root", root.uri, "--quarantine"]) == 0  # a third repair changes nothing
    assert table_rows(root) == rows


def test_the_repair_finished_from_its_plan_says_so(uninterrupted, tmp_path, capsys):
    bad, pristine, steps, _ = uninterrupted
    shutil.copytree(pristine, tmp_path / "store")
    root = Location.of(str(tmp_path / "store"))
    at = steps.index(f"moved {commit_name(bad + 1)}") + 1  # the bad commit and the next moved, the rest not
    kill_repair_at(root.uri, at)

    capsys.readouterr()
    assert main(["store", "verify", "--root", root.uri]) == 2
    out = capsys.readouterr().out
    assert f"commit {bad} (of 5) does not read" in out and "(a repair of it was stopped part-way)" in out
    assert main(["store", "verify", "--root", root.uri, "--quarantine"]) == 0
    out = capsys.readouterr().out
    assert "(a repair of it was stopped part-way; finished now) -> moved to" in out
    assert "versions 3..5 committed again" in out if bad else "versions 1..5 committed again" in out


def test_verify_of_a_root_that_does_not_exist_is_an_error_naming_it(tmp_path, capsys):
    missing = tmp_path / "no-such-root"
    assert main(["store", "verify", "--root", str(missing)]) == 2
    assert f"--root {missing}: no such folder" in capsys.readouterr().err


def test_a_store_whose_repair_was_stopped_is_refused_by_a_run_until_it_is_finished(uninterrupted, tmp_path):
    """A run on the table mid-repair would ask again what the carried commits hold: it is refused, naming the plan
    and the command that finishes the repair (the run's own refusal: tests/storage/test_store_repair.py)."""
    _, pristine, _, _ = uninterrupted
    shutil.copytree(pristine, tmp_path / "store")
    root = Location.of(str(tmp_path / "store"))
    kill_repair_at(root.uri, 2)
    table = RunLayout(root, "").judgments
    with pytest.raises(UnfinishedRepair) as info:
        refuse_unfinished_repair(table)
    plan = Plan.location(quarantine_folder(root, "judgments").join(LOG))
    assert f"stopped part-way ({plan.uri} is its plan)" in str(info.value)
    assert f"`pairank store verify --root {root.uri} --quarantine` finishes it" in str(info.value)
    refuse_unfinished_repair(RunLayout(root, "").passes)  # the other table has no repair under way
    assert verify_store(root, quarantine=True).commits[0].interrupted
    refuse_unfinished_repair(table)
