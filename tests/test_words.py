"""One word, one meaning (issue 25, item 3): "stage" names a pipeline stage only.

A **stage** is a declared pipeline stage (``cluster/executor.py``'s ``Stage``, run as a Ray Data stream or as
tasks); a judging mode has **passes** (``judging_pass`` in code), a run has **steps** (docs/development.md,
"Words"). This test reads every identifier of the code, the tests and the benchmarks (names, arguments,
attributes, keyword arguments, imports, and strings that are identifiers, such as a ``fn_kwargs`` key) and fails
on one that contains "stage" where the allow-list does not expect it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from pairank import SUBPACKAGES
from tests.helpers import ROOT

#: The folders read: pairank's four, its API module, the tests and the benchmarks.
FOLDERS = (*SUBPACKAGES, "pairank", "tests", "bench")
#: Anywhere.
ANYWHERE = frozenset({"*"})
SUBMIT = frozenset({"cluster/ray_jobs.py", "cluster/runtime.py", "jobs/submit.py", "tests/cluster/test_submit.py"})

#: Identifier -> the files where it may appear. Each means a pipeline stage, or a file staged for upload.
ALLOWED: dict[str, frozenset[str]] = {
    # the executor's pipeline stage, imported wherever stages are declared
    "Stage": ANYWHERE,
    # a parameter or variable holding a Stage: in the executor and its tests, render.py's `rendered(ids, stage)`,
    # and the render tasks' stage that test_render.py reads
    "stage": frozenset(
        {
            "cluster/executor.py",
            "tests/cluster/test_executor.py",
            "jobs/judging/render.py",
            "tests/jobs/judging/test_render.py",
        }
    ),
    "test_a_stage_s_own_error_reaches_the_caller_as_itself": frozenset({"tests/cluster/test_executor.py"}),
    "stage_of": frozenset({"tests/cluster/test_executor.py"}),  # makes that test's pipeline stage
    # `pairank submit` stages a spec copy and the package for upload (to stage: to put in place for a later step)
    "STAGED_SPECS": SUBMIT,
    "staged": SUBMIT,
    "staged_dir": SUBMIT,
    "staged_package": SUBMIT,
    "staged_upload": SUBMIT,
    # bench/stream_ceiling.py times the static stream's stages (planning, keys, scoring) one by one
    "stages": frozenset({"bench/stream_ceiling.py"}),
    "stage_cpu": frozenset({"bench/stream_ceiling.py"}),
    "stage_cpu_us_per_comparison": frozenset({"bench/stream_ceiling.py"}),
    "stage_summary": frozenset({"bench/stream_ceiling.py"}),
    # PassProgress.stage: the deprecated alias of judging_pass kept for progress callbacks, and its test
    "test_stage_is_a_deprecated_alias_of_judging_pass": frozenset({"tests/jobs/judging/test_progress.py"}),
}
#: (file, identifier) pairs allowed besides: the deprecated alias, defined and tested.
DEPRECATED = {("jobs/judging/progress.py", "stage"), ("tests/jobs/judging/test_progress.py", "stage")}


def identifiers(tree: ast.AST) -> Iterator[tuple[str, int]]:
    """Every identifier of ``tree`` with its line, except a keyword ``stage=`` whose value is a ``Stage(...)``
    (it hands a pipeline stage to a function that takes one)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id, node.lineno
        elif isinstance(node, ast.Attribute):
            yield node.attr, node.lineno
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node.lineno
        elif isinstance(node, ast.arg):
            yield node.arg, node.lineno
        elif isinstance(node, ast.keyword) and node.arg is not None:
            given = node.value
            hands_a_stage = (
                isinstance(given, ast.Call) and isinstance(given.func, ast.Name) and given.func.id == "Stage"
            )
            if not (node.arg == "stage" and hands_a_stage):
                yield node.arg, node.value.lineno
        elif isinstance(node, ast.ImportFrom) and node.module:
            for part in node.module.split("."):
                yield part, node.lineno
        elif isinstance(node, ast.alias):
            for part in [*node.name.split("."), *([node.asname] if node.asname else [])]:
                yield part, node.lineno
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isidentifier():
            yield node.value, node.lineno


def misused(source: str, where: str) -> list[str]:
    """``where:line: identifier`` for each identifier of ``source`` that contains "stage" and is not allowed there."""
    found = []
    for name, line in identifiers(ast.parse(source)):
        if "stage" not in name.lower() or (where, name) in DEPRECATED:
            continue
        allowed = ALLOWED.get(name, frozenset())
        if allowed is not ANYWHERE and where not in allowed:
            found.append(f"{where}:{line}: {name}")
    return sorted(set(found), key=lambda s: (s.split(":")[0], int(s.split(":")[1]), s))


def sources() -> Iterator[tuple[str, Path]]:
    me = Path(__file__).resolve()
    for folder in FOLDERS:
        for path in sorted((ROOT / folder).rglob("*.py")):
            if path.resolve() != me:
                yield str(path.relative_to(ROOT)), path


def test_stage_names_a_pipeline_stage_only():
    """A judging pass is ``judging_pass`` (``PassProgress``, ``ModeRunner.run(judging_pass, batch)``,
    ``JudgePool.judge(requests, judging_pass)``, ...), a run's step a step: only the executor's stages (and files
    staged for upload) carry the word."""
    found = [f for where, path in sources() for f in misused(path.read_text(encoding="utf-8"), where)]
    assert found == [], (
        'these identifiers contain "stage" but do not name a pipeline stage (cluster/executor.py); a judging mode '
        f"has passes (judging_pass), a run has steps; or add a real pipeline stage to ALLOWED: {found}"
    )


def test_the_allow_list_names_what_is_there():
    """Every allowed identifier still occurs in a file it is allowed in, so the list shrinks as names leave."""
    seen = {(where, name) for where, path in sources() for name, _ in identifiers(ast.parse(path.read_text()))}
    stale = [
        name
        for name, files in ALLOWED.items()
        if not any(n == name and (files is ANYWHERE or where in files) for where, n in seen)
    ]
    assert stale + sorted(DEPRECATED - seen) == []


def test_identifiers_are_names_arguments_attributes_keywords_imports_and_identifier_strings():
    source = "from m import StageA as b\ndef f(a, *, c=1):\n    return g(d=a.e, k='x_y', h='no way')"
    found = sorted({n for n, _ in identifiers(ast.parse(source))})
    assert found == ["StageA", "a", "b", "c", "d", "e", "f", "g", "h", "k", "m", "x_y"]


def test_a_judging_pass_named_stage_is_found_and_a_pipeline_stage_handed_on_is_not():
    pool = "def judge(requests, stage):\n    return forward(requests, fn_kwargs={'stage': stage})"
    assert misused(pool, "cluster/pools/judge_pool.py") == [
        "cluster/pools/judge_pool.py:1: stage",
        "cluster/pools/judge_pool.py:2: stage",
    ]
    progress = "class StageProgress(str):\n    pass"
    assert misused(progress, "jobs/judging/progress.py") == ["jobs/judging/progress.py:1: StageProgress"]
    assert misused("progress(line, stage=kind)", "jobs/x.py") == ["jobs/x.py:1: stage"]
    assert misused("render = partial(rendered, stage=Stage(render_requests, texts, RENDERING))", "jobs/x.py") == []
    render = "def rendered(ids, stage: Stage[Texts]):\n    return stream(ids, stage)"
    assert misused(render, "jobs/judging/render.py") == []
