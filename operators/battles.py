"""The statistics from Python, on a table of battles: ``(model_a, model_b, winner[, context, features])``.

    >>> t = {"model_a": ["x", "y", "x", "z"], "model_b": ["y", "z", "z", "x"], "winner": ["model_a", "tie", "A", "B"]}
    >>> board = bradley_terry(t, n_boot=20, seed=1)
    >>> board.table.column("system").to_pylist()[0], board.interval.split(",")[0], board.replicates.shape
    ('x', 'bootstrap percentile', (20, 3))

A battle table is a pyarrow Table, a mapping of columns, or a pandas DataFrame, with

- ``model_a``, ``model_b``: the two systems; ``winner``: ``model_a`` / ``A``, ``model_b`` / ``B``, ``tie``,
  ``tie (bothbad)`` / ``both_bad`` (ties count half a win to each side, both bad too, as LMArena counts them);
- ``context`` (optional): the prompt's id; with it the bootstrap resamples contexts (a context carries all its
  battles), without it (and under ``compat="lmarena"``, as arena-rank) battles;
- style features, for :func:`style_controlled`: given as columns ``<feature>_a`` and ``<feature>_b`` for each of
  :data:`FEATURES` (tokens or characters, headers, bold spans, list items: as LMArena's and Arena-Hard's
  metadata count them), or computed from the texts in ``text_a`` and ``text_b``
  (:func:`pairank.operators.style_control.style_features`).

A missing column is a ValueError naming the columns the table lacks and needs. Each function returns a
:class:`BattleBoard`: the scores with their intervals, the bootstrap replicates (one row per refit, one column
per system, in ``systems`` order; empty without a bootstrap) and ``interval``, which says what kind of interval
it is: a bootstrap percentile interval, or (``n_boot=0`` for the style fit) a Wald interval from the fit's
inverse Hessian, or under ``compat="lmarena"`` with ``n_boot=0`` arena-rank's sandwich interval.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pairank.operators.bradley_terry import PRIOR_TIES, bt_strengths, win_matrix
from pairank.operators.checks import require_columns
from pairank.operators.compat import check_compat, lmarena_bt, lmarena_style
from pairank.operators.leaderboard import elo
from pairank.operators.scores import min_ranks
from pairank.operators.style_control import Z95, fit_logistic, lc_table, style_features

#: Style features of :func:`style_controlled`, as columns ``<name>_a`` and ``<name>_b``.
FEATURES = ("length", "headers", "bold", "lists")
#: Slot A's points for each winner value.
WINNER_POINTS = {
    "model_a": 1.0,
    "A": 1.0,
    "model_b": 0.0,
    "B": 0.0,
    "tie": 0.5,
    "tie (bothbad)": 0.5,
    "both_bad": 0.5,
}
BOARD = pa.schema(
    [
        ("system", pa.string()),
        ("rank", pa.int64()),
        ("strength", pa.float64()),
        ("strength_low", pa.float64()),
        ("strength_high", pa.float64()),
        ("elo", pa.float64()),
        ("elo_low", pa.float64()),
        ("elo_high", pa.float64()),
        ("n_battles", pa.int64()),
    ]
)


@dataclass(frozen=True)
class BattleBoard:
    """Scores, intervals and bootstrap replicates of one fit (see the module docstring)."""

    table: pa.Table
    systems: list[str]
    replicates: np.ndarray
    interval: str
    coefficients: dict[str, float] = field(default_factory=dict)


def as_table(battles) -> pa.Table:
    """A battle table as a pyarrow Table (from a Table, a mapping of columns or a pandas DataFrame)."""
    if isinstance(battles, pa.Table):
        return battles
    if isinstance(battles, dict):
        return pa.table(battles)
    if hasattr(battles, "to_dict") and hasattr(battles, "columns"):
        return pa.Table.from_pandas(battles, preserve_index=False)
    raise TypeError(f"battles: expected a pyarrow Table, a mapping of columns or a DataFrame, found {type(battles)}")


def parse_battles(battles) -> tuple[pa.Table, list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    t = as_table(battles)
    require_columns(t, ("model_a", "model_b", "winner"), "the battles table")
    a, b, w = (t.column(c).to_pylist() for c in ("model_a", "model_b", "winner"))
    for row, (x, y, v) in enumerate(zip(a, b, w)):
        if not isinstance(x, str) or not isinstance(y, str) or x == y:
            raise ValueError(f"battles row {row}: model_a, model_b: expected two different systems, found {x!r}, {y!r}")
        if v not in WINNER_POINTS:
            raise ValueError(f"battles row {row}: winner: expected one of {list(WINNER_POINTS)}, found {v!r}")
    systems = sorted(set(a) | set(b))
    index = {s: i for i, s in enumerate(systems)}
    first = np.array([index[x] for x in a], dtype=np.int64)
    second = np.array([index[y] for y in b], dtype=np.int64)
    points = np.array([WINNER_POINTS[v] for v in w])
    if "context" in t.column_names:
        _, groups = np.unique(np.array([str(c) for c in t.column("context").to_pylist()]), return_inverse=True)
    else:
        groups = np.arange(t.num_rows)
    return t, systems, first, second, points, groups


def _resample(rng: np.random.Generator, groups: np.ndarray) -> np.ndarray:
    """Weights of one bootstrap draw: each group (a context, or a battle) drawn with replacement."""
    k = int(groups.max()) + 1 if groups.size else 0
    return np.bincount(rng.integers(0, k, size=k), minlength=k).astype(float)[groups]


def _board(systems, theta, low, high, counts) -> pa.Table:
    ranks = min_ranks({i: round(float(theta[i]), 12) for i in range(len(systems))})
    rows = [
        {
            "system": systems[i],
            "rank": ranks[i],
            "strength": float(theta[i]),
            "strength_low": None if low is None else float(low[i]),
            "strength_high": None if high is None else float(high[i]),
            "elo": float(elo(theta[i])),
            "elo_low": None if low is None else float(elo(low[i])),
            "elo_high": None if high is None else float(elo(high[i])),
            "n_battles": int(counts[i]),
        }
        for i in sorted(range(len(systems)), key=lambda i: (ranks[i], systems[i]))
    ]
    return pa.Table.from_pylist(rows, schema=BOARD)


def _percentiles(reps: np.ndarray, mass: float):
    if reps.shape[0] == 0:
        return None, None
    tail = (1.0 - mass) / 2.0
    return np.nanquantile(reps, tail, axis=0), np.nanquantile(reps, 1.0 - tail, axis=0)


def _what(resampled: str, n_boot: int, mass: float) -> str:
    return f"bootstrap percentile, {mass:.0%}, over {resampled} resampled with replacement ({n_boot} refits)"


def bradley_terry(
    battles,
    *,
    n_boot: int = 200,
    seed: int = 0,
    mass: float = 0.95,
    prior_ties: float | None = None,
    compat: str | None = None,
) -> BattleBoard:
    """Bradley-Terry strengths of the battles' systems, as the leaderboard fits them (choix's ILSR with the
    virtual-draw prior of ``prior_ties`` ties per system, default :data:`PRIOR_TIES`, centred), with bootstrap
    percentile intervals over contexts (or battles without ``context``). ``compat="lmarena"``: as arena-rank's
    ``BradleyTerry`` fits them (:func:`pairank.operators.compat.lmarena_bt`: ties 0.5, no prior, a bootstrap of
    battles whatever the contexts or, with ``n_boot=0``, its sandwich interval); ``prior_ties`` is then refused
    unless 0."""
    check_compat(compat, "bt")
    if compat == "lmarena" and prior_ties not in (None, 0):
        raise ValueError(
            f"prior_ties: compat 'lmarena' fits arena-rank's maximum likelihood, which has no prior; expected it "
            f"unset or 0, found {prior_ties}"
        )
    t, systems, first, second, points, groups = parse_battles(battles)
    n = len(systems)
    counts = np.bincount(first, minlength=n) + np.bincount(second, minlength=n)
    if compat == "lmarena":
        fit = lmarena_bt(first, second, points, n, n_boot=n_boot, seed=seed, mass=mass)
        table = _board(systems, fit["theta"], fit["low"], fit["high"], counts)
        return BattleBoard(table, systems, fit["replicates"], fit["interval"])
    prior = PRIOR_TIES if prior_ties is None else prior_ties
    theta = bt_strengths(win_matrix(first, second, points, n), prior)
    rng = np.random.default_rng(seed)
    reps = np.empty((n_boot, n))
    for r in range(n_boot):
        reps[r] = bt_strengths(win_matrix(first, second, points, n, _resample(rng, groups)), prior)
    low, high = _percentiles(reps, mass)
    what = "contexts" if "context" in t.column_names else "battles"
    interval = _what(what, n_boot, mass) if n_boot else "none (n_boot 0)"
    return BattleBoard(_board(systems, theta, low, high, counts), systems, reps, interval)


def feature_matrix(battles) -> tuple[np.ndarray, np.ndarray]:
    """Per battle the style counts of side A and side B (:data:`FEATURES` in order): given columns, else counted
    in ``text_a`` / ``text_b``; a missing column is a named error."""
    t = as_table(battles)
    given = [f"{f}_{side}" for f in FEATURES for side in ("a", "b")]
    if all(c in t.column_names for c in given):
        cols = {c: np.asarray(t.column(c).to_pylist(), dtype=float) for c in given}
        fa = np.column_stack([cols[f"{f}_a"] for f in FEATURES])
        fb = np.column_stack([cols[f"{f}_b"] for f in FEATURES])
        if not (np.isfinite(fa).all() and np.isfinite(fb).all()) or (fa < 0).any() or (fb < 0).any():
            raise ValueError("the battles table's style columns: expected finite counts >= 0")
        return fa, fb
    if "text_a" in t.column_names and "text_b" in t.column_names:
        rows = [
            [[style_features(x)[f] for f in FEATURES] for x in t.column(c).to_pylist()] for c in ("text_a", "text_b")
        ]
        return np.array(rows[0], dtype=float), np.array(rows[1], dtype=float)
    missing = [c for c in given if c not in t.column_names]
    raise ValueError(
        f"the battles table lacks columns {missing}; style control needs {list(given)} (given counts) or "
        "['text_a', 'text_b'] (counted in the texts)"
    )


def style_design(fa: np.ndarray, fb: np.ndarray) -> np.ndarray:
    """The style columns of the fit: log length ratio, then each markdown count's normalised difference."""
    cols = [np.log(np.maximum(fa[:, 0], 1.0) / np.maximum(fb[:, 0], 1.0))]
    for k in range(1, fa.shape[1]):
        s = fa[:, k] + fb[:, k]
        cols.append(np.divide(fa[:, k] - fb[:, k], s, out=np.zeros_like(s), where=s > 0))
    return np.column_stack(cols)


