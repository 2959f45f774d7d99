"""The cost-quality frontier: Spearman against comparisons asked, for every scheduler, on a SIMULATED judge.

A *world* is a stack of contexts with the same number of candidates N, each with
a quality per candidate: the mean human score of a meta-evaluation set (SummEval,
HANNA, TopicalChat; every aspect is a context of its own), or a seeded standard
normal (synthetic contexts). The judge is the SIMULATED judge of
:mod:`pairank.judges.engines.simulated_judge` on that quality (z-scored within the
context), with the coefficients of a real judge measured from its published hard
verdicts (:func:`fit_judge`); :meth:`World.judge` draws every p of every context
for one seed (``verdict="hard"``: p is its side of 0.5, as a generating judge's
verdicts are).

An *arm* is one scheduler with one setting (:func:`arms`): the ``scheduler``
mapping a job spec would hold, so a recommendation is a setting to paste.
:func:`run_arm` runs it on every context of a world for one seed: static
schedulers rank by win ratio (soft, or hard for hard verdicts; a candidate never
compared scores 0.5), adaptive ones advance in lockstep (:func:`run_lockstep`)
and rank by their own ranking. Per context it records the comparisons used
(ordered judgments) and Spearman against the quality (= the human scores) and
against the full matrix's win ratios of the same judgments.

:func:`curves` folds seeds into points: the mean over seeds of each seed's mean
over contexts, with the standard deviation and standard error across seeds.
:func:`recommend` reads the cheapest point that reaches a target. Every number is
SIMULATED: it says how schedulers compare under the judge model, not how a
real judge will do.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.optimize import least_squares
from scipy.special import ndtr

from pairank.jobs.plan import spearman_rows
from pairank.jobs.schedulers import parse_scheduler, run_lockstep
from pairank.jobs.schedulers.protocol import AdaptiveSettings
from pairank.jobs.schedulers.static import StaticSettings
from pairank.judges.engines.simulated_judge import comparison_noise, latent_qualities, simulated_logit

# ---------------------------------------------------------------------------
# a judge measured from its published verdicts


@dataclass(frozen=True)
class VerdictStats:
    """A judge's hard verdicts on labelled pairs judged in both orders."""

    judge: str
    pairs: int  # labelled pairs with a verdict in both orders
    accuracy: float  # share of verdicts that name the human-preferred output
    slot_a: float  # share of verdicts for slot A (position bias: 0.5 is none)
    flip: float  # share of pairs whose two verdicts name the same slot (the winner flips with the order)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def verdict_stats(judgments: pa.Table, labels: pa.Table, model: str, mode: str | None = None) -> VerdictStats:
    """Accuracy, slot-A share and flip rate of one judge (``model``, prompting ``mode``) from a JUDGMENTS table.

    ``labels``: PAIRWISE_LABELS rows (``preferred`` A or B of ``candidate_a``,
    ``candidate_b``), as ``pairank import llmbar`` writes them. Only pairs with a
    decisive verdict (A or B) in both orders count; a tie or an error drops the pair.
    """
    ok = judgments.filter(pc.and_(pc.is_null(judgments.column("error")), pc.equal(judgments.column("model"), model)))
    gold: dict[str, set[str]] = {}
    for r in labels.to_pylist():
        gold.setdefault(r["context_id"], set()).add(r["candidate_a"] if r["preferred"] == "A" else r["candidate_b"])
    verdicts: dict[tuple[str, frozenset], dict[str, str]] = defaultdict(dict)
    for r in ok.to_pylist():
        if mode is not None and json.loads(r["sampling"] or "{}").get("mode") != mode:
            continue
        if r["label"] in ("A", "B"):
            verdicts[(r["context_id"], frozenset((r["candidate_a"], r["candidate_b"])))][r["candidate_a"]] = r["label"]
    right = slot_a = flips = pairs = 0
    for (ctx, _), by_first in verdicts.items():
        if len(by_first) != 2 or ctx not in gold:
            continue
        pairs += 1
        labels_ = list(by_first.values())
        flips += labels_[0] == labels_[1]
        for first, label in by_first.items():
            slot_a += label == "A"
            right += (label == "A") == (first in gold[ctx])
    if pairs == 0:
        raise ValueError(f"judge {model!r} (mode {mode!r}): no labelled pair with a verdict in both orders")
    return VerdictStats(
        f"{model}" + (f" {mode}" if mode else ""), pairs, right / (2 * pairs), slot_a / (2 * pairs), flips / pairs
    )


