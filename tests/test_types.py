"""The whole package passes mypy, the strictly typed modules with every flag of ``mypy --strict``, in one run
(tests/typecheck.py)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.helpers import ROOT
from tests.typecheck import STRICT_GLOBAL, STRICT_PER_MODULE, config, run, strict_files, strict_modules


def test_the_strict_modules_are_found():
    files = strict_files()
    for engine in ("vllm", "http", "replay", "simulated"):
        assert f"pairank/judges/engines/{engine}.py" in files
    assert "pairank/judges/__init__.py" in files and "tests/judges/toy_engine.py" in files
    assert (ROOT / "pairank" / "py.typed").is_file()


def test_the_strict_modules_get_every_flag_of_strict():
    """What ``mypy --strict`` turns on (as this mypy says), each set for the strict modules or the whole run."""
    said = subprocess.run([sys.executable, "-m", "mypy", "--help"], capture_output=True, text=True, check=True).stdout
    block = said.split("--strict ", 1)[1].split("\n  --", 1)[0]
    flags = {f.replace("-", "_") for f in re.findall(r"--([a-z-]+)", re.sub(r"-\n\s+", "-", block))}
    ours = {("no_" + k) if v is False else k for k, v in (STRICT_PER_MODULE | STRICT_GLOBAL).items()}
    assert flags == ours, f"mypy --strict is now {sorted(flags)}"
    section = next(line for line in config().splitlines() if "pairank.judges.engines.vllm" in line)
    assert set(section.strip("[]").removeprefix("mypy-").split(",")) == set(strict_modules())


def test_the_package_passes_mypy_and_the_strict_modules_mypy_strict():
    result = run()
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, result.stdout + result.stderr
