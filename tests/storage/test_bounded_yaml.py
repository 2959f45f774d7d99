"""Specs that cannot hurt (issue 30, item 4): YAML aliases are bounded everywhere pairank reads YAML.

A 624-byte spec whose ``judge.engine_kwargs`` held an alias bomb became a 184 MB manifest; each case here is
refused at once with exit 2, naming the file (or the ``--set`` key), the line and column, and the key, and
nothing is written under the output root. Real parts: ``pairank run`` (the CLI's main) on spec files.
"""

from __future__ import annotations

import shutil
import time

import yaml

from pairank.jobs.cli.main import main
from pairank.jobs.specs.job import load_spec
from pairank.storage.bounded_yaml import MAX_BYTES, MAX_DEPTH, load_yaml
from tests.helpers import PROMPTS, ROOT, spec_for, write_input

#: Nine levels of nine aliases each: 9**9 copies of "lol" once expanded (about 1.5 GB as JSON).
BOMB = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]'] + [
    f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)
]


def run_cli(capsys, *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def spec_text(tmp_path, engine_kwargs: list[str]) -> str:
    """A spec file (text) whose judge has the given lines as its ``engine_kwargs``."""
    base = {
        "name": "bomb",
        "input": str(tmp_path / "input"),
        "output": str(tmp_path / "out"),
        "aspects": ["coherence"],
        "prompts": PROMPTS,
    }
    lines = yaml.safe_dump(base).splitlines() + ["judge:", "  engine: vllm", "  engine_kwargs:"]
    return "\n".join(lines + [f"    {line}" for line in engine_kwargs]) + "\n"


def line_of(path, start: str) -> int:
    """The 1-based number of the first line of ``path`` that begins (after its indent) with ``start``."""
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip().startswith(start))


def test_an_alias_bomb_in_engine_kwargs_is_exit_2_naming_file_line_and_key(tmp_path, capsys):
    path = tmp_path / "bomb.yaml"
    path.write_text(spec_text(tmp_path, BOMB))
    assert len(BOMB[-1]) < 100 and path.stat().st_size < 1000
    started = time.process_time()  # CPU seconds: other processes' load does not count
    code, err = run_cli(capsys, "run", str(path))
    assert code == 2, err
    assert time.process_time() - started < 10
    (line,) = err.splitlines()
    assert line.startswith(f"pairank: error: {path}: line {line_of(path, 'a5:')}, column ")
    assert "(key judge.engine_kwargs.a5." in line and f"expands to over {MAX_BYTES:,} bytes" in line
    assert not (tmp_path / "out").exists()


def test_an_alias_bomb_in_a_set_override_is_exit_2_naming_the_override(tmp_path, capsys):
    path = tmp_path / "spec.yaml"
    path.write_text(spec_text(tmp_path, ["dtype: float32"]))
    flow = "{" + ", ".join(line.replace(": ", ": ", 1) for line in BOMB) + "}"
    code, err = run_cli(capsys, "run", str(path), "--set", f"judge.engine_kwargs={flow}")
    assert code == 2, err
    assert err.startswith("pairank: error: --set judge.engine_kwargs: line 1, column ")
    assert "(key a5." in err and "expands to over" in err
    assert not (tmp_path / "out").exists()


def test_an_alias_inside_the_node_it_names_is_exit_2(tmp_path, capsys):
    path = tmp_path / "loop.yaml"
    path.write_text(spec_text(tmp_path, ["loop: &me [1, *me]"]))
    code, err = run_cli(capsys, "run", str(path))
    assert code == 2, err
    line = line_of(path, "loop:")
    assert f"{path}: line {line}, column 19 (key judge.engine_kwargs.loop.1): the alias *me is inside the node" in err


def test_collections_nested_too_deep_are_exit_2(tmp_path, capsys):
    path = tmp_path / "deep.yaml"
    path.write_text(spec_text(tmp_path, ["deep: " + "[" * (MAX_DEPTH + 10) + "]" * (MAX_DEPTH + 10)]))
    code, err = run_cli(capsys, "run", str(path))
    assert code == 2, err
    assert (
        f"{path}: line {line_of(path, 'deep:')}, column " in err
        and f"collections nested more than {MAX_DEPTH} deep" in err
    )
    assert "(key judge.engine_kwargs.deep.0.0." in err


def test_a_spec_file_over_the_size_limit_is_exit_2(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_text(spec_text(tmp_path, [f"padding: {'x' * MAX_BYTES}"]))
    code, err = run_cli(capsys, "run", str(path))
    assert code == 2, err
    assert err.strip() == (
        f"pairank: error: {path}: {path.stat().st_size:,} bytes; "
        f"pairank reads YAML files of at most {MAX_BYTES:,} bytes"
    )


def test_a_spec_that_is_not_utf8_is_exit_2_naming_line_and_column(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(spec_text(tmp_path, ["label: 'caf\xe9'"]).encode("latin-1"))
    code, err = run_cli(capsys, "run", str(path))
    assert code == 2, err
    line = next(i for i, x in enumerate(path.read_bytes().splitlines(), 1) if x.strip().startswith(b"label:"))
    assert err.strip() == f"pairank: error: {path}: line {line}, column 16: not UTF-8 text (byte 0xe9)"


def test_an_alias_bomb_in_a_domain_yaml_is_exit_2_naming_the_domain_file(tmp_path, capsys, summeval_tables):
    prompts = tmp_path / "prompts" / "summarization"
    shutil.copytree(PROMPTS, prompts)
    domain = yaml.safe_load((prompts / "domain.yaml").read_text())
    (prompts / "domain.yaml").write_text(yaml.safe_dump(domain) + "\n".join(["extra:"] + [f"  {x}" for x in BOMB]))
    folder = write_input(tmp_path / "input", summeval_tables, 1, 3)
    spec = spec_for(
        folder,
        tmp_path / "out",
        name="domain",
        prompts=str(prompts),
        scheduler={"name": "full"},
        judging={"variants": ["v1"], "templates": str(ROOT / "configs/prompts")},
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    code, err = run_cli(capsys, "run", str(path))
    assert code == 2, err
    assert f"pairank: error: domain file {prompts / 'domain.yaml'}: line " in err
    assert "(key extra.a5." in err and "expands to over" in err


def test_aliases_and_merge_keys_within_the_limit_still_load(tmp_path):
    spec = yaml.safe_load((ROOT / "configs/simulated.yaml").read_text())
    spec["judge"]["seed"] = 7
    text = yaml.safe_dump(spec).replace("seed: 7", "seed: &seed 7", 1)
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    assert load_spec(path, ["scheduler.seed=3"]).judge.seed == 7
    path.write_text(text + "report: {bootstrap: 0, seed: *seed}\n")
    assert load_spec(path).report.seed == 7
    merged = load_yaml("base: &b {size: 2}\npool: {<<: *b, batch_size: 4}", "x.yaml")
    assert merged["pool"] == {"size": 2, "batch_size": 4}