#: Quadrature of the quality gap of a labelled pair: |q_1 - q_2| for two standard normal qualities.
_GAP = np.linspace(0.0, 8.0, 801)[1:] - 0.005
_GAP_W = np.exp(-(_GAP**2) / 4.0)
_GAP_W /= _GAP_W.sum()


def predicted_stats(scale: float, position_bias: float) -> tuple[float, float, float]:
    """Accuracy, slot-A share and flip rate of the simulated judge's hard verdicts (noise 1).

    A pair's better output wins slot A's verdict with ``Phi(scale g + bias)`` and
    slot B's with ``1 - Phi(-scale g + bias)``, g = the quality gap, distributed as
    for two candidates of a world (``|q_1 - q_2|``, q standard normal); the two
    orders' noises are independent.
    """
    up, down = ndtr(scale * _GAP + position_bias), ndtr(-scale * _GAP + position_bias)
    accuracy = float(_GAP_W @ (up + 1.0 - down)) / 2.0
    slot_a = float(_GAP_W @ (up + down)) / 2.0
    flip = float(_GAP_W @ (up * down + (1.0 - up) * (1.0 - down)))
    return accuracy, slot_a, flip


def fit_judge(stats: VerdictStats) -> dict:
    """The simulated judge (noise 1, no intransitivity) whose hard verdicts best match ``stats``.

    Hard verdicts fix the quality scale and the slot bias relative to the noise
    only, so the noise is set to 1 (a logit's standard deviation between asks of
    one comparison) and ``scale`` and ``position_bias`` are fitted by least
    squares to the three shares, each weighted by its binomial standard error.
    """
    want = np.array([stats.accuracy, stats.slot_a, stats.flip])
    n = np.array([2 * stats.pairs, 2 * stats.pairs, stats.pairs], dtype=float)
    se = np.sqrt(np.clip(want * (1 - want), 0.01, None) / n)

    def resid(x):
        return (np.array(predicted_stats(*x)) - want) / se

    fit = least_squares(resid, x0=[1.0, 0.0], bounds=([0.0, -5.0], [50.0, 5.0]))
    scale, bias = (float(v) for v in fit.x)
    acc, slot_a, flip = predicted_stats(scale, bias)
    return {
        "scale": round(scale, 4),
        "noise": 1.0,
        "position_bias": round(bias, 4),
        "intransitivity": 0.0,
        "measured": stats.as_dict(),
        "fitted": {"accuracy": round(acc, 4), "slot_a": round(slot_a, 4), "flip": round(flip, 4)},
    }


# ---------------------------------------------------------------------------
# worlds


@dataclass
class World:
    """Contexts of N candidates: quality ``q[c, i]`` (z-scored), and what each context's judge needs."""

    name: str
    contexts: list[str]  # machine context ids, unique (set contexts: "<context>|<aspect>")
    keys: list[tuple[str, str]]  # (context, aspect) the judge's noise is keyed by
    candidates: list[list[str]]  # real candidate ids per context, in column order
    q: np.ndarray
    #: True: each comparison's noise is keyed by its request, as the engine's judge draws it; False: drawn from a
    #: generator seeded by (seed, context) (the same distribution, without hashing N^2 requests per context).
    keyed_noise: bool = True
    ids: list[str] = field(init=False)  # generic ids the machines see (column order)

    def __post_init__(self) -> None:
        self.ids = [f"c{i:04d}" for i in range(self.q.shape[1])]

    @property
    def n(self) -> int:
        return self.q.shape[1]

    def take(self, rows: Sequence[int]) -> World:
        return World(
            self.name,
            [self.contexts[r] for r in rows],
            [self.keys[r] for r in rows],
            [self.candidates[r] for r in rows],
            self.q[list(rows)],
            self.keyed_noise,
        )

    def judge(self, model: dict, seed: int, verdict: str = "soft") -> np.ndarray:
        """``p[c, i, j]``: the simulated judge's p_a with i in slot A, j in slot B (diagonal 0.5)."""
        c, n = self.q.shape
        if self.keyed_noise:
            ctx = np.repeat([k[0] for k in self.keys], n * n).astype(object)
            aspect = np.repeat([k[1] for k in self.keys], n * n).astype(object)
            cands = np.asarray(self.candidates, dtype=object)
            a = np.repeat(cands, n, axis=1).ravel()
            b = np.tile(cands, (1, n)).ravel()
            eps = comparison_noise(seed, ctx, aspect, a, b).reshape(c, n, n)
        else:
            eps = np.stack([np.random.default_rng([seed, r, 29]).standard_normal((n, n)) for r in range(c)])
        zero = np.zeros((c, n, n))
        logit = simulated_logit(
            self.q[:, :, None],
            self.q[:, None, :],
            phase_a=zero,
            phase_b=zero,
            eps=eps,
            **{k: float(model[k]) for k in ("scale", "noise", "position_bias")},
            intransitivity=0.0,
        )
        p = (
            np.where(logit > 0, 1.0, np.where(logit < 0, 0.0, 0.5))
            if verdict == "hard"
            else 1.0 / (1.0 + np.exp(-logit))
        )
        idx = np.arange(n)
        p[:, idx, idx] = 0.5
        return p


