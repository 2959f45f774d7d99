"""Every docstring example of the installed ``pairank`` package, run as a test.

pytest's ``--doctest-modules`` would import the checkout's folders under their
folder names (``jobs.spec``), a second copy of each module beside ``pairank.jobs.specs.job``;
this collects the examples from the modules as the package imports them.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

from pairank import SUBPACKAGES

#: Modules whose import needs an optional engine; their examples need it too.
OPTIONAL = {"pairank.judges.engines.vllm_judge"}
#: Examples that run a job (module-level ones, named as their module): on the session's Ray (``ray_local``), never
#: on a local Ray of their own, which would stay up with other CPUs for the tests after it.
ON_RAY = {"pairank"}


def _modules() -> list[str]:
    names = ["pairank"]
    for sub in SUBPACKAGES:
        package = importlib.import_module(f"pairank.{sub}")
        names.append(package.__name__)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}.")]
    return sorted(set(names))


def _examples() -> list[tuple[str, str]]:
    found = []
    finder = doctest.DocTestFinder()
    for name in _modules():
        if name in OPTIONAL:
            continue
        module = importlib.import_module(name)
        for test in finder.find(module, name):
            if test.examples and test.name.split(".")[: len(name.split("."))] == name.split("."):
                found.append((name, test.name))
    return found


EXAMPLES = _examples()


def test_every_subpackage_module_is_walked():
    names = _modules()
    for module in (
        "pairank.jobs.specs.job",
        "pairank.operators.scores",
        "pairank.storage.schemas",
        "pairank.cluster.ray_jobs",
    ):
        assert module in names
    assert len(EXAMPLES) > 50, EXAMPLES


@pytest.mark.parametrize(
    ("module", "name"),
    [e for e in EXAMPLES if e[1] not in ON_RAY],
    ids=[name for _, name in EXAMPLES if name not in ON_RAY],
)
def test_docstring_example(module: str, name: str) -> None:
    run_example(module, name)


@pytest.mark.parametrize("name", sorted(ON_RAY))
def test_docstring_example_on_the_sessions_ray(name: str, ray_local) -> None:
    run_example(name, name)


def run_example(module: str, name: str) -> None:
    test = next(t for t in doctest.DocTestFinder().find(importlib.import_module(module), module) if t.name == name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    out: list[str] = []
    runner.run(test, out=out.append)
    assert runner.failures == 0, "".join(out)