def _style_fit(x: np.ndarray, y: np.ndarray, n: int, weights=None):
    if weights is not None:
        keep = weights > 0
        x, y, w = x[keep], y[keep], weights[keep]
        x, y = np.repeat(x, w.astype(int), axis=0), np.repeat(y, w.astype(int))
    ridge = np.array([1e-4] * n + [1e-6] * (x.shape[1] - n))
    return fit_logistic(x, y, ridge=ridge)


def style_controlled(
    battles, *, n_boot: int = 200, seed: int = 0, mass: float = 0.95, compat: str | None = None
) -> BattleBoard:
    """Strengths with style held equal (the leaderboard's style-controlled Bradley-Terry: log length ratio and
    normalised markdown differences, a slot-A term; ties half), with bootstrap percentile intervals over
    contexts or battles, or with ``n_boot=0`` 95% Wald intervals. ``coefficients``: each feature's and slot A's.
    ``compat="lmarena"``: the fit as LMArena's arena-rank makes it (:mod:`pairank.operators.compat`: standardised
    normalised differences, inverse pair-count weights, its L2 penalty on the mean log-likelihood, a bootstrap
    of battles or, with ``n_boot=0``, its sandwich interval)."""
    check_compat(compat, "style")
    t, systems, first, second, points, groups = parse_battles(battles)
    fa, fb = feature_matrix(t)
    n = len(systems)
    counts = np.bincount(first, minlength=n) + np.bincount(second, minlength=n)
    if compat == "lmarena":
        fit = lmarena_style(first, second, points, fa, fb, n, n_boot=n_boot, seed=seed, mass=mass)
        coefficients = {name: float(v) for name, v in zip(FEATURES, fit["beta"])}
        table = _board(systems, fit["theta"], fit["low"], fit["high"], counts)
        return BattleBoard(table, systems, fit["replicates"], fit["interval"], coefficients)
    x = np.zeros((t.num_rows, n))
    x[np.arange(t.num_rows), first] += 1.0
    x[np.arange(t.num_rows), second] -= 1.0
    x = np.column_stack([x, style_design(fa, fb), np.ones(t.num_rows)])
    center = np.eye(n) - 1.0 / n
    coef, cov = _style_fit(x, points, n)
    theta = center @ coef[:n]
    rng = np.random.default_rng(seed)
    reps = np.empty((n_boot, n))
    for r in range(n_boot):
        reps[r] = center @ _style_fit(x, points, n, _resample(rng, groups))[0][:n]
    if n_boot:
        low, high = _percentiles(reps, mass)
        interval = _what("contexts" if "context" in t.column_names else "battles", n_boot, mass)
    else:
        se = np.sqrt(np.diag(center @ cov[:n, :n] @ center.T))
        low, high = theta - Z95 * se, theta + Z95 * se
        interval = "Wald, 95%, from the inverse Hessian of the fit"
    names = [*FEATURES, "slot_a"]
    coefficients = {name: float(coef[n + k]) for k, name in enumerate(names)}
    return BattleBoard(_board(systems, theta, low, high, counts), systems, reps, interval, coefficients)


