"""Plan a run on a SIMULATED judge: how many comparisons reach a target Spearman.

The judge is :mod:`pairank.judges.engines.simulated_judge` (latent quality, noise, position
bias, intransitivity), given by its coefficients or measured from a judgments
table with :func:`measure_judge`. For each scheduler the plan simulates many
contexts (no Ray, no tables) and reports the comparisons per context it uses and
the mean over contexts of the Spearman correlation between its ranking and the
latent quality, with a standard error (sd / sqrt(contexts)).

* Static schedulers (:data:`pairank.jobs.schedulers.static.SCHEDULERS`) rank by win ratios
  (soft by default: c = p_a; a candidate never compared scores 0.5). A budgeted
  one gets the smallest budget R whose mean Spearman reaches the target, by
  bisection over R (the schedules of a context share its seed, so the curve is
  close to monotone); ``full`` has one point.
* Adaptive machines (every entry of :data:`pairank.jobs.ADAPTIVE`, read when
  the plan runs) run with their default options, and also with the other
  ``symmetric`` setting where they take one (a machine that refuses it is
  skipped); they use what they use. A slow machine may run only the first
  contexts within a time budget (:func:`run_adaptive`); its entry says how many.

A context whose ranking has no spread counts as Spearman 0. The numbers are
SIMULATED: they say how schedulers compare under the model, not how a real
judge will do.

``pairank plan --recommend`` reads the measured frontier instead
(:mod:`pairank.jobs.recommend`).
"""

from __future__ import annotations

import inspect
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.stats import rankdata

from pairank.jobs.schedulers import ADAPTIVE, rng, run_lockstep
from pairank.jobs.schedulers.static import SCHEDULERS
from pairank.judges.engines.simulated import SimulatedJudgeSpec
from pairank.judges.engines.simulated_judge import model_of, simulate_matrices
from pairank.operators.scores import win_ratios

#: p_a is clipped to [CLIP, 1 - CLIP] before its logit is taken (a 0 or 1 would be infinite).
CLIP = 1e-3
ASPECT = "plan"
#: Seconds an adaptive run may take before it stops adding contexts (see :func:`run_adaptive`).
TIME_BUDGET_S = 5.0


@dataclass(frozen=True)
class World:
    """Simulated contexts: latent quality ``q[c, i]`` and ``p[c, i, j]`` = p_a of (i in A, j in B)."""

    ids: list[str]
    contexts: list[str]
    q: np.ndarray
    p: np.ndarray
    seed: int

    @classmethod
    def simulate(cls, judge: SimulatedJudgeSpec, candidates: int, contexts: int) -> World:
        ids = [f"c{i:03d}" for i in range(candidates)]
        ctxs = [f"plan-{c:05d}" for c in range(contexts)]
        q, p = simulate_matrices(judge.seed, ctxs, ids, ASPECT, **model_of(judge))
        return cls(ids, ctxs, q, p, judge.seed)


@dataclass(frozen=True)
class Point:
    """Mean comparisons per context, mean Spearman and its standard error, over ``contexts``."""

    comparisons: float
    spearman: float
    se: float
    contexts: int

    def as_dict(self) -> dict:
        return {"comparisons": self.comparisons, "spearman": self.spearman, "se": self.se, "contexts": self.contexts}


