"""mypy over pairank: ``python -m tests.typecheck`` (or ``make typecheck``) runs two checks.

- ``mypy --strict`` on the strictly typed modules (:data:`STRICT`);
- ``mypy`` (the default, non-strict settings) on the whole package, ``-p pairank``: every module's
  annotations are read and checked, unannotated functions' bodies are not.

The checkout's folders are installed as ``pairank``'s subpackages (``operators/`` is
``pairank.operators``), a mapping mypy cannot follow, so the checks run on a view of the
package: ``build/typecheck/pairank/`` holds symlinks to ``pairank/__init__.py``,
``py.typed`` and the four folders. mypy's settings are ``[tool.mypy]`` in pyproject.toml
(the pydantic plugin; the libraries without type information; for the strict check, the modules
the strict ones import are read for their types, not checked). Each check keeps its own cache
(their settings differ, and one cache would be thrown away at every switch). Errors are printed
with the checkout's paths.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("jobs", "operators", "cluster", "storage")
#: The strictly typed modules, as globs under the checkout: the judging runtime and the run's steps
#: (``jobs/pipeline/``), the executor and the Ray shim, the settings base, the judge engine registry and
#: declarations (every ``*_engine.py``), and the toy engine a test declares outside pairank.
STRICT = (
    "jobs/pipeline/*.py",
    "cluster/executor.py",
    "cluster/ray_shim.py",
    "operators/settings.py",
    "operators/judges/__init__.py",
    "operators/judges/engine.py",
    "operators/judges/*_engine.py",
    "tests/operators/toy_engine.py",
)


def view(root: Path = ROOT) -> Path:
    """``build/typecheck``: ``pairank/`` (its own files and the four folders) and ``tests/``, as symlinks."""
    base = root / "build" / "typecheck"
    links = {
        base / "pairank" / "__init__.py": root / "pairank" / "__init__.py",
        base / "pairank" / "py.typed": root / "pairank" / "py.typed",
        base / "tests": root / "tests",
        **{base / "pairank" / folder: root / folder for folder in FOLDERS},
    }
    for link, target in links.items():
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() and link.resolve() == target.resolve():
            continue
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    return base


def strict_files(root: Path = ROOT) -> list[str]:
    """The files of :data:`STRICT`, relative to the checkout (and so to the view)."""
    found = sorted({p.relative_to(root).as_posix() for pattern in STRICT for p in root.glob(pattern)})
    return [f"pairank/{f}" if not f.startswith("tests/") else f for f in found]


def _mypy(root: Path, cache: str, *args: str) -> subprocess.CompletedProcess[str]:
    """mypy with pyproject's settings and ``args``, in the view; its output names the checkout's files."""
    base = view(root)
    config = ["--config-file", str(root / "pyproject.toml"), "--cache-dir", f".mypy_cache/{cache}"]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *config, *args], cwd=base, capture_output=True, text=True, timeout=1200
    )
    done.stdout = done.stdout.replace("pairank/", "").replace(str(base) + "/", "")
    return done


def run(root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy --strict on :func:`strict_files`."""
    return _mypy(root, "strict", "--strict", *strict_files(root))


def run_package(root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy, non-strict, on the whole package."""
    return _mypy(root, "package", "-p", "pairank")


if __name__ == "__main__":
    failed = False
    for what, check in (("strict modules (--strict)", run), ("the whole package", run_package)):
        result = check()
        print(f"mypy on {what}: " + result.stdout + result.stderr, end="")
        failed = failed or result.returncode != 0
    sys.exit(1 if failed else 0)
