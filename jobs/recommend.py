"""``pairank plan --recommend``: which scheduler, at which budget, reaches a Spearman target.

Two sources, both SIMULATED judges:

* **the measured frontier** (the default): :data:`TABLE`, a small CSV that
  ``bench/frontier.py`` writes with every point of BENCHMARKS.md's frontier. A row
  is one scheduler setting on one set (SummEval, HANNA, TopicalChat, synthetic
  N = 50, 200, 1,000) under one judge fitted to LLMBar's published verdicts: its
  comparisons per context, the share of N(N-1), and the mean and sd over seeds of
  Spearman against the human scores (``human``) and against the full matrix's
  ranking (``full_matrix``). :func:`recommend_from_table` takes the measured judge
  nearest the given one by its signal to noise (``scale / noise``, on a log
  scale), then the set of that judge whose N is nearest on a log scale, and names
  the cheapest measured setting whose mean Spearman reaches the target. A budget
  measured at n is carried to the asked N as the same share of N(N-1).
* **a fresh sweep** (``--simulate``): :func:`recommend_plan` runs the frontier's
  schedulers (:func:`pairank.jobs.frontier.arms`) on simulated contexts of exactly
  this N and judge: slower, but no carrying over.
"""

from __future__ import annotations

import csv
import json
import math
from collections import defaultdict
from pathlib import Path
from typing import Any

from pairank.judges.engines.simulated import SimulatedJudgeSpec
from pairank.judges.engines.simulated_judge import model_of

#: The measured frontier, as bench/frontier.py writes it.
TABLE = Path(__file__).with_name("frontier_table.csv")
#: Column -> (type, what it holds). A table read by plan must have every column.
COLUMNS = {
    "set": (str, "the set the point was measured on"),
    "n": (int, "candidates per context"),
    "judge": (str, "the real judge whose verdicts the simulated judge was fitted to"),
    "scale": (float, "the simulated judge's logit per unit of quality difference"),
    "noise": (float, "the simulated judge's logit noise (sd)"),
    "position_bias": (float, "the simulated judge's slot-A logit"),
    "family": (str, "the curve the point belongs to"),
    "scheduler": (dict, "the spec's scheduler mapping, as JSON"),
    "seeds": (int, "seeds the point is the mean over"),
    "comparisons": (float, "mean ordered comparisons per context"),
    "share": (float, "comparisons / N(N-1)"),
    "human": (float, "mean Spearman against the human scores (quality)"),
    "human_sd": (float, "its standard deviation over seeds"),
    "full_matrix": (float, "mean Spearman against the full matrix's ranking"),
    "full_matrix_sd": (float, "its standard deviation over seeds"),
}
#: The scheduler keys that hold a budget, and the unit they count (ordered comparisons or unordered pairs).
BUDGET_KEYS = {"comparisons": 1, "sampling.budget": 2}


def read_frontier_table(path: str | Path = TABLE) -> list[dict]:
    """The rows of a frontier table, typed; a bad cell names the file, row and column."""
    path = Path(path)
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(
                f"{path}: missing column(s) {', '.join(missing)}; a frontier table has {', '.join(COLUMNS)}"
            )
        rows = []
        for k, raw in enumerate(reader, start=2):  # row 1 is the header
            row = {}
            for col, (kind, what) in COLUMNS.items():
                value = raw[col]
                try:
                    row[col] = json.loads(value) if kind is dict else kind(value)
                    if kind is dict and not (isinstance(row[col], dict) and "name" in row[col]):
                        raise ValueError
                    if kind is float and math.isnan(row[col]) and col not in ("human_sd", "full_matrix_sd"):
                        raise ValueError
                except (ValueError, TypeError):
                    expected = "a JSON object with a name" if kind is dict else f"{kind.__name__}"
                    raise ValueError(
                        f"{path} row {k} column {col}: expected {expected} ({what}), found {value!r}"
                    ) from None
            rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no rows")
    return rows


def _strength(scale: float, noise: float) -> float:
    return math.inf if noise == 0 else scale / noise


def _closest(values, want: float) -> float:
    """The value nearest ``want`` on a log scale (an infinite ``want`` takes the largest)."""
    if math.isinf(want):
        return max(values)
    return min(values, key=lambda v: (abs(math.log(max(v, 1e-9)) - math.log(max(want, 1e-9))), v))


