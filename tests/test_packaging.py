"""Packaging and the command line as a user meets them."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from pairank import SUBPACKAGES as PACKAGES
from tests.helpers import ROOT

PAIRANK = [sys.executable, "-m", "pairank.jobs.cli.main"]


def test_no_other_distribution_provides_the_pairank_import_name():
    owners = importlib.metadata.packages_distributions()
    assert set(owners.get("pairank", [])) == {"pairank"}, owners.get("pairank")


def _site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python3*/site-packages"))


@pytest.mark.ray
def test_the_wheel_installs_pairank_alone_and_its_documented_example_runs(tmp_path):
    """Built as a user's pip builds it, installed into a fresh venv: the only import name is ``pairank``
    (plus the console script), and the API example of ``pairank/__init__.py`` runs from outside the checkout."""
    wheels = tmp_path / "wheels"
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("pairank-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert {n.split("/")[0] for n in names} == {"pairank", f"{wheel.name.split('-py3')[0]}.dist-info"}
    for module in (
        "pairank/__init__.py",
        "pairank/jobs/cli/main.py",
        "pairank/jobs/schedulers/pairs.py",
        "pairank/judges/modes.py",
        "pairank/cluster/pools/judge_pool.py",
        "pairank/storage/schemas.py",
        "pairank/jobs/frontier_table.csv",  # the measured frontier `pairank plan --recommend` reads
    ):
        assert module in names
    sources = {p.relative_to(ROOT).as_posix() for folder in PACKAGES for p in (ROOT / folder).rglob("*.py")}
    assert {f"pairank/{s}" for s in sources} <= set(names), "a module of the checkout is missing from the wheel"

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert installed.returncode == 0, installed.stderr
    site = _site_packages(venv)
    importable = {
        p.name.removesuffix(".py")
        for p in site.iterdir()
        if not p.name.endswith((".dist-info", ".pth")) and p.name != "__pycache__"
    }
    assert importable == {"pairank"}, sorted(importable)
    assert (venv / "bin" / "pairank").is_file()
    # pairank's dependencies come from the test venv (a plain path entry: its .pth files, and with them the
    # editable install of this checkout, are not read), so the pairank imported is the wheel's.
    (site / "deps.pth").write_text(str(_site_packages(Path(sys.prefix))) + "\n")
    example = (
        "import doctest, pairank\n"
        f"assert pairank.__file__.startswith({str(site)!r}), pairank.__file__\n"
        "result = doctest.testmod(pairank)\n"
        "assert result.attempted >= 10 and result.failed == 0, result\n"
        "print('example ok', pairank.run.__module__)\n"
    )
    ran = subprocess.run(
        [str(python), "-c", example],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
        env={**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
    )
    assert ran.returncode == 0 and "example ok pairank.jobs.run" in ran.stdout, ran.stdout + ran.stderr[-3000:]
    help_ = subprocess.run([str(venv / "bin" / "pairank"), "--help"], capture_output=True, text=True, timeout=120)
    assert help_.returncode == 0 and "submit" in help_.stdout


def test_console_script_is_installed():
    exe = shutil.which("pairank") or str(ROOT / ".venv/bin/pairank")
    out = subprocess.run([exe, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "import" in out.stdout and "run" in out.stdout


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*PAIRANK, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_run_with_an_unknown_spec_key_exits_2_naming_file_and_allowed_keys(tmp_path):
    spec = tmp_path / "bad.yaml"
    spec.write_text((ROOT / "configs/demo.yaml").read_text() + "\nschedular: {name: full}\n")
    out = run("run", str(spec))
    assert out.returncode == 2
    assert str(spec) in out.stderr and "schedular: unknown key" in out.stderr
    assert "scheduler" in out.stderr.split("allowed keys here:")[1]


def test_run_with_missing_input_says_what_to_do(tmp_path):
    out = run("run", str(ROOT / "configs/demo.yaml"), "--set", f"input={tmp_path}/nothing")
    assert out.returncode == 2
    assert "candidates.parquet: no candidates table" in out.stderr and "pairank import" in out.stderr


def test_import_of_an_unknown_set_lists_the_known_ones(tmp_path):
    out = run("import", "mmlu", str(tmp_path), str(tmp_path / "out"))
    assert out.returncode == 2
    for name in ("summeval", "newsroom", "topicalchat", "hanna", "llmbar"):
        assert name in out.stderr


def test_import_of_a_bad_file_names_file_row_and_column(tmp_path, shared_data):
    src = tmp_path / "summeval"
    src.mkdir()
    good = (shared_data / "summeval/summeval.jsonl").read_text().splitlines()[:3]
    good[1] = good[1].replace('"coherence":', '"coherance":')
    (src / "summeval.jsonl").write_text("\n".join(good) + "\n")
    shutil.copy(shared_data / "summeval/summeval_systems.json", src)
    out = run("import", "summeval", str(src), str(tmp_path / "out"))
    assert out.returncode == 2
    assert "summeval.jsonl" in out.stderr and "row 1" in out.stderr and "coherence" in out.stderr
