"""The guard of the test tiers: while a test runs, nothing under the pytest process starts what the test's markers
(``ray``, ``s3``, ``engine``, ``browser``) do not allow; a test with none of them, the fast tier, starts nothing.

``tests/conftest.py`` turns it on for the session: in the pytest process by calling :func:`watch`, and in every
process started from it (Ray's workers and a test's ``pairank run`` alike) through the environment: this folder
goes first on ``PYTHONPATH``, so Python imports this module at start-up as ``sitecustomize``, and
``PAIRANK_TEST_GUARD`` names the guard's folder. There, ``allows`` lists the running test's markers (no file: no
test is running, nothing is refused), and each refusal is added to ``refused.log``. A refused start raises in the
process that tried it and, through that file, fails the test with what was started and the marker it needs, even
when the process that tried swallowed the error.

What counts as a start: running Ray's ``gcs_server`` or ``raylet`` (``ray.init`` of a local Ray, ``ray start``),
SeaweedFS's ``weed``, Chromium, or importing ``vllm`` (the engine; in the pytest process only while vLLM is not
imported yet). Standard library only: it runs in every Python process of the session.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ENV = "PAIRANK_TEST_GUARD"
#: Executables started only by tests with the marker named.
PROGRAMS = {
    "gcs_server": "ray",
    "raylet": "ray",
    "weed": "s3",
    "chromium": "browser",
    "chromium-browser": "browser",
    "chrome": "browser",
}
#: Modules imported only by tests with the marker named.
MODULES = {"vllm": "engine"}

#: The guard's folder in this process (None: off).
_folder: list[Path | None] = [None]


class StartRefused(RuntimeError):
    """A test tried to start something its markers do not allow."""


def allows(folder: Path) -> set[str] | None:
    """The running test's markers; None when no test is running."""
    try:
        return set(filter(None, (folder / "allows").read_text().split(",")))
    except FileNotFoundError:
        return None


def check(what: str, marker: str) -> None:
    """Refuse ``what`` unless the running test has ``marker``."""
    folder = _folder[0]
    if folder is None:
        return
    markers = allows(folder)
    if markers is None or marker in markers:
        return
    message = f"{what} (pid {os.getpid()}) in a test not marked `{marker}`: mark it `{marker}`"
    with open(folder / "refused.log", "a", encoding="utf-8") as out:
        out.write(message + "\n")
    raise StartRefused(message)


def _program(args) -> str:
    first = args if isinstance(args, (str, bytes, os.PathLike)) else (list(args) or [""])[0]
    first = os.fsdecode(first).strip()
    return os.path.basename(first.split()[0]) if first else ""


_popen_init = subprocess.Popen.__init__


def _guarded_popen_init(self, args, *rest, **kwargs):
    name = _program(kwargs.get("executable") or args)
    if name in PROGRAMS:
        check(f"started {name}", PROGRAMS[name])
    _popen_init(self, args, *rest, **kwargs)


class _ModuleBlocker:
    """A meta path finder that refuses :data:`MODULES` to tests without their marker."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        marker = MODULES.get(name.partition(".")[0])
        if marker:
            check(f"imported {name}", marker)
        return None


def watch(folder: Path | str) -> None:
    """Guard this process with the guard's ``folder``."""
    _folder[0] = Path(folder)
    subprocess.Popen.__init__ = _guarded_popen_init
    if not any(isinstance(f, _ModuleBlocker) for f in sys.meta_path):
        sys.meta_path.insert(0, _ModuleBlocker())


if os.environ.get(ENV):
    watch(os.environ[ENV])
