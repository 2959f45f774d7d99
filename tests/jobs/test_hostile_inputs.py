"""Inputs and paths a chaos run found accepted or told badly (issue 30, items 4, 5 and 7): each is exit 2 with a
message naming the file, row and column, or the key.

Real parts: ``pairank`` (the CLI's main) on real spec files and Parquet inputs; the session's SeaweedFS server
for the storage URIs; the session's local Ray where a task reads the candidates.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pytest
import yaml

from pairank.jobs.cli.main import main
from pairank.jobs.schedulers import REGISTRY
from pairank.storage.fs import Location
from tests.helpers import PROMPTS, ROOT, spec_for, write_input

#: Settings a scheduler needs besides its name.
REQUIRED = {
    "random": {"comparisons": 2},
    "no_repeat": {"comparisons": 2},
    "symmetric": {"comparisons": 2},
    "one_vs_n": {"baseline": "M0"},
}


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def spec_file(tmp_path, data: dict) -> str:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


# -- storage URIs without a bucket (item 4) ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("output", "s3://"),
        ("output", "s3:///runs"),
        ("input", "s3://"),
        ("prompts", "s3://"),
        ("judge.quality", "s3://"),
    ],
)
def test_a_storage_uri_without_a_bucket_in_a_spec_is_exit_2_naming_the_key(s3_server, tmp_path, capsys, key, value):
    data = spec_for(Location.of(str(tmp_path / "input")), tmp_path / "out", name="nobucket")
    section, _, field = key.rpartition(".")
    (data[section] if section else data)[field] = value
    path = spec_file(tmp_path, data)
    before = {b["Name"] for b in s3_server.list_buckets()["Buckets"]}
    code, err = run_cli(capsys, "run", path)
    assert code == 2, err
    assert err.strip() == (
        f"pairank: error: {path}: invalid job spec\n  {key}: {value!r} names no bucket; "
        "expected s3://bucket or s3://bucket/prefix"
    )
    assert {b["Name"] for b in s3_server.list_buckets()["Buckets"]} == before  # no bucket `runs`, `leases`, ...


def test_a_set_override_without_a_bucket_is_exit_2_naming_the_key(s3_server, tmp_path, capsys):
    path = spec_file(tmp_path, spec_for(Location.of(str(tmp_path / "input")), "s3://pairank/fine", name="x"))
    code, err = run_cli(capsys, "run", path, "--set", "output=s3://")
    assert code == 2 and "  output: 's3://' names no bucket" in err, err


@pytest.mark.parametrize(
    "args",
    [
        ["leaderboard", "--root", "s3://"],
        ["store", "verify", "--root", "s3://"],
        ["winrate", "--input", "s3://", "--baseline", "M0"],
    ],
)
def test_a_storage_uri_without_a_bucket_on_the_command_line_is_exit_2(s3_server, capsys, args):
    before = {b["Name"] for b in s3_server.list_buckets()["Buckets"]}
    code, err = run_cli(capsys, *args)
    assert code == 2, err
    assert err.strip() == "pairank: error: 's3://' names no bucket; expected s3://bucket or s3://bucket/prefix"
    assert {b["Name"] for b in s3_server.list_buckets()["Buckets"]} == before


# -- empty candidates, whatever the scheduler (item 5) ------------------------------------------------------------


@pytest.mark.parametrize("scheduler", [*REGISTRY, "nightly"])
def test_an_empty_candidates_table_is_exit_2_naming_the_file_for_every_scheduler(
    tmp_path, capsys, summeval_tables, scheduler
):
    folder = tmp_path / "input" / ("night-1" if scheduler == "nightly" else "")
    Location.of(str(folder)).join("candidates.parquet").write_parquet(summeval_tables[0].slice(0, 0))
    data = spec_for(Location.of(str(tmp_path / "input")), tmp_path / "out", name="empty")
    if scheduler == "nightly":
        data.update(scheduler={"name": "pairs_anchors"}, nightly={"night": "2026-11-21"})
    else:
        data["scheduler"] = {"name": scheduler, **REQUIRED.get(scheduler, {})}
    code, err = run_cli(capsys, "run", spec_file(tmp_path, data))
    assert code == 2, err
    uri = Location.of(str(folder)).join("candidates.parquet").uri
    assert err.strip() == (
        f"pairank: error: column `candidate_id` in {uri}: expected at least one candidate, found an empty table"
    )


# -- bytes that are not UTF-8 (item 5) ----------------------------------------------------------------------------


def bad_text_input(folder, summeval_tables, row: int) -> tuple[str, bytes]:
    """An input of 2 contexts x 3 candidates whose candidate text at ``row`` has a byte 0xff at byte 10: the
    candidates' file and that text."""
    loc = write_input(folder, summeval_tables, 2, 3)
    cand = loc.join("candidates.parquet").read_parquet()
    texts = [t.encode() for t in cand.column("text").to_pylist()]
    texts[row] = texts[row][:10] + b"\xff" + texts[row][10:]
    bad = pa.array(texts, pa.binary()).view(pa.string())
    loc.join("candidates.parquet").write_parquet(cand.set_column(cand.schema.get_field_index("text"), "text", bad))
    return loc.join("candidates.parquet").uri, texts[row]


