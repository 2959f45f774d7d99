"""A quiet console (issue 17, item 2, first part): `pairank run` shows pairank's own lines; what Ray and the
libraries write goes to a log file under the run, whose path is printed once; `-v` shows it live.

Real parts: `pairank run` processes with the SIMULATED judge, each with a local Ray of its own (a user's run) or
joining the session's Ray (as a driver joins a cluster: the same console, a cheaper start); the S3 case on the
session's SeaweedFS server.
"""

from __future__ import annotations

import datetime as dt
import io
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from pairank.jobs.cli.console import Console
from pairank.jobs.judging.progress import PassProgress
from pairank.storage.fs import Location
from tests.helpers import ROOT, Gate, joining, shell_env, spec_for, write_input

#: What Ray Data says in the log of a run that plans in Ray Data tasks (a static schedule's runs; an adaptive run
#: renders its rounds in plain tasks and may start no Ray Data execution).
RAY_WORDS = ("streaming_executor", "Dataset")


def pairank_run(
    spec: dict, tmp_path, *flags: str, sets: tuple[str, ...] = (), address: str | None = None
) -> subprocess.CompletedProcess:
    """``pairank run`` of ``spec``: on a local Ray of its own, or joining the Ray at ``address``, from a user's
    shell (:func:`~tests.helpers.shell_env`: pairank sends Ray's token by itself)."""
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    joined = joining(address) if address else []
    command = [*flags, "run", str(path), *(f"--set={s}" for s in sets), *joined]
    return subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", *command],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env=shell_env(),
    )