def human_world(name: str, candidates: pa.Table, human: pa.Table, aspects: Sequence[str] | None = None) -> World:
    """A world of every (context, aspect) of a set with the modal number of candidates and some spread in score."""
    context_of = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("context_id").to_pylist()))
    groups: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for cid, aspect, score in zip(*(human.column(k).to_pylist() for k in ("candidate_id", "aspect", "score"))):
        if aspects is None or aspect in aspects:
            groups[(context_of[cid], aspect)][cid].append(score)
    sizes: defaultdict[int, int] = defaultdict(int)
    for g in groups.values():
        sizes[len(g)] += 1
    n = max(sizes, key=lambda k: (sizes[k], k))
    contexts, keys, cands, rows = [], [], [], []
    for (ctx, aspect), g in sorted(groups.items()):
        ids = sorted(g)
        mean = np.array([np.mean(g[c]) for c in ids])
        if len(ids) != n or mean.std() == 0:
            continue
        contexts.append(f"{ctx}|{aspect}")
        keys.append((ctx, aspect))
        cands.append(ids)
        rows.append((mean - mean.mean()) / mean.std())
    return World(name, contexts, keys, cands, np.array(rows))


#: Synthetic worlds of at least this many candidates draw their noise from a generator (``World.keyed_noise``).
GENERATOR_NOISE_FROM = 1000


def synthetic_world(n: int, contexts: int, seed: int) -> World:
    """``contexts`` contexts of ``n`` candidates with seeded standard normal qualities (z-scored).

    From :data:`GENERATOR_NOISE_FROM` candidates on, the judge's noise comes from a
    seeded generator instead of a keyed hash per request.
    """
    names = [f"syn{n}-{seed}-{c:04d}" for c in range(contexts)]
    cands = [[f"x{i:04d}" for i in range(n)] for _ in names]
    q = latent_qualities(seed, np.repeat(names, n).astype(object), np.array(sum(cands, []), dtype=object))
    q = q.reshape(contexts, n)
    q = (q - q.mean(axis=1, keepdims=True)) / q.std(axis=1, keepdims=True)
    return World(f"synthetic N={n}", names, [(c, "quality") for c in names], cands, q, n < GENERATOR_NOISE_FROM)


# ---------------------------------------------------------------------------
# arms


@dataclass(frozen=True)
class Arm:
    family: str  # the curve it belongs to
    scheduler: dict  # the spec's scheduler mapping (without the seed)

    @property
    def label(self) -> str:
        rest = {k: v for k, v in self.scheduler.items() if k != "name"}
        return self.scheduler["name"] + (" " + json.dumps(rest, sort_keys=True) if rest else "")