def carried(scheduler: dict, n: int, candidates: int) -> dict:
    """A scheduler setting measured at ``n`` candidates, with its budget as the same share of N(N-1) at ``candidates``.

    >>> carried({"name": "poe", "comparisons": 30}, 16, 32)
    {'name': 'poe', 'comparisons': 124}
    >>> carried({"name": "adaptive_symmetric", "sampling": {"budget": 60}}, 16, 16)
    {'name': 'adaptive_symmetric', 'sampling': {'budget': 60}}
    """
    out = json.loads(json.dumps(scheduler))
    out = {"name": out["name"], **{k: v for k, v in out.items() if k != "name"}}  # the name first, as a spec has it
    ratio = candidates * (candidates - 1) / (n * (n - 1))
    for key, unit in BUDGET_KEYS.items():
        *parents, leaf = key.split(".")
        holder: Any = out
        for part in parents:
            holder = holder.get(part) if isinstance(holder, dict) else None
        if isinstance(holder, dict) and leaf in holder:
            step = 2 if unit == 1 and scheduler["name"] != "random" else 1
            value = max(1, round(holder[leaf] * ratio / step) * step)
            holder[leaf] = min(value, candidates * (candidates - 1) // unit)
    return out


def recommend_from_table(
    judge: SimulatedJudgeSpec,
    *,
    candidates: int,
    target: float,
    metric: str = "human",
    path: str | Path = TABLE,
) -> dict:
    """The cheapest measured setting reaching ``target`` at the nearest measured judge and N (module docstring)."""
    from pairank.jobs.frontier import recommend

    if candidates < 2:
        raise ValueError(f"plan --recommend: expected at least 2 candidates, found {candidates}")
    if metric not in ("human", "full_matrix"):
        raise ValueError(f"plan --recommend: metric is human or full_matrix, found {metric!r}")
    rows = read_frontier_table(path)
    strengths = {_strength(r["scale"], r["noise"]): r["judge"] for r in rows}
    judge_name = strengths[_closest(list(strengths), _strength(judge.scale, judge.noise))]
    mine = [r for r in rows if r["judge"] == judge_name]
    n = int(_closest({r["n"] for r in mine}, candidates))
    mine = [r for r in mine if r["n"] == n]
    frontier: dict[str, list[dict]] = defaultdict(list)
    for r in sorted(mine, key=lambda r: r["comparisons"]):
        frontier[r["family"]].append(
            {
                "label": r["family"],
                "scheduler": r["scheduler"],
                "comparisons": {"mean": r["comparisons"]},
                "share": r["share"],
                "human": {"mean": r["human"], "sd": r["human_sd"]},
                "full_matrix": {"mean": r["full_matrix"], "sd": r["full_matrix_sd"]},
            }
        )
    rec = recommend(dict(frontier), target, metric)
    for pt in rec["options"] + [rec["best"]]:
        pt["at_candidates"] = {
            "scheduler": carried(pt["scheduler"], n, candidates),
            "comparisons": pt["share"] * candidates * (candidates - 1),
        }
    first = mine[0]
    return {
        "simulated": True,
        "source": str(path),
        "measured_at": {
            "set": first["set"],
            "n": n,
            "judge": judge_name,
            "seeds": first["seeds"],
            **{k: first[k] for k in ("scale", "noise", "position_bias")},
        },
        "judge": {"seed": judge.seed, **model_of(judge)},
        "candidates": candidates,
        "target_spearman": target,
        "metric": metric,
        "recommendation": rec,
    }


def render_from_table(result: dict) -> str:
    """The table's recommendation as readable text; the first line says the numbers are simulated."""
    at, rec, n, big_n = (
        result["measured_at"],
        result["recommendation"],
        result["candidates"],
        result["measured_at"]["n"],
    )
    metric = (
        "quality (the human scores; a synthetic set's latent quality)"
        if result["metric"] == "human"
        else "the full matrix's ranking"
    )
    lines = [
        "SIMULATED: every number below comes from a simulated judge, not from a real judge or real data.",
        (
            f"from the measured frontier ({result['source']}): {at['set']} (N = {big_n}), simulated judge fitted to "
            f"{at['judge']} (scale {at['scale']:g}, noise {at['noise']:g}, position bias {at['position_bias']:+g}; "
            f"the nearest to scale/noise {result['judge']['scale']:g}/{result['judge']['noise']:g}), "
            f"{at['seeds']} seeds; target mean Spearman {result['target_spearman']:g} vs {metric}"
        ),
        "",
    ]
    choice = rec["choice"]
    if choice is None:
        best = rec["best"]
        lines.append(
            f"no measured scheduler reaches {result['target_spearman']:g}; the best measured is {best['label']} "
            f"({json.dumps(best['at_candidates']['scheduler'])}) at {best[result['metric']]['mean']:.3f}"
        )
    else:
        lines.append(
            f"recommended: scheduler: {json.dumps(choice['at_candidates']['scheduler'])}  ->  about "
            f"{choice['at_candidates']['comparisons']:.0f} comparisons per context at N = {n} "
            f"({choice['share']:.1%} of the full matrix), Spearman {choice[result['metric']]['mean']:.3f} +- "
            f"{choice[result['metric']]['sd']:.3f} (sd over seeds) at N = {big_n}"
        )
    if n != big_n:
        lines.append(f"(measured at N = {big_n}; budgets carried to N = {n} as the same share of N(N-1))")
    lines += ["", f"{'scheduler':<32} {'cheapest setting reaching the target':<56} {'share':>7} {'Spearman':>9}"]
    for opt in rec["options"]:
        rest = {k: v for k, v in opt["at_candidates"]["scheduler"].items() if k != "name"}
        lines.append(
            f"{opt['family']:<32} {json.dumps(rest) if rest else '-':<56} {opt['share']:>7.2%} "
            f"{opt[result['metric']]['mean']:>9.3f}"
        )
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# a fresh sweep

#: Candidate-pairs per seed the fresh sweep simulates by default (contexts = this // N, at least 1).
RECOMMEND_WORK = 2000


def recommend_plan(
    judge: SimulatedJudgeSpec,
    *,
    candidates: int,
    target: float,
    contexts: int | None = None,
    seeds: int = 3,
    verdict: str = "soft",
) -> dict:
    """The frontier swept at exactly this N and judge, and the cheapest setting reaching ``target``.

    The schedulers and budgets of :func:`pairank.jobs.frontier.arms` (its caps on
    the costly machines at large N included) on ``contexts`` simulated contexts
    per seed; Spearman against the simulated latent quality.
    """
    from pairank.jobs.frontier import arms, curves, recommend, sweep, synthetic_world

    if candidates < 2:
        raise ValueError(f"plan --recommend: expected at least 2 candidates, found {candidates}")
    if seeds < 1:
        raise ValueError(f"plan --recommend: expected at least 1 seed, found {seeds}")
    contexts = contexts or max(1, RECOMMEND_WORK // candidates)
    model = model_of(judge)
    records = []
    for seed in range(judge.seed, judge.seed + seeds):
        records += sweep(synthetic_world(candidates, contexts, seed), model, [seed], arms(candidates), verdict)
    frontier = curves(records)
    return {
        "simulated": True,
        "judge": {"seed": judge.seed, **model},
        "candidates": candidates,
        "contexts": contexts,
        "seeds": seeds,
        "verdict": verdict,
        "target_spearman": target,
        "recommendation": recommend(frontier, target),
        "frontier": frontier,
    }


def render_recommendation(result: dict) -> str:
    """The fresh sweep's recommendation as readable text; the first line says the numbers are simulated."""
    j, rec, n = result["judge"], result["recommendation"], result["candidates"]
    lines = [
        "SIMULATED: every number below comes from a simulated judge, not from a real judge or real data.",
        (
            f"judge model: scale {j['scale']:g}, noise {j['noise']:.3g}, position bias {j['position_bias']:+.3g}, "
            f"intransitivity {j['intransitivity']:.3g}; {n} candidates, {result['contexts']} contexts x "
            f"{result['seeds']} seeds; target mean Spearman {result['target_spearman']:g} vs latent quality"
        ),
        "",
    ]
    choice = rec["choice"]
    if choice is None:
        best = rec["best"]
        lines.append(
            f"no scheduler reaches {result['target_spearman']:g}; the best seen is {best['label']} at "
            f"{best['human']['mean']:.3f} with {best['comparisons']['mean']:.0f} comparisons per context"
        )
    else:
        lines.append(
            f"recommended: scheduler: {json.dumps(choice['scheduler'])}  ->  {choice['comparisons']['mean']:.0f} "
            f"comparisons per context ({choice['comparisons']['mean'] / (n * (n - 1)):.1%} of the full matrix), "
            f"Spearman {choice['human']['mean']:.3f} +- {choice['human']['sd']:.3f} (sd over seeds)"
        )
    lines += ["", f"{'scheduler':<32} {'cheapest setting reaching the target':<56} {'comparisons':>11} {'Spearman':>9}"]
    for opt in rec["options"]:
        rest = {k: v for k, v in opt["scheduler"].items() if k != "name"}
        lines.append(
            f"{opt['family']:<32} {json.dumps(rest) if rest else '-':<56} {opt['comparisons']['mean']:>11.0f} "
            f"{opt['human']['mean']:>9.3f}"
        )
    missing = sorted(set(result["frontier"]) - {opt["family"] for opt in rec["options"]})
    if missing:
        lines.append(f"(not reaching the target at any budget tried: {', '.join(missing)})")
    return "\n".join(lines)
