"""``make test``'s scheduler (pytest-xdist's ``loadgroup``, repaired in ``pytest_xdist_make_scheduler`` in
tests/conftest.py) when a worker process dies.

A clean-clone run lost a pytest worker to a failed check in Ray's C++ (since fixed): xdist replaced the worker, but
the run then waited for ever, two workers idle: xdist 3.8's loadgroup puts the groups the dead worker had finished
back in the queue and hands them out as empty work that no worker answers (without the repair this test times
out). Here a real ``pytest -n 3`` of this repository runs a test that ends its worker after a few fast modules."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.helpers import ROOT

#: Fast modules run before the crash (given first, so handed out first): the worker that dies has finished units.
BEFORE = ["tests/storage/test_bounded_yaml.py", "tests/storage/test_schemas_cache.py"]


def test_a_worker_that_dies_fails_its_test_once_and_the_run_still_ends(tmp_path):
    crash = tmp_path / "test_worker_dies.py"
    crash.write_text(
        "import os\n\n\ndef test_ends_its_worker():\n    os._exit(1)\n\n\ndef test_after_it():\n    pass\n",
        encoding="utf-8",
    )
    run = [sys.executable, "-m", "pytest", "-n", "3", "--dist", "loadgroup", "--no-loadscope-reorder", "-v"]
    env = {k: v for k, v in os.environ.items() if k != "PAIRANK_TEST_CPU_LOG"}  # its tests are not this run's
    out = subprocess.run(
        [*run, "-p", "no:cacheprovider", *BEFORE, str(crash)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    said = out.stdout
    assert out.returncode == 1, said[-3000:] + out.stderr[-2000:]
    assert said.count("node down: Not properly terminated") == 1, said[-3000:]  # the test did not run again
    assert "crashed while running" in said and "test_ends_its_worker" in said
    assert "PASSED " in said and any("PASSED" in line and "test_after_it" in line for line in said.splitlines()), said[
        -3000:
    ]  # the rest of its module ran on another worker
    summary = said.strip().splitlines()[-1]
    assert summary.startswith("=") and " 1 failed, " in f" {summary}" and " passed" in summary, summary
