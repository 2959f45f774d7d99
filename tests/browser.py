"""A real headless Chromium for the page tests (marker ``browser``).

Chromium is Debian's ``chromium`` package; ``.ci/run`` installs it. Where it is
missing a test fails (it does not skip) and says how to install it.
"""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

import pytest

INSTALL = "apt-get update && apt-get install -y chromium   (Debian's package, as root; .ci/run does this in CI)"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
WINDOW = "1200,1600"


def chromium() -> str:
    exe = shutil.which("chromium")
    if exe is None:
        pytest.fail(f"headless Chromium is not installed (no `chromium` on PATH); install it with: {INSTALL}")
    return exe


def _run(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    out = subprocess.run(args, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    assert out.returncode == 0, f"{' '.join(args)} exited {out.returncode}:\n{out.stderr[-3000:]}"
    return out


def render(page: Path, work: Path, timeout: float = 180) -> tuple[str, Path]:
    """Load ``page`` from disk in headless Chromium: the rendered DOM, and a screenshot's path."""
    exe = chromium()
    work.mkdir(parents=True, exist_ok=True)
    common = [
        exe,
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        f"--user-data-dir={work / 'profile'}",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--disable-background-networking",
        "--disable-sync",
        "--disable-component-update",
        "--mute-audio",
    ]
    shot = work / "leaderboard.png"
    _run([*common, f"--screenshot={shot}", f"--window-size={WINDOW}", page.resolve().as_uri()], timeout)
    dom = _run([*common, "--dump-dom", page.resolve().as_uri()], timeout).stdout
    return dom, shot


def check_screenshot(shot: Path, min_bytes: int = 20_000) -> None:
    assert shot.is_file(), f"Chromium wrote no screenshot at {shot}"
    data = shot.read_bytes()
    assert data[:8] == PNG_MAGIC, f"{shot} is not a PNG"
    assert len(data) > min_bytes, f"{shot} has {len(data)} bytes: a blank page?"


def check_rows_in_dom(dom: str, rows: list[dict]) -> None:
    """Every row's system name and strength interval are text of the rendered page."""
    from pairank.operators.html_plots import strength_text, winrate_text

    assert "<svg" in dom and "</table>" in dom
    for r in rows:
        assert html.escape(r["system"], quote=False) in dom, f"system {r['system']!r} is not in the rendered page"
        assert strength_text(r) in dom, f"{r['system']} ({r['aspect']}): {strength_text(r)!r} not in the page"
        if r.get("winrate_estimate") is not None:
            assert winrate_text(r) in dom, f"{r['system']} ({r['aspect']}): win rate {winrate_text(r)!r} not in it"
