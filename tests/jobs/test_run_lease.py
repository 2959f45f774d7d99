"""Two runs of one name on one root: the second is refused (exit 4) before it judges anything; a run killed
mid-judging is flagged on the leaderboard until a later run of its name finishes it (issue 14, item 7).

Real parts: `pairank run` processes that join the session's Ray (as drivers join a cluster) with the SIMULATED
judge, SIGKILLed for real.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import yaml

from pairank.jobs.cli.main import main
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.lease import is_held
from tests.helpers import ROOT, Gate, joining, spec_for, write_input

TTL_S = "4"


def spec_file(tmp_path, name: str, folder: Location, out, **over) -> str:
    data = spec_for(folder, out, name=name, scheduler={"name": "full"}, **over)
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def start(spec: str, address: str) -> subprocess.Popen:
    env = {**os.environ, "PAIRANK_LEASE_TTL_S": TTL_S}
    return subprocess.Popen(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", spec, *joining(address)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def run(spec: str, address: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PAIRANK_LEASE_TTL_S": TTL_S}
    return subprocess.run(
        [sys.executable, "-m", "pairank.jobs.cli.main", "run", spec, *joining(address)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)  # a poll of the state waited for, not a window


def manifest_state(out, name: str) -> str | None:
    path = out / "runs" / name / "manifest.json"
    return json.loads(path.read_text())["state"] if path.exists() else None


def stored_keys(out) -> Counter:
    cache = JudgmentCache(Location.of(str(out)).join("tables", "judgments"))
    return Counter(k for k in cache.rows().column("key").to_pylist())


def test_a_second_run_of_a_name_is_refused_while_the_first_judges(tmp_path, summeval_tables, ray_address):
    folder = write_input(tmp_path / "input", summeval_tables, 3, 5)
    out = tmp_path / "store"
    gate = Gate(tmp_path / "gate")  # the first run's batches held until the second was refused
    spec = spec_file(tmp_path, "twice", folder, out, judge=gate.judge(hold_from=0))
    first = start(spec, ray_address)
    try:
        gate.wait_for(1, proc=first)  # the first run judges (and holds its name)
        second = run(spec, ray_address)
        gate.release()
        assert second.returncode == 4, second.stderr[-2000:]
        said = [line for line in second.stderr.splitlines() if line.startswith("pairank: error: ")]
        assert len(said) == 1 and "run 'twice' under" in said[0] and "already running" in said[0]
        assert f"pid {first.pid}" in said[0]
        _, err = first.communicate(timeout=600)
        assert first.returncode == 0, err[-2000:]
    finally:
        if first.poll() is None:
            os.killpg(first.pid, signal.SIGKILL)
    keys = stored_keys(out)
    assert len(keys) == 3 * 5 * 4 and set(keys.values()) == {1}  # judged once, by the first run only
    assert manifest_state(out, "twice") == "done"


def test_a_killed_run_is_flagged_on_the_leaderboard_until_a_later_run_finishes_it(
    tmp_path, summeval_tables, capsys, ray_address
):
    folder = write_input(tmp_path / "input", summeval_tables, 6, 5)
    out = tmp_path / "store"
    done = run(spec_file(tmp_path, "small", folder, out, subset={"contexts": 2}), ray_address)
    assert done.returncode == 0, done.stderr[-2000:]
    small_keys = len(stored_keys(out))
    gate = Gate(tmp_path / "gate")  # the big run judges two batches (8 each), then holds until it is killed
    spec = spec_file(tmp_path, "big", folder, out, judge=gate.judge(hold_from=2))
    big = start(spec, ray_address)
    try:
        gate.wait_for(3, proc=big)
        wait_for(
            lambda: manifest_state(out, "big") == "judging" and len(stored_keys(out)) > small_keys + 8,
            180,
            "the big run's first parts",
        )
    finally:
        os.killpg(big.pid, signal.SIGKILL)
        big.wait(timeout=60)
    assert manifest_state(out, "big") == "judging"

    capsys.readouterr()
    assert main(["leaderboard", "--root", str(out), "--n-boot", "0"]) == 0
    err = capsys.readouterr().err
    meta = json.loads((out / "leaderboard" / "leaderboard.json").read_text())
    (flag,) = meta["unfinished"]
    assert flag["run"] == "big" and flag["state"] == "judging" and 0 < flag["judgments"] <= meta["judgments"]["used"]
    assert "warning: run big" in err and "--finished-only" in err
    html = (out / "leaderboard" / "index.html").read_text()
    assert 'class="banner"' in html and "Not final." in html and "run big" in html

    assert main(["leaderboard", "--root", str(out), "--n-boot", "0", "--finished-only"]) == 0
    meta = json.loads((out / "leaderboard" / "leaderboard.json").read_text())
    assert meta["runs"] == ["small"] and meta["unfinished"] == [] and meta["judgments"]["used"] == small_keys
    assert 'class="banner"' not in (out / "leaderboard" / "index.html").read_text()

    wait_for(lambda: not is_held(Location.of(str(out)), "big"), 120, "the killed run's lease to run out")
    gate.release()  # the later run judges freely
    again = run(spec, ray_address)
    assert again.returncode == 0, again.stderr[-2000:]
    assert set(stored_keys(out).values()) == {1}
    assert main(["leaderboard", "--root", str(out), "--n-boot", "0"]) == 0
    assert json.loads((out / "leaderboard" / "leaderboard.json").read_text())["unfinished"] == []
