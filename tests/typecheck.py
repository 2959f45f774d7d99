"""``mypy --strict`` over pairank's strictly typed modules: ``python -m tests.typecheck`` (or ``make typecheck``).

The checkout's folders are installed as ``pairank``'s subpackages (``operators/`` is
``pairank.operators``), a mapping mypy cannot follow, so the check runs on a view of the
package: ``build/typecheck/pairank/`` holds symlinks to ``pairank/__init__.py``,
``py.typed`` and the four folders. mypy's settings are ``[tool.mypy]`` in pyproject.toml
(the pydantic plugin; the modules the strict ones import are read for their types, not
checked). Errors are printed with the checkout's paths.
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


def run(root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy --strict on :func:`strict_files`, in the view; its output names the checkout's files."""
    base = view(root)
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--config-file", str(root / "pyproject.toml"), "--strict", *strict_files(root)],
        cwd=base,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    done.stdout = done.stdout.replace("pairank/", "").replace(str(base) + "/", "")
    return done


if __name__ == "__main__":
    result = run()
    print(result.stdout + result.stderr, end="")
    sys.exit(result.returncode)
