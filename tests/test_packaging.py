"""Packaging and the command line as a user meets them."""

from __future__ import annotations

import importlib.metadata
import shutil
import subprocess
import sys

from tests.conftest import ROOT

PACKAGES = ("jobs", "operators", "cluster", "storage")
PAIRANK = [sys.executable, "-m", "pairank.jobs.cli"]


def test_no_other_distribution_provides_pairank_top_level_names():
    owners = importlib.metadata.packages_distributions()
    for name in PACKAGES:
        assert set(owners.get(name, [])) == {"pairank"}, f"top-level `{name}` is provided by {owners.get(name)}"


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


def test_import_of_a_bad_file_names_file_row_and_column(tmp_path):
    src = tmp_path / "summeval"
    src.mkdir()
    good = (ROOT.parent / "shared/data/summeval/summeval.jsonl").read_text().splitlines()[:3]
    good[1] = good[1].replace('"coherence":', '"coherance":')
    (src / "summeval.jsonl").write_text("\n".join(good) + "\n")
    shutil.copy(ROOT.parent / "shared/data/summeval/summeval_systems.json", src)
    out = run("import", "summeval", str(src), str(tmp_path / "out"))
    assert out.returncode == 2
    assert "summeval.jsonl" in out.stderr and "row 1" in out.stderr and "coherence" in out.stderr
