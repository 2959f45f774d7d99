"""The docs a newcomer reads: a short README, docs/ whose links all resolve, every command documented
(issue 17, item 3)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pairank.jobs.cli.parser import parser
from tests.helpers import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a Markdown page (headings inside code blocks are not headings)."""
    found, fenced = set(), False
    for line in page.read_text().split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-"))
    return found


def test_the_readme_is_short_and_points_at_every_page_of_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) < 200
    assert "make demo" in readme and "make test" in readme
    for page in PAGES[1:]:
        assert f"(docs/{page.name})" in readme, page.name


def test_the_maintainers_guide_fits_in_12_kb():
    """docs/development.md says how the house is laid out and how to work in it, not what happened: at most 12 KB."""
    assert len((ROOT / "docs" / "development.md").read_bytes()) <= 12 * 1024


def test_every_link_between_the_pages_resolves():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
            if target.startswith(("http://", "https://")):
                continue
            path, _, fragment = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists() or (fragment and file.suffix == ".md" and fragment not in anchors(file)):
                broken.append(f"{page.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_command_is_in_the_command_reference():
    text = (ROOT / "docs" / "cli.md").read_text()
    (commands,) = [a for a in parser()._actions if isinstance(a, argparse._SubParsersAction)]
    for name in commands.choices:
        assert f"pairank {name}" in text or "pairank status|logs|stop" in text and name in "status logs stop", name
