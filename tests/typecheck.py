"""mypy over pairank: ``python -m tests.typecheck`` (or ``make typecheck``), one mypy run with two levels.

- the strictly typed modules (:data:`STRICT`) are checked with every flag of ``mypy --strict``;
- every other module of the package with mypy's default (non-strict) settings: every module's
  annotations are read and checked, unannotated functions' bodies are not.

One run, not two: a run spends most of its time reading what the package imports (Ray's types; the other
libraries are skipped, pyproject.toml says why), and a second run read it all again. ``--strict`` applies to
every module of a run, so the strict modules get its flags one by one, in a section of their own of a configuration
written from pyproject.toml's ``[tool.mypy]`` (:func:`config`); the one flag mypy allows only for
a whole run (redundant casts) is on for all.

The checkout's folders are installed as ``pairank``'s subpackages (``operators/`` is
``pairank.operators``), a mapping mypy cannot follow, so the check runs on a view of the
package: ``build/typecheck/pairank/`` holds symlinks to ``pairank/__init__.py``,
``py.typed`` and the folders of pairank.SUBPACKAGES. Errors are printed with the checkout's paths.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

from pairank import SUBPACKAGES as FOLDERS

ROOT = Path(__file__).resolve().parents[1]
#: The strictly typed modules, as globs under the checkout: the run's steps and its judging (``jobs/pipeline/``,
#: ``jobs/judging/``), the executor and the Ray shim, the settings base, the judge engine registry and the engines'
#: declarations, and the toy engine a test declares outside pairank.
STRICT = (
    "jobs/pipeline/*.py",
    "jobs/judging/*.py",
    "cluster/executor.py",
    "cluster/ray_shim.py",
    "operators/settings.py",
    "judges/__init__.py",
    "judges/engine.py",
    "judges/engines/http.py",
    "judges/engines/replay.py",
    "judges/engines/simulated.py",
    "judges/engines/vllm.py",
    "tests/judges/toy_engine.py",
)
#: ``mypy --strict``'s flags (mypy 2.4), as settings a module's section may hold...
STRICT_PER_MODULE = {
    "disallow_any_generics": True,
    "disallow_subclassing_any": True,
    "disallow_untyped_calls": True,
    "disallow_untyped_defs": True,
    "disallow_incomplete_defs": True,
    "check_untyped_defs": True,
    "disallow_untyped_decorators": True,
    "warn_unused_ignores": True,
    "warn_return_any": True,
    "implicit_reexport": False,
    "strict_equality": True,
    "extra_checks": True,
}
#: ... and the one that mypy takes only for a whole run.
STRICT_GLOBAL = {"warn_redundant_casts": True}


def view(root: Path = ROOT) -> Path:
    """``build/typecheck``: ``pairank/`` (its own files and its folders) and ``tests/``, as symlinks."""
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


def strict_modules(root: Path = ROOT) -> list[str]:
    """The module names of :func:`strict_files` (a package's ``__init__.py`` is the package)."""
    return [f.removesuffix(".py").removesuffix("/__init__").replace("/", ".") for f in strict_files(root)]


def _ini(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, list):
        return ", ".join(map(str, value))
    return str(value)


def config(root: Path = ROOT) -> str:
    """The run's configuration (INI): pyproject.toml's ``[tool.mypy]``, its module sections and
    ``[tool.pydantic-mypy]``, plus a section that gives the strict modules ``--strict``'s flags."""
    tool = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]
    settings = dict(tool["mypy"])
    overrides = settings.pop("overrides", [])
    sections = {"mypy": settings | STRICT_GLOBAL}
    for override in overrides:
        modules = override.pop("module")
        sections["mypy-" + ",".join(modules if isinstance(modules, list) else [modules])] = override
    sections["mypy-" + ",".join(strict_modules(root))] = STRICT_PER_MODULE
    sections["pydantic-mypy"] = tool.get("pydantic-mypy", {})
    lines = []
    for name, values in sections.items():
        lines += [f"[{name}]", *(f"{key} = {_ini(value)}" for key, value in values.items()), ""]
    return "\n".join(lines)


def run(root: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """mypy on the whole package and the toy engine: :data:`STRICT` strictly, the rest with the defaults."""
    base = view(root)
    (base / "mypy.ini").write_text(config(root), encoding="utf-8")
    outside = [f for f in strict_files(root) if not f.startswith("pairank/")]  # the toy engine
    args = ["--config-file", "mypy.ini", "--cache-dir", ".mypy_cache/run", "pairank", *outside]
    done = subprocess.run(
        [sys.executable, "-m", "mypy", *args],
        cwd=base,
        capture_output=True,
        text=True,
        timeout=1200,
    )
    done.stdout = done.stdout.replace("pairank/", "").replace(str(base) + "/", "")
    return done


if __name__ == "__main__":
    result = run()
    print("mypy (the strict modules strictly, the rest with the defaults): " + result.stdout + result.stderr, end="")
    sys.exit(result.returncode)