def budget_grid(n: int, most_share: float | None = None) -> list[int]:
    """Ordered comparisons per context to sweep: shares of N(N-1) from 0.5% up, at least N, even."""
    full = n * (n - 1)
    shares = [0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75]
    if most_share is None:
        most_share = 0.05 if n >= 1000 else 0.1 if n >= 200 else 1.0
    out = sorted({2 * round(s * full / 2) for s in shares if s <= most_share} | {2 * ((n + 1) // 2)})
    return [r for r in out if n <= r < full]


#: Largest share of N(N-1) swept, by N: (adaptive_symmetric, its d_optimal selection, poe). The Bradley-Terry
#: machines refit every round and d_optimal's pick costs O(N^2), poe's shared sequence O(N^2) per pair.
AFFORDABLE = ((1000, (0.001, 0.0, 0.01)), (200, (0.05, 0.05, 1.0)), (0, (1.0, 1.0, 1.0)))


def arms(n: int, grid: Sequence[int] | None = None, families: Sequence[str] | None = None) -> list[Arm]:
    """Every scheduler setting the frontier sweeps for contexts of ``n`` candidates.

    At large N the costly adaptive machines stop at the shares of :data:`AFFORDABLE`
    (at N >= 1,000: adaptive_symmetric at N comparisons only, without d_optimal; poe up to 1%),
    and at N >= 1,000 the sweep is thinner, to keep it to minutes on 2 shared cores:
    symmetric stands for random, pairs_greedy in both orders only, no pairs_beam
    (about 12% of the matrix there), one anchor count, and poe's Gaussian symmetric
    curve only.
    """
    grid = list(grid) if grid is not None else budget_grid(n)
    most_as, most_dopt, most_poe = next(caps for floor, caps in AFFORDABLE if n >= floor)
    full_n = n * (n - 1)
    big = n >= 1000
    out = [Arm("full", {"name": "full"})]
    out += [] if big else [Arm("random", {"name": "random", "comparisons": r}) for r in grid]
    out += [Arm("symmetric", {"name": "symmetric", "comparisons": r}) for r in grid]
    out += [Arm("pairs_greedy", {"name": "pairs_greedy"})]
    out += [] if big else [Arm("pairs_greedy (one order)", {"name": "pairs_greedy", "symmetric": False})]
    out += [] if big else [Arm("pairs_beam", {"name": "pairs_beam"})]
    for size in sorted({max(2, min(97, n // 2))} | (set() if big else {max(2, n // 4)})):
        out.append(Arm("pairs_anchors", {"name": "pairs_anchors", "anchors": {"size": size}}))
    for selection, most in (("uncertainty", most_as), ("d_optimal", most_dopt)):
        family = "adaptive_symmetric" + ("" if selection == "uncertainty" else " (d_optimal)")
        for r in (r for r in grid if r <= max(n, most * full_n + 2)) if most else ():
            sampling = {"budget": r // 2} | ({} if selection == "uncertainty" else {"selection": selection})
            out.append(Arm(family, {"name": "adaptive_symmetric", "sampling": sampling}))
    poe: tuple[tuple[str, dict[str, object]], ...] = (
        ("poe", {}),
        ("poe (one order)", {"symmetric": False}),
        ("poe (bt)", {"expert": "bt"}),
    )
    for family, extra in poe[:1] if big else poe:
        floor = n - 1 if extra.get("symmetric") is False else 2 * (n - 1)
        for r in sorted({max(r, floor) for r in grid if r <= max(2 * n, most_poe * full_n + 2)}):
            out.append(Arm(family, {"name": "poe", "comparisons": r, **extra}))
    return [a for a in out if families is None or a.family in families]


# ---------------------------------------------------------------------------
# running


def win_ratio_scores(p: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Soft win ratio of every candidate over the judged ordered pairs (``mask``); 0.5 if never compared."""
    wins = (mask * p).sum(axis=2) + (mask * (1.0 - p)).sum(axis=1)
    games = mask.sum(axis=2) + mask.sum(axis=1)
    return np.divide(wins, games, out=np.full(games.shape, 0.5), where=games > 0)


def run_arm(world: World, p: np.ndarray, arm: Arm, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Comparisons used per context and scores ``(C, N)`` (higher is better) of one arm for one seed."""
    settings = parse_scheduler({**arm.scheduler, "seed": seed})
    c, n = world.q.shape
    col = {cid: k for k, cid in enumerate(world.ids)}
    if arm.scheduler["name"] == "full":  # every ordered pair once: no need to list 10^6 of them
        mask = np.broadcast_to(1.0 - np.eye(n), (c, n, n))
        return mask.sum(axis=(1, 2)), win_ratio_scores(p, mask)
    if isinstance(settings, StaticSettings):
        contexts: dict[str, Sequence[str]] = dict.fromkeys(world.contexts, world.ids)
        pairs = settings.pairs(contexts, {})
        mask = np.zeros((c, n, n))
        for r, ctx in enumerate(world.contexts):
            for a, b in pairs[ctx]:
                mask[r, col[a], col[b]] += 1.0
        return mask.sum(axis=(1, 2)), win_ratio_scores(p, mask)
    assert isinstance(settings, AdaptiveSettings), settings
    row = {ctx: r for r, ctx in enumerate(world.contexts)}
    machines = [settings.machine(ctx, world.ids, seed) for ctx in world.contexts]
    run_lockstep(machines, lambda reqs: [float(p[row[x], col[a], col[b]]) for x, a, b in reqs])
    scores = np.empty((c, n))
    for r, m in enumerate(machines):
        for k, cid in enumerate(m.ranking()):
            scores[r, col[cid]] = -k
    return np.array([m.asked for m in machines], dtype=float), scores


def sweep(world: World, model: dict, seeds: Sequence[int], arms_: Sequence[Arm], verdict: str = "soft") -> list[dict]:
    """Every arm on every seed: one record per (arm, seed) with the means over contexts."""
    out = []
    for seed in seeds:
        p = world.judge(model, seed, verdict)
        full = win_ratio_scores(p, np.ones_like(p) - np.eye(world.n))
        for arm in arms_:
            started, cpu = time.perf_counter(), time.process_time()
            used, scores = run_arm(world, p, arm, seed)
            out.append(
                {
                    "family": arm.family,
                    "label": arm.label,
                    "scheduler": arm.scheduler,
                    "seed": seed,
                    "comparisons": float(used.mean()),
                    "human": float(spearman_rows(scores, world.q).mean()),
                    "full_matrix": float(spearman_rows(scores, full).mean()),
                    "seconds": round(time.perf_counter() - started, 3),
                    "cpu_seconds": round(time.process_time() - cpu, 3),
                }
            )
    return out


def _spread(values: Sequence[float]) -> dict:
    v = np.asarray(values, dtype=float)
    sd = float(v.std(ddof=1)) if len(v) > 1 else math.nan
    return {"mean": float(v.mean()), "sd": sd, "se": sd / math.sqrt(len(v)) if len(v) > 1 else math.nan, "n": len(v)}


def curves(records: Sequence[dict]) -> dict[str, list[dict]]:
    """``{family: [point, ...]}`` by comparisons: each point's comparisons, Spearman vs human and vs full matrix."""
    by_label: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        by_label[r["label"]].append(r)
    out: dict[str, list[dict]] = defaultdict(list)
    for rs in by_label.values():
        out[rs[0]["family"]].append(
            {
                "label": rs[0]["label"],
                "scheduler": rs[0]["scheduler"],
                "comparisons": _spread([r["comparisons"] for r in rs]),
                "human": _spread([r["human"] for r in rs]),
                "full_matrix": _spread([r["full_matrix"] for r in rs]),
            }
        )
    return {k: sorted(v, key=lambda pt: pt["comparisons"]["mean"]) for k, v in out.items()}


def value_at(curve: Sequence[dict], comparisons: float, metric: str = "human") -> float | None:
    """The curve's mean ``metric`` at ``comparisons``, linear in log comparisons; None outside the curve."""
    xs = [math.log(pt["comparisons"]["mean"]) for pt in curve]
    ys = [pt[metric]["mean"] for pt in curve]
    x = math.log(comparisons)
    if not xs or x < xs[0] - 1e-9 or x > xs[-1] + 1e-9:
        return None
    return float(np.interp(x, xs, ys))


def comparisons_for(curve: Sequence[dict], target: float, metric: str = "human") -> float | None:
    """The fewest comparisons at which the curve (linear in log comparisons) reaches ``target``; None if never."""
    pts = [(pt["comparisons"]["mean"], pt[metric]["mean"]) for pt in curve]
    for k, (x, y) in enumerate(pts):
        if y >= target:
            if k == 0:
                return x
            (x0, y0) = pts[k - 1]
            t = (target - y0) / (y - y0)
            return float(math.exp(math.log(x0) + t * (math.log(x) - math.log(x0))))
    return None


def recommend(frontier: dict[str, list[dict]], target: float, metric: str = "human") -> dict:
    """The cheapest measured setting whose mean Spearman reaches ``target``, and each family's cheapest.

    Only measured points are recommended (the first point of a family that
    reaches the target); ``None`` when no family reaches it, with the best seen.
    """
    options = []
    for family, curve in frontier.items():
        hit = next((pt for pt in curve if pt[metric]["mean"] >= target), None)
        if hit is not None:
            options.append({"family": family, **hit})
    options.sort(key=lambda pt: (pt["comparisons"]["mean"], -pt[metric]["mean"]))
    best_seen = max((pt for c in frontier.values() for pt in c), key=lambda pt: pt[metric]["mean"], default=None)
    return {
        "target": target,
        "metric": metric,
        "choice": options[0] if options else None,
        "options": options,
        "best": best_seen,
    }