@pytest.mark.ray
def test_the_console_holds_pairank_lines_only_and_the_log_holds_the_rest(tmp_path, summeval_tables, ray_address):
    folder = write_input(tmp_path / "input", summeval_tables, 2, 3)
    out = tmp_path / "store"
    run = pairank_run(spec_for(folder, out, name="quiet", scheduler={"name": "full"}), tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.splitlines() == [str(out / "runs" / "quiet" / "report.md")]
    lines = run.stderr.splitlines()
    assert lines and all(line.startswith("[pairank] ") for line in lines), [x for x in lines if "[pairank]" not in x]
    (log,) = (out / "runs" / "quiet" / "logs").iterdir()
    assert lines[0] == f"[pairank] Ray, engine and library output: {log} (-v shows it here)"
    text = log.read_text()
    assert all(word in text for word in RAY_WORDS) and "[pairank]" not in text

    # -v, joining the session's Ray (the quiet run above started one of its own, whose start is in its log)
    loud = spec_for(folder, out, name="loud", scheduler={"name": "full"}, judge={"seed": 4})  # nothing cached
    verbose = pairank_run(loud, tmp_path, "-v", address=ray_address)
    assert verbose.returncode == 0 and all(word in verbose.stderr for word in RAY_WORDS)
    assert not (out / "runs" / "loud" / "logs").exists()


def test_switching_the_scheduler_by_set_runs_and_says_once_what_it_dropped(tmp_path, summeval_tables, ray_address):
    """Issue 27, item 3: the file's anchors settings belong to pairs_anchors; `--set scheduler.name=full` means
    the full scheduler instead, and the console names the dropped keys in one note."""
    folder = write_input(tmp_path / "input", summeval_tables, 2, 3)
    anchors = {"name": "pairs_anchors", "anchors": {"size": 2}, "symmetric": False}
    spec = spec_for(folder, tmp_path / "store", name="switch", scheduler=anchors)
    run = pairank_run(spec, tmp_path, sets=("scheduler.name=full",), address=ray_address)
    assert run.returncode == 0, run.stderr[-3000:]
    notes = [line for line in run.stderr.splitlines() if line.startswith("[pairank] note: ")]
    assert len(notes) == 1 and "scheduler keys anchors, symmetric" in notes[0], notes
    report = (tmp_path / "store" / "runs" / "switch" / "report.md").read_text()
    assert "scheduler: full" in report
    refused = pairank_run(spec, tmp_path, sets=("scheduler.name=full", "scheduler.anchors.size=4"), address=ray_address)
    assert refused.returncode == 2 and "scheduler.anchors: unknown key for scheduler 'full'" in refused.stderr


def test_the_console_speaks_while_the_engine_starts_and_before_the_first_batch_is_back(
    tmp_path, summeval_tables, ray_address
):
    """Issue 27, item 2: a judge whose engine takes 25 s to start (SIMULATED, start_seconds) answers its first
    batch after 25 s; the console says what happens before that, at most every 10 s, and the plan line comes
    before the first judged numbers."""
    folder = write_input(tmp_path / "input", summeval_tables, 2, 3)
    slow = {"start_seconds": 25.0, "seconds_per_comparison": 0.1}  # kept: the heartbeat's 10 s period is the subject
    run = pairank_run(
        spec_for(folder, tmp_path / "store", name="slow", scheduler={"name": "full"}, judge=slow),
        tmp_path,
        address=ray_address,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    lines = [line.removeprefix("[pairank] ") for line in run.stderr.splitlines()]
    first = next(i for i, line in enumerate(lines) if line.startswith("pairwise: "))  # the first judged numbers
    before = lines[:first]
    said = [line for line in before if line.startswith(("starting 1 engine", "1 engine ready", "judging: "))]
    assert said[0] == "starting 1 engine", lines
    ticks = [line for line in said if line.startswith("starting 1 engine (")]
    seconds = [int(t.removeprefix("starting 1 engine (").split()[0]) for t in ticks]
    assert len(seconds) >= 2 and seconds[0] >= 10 and all(b - a >= 9 for a, b in zip(seconds, seconds[1:])), lines
    ready = next(line for line in said if line.startswith("1 engine ready in "))
    assert 25 <= int(ready.removeprefix("1 engine ready in ").split()[0]) < 60
    assert "judging: first batch of 8 running" in said and any(x.startswith("judging: first batch back") for x in said)
    assert len(said) >= 2 + len(ticks)
    assert "12 comparisons (0 cached, 12 to judge)" in before  # the plan line, before any judged numbers


def test_a_failing_run_keeps_its_error_on_the_console(tmp_path, summeval_tables, ray_address):
    folder = write_input(tmp_path / "input", summeval_tables, 1, 3)
    (tmp_path / "q.parquet").write_bytes(b"garbage")  # the simulated judge's constructor fails in its actor
    spec = spec_for(folder, tmp_path / "store", name="nostart", judge={"quality": str(tmp_path / "q.parquet")})
    run = pairank_run(spec, tmp_path, address=ray_address)
    assert run.returncode == 5
    assert "[pairank] nostart: 1 context, 3 candidates, " in run.stderr  # counted in the singular too
    said = [line for line in run.stderr.splitlines() if line.startswith("pairank: error: ")]
    assert len(said) == 1 and "a judge engine failed to start" in said[0]
    (log,) = (tmp_path / "store" / "runs" / "nostart" / "logs").iterdir()
    assert "JudgeActor" in log.read_text()


def test_the_log_of_a_run_on_s3_is_kept_under_the_run(s3_server, tmp_path, summeval_tables, ray_address):
    folder = write_input("s3://pairank/console/input", summeval_tables, 2, 3)
    run = pairank_run(
        spec_for(folder, "s3://pairank/console/store", name="quiet", scheduler={"name": "full"}),
        tmp_path,
        address=ray_address,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    (log,) = Location.of("s3://pairank/console/store/runs/quiet/logs").files(".log")
    assert run.stderr.splitlines()[0] == f"[pairank] Ray, engine and library output: {log.uri} (-v shows it here)"
    assert all(word in log.read_text() for word in RAY_WORDS)


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def pass_lines(n: int, total: int) -> list[PassProgress]:
    return [
        PassProgress(
            f"pairwise: {d}/{total} (0 errors)",
            judging_pass="pairwise",
            done=d,
            total=total,
            errors=0,
            final=d == total,
        )
        for d in range(total // n, total + 1, total // n)
    ]


def test_plain_progress_lines_are_throttled_per_pass_and_the_last_always_shown():
    c = Console()
    c._err = io.StringIO()
    for line in pass_lines(5, 100):
        c.progress(line)
    c.progress("round 2: other news")
    shown = c._err.getvalue().splitlines()
    assert shown == [
        "[pairank] pairwise: 20/100 (0 errors)",
        "[pairank] pairwise: 100/100 (0 errors)",
        "[pairank] round 2: other news",
    ]


def test_on_a_terminal_a_pass_is_one_bar_that_ends_at_its_total():
    c = Console()
    c._err = Terminal()
    for line in pass_lines(4, 80):
        c.progress(line)
    text = c._err.getvalue()
    assert "[pairank] pairwise" in text and "80/80" in text and "errors=0" in text
    assert "pairwise: 40/80 (0 errors)" not in text and not c._bars  # no plain lines; the bar was closed


def broken_input(folder, summeval_tables, fault: str):
    """An input of 2 contexts x 3 candidates with a duplicate candidate id, or a text that is not UTF-8."""
    import pyarrow as pa

    loc = write_input(folder, summeval_tables, 2, 3)
    cand = loc.join("candidates.parquet").read_parquet()
    if fault == "duplicate id":
        ids = cand.column("candidate_id").to_pylist()
        column, values = "candidate_id", pa.array([*ids[:-1], ids[0]])
    else:
        texts = [t.encode() for t in cand.column("text").to_pylist()]
        column, values = "text", pa.array([texts[0] + b"\xff", *texts[1:]], pa.binary()).view(pa.string())
    loc.join("candidates.parquet").write_parquet(cand.set_column(cand.schema.get_field_index(column), column, values))
    return loc


def test_nothing_reaches_the_console_after_pairank_error_line(tmp_path, summeval_tables, ray_address):
    """A bad input found by a Ray task (the candidates are read in one): Ray's traceback of the task, its INFO
    lines and its shutdown go to the run's log, before and after pairank's error line (issue 30, item 7)."""
    for fault, said in [("duplicate id", "expected a unique candidate id"), ("not utf-8", "expected UTF-8 text")]:
        folder = broken_input(tmp_path / fault.replace(" ", "-"), summeval_tables, fault)
        out = tmp_path / "store"
        run = pairank_run(
            spec_for(folder, out, name="broken", scheduler={"name": "full"}), tmp_path, address=ray_address
        )
        assert run.returncode == 2, run.stderr[-3000:]
        lines = run.stderr.splitlines()
        assert lines[-1].startswith("pairank: error: column `") and said in lines[-1], lines[-5:]
        assert all(line.startswith("[pairank] ") for line in lines[:-1]), lines
        assert run.stdout == ""
        log = Path(lines[0].split("output: ", 1)[1].split(" (-v", 1)[0])
        text = log.read_text()
        assert "read_blocks" in text and said in text  # Ray's report of the failed task, kept there


def test_two_runs_of_a_name_started_together_each_print_their_own_log(tmp_path, summeval_tables, ray_address):
    """Started in the same second, one run holds the name and the other is refused (exit 4): each prints the
    path of its own log, and the refused run's log is not the other's (issue 30, item 7)."""
    folder = write_input(tmp_path / "input", summeval_tables, 2, 4)
    out = tmp_path / "store"
    path = tmp_path / "spec.yaml"
    gate = Gate(tmp_path / "gate")  # every batch held until the refused run has ended: the runs overlap
    spec = spec_for(folder, out, name="twice", scheduler={"name": "full"}, judge=gate.judge(hold_from=0))
    path.write_text(yaml.safe_dump(spec))
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(path), *joining(ray_address)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    done: list[tuple[str, str] | None] = [None, None]
    readers = [
        threading.Thread(target=lambda i=i: done.__setitem__(i, procs[i].communicate()), daemon=True) for i in (0, 1)
    ]
    for reader in readers:
        reader.start()
    deadline = time.monotonic() + 600  # a hang bound
    while all(p.poll() is None for p in procs):
        assert time.monotonic() < deadline, "neither run ended while the batches were held"
        time.sleep(0.2)  # a poll of the runs, not a window
    gate.release()
    for reader in readers:
        reader.join(600)
    codes = sorted(p.returncode for p in procs)
    assert codes == [0, 4], [err[-2000:] for _, err in done]
    logs = {}
    for proc, (_, err) in zip(procs, done):
        first = err.splitlines()[0]
        assert first.startswith("[pairank] Ray, engine and library output: "), err[-2000:]
        logs[proc.returncode] = Path(first.split("output: ", 1)[1].split(" (-v", 1)[0])
    assert logs[0] != logs[4] and logs[0].exists() and logs[4].exists()
    assert "already running" in done[[p.returncode for p in procs].index(4)][1]
    assert all(word in logs[0].read_text() for word in RAY_WORDS)
    assert not any(word in logs[4].read_text() for word in RAY_WORDS)  # the refused run started no Ray work


def test_a_log_name_is_unique_to_its_process_and_call():
    from pairank.jobs.cli.console import run_log_file

    now = dt.datetime(2026, 11, 25, 12, 0, 0, tzinfo=dt.UTC)
    (a, _), (b, _) = run_log_file("/tmp/root", "x", now=now), run_log_file("/tmp/root", "x", now=now)
    assert a != b and a.name.startswith(f"20261125T120000Z-{os.getpid()}-") and a.parent == b.parent
