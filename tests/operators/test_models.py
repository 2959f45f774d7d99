"""The embedded judge's folder is made once per machine: several processes asking at once wait for one maker
(``made_once``, the lock a cluster node's judge actors share when they prepare the model themselves)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

from pairank.operators.judges.models import is_prepared, made_once


def make_slowly(folder: Path) -> None:
    """A maker that takes a while and counts its runs beside the folder."""
    with open(folder.parent / "makes.txt", "a") as out:
        out.write(f"{os.getpid()}\n")
    time.sleep(1.0)
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"w")
    (folder / ".pairank-done").write_text("done\n")


def make_and_die(folder: Path) -> None:
    """A maker killed halfway: it leaves a partial folder and no marker."""
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"half")
    os.kill(os.getpid(), signal.SIGKILL)


def ask(folder: str, maker: str) -> None:
    made_once(Path(folder), globals()[maker])


def test_processes_asking_at_once_make_the_folder_once(tmp_path):
    folder = tmp_path / "models" / "m"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=ask, args=(str(folder), "make_slowly")) for _ in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    assert len((tmp_path / "models" / "makes.txt").read_text().splitlines()) == 1
    assert is_prepared(folder) and (folder / "weights.bin").read_bytes() == b"w"
    assert made_once(folder, make_and_die) == folder  # made: the maker is not called again


def test_a_maker_killed_halfway_leaves_the_folder_to_the_next(tmp_path):
    folder = tmp_path / "models" / "m"
    ctx = multiprocessing.get_context("fork")
    dying = ctx.Process(target=ask, args=(str(folder), "make_and_die"))
    dying.start()
    dying.join(60)
    assert dying.exitcode == -signal.SIGKILL and not is_prepared(folder)

    def again(f: Path) -> None:  # the next maker finds the half-made folder and replaces it
        import shutil

        shutil.rmtree(f)
        make_slowly(f)

    assert made_once(folder, again) == folder  # the lock died with its holder: no wait
    assert is_prepared(folder) and (folder / "weights.bin").read_bytes() == b"w"