def length_controlled(battles, baseline: str, *, compat: str | None = None) -> pa.Table:
    """Each system's raw and length-controlled win rate against ``baseline`` (LC_WINRATES rows), from the
    battles that pit it against the baseline. Lengths from ``length_a``/``length_b`` or counted in
    ``text_a``/``text_b``. pairank's fit by default (one over all systems: a strength each, the judge's
    ``tanh`` of the length difference over its pooled sd and slot term shared); ``compat="alpaca-eval"``:
    AlpacaEval's GLM, whose instruction difficulty needs a ``context`` column (:mod:`pairank.operators.compat`)."""
    check_compat(compat, "lc")
    t, systems, first, second, points, _ = parse_battles(battles)
    if baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not a system of the battles: {systems}")
    if compat == "alpaca-eval":
        require_columns(t, ("context",), "the battles table (compat alpaca-eval: instruction difficulty)")
    if "length_a" in t.column_names and "length_b" in t.column_names:
        la, lb = (np.asarray(t.column(c).to_pylist(), dtype=float) for c in ("length_a", "length_b"))
    elif "text_a" in t.column_names and "text_b" in t.column_names:
        la, lb = (np.array([len(x) for x in t.column(c).to_pylist()], dtype=float) for c in ("text_a", "text_b"))
    else:
        raise ValueError(
            "the battles table lacks columns ['length_a', 'length_b'] (given lengths) or ['text_a', 'text_b'] "
            "(counted in the texts); a length-controlled win rate needs one pair"
        )
    contexts = t.column("context").to_pylist() if "context" in t.column_names else [None] * t.num_rows
    base = systems.index(baseline)
    rows: dict[str, list[tuple]] = {}
    for i in range(t.num_rows):
        if first[i] == base and second[i] != base:
            rows.setdefault(systems[second[i]], []).append((lb[i] - la[i], -1.0, 1.0 - points[i], contexts[i]))
        elif second[i] == base and first[i] != base:
            rows.setdefault(systems[first[i]], []).append((la[i] - lb[i], 1.0, points[i], contexts[i]))
    return lc_table(rows, baseline, compat)


def win_rate_against(board: BattleBoard, baseline: str) -> dict[str, float]:
    """Each system's Bradley-Terry win probability against ``baseline`` (Arena-Hard's score, in [0, 1])."""
    rows = {r["system"]: r["strength"] for r in board.table.to_pylist()}
    if baseline not in rows:
        raise ValueError(f"baseline {baseline!r} is not a system of the battles: {sorted(rows)}")
    return {s: 1.0 / (1.0 + math.exp(rows[baseline] - v)) for s, v in rows.items()}
