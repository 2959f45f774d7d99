"""The strictly typed modules pass ``mypy --strict``, and the whole package passes ``mypy`` (tests/typecheck.py)."""

from __future__ import annotations

from tests.helpers import ROOT
from tests.typecheck import run, run_package, strict_files


def test_the_strict_modules_are_found():
    files = strict_files()
    for engine in ("vllm", "http", "replay", "simulated"):
        assert f"pairank/operators/judges/{engine}_engine.py" in files
    assert "pairank/operators/judges/__init__.py" in files and "tests/operators/toy_engine.py" in files
    assert (ROOT / "pairank" / "py.typed").is_file()


def test_the_engines_and_their_registry_pass_mypy_strict():
    result = run()
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, result.stdout + result.stderr


def test_the_whole_package_passes_mypy():
    result = run_package()
    assert result.returncode == 0 and "Success: no issues found" in result.stdout, result.stdout + result.stderr
