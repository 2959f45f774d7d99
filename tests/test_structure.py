"""The shape of the package: one import name, files of a readable size, no import cycle."""

from __future__ import annotations

import ast
from pathlib import Path

from pairank import SUBPACKAGES as LAYERS
from tests.helpers import ROOT

#: The checkout's folders and the subpackage each is installed as.
SUBPACKAGES = {folder: f"pairank.{folder}" for folder in LAYERS}
MAX_LINES = 600


def modules() -> dict[str, Path]:
    """Every module of pairank by its import name."""
    found = {"pairank": ROOT / "pairank" / "__init__.py"}
    for folder, package in SUBPACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def imported(path: Path, known: set[str]) -> set[str]:
    """The pairank modules ``path`` imports anywhere (module level or inside a function)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("pairank"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                out.add(full if full in known else node.module)
    return out & known


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module, or a module importing itself (Tarjan).

    >>> cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}})
    [['a', 'b']]
    >>> cycles({"a": {"b"}, "b": set()})
    []
    """
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_module_of_the_folders_is_longer_than_600_lines():
    long = {}
    for folder in SUBPACKAGES:
        for path in (ROOT / folder).rglob("*.py"):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                long[str(path.relative_to(ROOT))] = n
    assert long == {}, f"split these into modules of at most {MAX_LINES} lines: {long}"


def test_no_import_cycle_among_pairank_modules():
    known = modules()
    graph = {name: imported(path, set(known)) - {name} for name, path in known.items()}
    assert len(graph) > 60 and graph["pairank.jobs.run"]  # the walk found the package and its edges
    assert cycles(graph) == []


def test_a_cycle_is_found_when_there_is_one():
    known = modules()
    graph = {name: imported(path, set(known)) - {name} for name, path in known.items()}
    graph["pairank.storage.schemas"] = graph["pairank.storage.schemas"] | {"pairank.jobs.run"}
    assert any("pairank.jobs.run" in c and "pairank.storage.schemas" in c for c in cycles(graph))


def test_placement_knows_nothing_of_judges_or_specs():
    """cluster/ imports nothing from jobs/ or operators/: it receives what to run as a factory."""
    known = modules()
    for name, path in known.items():
        if name.startswith("pairank.cluster"):
            bad = {m for m in imported(path, set(known)) if m.startswith(("pairank.jobs", "pairank.operators"))}
            assert bad == set(), f"{path.relative_to(ROOT)} imports {sorted(bad)}"


def test_tests_share_helpers_through_helper_modules_only():
    """No test module imports from conftest.py or from another test module."""
    bad = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tests."):
                last = node.module.rsplit(".", 1)[-1]
                if last == "conftest" or last.startswith("test_"):
                    bad.append(f"{path.relative_to(ROOT)}: from {node.module} import ...")
    assert bad == []


def test_nothing_imports_the_folders_by_their_bare_names():
    """``pairank.jobs``, never ``jobs``: in code, docstring examples, tests and benchmarks (a bare name works only
    from the checkout's root, by accident, as a second copy of the module)."""
    import re

    bare = re.compile(rf"^\s*(>>> |\.\.\. )?(from|import) ({'|'.join(LAYERS)})\b")
    found = []
    for folder in (*SUBPACKAGES, "pairank", "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if bare.match(line):
                    found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert found == []


def test_only_cluster_imports_ray():
    """Ray is the executor's business: jobs/, operators/ and storage/ declare what runs, cluster/ runs it."""
    bad = []
    for folder in (*(f for f in LAYERS if f != "cluster"), "pairank"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0:
                    names = [node.module or ""]
                if any(n == "ray" or n.startswith("ray.") for n in names):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert bad == [], f"only cluster/ imports ray; found it in {bad}"


#: What the job's Ray tasks and actors import (a fresh worker process each, so every import is paid per process):
#: the planning, rendering and block-scoring tasks, the judge actors (the pool's factory unpickles the spec).
WORKER_MODULES = (
    "pairank.jobs.judging.streamed",
    "pairank.jobs.judging.render",
    "pairank.jobs.judging.block_scoring",
    "pairank.cluster.pools.judge_actor",
    "pairank.jobs.specs.job",
)


def test_what_ray_workers_import_leaves_out_scipy_stats_and_optimize():
    """scipy.stats and scipy.optimize cost about 0.4 CPU s per process to import; the workers' modules import them
    where they are used, which no task or actor of a run reaches (the report's statistics run in the driver)."""
    import subprocess
    import sys

    code = f"import sys; [__import__(m) for m in {WORKER_MODULES!r}]; print(sorted(m for m in sys.modules if "
    code += "m in ('scipy.stats', 'scipy.optimize')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]", f"a worker's modules import {out.strip()}"


#: What each folder may import besides itself: the folders before it in :data:`pairank.SUBPACKAGES`, except that
#: cluster/ runs what it is handed (a factory) and so knows only storage/.
MAY_IMPORT = {folder: set(LAYERS[: LAYERS.index(folder)]) if folder != "cluster" else {"storage"} for folder in LAYERS}


def test_each_folder_imports_only_the_layers_below_it():
    """storage/ -> operators/ -> judges/ -> jobs/, and cluster/ beside them on storage/: no import climbs back
    (operators/ is statistics on tables and knows no judge; judges/ knows no Ray, pool or spec)."""
    known = modules()
    climbs = []
    for name, path in known.items():
        folder = name.split(".")[1] if name.count(".") else None
        if folder is None:
            continue
        for target in imported(path, set(known)):
            other = target.split(".")[1] if target.count(".") else None
            if other is not None and other != folder and other not in MAY_IMPORT[folder]:
                climbs.append(f"{path.relative_to(ROOT)} imports {target}")
    assert climbs == []
