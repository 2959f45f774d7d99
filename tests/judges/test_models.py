"""The embedded judge's folder is made once per machine: several processes asking at once wait for one maker
(``made_once``, the lock a cluster node's judge actors share when they prepare the model themselves)."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from pathlib import Path

from pairank.judges.models import is_prepared, made_once

ASKERS = 4


def waiting_on(lock: Path) -> int:
    """Processes blocked on ``lock``'s flock now (``->`` lines of /proc/locks for its inode)."""
    st = lock.stat()
    inode = f" {os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino} "
    return sum(1 for line in Path("/proc/locks").read_text().splitlines() if "->" in line and inode in line)


def make_while_the_others_wait(folder: Path) -> None:
    """A maker that makes only once every other asker is blocked on the lock (an event: they asked while it made)."""
    lock = folder.with_name(folder.name + ".lock")
    deadline = time.monotonic() + 60
    while waiting_on(lock) < ASKERS - 1:
        assert time.monotonic() < deadline, f"{waiting_on(lock)} of {ASKERS - 1} askers blocked on {lock}"
        time.sleep(0.02)  # a poll of the lock's waiters, not a window
    make(folder)


def make(folder: Path) -> None:
    """A maker that counts its runs beside the folder."""
    with open(folder.parent / "makes.txt", "a") as out:
        out.write(f"{os.getpid()}\n")
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
    procs = [ctx.Process(target=ask, args=(str(folder), "make_while_the_others_wait")) for _ in range(ASKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0] * ASKERS
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
        make(f)

    assert made_once(folder, again) == folder  # the lock died with its holder: no wait
    assert is_prepared(folder) and (folder / "weights.bin").read_bytes() == b"w"
