"""Prediction-powered rank-sets and win rates: a few human pairwise labels correct many judge verdicts.

The construction of Chatzi et al., *Prediction-Powered Ranking of Large Language Models* (NeurIPS 2024,
arXiv 2402.17826), with the power tuning of PPI++ (Angelopoulos et al., arXiv 2311.01453).

The unit is a **key**: one (context, system pair). The judge has compared N keys; humans have labelled n of
them, drawn uniformly at random from the N. Of a key with systems a and b, ``judge`` is the judge's probability
that a beats b (the mean ``p_a`` of its verdicts there, turned to a's side) and ``human`` the humans' share of
votes for a (ties half). A system m's **win rate** theta_m is the probability that the humans prefer m in a key
involving m, the keys drawn as the judged ones were. Its prediction-powered estimate is

    theta_m = lambda_m * J_m(all N) + H_m(n) - lambda_m * J_m(n)

with J_m the judge's mean win probability of m and H_m the humans' mean over the keys named: the judge's
estimate on every key, corrected by the rectifier (human minus judge) measured on the labelled ones. lambda_m
in [0, 1] is PPI++'s power tuning: the value that minimises the estimate's variance (1 is plain PPI, 0 the
humans alone). Its covariance over systems is the sum over keys of each key's influence vector times itself
(the estimate's linearisation, exact for its means). With it, at level 1 - alpha:

- a **win-rate interval** per system, theta_m -/+ z(1 - alpha/2) * sd_m (marginal);
- a **rank-set** per system: the confidence ellipsoid of the whole vector, radius^2 = chi2_k(1 - alpha) (k
  systems), orders m above m' when theta_m - theta_m' stays positive all over it; m's rank-set runs from
  1 + (systems ordered above it) to k - (systems ordered below it). All k rank-sets hold the true ranks at
  once with probability at least 1 - alpha (asymptotically), whatever the judge's bias.

Beside them, **judge-only** figures: the judge's win rate over the N keys with a bootstrap percentile interval
(keys resampled) and the rank-set that interval gives (1 + the systems whose low end is above this one's high
end, to k - those whose high end is below its low end): what a board of the judge alone says, and what a
systematic disagreement with the humans makes miss.

    >>> keys = pa.table({"context_id": ["c1", "c2", "c3"], "system_a": ["x", "x", "y"],
    ...                  "system_b": ["y", "z", "z"], "judge": [0.9, 0.8, 0.6]})
    >>> human = pa.table({"context_id": ["c1", "c3"], "system_a": ["x", "y"], "system_b": ["y", "z"],
    ...                   "human": [1.0, 0.0]})
    >>> s = disagreement(keys, human)
    >>> s["labelled"], s["disagree"]
    (2, 0.5)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from scipy import stats

from pairank.storage.schemas import PREDICTION_POWERED
from pairank.storage.validation import TableError

#: Columns of a table of judged keys and of labelled keys.
KEY_COLUMNS = ("context_id", "system_a", "system_b")


@dataclass(frozen=True)
class PredictionPowered:
    """Per system a PREDICTION_POWERED row; ``summary``: the counts and the judge's disagreement with the humans."""

    table: pa.Table
    summary: dict


