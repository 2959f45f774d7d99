"""A clone with nothing beside it runs the demo and the tests (issue 17, item 1).

The repository is cloned into an empty temporary folder (no ``shared/data`` next to it). There the demo
spec runs on the data that ships in ``data/`` with the real CPU judge and writes its report, and the tests
of the full public sets skip, naming the folder they need. The installed environment is reused (the
README's install step excepted), so the code is this checkout's and the data and specs are the clone's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT


@pytest.fixture(scope="module")
def clone(tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("fresh") / "pairank"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(where)], check=True, timeout=120)
    assert not (where.parent / "shared").exists()
    return where


def in_clone(clone: Path, *command: str, timeout: float = 900) -> subprocess.CompletedProcess:
    """``command`` run in the clone with this process's environment; its output as text."""
    return subprocess.run(
        command, cwd=clone, capture_output=True, text=True, timeout=timeout, env=dict(os.environ), check=False
    )


@pytest.mark.ray  # and `engine`, from default_model
def test_the_demo_runs_in_a_clone_with_nothing_beside_it(clone, default_model):
    # 2 of the demo's 4 articles (48 comparisons of the 96): the clone's paths, data and judge are the claim, not the
    # demo's size, which `make demo` runs as shipped
    run = in_clone(
        clone, sys.executable, "-m", "pairank.jobs.cli.main", "run", "configs/demo.yaml", "--set", "subset.contexts=2"
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = clone / "runs" / "store" / "runs" / "demo" / "report.md"
    assert run.stdout.strip() == str(report) and report.exists()
    assert "2 contexts, 8 candidates" in run.stderr


@pytest.mark.ray
def test_the_demos_replay_of_published_verdicts_gives_llmbars_own_statistics(clone):
    """`make demo`'s second part (`make demo-replay`, run here with this checkout's venv): GPT-4's published CoT
    verdicts on LLMBar Natural through the same pipeline, then their meta-evaluation. The figures are LLMBar's own
    statistics.json for GPT-4/CoT on Natural (94.0% and 95.0% in the two orders, 90.0% right in both, 91.0% the
    same pick), and the run's bias report finds its position preference: 9 of 100 pairs flip when the slots swap."""
    run = in_clone(clone, "make", "--no-print-directory", "demo-replay", f"BIN={Path(sys.executable).parent}")
    assert run.returncode == 0, run.stderr[-3000:]
    report = clone / "runs" / "store" / "runs" / "demo-replay" / "report.md"
    assert str(report) in run.stdout.splitlines()
    row = "| (none) | instruction_following | GPT-4/CoT | 100 | 94.0 | 95.0 | 94.5 | 90.0 | 91.0 | 0.264 | 0.263 |"
    assert row in run.stdout
    text = report.read_text()
    assert "| instruction_following | 200 | 0.515 | 0.515 |" in text  # slot A wins 103 of 200
    assert "| GPT-4/CoT | instruction_following | 100 | 100 | 9 | 0.090 " in text


def test_the_tests_of_the_full_sets_skip_naming_the_folder(clone):
    tests = ["tests/test_shipped_data.py", "tests/storage/test_importers.py", "tests/storage/test_bad_inputs.py"]
    run = in_clone(clone, sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", *tests, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
    skipped = [line for line in run.stdout.splitlines() if line.startswith("SKIPPED")]
    assert skipped and all(str(clone.parent / "shared" / "data") in line for line in skipped), skipped
    assert " passed" in run.stdout.splitlines()[-1]