def spearman_rows(scores: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of ``scores`` with the same row of ``q`` (ties: mean ranks).

    What :func:`scipy.stats.spearmanr` gives row by row, in one pass; a row with
    no spread gets 0::

        >>> from scipy.stats import spearmanr
        >>> x, y = np.array([[1.0, 2, 2, 5], [3, 3, 3, 3]]), np.array([[0.1, 0.4, 0.2, 0.3], [1, 2, 3, 4]])
        >>> spearman_rows(x, y).round(6).tolist(), round(float(spearmanr(x[0], y[0]).statistic), 6)
        ([0.632456, 0.0], 0.632456)
    """
    rx, ry = (rankdata(m, axis=1) for m in (scores, q))
    rx, ry = rx - rx.mean(axis=1, keepdims=True), ry - ry.mean(axis=1, keepdims=True)
    den = np.sqrt((rx**2).sum(axis=1) * (ry**2).sum(axis=1))
    return np.divide((rx * ry).sum(axis=1), den, out=np.zeros(len(rx)), where=den > 0)


def _point(used: list[int], scores: list[list[float]], world: World) -> Point:
    """Scores of the first ``len(scores)`` contexts, in ``world.ids`` order."""
    rhos = spearman_rows(np.array(scores, dtype=np.float64), world.q[: len(scores)])
    se = float(rhos.std(ddof=1) / math.sqrt(len(rhos))) if len(rhos) > 1 else math.nan
    return Point(float(np.mean(used)), float(rhos.mean()), se, len(rhos))


def run_static(world: World, name: str, budget: int | None, verdict: str = "soft") -> Point:
    """Every context under a static scheduler with budget R, ranked by win ratios."""
    fn, index = SCHEDULERS[name], {c: i for i, c in enumerate(world.ids)}
    used, rows = [], []
    for c, ctx in enumerate(world.contexts):
        pairs = fn(world.ids, budget, rng(world.seed, ctx))
        scores = win_ratios([(a, b, float(world.p[c, index[a], index[b]])) for a, b in pairs], verdict)
        used.append(len(pairs))
        rows.append([scores.get(i, 0.5) for i in world.ids])
    return _point(used, rows, world)


def run_adaptive(
    world: World,
    machine: Callable,
    time_budget: float | None = None,
    clock: Callable[[], float] = time.perf_counter,
    **options,
) -> Point:
    """The contexts under an adaptive machine, advanced in lockstep until done.

    Contexts go in chunks (2, then doubling the total). With ``time_budget``
    (seconds) the next chunk starts only if the time so far, scaled to the
    larger total, stays within it; the point then covers the first contexts.
    """
    index = {c: i for i, c in enumerate(world.ids)}
    row = {ctx: c for c, ctx in enumerate(world.contexts)}
    machines: list = []
    started, chunk = clock(), min(2, len(world.contexts))
    while chunk > 0:
        start = len(machines)
        batch = [machine(ctx, world.ids, seed=world.seed, **options) for ctx in world.contexts[start : start + chunk]]
        run_lockstep(batch, lambda reqs: [float(world.p[row[x], index[a], index[b]]) for x, a, b in reqs])
        machines += batch
        chunk = min(len(machines), len(world.contexts) - len(machines))
        if time_budget and (clock() - started) * (len(machines) + chunk) / len(machines) > time_budget:
            break
    rows: list[list[float]] = []
    for m in machines:
        position = {cid: k for k, cid in enumerate(m.ranking())}
        rows.append([-position[i] for i in world.ids])
    return _point([m.asked for m in machines], rows, world)


def smallest_budget(evaluate: Callable[[int], Point], lo: int, hi: int, target: float) -> tuple[int, dict[int, Point]]:
    """Bisection for the smallest R in [lo, hi] with mean Spearman >= target (``hi`` if none).

    Returns R and every point evaluated, by R.
    """
    seen: dict[int, Point] = {}

    def at(r: int) -> Point:
        if r not in seen:
            seen[r] = evaluate(r)
        return seen[r]

    if at(hi).spearman < target:
        return hi, seen
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if at(mid).spearman >= target else (mid + 1, hi)
    at(lo)
    return lo, seen


def _entry(name: str, kind: str, point: Point, target: float, **extra) -> dict:
    return {"scheduler": name, "kind": kind, **extra, **point.as_dict(), "reaches_target": point.spearman >= target}


def available() -> list[str]:
    """Static then adaptive scheduler names, as registered now."""
    return list(SCHEDULERS) + list(ADAPTIVE)


def _variants(machine: Callable) -> list[dict]:
    """Default options, and the other ``symmetric`` setting where the machine takes one."""
    param = inspect.signature(machine).parameters.get("symmetric")
    if param is None:
        return [{}]
    default = param.default if param.default is not inspect.Parameter.empty else False
    return [{}, {"symmetric": not default}]


def plan(
    judge: SimulatedJudgeSpec,
    *,
    candidates: int = 16,
    contexts: int = 100,
    target: float = 0.9,
    schedulers: Sequence[str] | None = None,
    verdict: str = "soft",
    time_budget: float | None = TIME_BUDGET_S,
    clock: Callable[[], float] = time.perf_counter,
) -> dict:
    """The plan as a JSON-ready dict; ``result["schedulers"]`` has one entry per scheduler run.

    ``time_budget`` caps each adaptive run (see :func:`run_adaptive`; None: every context).
    """
    names = list(schedulers) if schedulers else available()
    unknown = [n for n in names if n not in available()]
    if unknown:
        raise ValueError(f"unknown scheduler(s) {unknown}; available: {', '.join(available())}")
    if candidates < 2 or contexts < 2:
        raise ValueError(f"plan: expected at least 2 candidates and 2 contexts, found {candidates} and {contexts}")
    world = World.simulate(judge, candidates, contexts)
    entries = []
    for name in names:
        if name == "full":
            entries.append(_entry(name, "static", run_static(world, name, None, verdict), target, budget=None))
        elif name in SCHEDULERS:
            most = len(SCHEDULERS[name](world.ids, candidates * (candidates - 1), rng(0, "")))
            r, seen = smallest_budget(partial(run_static, world, name, verdict=verdict), 1, most, target)
            curve = [{"budget": k, **seen[k].as_dict()} for k in sorted(seen)]
            entries.append(_entry(name, "static", seen[r], target, budget=r, curve=curve))
        else:
            machine = ADAPTIVE[name]
            for options in _variants(machine):
                try:
                    probe = machine(world.contexts[0], world.ids, seed=world.seed, **options)
                except ValueError:  # the machine does not offer this setting
                    continue
                label = name + (" (symmetric)" if getattr(probe, "symmetric", False) else "")
                point = run_adaptive(world, machine, time_budget, clock, **options)
                entries.append(_entry(label, "adaptive", point, target, budget=None))
    return {
        "simulated": True,
        "judge": {"seed": judge.seed, **model_of(judge)},
        "candidates": candidates,
        "contexts": contexts,
        "target_spearman": target,
        "static_ranking": f"win_ratio_{verdict}",
        "time_budget_s": time_budget,
        "schedulers": entries,
    }


# ---------------------------------------------------------------------------
# measuring a judge


def measure_judge(judgments: pa.Table, model: str | None = None) -> dict:
    """Fit the simulated judge's coefficients to a JUDGMENTS table.

    Within each (context, aspect), with ``L(a, b)`` the logit of p_a (clipped to
    [CLIP, 1 - CLIP]) and only pairs judged in both orders (a full or symmetric
    run; the mean logit where an order was judged more than once):

    * ``S = (L(a, b) + L(b, a)) / 2 = position_bias + noise (eps_ab + eps_ba) / 2``:
      quality and the cyclic term cancel, so ``position_bias = mean(S)`` and
      ``noise = sqrt(2 var(S))``;
    * ``D = (L(a, b) - L(b, a)) / 2 = s_a - s_b + cyclic + noise (eps_ab - eps_ba) / 2``:
      least squares gives the strengths ``s`` (Bradley-Terry in logit space);
      ``scale`` = the pooled within-context sd of ``s`` (latent quality is a
      standard normal; the noise inflates it by about noise^2 / (2 N) in variance);
    * the residual mean square of ``D`` is ``noise^2 / 2 + intransitivity^2 / 2``,
      so ``intransitivity = sqrt(max(0, 2 MSE - noise^2))``: the order-consistent,
      pair-specific disagreement with any ranking, which the model calls cyclic.
    """
    ok = judgments.filter(pc.is_null(judgments.column("error")))
    models = sorted(set(ok.column("model").to_pylist()))
    if model is not None:
        ok = ok.filter(pc.equal(ok.column("model"), model))
    elif len(models) > 1:
        raise ValueError(f"judgments from several models {models}; choose one with --model")
    logits: dict[tuple[str, str], dict[tuple[str, str], list[float]]] = {}
    for ctx, aspect, a, b, p in zip(
        *(ok.column(c).to_pylist() for c in ("context_id", "aspect", "candidate_a", "candidate_b", "p_a"))
    ):
        p = min(max(p, CLIP), 1.0 - CLIP)
        logits.setdefault((ctx, aspect), {}).setdefault((a, b), []).append(math.log(p / (1.0 - p)))
    sym, sizes, strength_var, rss, dof = [], [], [], 0.0, 0
    for group in logits.values():
        mean = {pair: float(np.mean(v)) for pair, v in group.items()}
        pairs = sorted({tuple(sorted(pair)) for pair in mean if pair[::-1] in mean})
        ids = sorted({c for pair in pairs for c in pair})
        if not pairs:
            continue
        col = {c: i for i, c in enumerate(ids)}
        design = np.zeros((len(pairs), len(ids)))
        d = np.empty(len(pairs))
        for k, (a, b) in enumerate(pairs):
            design[k, col[a]], design[k, col[b]] = 1.0, -1.0
            sym.append((mean[(a, b)] + mean[(b, a)]) / 2.0)
            d[k] = (mean[(a, b)] - mean[(b, a)]) / 2.0
        s, _, rank, _ = np.linalg.lstsq(design, d, rcond=None)
        rss += float(np.sum((d - design @ s) ** 2))
        dof += len(pairs) - int(rank)
        sizes.append(len({c for pair in group for c in pair}))
        if len(ids) > 1:
            strength_var.append(float(np.var(s, ddof=1)))
    if len(sym) < 10:
        raise ValueError(
            f"measure: {len(sym)} pairs judged in both orders (without error); need at least 10 "
            "(measure from a full or symmetric run)"
        )
    noise = math.sqrt(2.0 * float(np.var(sym, ddof=1)))
    mse = rss / dof if dof > 0 else 0.0
    return {
        "position_bias": float(np.mean(sym)),
        "noise": noise,
        "scale": math.sqrt(float(np.mean(strength_var))) if strength_var else 0.0,
        "intransitivity": math.sqrt(max(0.0, 2.0 * mse - noise**2)),
        "pairs_both_orders": len(sym),
        "context_aspects": len(sizes),
        "candidates": int(np.median(sizes)),
        "model": model if model is not None else (models[0] if models else None),
    }


# ---------------------------------------------------------------------------
# the table


def render(result: dict) -> str:
    """The plan as readable text; the first line says the numbers are simulated."""
    j = result["judge"]
    lines = [
        "SIMULATED: every number below comes from a simulated judge, not from a real judge or real data.",
        (
            f"judge model: scale {j['scale']:g}, noise {j['noise']:.3g}, position bias {j['position_bias']:+.3g}, "
            f"intransitivity {j['intransitivity']:.3g}, seed {j['seed']}"
        ),
    ]
    if "measured" in result:
        m = result["measured"]
        lines.append(
            f"  measured from {m['source']}: {m['pairs_both_orders']} pairs judged in both orders, "
            f"{m['context_aspects']} (context, aspect) groups"
        )
    lines += [
        (
            f"{result['candidates']} candidates, {result['contexts']} contexts; target mean Spearman "
            f"{result['target_spearman']:g} vs latent quality; static schedulers ranked by {result['static_ranking']}"
        ),
        "",
        (
            f"{'scheduler':<32} {'budget R':>8} {'comparisons/context':>20} {'Spearman':>9} {'s.e.':>6} "
            f"{'contexts':>8}  target"
        ),
    ]
    for e in result["schedulers"]:
        budget = "-" if e["budget"] is None else str(e["budget"])
        lines.append(
            f"{e['scheduler']:<32} {budget:>8} {e['comparisons']:>20.1f} {e['spearman']:>9.3f} {e['se']:>6.3f} "
            f"{e['contexts']:>8}  " + ("reached" if e["reaches_target"] else "not reached")
        )
    if any(e["contexts"] < result["contexts"] for e in result["schedulers"]):
        lines.append(
            f"(fewer contexts: that adaptive run hit the time budget of {result['time_budget_s']} s; "
            "--time-budget 0 runs every context)"
        )
    return "\n".join(lines)
