"""The spec reference is generated from the spec models and current; every --help shows its defaults
(issue 17, item 3)."""

from __future__ import annotations

import argparse

from pairank.jobs.cli.main import main
from pairank.jobs.cli.parser import parser
from pairank.jobs.specs.job import JobSpec
from pairank.jobs.specs.reference import render, sections
from tests.helpers import ROOT


def test_docs_specs_md_is_what_the_command_writes(tmp_path, capsys):
    assert main(["spec-reference", "--out", str(tmp_path / "specs.md")]) == 0
    written = (tmp_path / "specs.md").read_text()
    assert written == render() == (ROOT / "docs" / "specs.md").read_text(), (
        "docs/specs.md is stale: run `pairank spec-reference --out docs/specs.md`"
    )


def test_every_key_of_every_section_is_in_the_reference():
    text = render()
    keys = 0
    for section in sections():
        for name in section.model.model_fields:
            key = f"{section.path}.{name}" if section.path else name
            assert f"| `{key}` |" in text, key
            keys += 1
    assert keys > len(JobSpec.model_fields) + 60  # the nested sections are there too
    for title in ("`judge` (engine: vllm)", "`judge` (engine: simulated)", "`scheduler` (name: pairs_beam)"):
        assert f"\n## {title}\n" in text, title


def _subparsers(p: argparse.ArgumentParser):
    yield p
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _subparsers(sub)


def test_every_option_with_a_default_shows_it_in_help():
    checked = 0
    for p in _subparsers(parser()):
        text = p.format_help()
        for action in p._actions:
            default = action.default
            if not action.option_strings or any(default is x for x in (None, False, argparse.SUPPRESS)):
                continue
            helped = p._get_formatter()._get_help_string(action) % {"default": default}
            assert "default" in helped, (p.prog, action.option_strings)
            assert helped.split()[-1].rstrip(")") in " ".join(text.split()), (p.prog, action.option_strings)
            checked += 1
    assert checked > 10