def judged_keys(judgments: pa.Table, candidates: pa.Table) -> pa.Table:
    """The judged keys of JUDGMENTS rows: per (context, system pair), systems in name order, the judge's mean
    probability that ``system_a`` wins (``judge``) and its verdicts there (``n_verdicts``). Error rows and
    same-system pairs are left out; every aspect's verdicts on a key are pooled.

    >>> j = pa.table({"context_id": ["c", "c", "c"], "candidate_a": ["c/y", "c/x", "c/x"],
    ...               "candidate_b": ["c/x", "c/y", "c/x"], "p_a": [0.2, 0.6, 0.5]})
    >>> cands = pa.table({"candidate_id": ["c/x", "c/y"], "system": ["x", "y"]})
    >>> judged_keys(j, cands).to_pylist()
    [{'context_id': 'c', 'system_a': 'x', 'system_b': 'y', 'judge': 0.7, 'n_verdicts': 2}]
    """
    system = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    sums: dict[tuple[str, str, str], list[float]] = {}
    cols = (judgments.column(c).to_pylist() for c in ("context_id", "candidate_a", "candidate_b", "p_a"))
    for ctx, ca, cb, p in zip(*cols):
        sa, sb = system.get(ca), system.get(cb)
        if p is None or sa is None or sb is None or sa == sb:
            continue
        key, p_first = ((ctx, sa, sb), p) if sa < sb else ((ctx, sb, sa), 1.0 - p)
        acc = sums.setdefault(key, [0.0, 0])
        acc[0] += p_first
        acc[1] += 1
    rows = [
        {"context_id": k[0], "system_a": k[1], "system_b": k[2], "judge": round(s / n, 12), "n_verdicts": int(n)}
        for k, (s, n) in sorted(sums.items())
    ]
    schema = pa.schema(
        [*(pa.field(c, pa.string()) for c in KEY_COLUMNS), ("judge", pa.float64()), ("n_verdicts", pa.int64())]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def human_keys(labels: pa.Table, candidates: pa.Table, judged: pa.Table, source: str) -> pa.Table:
    """PAIRWISE_LABELS rows (already validated) as labelled keys: per (context, system pair), systems in name
    order, the humans' share of votes for ``system_a`` (``human``, ties half) and the votes (``n_labels``).

    Refused with a :class:`TableError` naming ``source``, the row and the field: a candidate that is not one of
    ``candidates`` (its system is unknown) or that answers another context, the same system on both sides, and
    a key the judge did not compare (not in ``judged``, :func:`judged_keys`).

    >>> cands = pa.table({"candidate_id": ["c/x", "c/y"], "system": ["x", "y"], "context_id": ["c", "c"]})
    >>> judged = pa.table({"context_id": ["c"], "system_a": ["x"], "system_b": ["y"], "judge": [0.7]})
    >>> labels = pa.table({"context_id": ["c", "c"], "candidate_a": ["c/y", "c/x"], "candidate_b": ["c/x", "c/y"],
    ...                    "preferred": ["A", "tie"]})
    >>> human_keys(labels, cands, judged, "h.parquet").to_pylist()
    [{'context_id': 'c', 'system_a': 'x', 'system_b': 'y', 'human': 0.25, 'n_labels': 2}]
    >>> bad = labels.set_column(1, "candidate_a", pa.array(["c/y", "c/w"]))
    >>> try:
    ...     human_keys(bad, cands, judged, "h.parquet")
    ... except TableError as e:
    ...     print(str(e)[:60])
    column `candidate_a` in h.parquet row 1: expected a candidat
    """
    ids = candidates.column("candidate_id").to_pylist()
    system = dict(zip(ids, candidates.column("system").to_pylist()))
    context = dict(zip(ids, candidates.column("context_id").to_pylist()))
    known = set(zip(*(judged.column(c).to_pylist() for c in KEY_COLUMNS)))
    votes: dict[tuple[str, str, str], list[float]] = {}
    cols = (labels.column(c).to_pylist() for c in ("context_id", "candidate_a", "candidate_b", "preferred"))
    for row, (ctx, ca, cb, preferred) in enumerate(zip(*cols)):
        for field, cid in (("candidate_a", ca), ("candidate_b", cb)):
            if cid not in system:
                raise TableError(
                    source, row, field, "a candidate of the board's runs (so that its system is known)", repr(cid)
                )
            if context[cid] != ctx:
                raise TableError(source, row, field, f"a candidate of context {ctx!r}", f"{cid!r} of {context[cid]!r}")
        sa, sb = system[ca], system[cb]
        if sa == sb:
            raise TableError(source, row, "candidate_b", f"a system other than candidate_a's ({sa!r})", repr(cb))
        share = {"A": 1.0, "B": 0.0, "tie": 0.5}[preferred]
        key, share = ((ctx, sa, sb), share) if sa < sb else ((ctx, sb, sa), 1.0 - share)
        if key not in known:
            raise TableError(
                source,
                row,
                "context_id",
                "a (context, system pair) the judge compared on the board",
                f"context {ctx!r} with systems {key[1]!r} and {key[2]!r}, which no judgment there compares",
            )
        acc = votes.setdefault(key, [0.0, 0])
        acc[0] += share
        acc[1] += 1
    rows = [
        {"context_id": k[0], "system_a": k[1], "system_b": k[2], "human": s / n, "n_labels": int(n)}
        for k, (s, n) in sorted(votes.items())
    ]
    schema = pa.schema(
        [*(pa.field(c, pa.string()) for c in KEY_COLUMNS), ("human", pa.float64()), ("n_labels", pa.int64())]
    )
    return pa.Table.from_pylist(rows, schema=schema)


def _index(keys: pa.Table, human: pa.Table) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Systems (sorted), per judged key its two system indices and judge probability, and per key its human
    share (NaN where unlabelled). A labelled key the judge did not compare is a ValueError."""
    systems = sorted(set(keys.column("system_a").to_pylist()) | set(keys.column("system_b").to_pylist()))
    at = {s: i for i, s in enumerate(systems)}
    a = np.array([at[s] for s in keys.column("system_a").to_pylist()], dtype=np.int64)
    b = np.array([at[s] for s in keys.column("system_b").to_pylist()], dtype=np.int64)
    judge = np.asarray(keys.column("judge").to_numpy(zero_copy_only=False), dtype=float)
    row = {k: i for i, k in enumerate(zip(*(keys.column(c).to_pylist() for c in KEY_COLUMNS)))}
    y = np.full(len(judge), np.nan)
    for k, share in zip(zip(*(human.column(c).to_pylist() for c in KEY_COLUMNS)), human.column("human").to_pylist()):
        if k not in row:
            raise ValueError(f"labelled key {k} is not among the judged keys")
        y[row[k]] = share
    return systems, a, b, judge, y


def _win_matrix(a: np.ndarray, b: np.ndarray, p: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per key and system: whether the system is in the key (d) and its win probability there (w, 0 if not)."""
    d = np.zeros((len(p), k))
    w = np.zeros((len(p), k))
    rows = np.arange(len(p))
    d[rows, a] = 1.0
    d[rows, b] = 1.0
    w[rows, a] = p
    w[rows, b] = 1.0 - p
    return d, w


def ppi_estimate(
    d: np.ndarray, w_judge: np.ndarray, w_human: np.ndarray, labelled: np.ndarray, power_tuning: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The prediction-powered win rates, their covariance and each system's lambda.

    ``d``, ``w_judge``: (keys x systems) membership and judge win probability on every judged key;
    ``w_human``: the human win share (any value where unlabelled); ``labelled``: which keys humans labelled.
    Each key's influence on the estimate is ``lambda * d (w_judge - J) / N_m`` plus, where labelled,
    ``d ((w_human - H) - lambda (w_judge - J_n)) / n_m``; the covariance is the sum of their outer products.

    >>> d = np.array([[1.0, 1.0]] * 4)
    >>> wj = np.array([[0.9, 0.1], [0.8, 0.2], [0.9, 0.1], [0.7, 0.3]])
    >>> wh = np.array([[1.0, 0.0], [0.0, 1.0], [0.0, 0.0], [0.0, 0.0]])
    >>> theta, cov, lam = ppi_estimate(d, wj, wh, np.array([True, True, False, False]), power_tuning=False)
    >>> [round(float(t), 3) for t in theta]  # 0.825 (judge on all) + 0.5 - 0.85 (the rectifier on two)
    [0.475, 0.525]
    """
    big_n = d.sum(axis=0)
    lab = labelled[:, None] * d
    small_n = lab.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        judge_all = (d * w_judge).sum(axis=0) / big_n
        judge_lab = (lab * w_judge).sum(axis=0) / small_n
        human_lab = (lab * np.nan_to_num(w_human)).sum(axis=0) / small_n
        u = d * (w_judge - judge_all) / big_n
        t = lab * (w_judge - judge_lab) / small_n
        v = lab * (np.nan_to_num(w_human) - human_lab) / small_n
    u, t, v = (np.nan_to_num(x) for x in (u, t, v))
    if power_tuning:
        # phi = v + lambda (u - t): the lambda minimising sum(phi^2), kept in [0, 1]
        g = u - t
        den = (g * g).sum(axis=0)
        lam = np.clip(np.divide(-(v * g).sum(axis=0), den, out=np.ones_like(den), where=den > 0), 0.0, 1.0)
    else:
        lam = np.ones(d.shape[1])
    theta = lam * judge_all + human_lab - lam * judge_lab
    phi = v + lam * (u - t)
    return theta, phi.T @ phi, lam


def rank_sets(theta: np.ndarray, cov: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Each system's rank-set (low, high; 1 is best) from the ellipsoid of radius^2 chi2_k(1 - alpha) around
    ``theta`` with covariance ``cov``: m is above m' where theta_m - theta_m' exceeds the ellipsoid's half-width
    along e_m - e_m'. NaN estimates (a system without labels) order nothing.

    >>> low, high = rank_sets(np.array([0.8, 0.5, 0.48]), np.eye(3) * 1e-4, 0.1)
    >>> low.tolist(), high.tolist()
    ([1, 2, 2], [1, 3, 3])
    """
    k = len(theta)
    radius = math.sqrt(stats.chi2.ppf(1.0 - alpha, k))
    var = np.diag(cov)
    half = radius * np.sqrt(np.maximum(var[:, None] + var[None, :] - 2.0 * cov, 0.0))
    with np.errstate(invalid="ignore"):
        above = (theta[:, None] - theta[None, :]) > half  # above[m, m']: m is surely above m'
    np.fill_diagonal(above, False)
    return 1 + above.sum(axis=0), k - above.sum(axis=1)


def interval_rank_sets(low: np.ndarray, high: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rank-sets from per-system intervals: 1 + the systems whose low end is above this high end, to k - those
    whose high end is below this low end.

    >>> lo, hi = interval_rank_sets(np.array([0.7, 0.4, 0.45]), np.array([0.9, 0.6, 0.5]))
    >>> lo.tolist(), hi.tolist()
    ([1, 2, 2], [1, 3, 3])
    """
    above = low[:, None] > high[None, :]
    return 1 + above.sum(axis=0), len(low) - above.sum(axis=1)


def judge_bootstrap(
    a: np.ndarray, b: np.ndarray, judge: np.ndarray, k: int, alpha: float, n_boot: int, seed: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The judge's win rate per system over all keys and its bootstrap percentile interval at 1 - alpha (keys
    resampled with replacement ``n_boot`` times)."""

    def rates(weights: np.ndarray) -> np.ndarray:
        wins = np.bincount(a, weights * judge, k) + np.bincount(b, weights * (1.0 - judge), k)
        n = np.bincount(a, weights, k) + np.bincount(b, weights, k)
        with np.errstate(invalid="ignore", divide="ignore"):
            return wins / n

    point = rates(np.ones(len(judge)))
    if n_boot <= 0:
        return point, np.full(k, np.nan), np.full(k, np.nan)
    rng = np.random.default_rng(seed)
    boots = np.stack(
        [
            rates(np.bincount(rng.integers(0, len(judge), len(judge)), minlength=len(judge)).astype(float))
            for _ in range(n_boot)
        ]
    )
    low, high = np.nanquantile(boots, [alpha / 2, 1 - alpha / 2], axis=0)
    return point, low, high


def disagreement(keys: pa.Table, human: pa.Table) -> dict:
    """How far the judge is from the humans on the labelled keys: their count, the share where the judge's
    likelier side is not the humans' (keys the humans tied, or the judge gave 0.5, count half) and the mean
    absolute gap of the probabilities."""
    _, _, _, judge, y = _index(keys, human)
    on = ~np.isnan(y)
    if not on.any():
        return {"labelled": 0, "disagree": None, "mean_abs_gap": None}
    j, h = np.sign(judge[on] - 0.5), np.sign(y[on] - 0.5)
    miss = np.where((j == 0) | (h == 0), 0.5, (j != h).astype(float))
    return {
        "labelled": int(on.sum()),
        "disagree": round(float(miss.mean()), 6),
        "mean_abs_gap": round(float(np.abs(judge[on] - y[on]).mean()), 6),
    }


def prediction_powered(
    keys: pa.Table, human: pa.Table, alpha: float = 0.1, n_boot: int = 200, seed: int = 0
) -> PredictionPowered:
    """PREDICTION_POWERED rows (best prediction-powered win rate first) for judged ``keys`` (:func:`judged_keys`)
    and the human labels on some of them (``human``: KEY_COLUMNS and ``human``, the share for ``system_a``,
    one row per key); ``n_boot``, ``seed``: the judge-only bootstrap."""
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha: expected a level in (0, 1), found {alpha!r}")
    systems, a, b, judge, y = _index(keys, human)
    k = len(systems)
    labelled = ~np.isnan(y)
    if k < 2 or not labelled.any():
        raise ValueError(
            f"prediction-powered ranking needs judged keys of at least 2 systems and a human label on some of them "
            f"(found {k} systems, {int(labelled.sum())} labelled keys)"
        )
    d, w_judge = _win_matrix(a, b, judge, k)
    _, w_human = _win_matrix(a, b, np.nan_to_num(y), k)
    theta, cov, lam = ppi_estimate(d, w_judge, w_human, labelled)
    n_lab = (labelled[:, None] * d).sum(axis=0)
    theta = np.where(n_lab > 0, theta, np.nan)
    sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
    z = stats.norm.ppf(1.0 - alpha / 2)
    rank_low, rank_high = rank_sets(theta, cov, alpha)
    j_rate, j_low, j_high = judge_bootstrap(a, b, judge, k, alpha, n_boot, seed)
    j_rank_low, j_rank_high = interval_rank_sets(j_low, j_high) if n_boot > 0 else (None, None)
    with np.errstate(invalid="ignore", divide="ignore"):
        rectifier = ((labelled[:, None] * d) * (w_human - w_judge)).sum(axis=0) / n_lab
    order = sorted(range(k), key=lambda m: (-(theta[m] if not np.isnan(theta[m]) else -1.0), systems[m]))
    rows = []
    for rank, m in enumerate(order, start=1):
        ok = not np.isnan(theta[m])
        rows.append(
            {
                "system": systems[m],
                "rank": rank if ok else None,
                "win_rate": _f(theta[m]),
                "win_low": _f(theta[m] - z * sd[m]) if ok else None,
                "win_high": _f(theta[m] + z * sd[m]) if ok else None,
                "rank_low": int(rank_low[m]) if ok else 1,
                "rank_high": int(rank_high[m]) if ok else k,
                "judge_win_rate": _f(j_rate[m]),
                "judge_low": _f(j_low[m]),
                "judge_high": _f(j_high[m]),
                "judge_rank_low": None if j_rank_low is None else int(j_rank_low[m]),
                "judge_rank_high": None if j_rank_high is None else int(j_rank_high[m]),
                "rectifier": _f(rectifier[m]),
                "power": _f(lam[m]),
                "n_judged": int(d[:, m].sum()),
                "n_human": int(n_lab[m]),
                "alpha": float(alpha),
            }
        )
    summary = {
        "alpha": alpha,
        "systems": k,
        "judged_keys": int(len(judge)),
        **disagreement(keys, human),
        "n_boot": n_boot,
        "seed": seed,
    }
    return PredictionPowered(pa.Table.from_pylist(rows, schema=PREDICTION_POWERED), summary)


def _f(x: float) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else round(float(x), 9)


def covers(table: pa.Table, true_rank: dict[str, int], low: str = "rank_low", high: str = "rank_high") -> bool:
    """Whether every system's true rank lies in its rank-set (columns ``low``, ``high``) of a PREDICTION_POWERED
    table: the simultaneous event the guarantee is about.

    >>> t = pa.table({"system": ["x", "y"], "rank_low": [1, 1], "rank_high": [2, 2]})
    >>> covers(t, {"x": 2, "y": 1}), covers(t, {"x": 3, "y": 1})
    (True, False)
    """
    for s, lo, hi in zip(*(table.column(c).to_pylist() for c in ("system", low, high))):
        if lo is None or hi is None or not lo <= true_rank[s] <= hi:
            return False
    return True
