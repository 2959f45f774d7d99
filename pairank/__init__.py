"""pairank: rank LLM outputs by asking a judge "which of these two is better?", at cluster scale.

The one import name. Its subpackages are the repository's folders (:data:`SUBPACKAGES`):
:mod:`pairank.storage` (schemas, object storage, the judgment store),
:mod:`pairank.operators` (statistics on Arrow tables: rankings, calibration, win rates, leaderboards, reports),
:mod:`pairank.judges` (the judge engines, judging modes, prompts and verdict parsing),
:mod:`pairank.cluster` (Ray, actor pools, submission) and
:mod:`pairank.jobs` (specs, schedulers, the driver, the CLI). This module re-exports the
small, stable API a program needs:

- :func:`load_spec` (a YAML file, ``--set``-style overrides) and :func:`parse_spec`
  (a mapping) give a validated :class:`JobSpec`;
- :func:`run` runs it (local Ray unless the spec names a cluster) and returns a
  :class:`RunResult` (counts and the run's layout under the output root); the jobs run inside
  ``with warm_pools():`` share their judge engines instead of starting one each
  (:mod:`pairank.cluster.pools.warm`);
- :class:`Judge` is the engine interface (request rows in, judgment rows out);
  :data:`ENGINES` and :data:`SCHEDULERS` are the registries of judge engines and schedulers
  by the names a spec uses; an :class:`Engine` declares a judge engine (its
  :class:`JudgeSettings` model, builder and hooks) and :func:`register_engine` adds it;
- :func:`bradley_terry` and :func:`style_controlled` take a table of battles (``model_a``,
  ``model_b``, ``winner``, optional ``context`` and style columns) and return a
  :class:`BattleBoard`: scores, intervals (their kind stated) and bootstrap replicates;
  :func:`length_controlled` gives each system's raw and length-controlled win rate against a
  baseline (:mod:`pairank.operators.battles`).

A run on the SIMULATED judge (no model needed), two texts of one context, both slot
orders::

    >>> import pathlib, tempfile
    >>> import pyarrow as pa, pyarrow.parquet as pq
    >>> import pairank
    >>> root = pathlib.Path(tempfile.mkdtemp())
    >>> (root / "prompts").mkdir()
    >>> _ = (root / "prompts" / "quality.txt").write_text(
    ...     "Text: {context}\\nA: {candidate_a}\\nB: {candidate_b}\\nWhich answer is better? Answer:")
    >>> (root / "input").mkdir()
    >>> pq.write_table(pa.table({"context_id": ["q1", "q1"], "context": ["2+2?", "2+2?"],
    ...     "candidate_id": ["q1-x", "q1-y"], "system": ["x", "y"], "text": ["4", "5"]}),
    ...     root / "input" / "candidates.parquet")
    >>> spec = pairank.parse_spec({"name": "example", "input": str(root / "input"),
    ...     "output": str(root / "store"), "aspects": ["quality"], "prompts": str(root / "prompts"),
    ...     "judge": {"engine": "simulated"}, "scheduler": {"name": "full"},
    ...     "cluster": {"num_cpus": 1}}, "example")
    >>> result = pairank.run(spec, progress=lambda message: None)
    >>> result.requests, result.judged, result.errors
    (2, 2, 0)
    >>> sorted(pairank.SCHEDULERS)[:3], sorted(pairank.ENGINES)
    (['adaptive_symmetric', 'board', 'full'], ['http', 'replay', 'simulated', 'vllm'])

Names are imported on first use, so ``import pairank`` starts neither Ray nor an engine.
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

#: The checkout's folders, each installed as ``pairank.<folder>``, lowest layer first: a folder imports only
#: folders before it, and cluster/ only storage/ (tests/test_structure.py). The package's one list of them.
SUBPACKAGES = ("storage", "operators", "judges", "cluster", "jobs")

#: public name -> (module, attribute)
_API = {
    "load_spec": ("pairank.jobs.specs.job", "load_spec"),
    "parse_spec": ("pairank.jobs.specs.job", "parse_spec"),
    "JobSpec": ("pairank.jobs.specs.job", "JobSpec"),
    "SpecError": ("pairank.jobs.specs.job", "SpecError"),
    "run": ("pairank.jobs.run", "run"),
    "RunResult": ("pairank.jobs.run", "RunResult"),
    "warm_pools": ("pairank.cluster.pools.warm", "warm_pools"),
    "Judge": ("pairank.judges.interface", "Judge"),
    "ENGINES": ("pairank.judges", "ENGINES"),
    "Engine": ("pairank.judges.engine", "Engine"),
    "JudgeSettings": ("pairank.judges.engine", "JudgeSettings"),
    "register_engine": ("pairank.judges", "register"),
    "SCHEDULERS": ("pairank.jobs.schedulers", "REGISTRY"),
    "bradley_terry": ("pairank.operators.battles", "bradley_terry"),
    "style_controlled": ("pairank.operators.battles", "style_controlled"),
    "length_controlled": ("pairank.operators.battles", "length_controlled"),
    "BattleBoard": ("pairank.operators.battles", "BattleBoard"),
}

__all__ = sorted(_API)


def __getattr__(name: str):
    try:
        module, attribute = _API[name]
    except KeyError:
        raise AttributeError(f"module 'pairank' has no attribute {name!r}; its API: {', '.join(__all__)}") from None
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