@pytest.mark.parametrize("scheduler", ["full", "pairs_greedy"])  # texts read in a Ray task, and on the driver
def test_a_text_that_is_not_utf8_is_exit_2_naming_file_row_and_column(
    ray_local, tmp_path, capsys, summeval_tables, scheduler
):
    uri, text = bad_text_input(tmp_path / "input", summeval_tables, 4)
    data = spec_for(Location.of(str(tmp_path / "input")), tmp_path / "out", name="utf8", scheduler={"name": scheduler})
    code, err = run_cli(capsys, "run", spec_file(tmp_path, data))
    assert code == 2, err
    (said,) = [line for line in err.splitlines() if line.startswith("pairank: error: ")]
    assert said == (
        f"pairank: error: column `text` in {uri} row 4: expected UTF-8 text, found byte 0xff at byte 10 of "
        f"{text[:30]!r}"
    )


def test_a_prompt_template_that_is_not_utf8_is_exit_2_naming_line_and_column(tmp_path, capsys, summeval_tables):
    prompts = tmp_path / "prompts"
    shutil.copytree(PROMPTS, prompts)
    template = prompts / "coherence.txt"
    template.write_bytes(template.read_bytes() + b"\nScore: \xfe\n")
    lines = template.read_bytes().count(b"\n")
    folder = write_input(tmp_path / "input", summeval_tables, 1, 3)
    data = spec_for(folder, tmp_path / "out", name="prompt", prompts=str(prompts), scheduler={"name": "full"})
    code, err = run_cli(capsys, "run", spec_file(tmp_path, data))
    assert code == 2, err
    assert (
        err.strip() == f"pairank: error: prompt template {template}: line {lines}, column 8: not UTF-8 text (byte 0xfe)"
    )


# -- a leaderboard root that is a file (item 7) -------------------------------------------------------------------


def test_a_leaderboard_root_that_is_a_file_is_exit_2_naming_it_a_file(tmp_path, capsys):
    root = tmp_path / "store"
    root.write_text("not a folder")
    code, err = run_cli(capsys, "leaderboard", "--root", str(root))
    assert code == 2, err
    assert err.strip() == (
        f"pairank: error: leaderboard root: {root} is a file; expected a folder (local or s3://) to hold the runs"
    )
    code, err = run_cli(capsys, "leaderboard", "--root", str(root), "--nightly", "n", "--as-of", "1")
    assert code == 2 and f"leaderboard root: {root} is a file" in err, err
    assert root.read_text() == "not a folder"


def test_the_shipped_specs_still_load():
    from pairank.jobs.specs.job import load_spec

    for path in sorted((ROOT / "configs").glob("*.yaml")):
        assert load_spec(path).name
