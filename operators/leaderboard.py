"""System leaderboards: Bradley-Terry strengths per aspect and overall, with bootstrap intervals.

Input: a JUDGMENTS table and the CANDIDATES table that names each candidate's
system (plus, optionally, a WINRATES table). Output: a LEADERBOARD table, one row
per (aspect or ``"overall"``, system). The rules:

- **Verdicts.** Each judgment with a verdict gives slot A its hard points
  (:func:`pairank.operators.scores.hard_verdict`: the row's label, A 1, B 0, ``tie`` 1/2)
  and slot B the rest, so a tie is half a win to each side. These points fill a
  win matrix ``W[x, y]``: the wins of system x over system y. Error rows are
  skipped and counted (``n_errors``); a comparison of two candidates of the same
  system says nothing about systems and is skipped and counted too. A decisive
  five-level verdict (``[[A>>B]]``, ``[[B>>A]]``; see :mod:`pairank.operators.scores`)
  counts ``decisive_weight`` times in ``W`` (default 3, as in Arena-Hard); the counts
  and ``win_ratio`` count each judgment once.
- **Fit.** Bradley-Terry, P(x beats y) = 1 / (1 + exp(theta_y - theta_x)), fitted by
  maximum likelihood with choix's iterative Luce spectral ranking
  (:func:`choix.ilsr_pairwise_dense`, which takes fractional counts) on ``W``
  augmented with a *virtual reference system*: every system plays ``prior_ties``
  virtual ties against it (default 1, i.e. half a win and half a loss). This is the
  virtual-draw prior of Coulom's Bayeselo/WHR: a system that won every comparison
  stays finite, a comparison graph with disconnected parts still has one answer,
  and the prior's weight per system does not grow with the number of systems. The
  reference is then dropped and the strengths centred (mean 0 over the aspect's
  systems). ``prior_ties=0`` is the plain MLE, which needs a strongly connected
  graph.
- **Compat lmarena** (``compat`` holds ``"lmarena"``): the fit is arena-rank's ``BradleyTerry``
  (:func:`pairank.operators.compat.lmarena_bt`): ties half, no prior (``prior_ties`` 0, so the graph must be
  strongly connected, else a ValueError naming the aspect), intervals over battles resampled with replacement,
  or with ``n_boot`` 0 arena-rank's sandwich interval at ``mass``.
- **Overall** pools the judgments of every aspect into one matrix.
- **Intervals.** Contexts are resampled with replacement ``n_boot`` times (a
  context carries all its judgments; for ``overall`` all its aspects), each
  resample is refitted, and the interval is the central ``mass`` percentile
  interval of each system's centred strength. The generator is seeded by
  ``(seed, aspect)``, so an aspect's intervals do not depend on the other aspects.
  A system absent from a resample is left out of that refit; ``n_boot`` counts the
  refits it took part in.
- **Scales.** ``strength`` is the centred log-strength theta (a difference of 1 is
  odds of e to 1); ``elo`` is 1000 + 400/ln(10) * theta, so 400 points are odds of
  10 to 1 and the mean system sits at 1000.
- **Rank** by point strength, 1 best; equal strengths share the smallest rank.
- **Style control** (:mod:`pairank.operators.style_control`, where the candidates have
  texts): per aspect and overall, the style-controlled Bradley-Terry strength (length
  and markdown held equal; a 95% interval, whatever ``mass``: bootstrap percentiles of ``n_boot`` refits on
  contexts resampled, or with ``n_boot`` 0 Wald's; see :func:`interval_kinds`) and its rank, and
  with a baseline the length-controlled win rate against it; ``style_status`` says
  why they are null where they are (a separated fit is not identified).
- **Win rates** against a baseline are not recomputed: for each (aspect, system)
  the leaderboard carries the pooled row (judge ``*``) of the first method in
  ``winrate_methods`` (default dawid_skene, then bwrs, then observed) that has an
  estimate, with its interval, method, prior, pairs and judges.

The fit itself is :func:`pairank.operators.bradley_terry.bt_strengths`.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pairank.operators.bradley_terry import PRIOR_TIES, bt_strengths, win_matrix
from pairank.operators.checks import require_columns
from pairank.operators.compat import lmarena_bt, split_compat
from pairank.operators.scores import DECISIVE_WEIGHT, LABEL_POINTS, min_ranks, verdict_weights
from pairank.operators.style_control import board_columns, given_features
from pairank.operators.votes import JUDGE_COLUMNS, judge_names
from pairank.operators.winrate_table import METHODS as WINRATE_METHOD_NAMES
from pairank.storage.schemas import LEADERBOARD

#: The pooled row of every aspect's judgments.
OVERALL = "overall"
#: The Elo-like scale: ELO_BASE + ELO_PER_NAT * theta.
ELO_BASE = 1000.0
ELO_PER_NAT = 400.0 / math.log(10.0)
#: Win-rate methods carried, in order of preference.
WINRATE_METHODS = ("dawid_skene", "bwrs", "observed")
#: Columns of the judgments table this operator reads; ``label`` too where the table has it.
COLUMNS = JUDGE_COLUMNS + ("context_id", "aspect", "candidate_a", "candidate_b", "p_a", "error")


@dataclass(frozen=True)
class LeaderboardOptions:
    """How to fit and what to carry; see the module docstring."""

    n_boot: int = 200
    mass: float = 0.95
    seed: int = 0
    #: Virtual ties per system (unset: PRIOR_TIES; 0, the only value allowed, under compat lmarena).
    prior_ties: float | None = None
    baseline: str | None = None
    winrate_methods: tuple[str, ...] = WINRATE_METHODS
    decisive_weight: float = DECISIVE_WEIGHT
    #: Compatibility settings (operators/compat.py): "lmarena" (Bradley-Terry and style control), "alpaca-eval"
    #: (LC win rates).
    compat: tuple[str, ...] = ()

    @property
    def prior(self) -> float:
        """``prior_ties`` as the fit takes it (``__post_init__`` has set it)."""
        return PRIOR_TIES if self.prior_ties is None else self.prior_ties

    def __post_init__(self) -> None:
        lmarena = split_compat(self.compat)[0]
        if lmarena and self.prior_ties not in (None, 0):
            raise ValueError(
                f"prior_ties: compat 'lmarena' fits arena-rank's maximum likelihood, which has no prior; expected it "
                f"unset or 0, found {self.prior_ties}"
            )
        prior = (0.0 if lmarena else PRIOR_TIES) if self.prior_ties is None else self.prior_ties
        if not (math.isfinite(prior) and prior >= 0):
            raise ValueError(f"prior_ties: expected a finite number >= 0, found {prior}")
        object.__setattr__(self, "prior_ties", float(prior))
        if not (math.isfinite(self.decisive_weight) and self.decisive_weight >= 1):
            raise ValueError(f"decisive_weight: expected a finite number >= 1, found {self.decisive_weight}")
        if self.n_boot < 0:
            raise ValueError(f"n_boot: expected an integer >= 0, found {self.n_boot}")
        if not 0.0 < self.mass < 1.0:
            raise ValueError(f"mass: expected a probability in (0, 1), found {self.mass}")
        unknown = [m for m in self.winrate_methods if m not in WINRATE_METHOD_NAMES]
        if unknown or not self.winrate_methods:
            raise ValueError(
                f"winrate_methods: expected a non-empty list of {list(WINRATE_METHOD_NAMES)}, "
                f"found {list(self.winrate_methods)}"
            )


@dataclass(frozen=True)
class Leaderboard:
    """The LEADERBOARD table and what went into it (``counts`` per aspect, the judges)."""

    table: pa.Table
    counts: dict = field(default_factory=dict)
    judges: list[str] = field(default_factory=list)
    baseline: str | None = None
    intervals: dict = field(default_factory=dict)


def _style_kind(n_boot: int, lmarena: bool) -> str:
    if n_boot:
        over = "battles" if lmarena else "contexts"
        compat = "; compat lmarena" if lmarena else ""
        return f"bootstrap percentile, 95%, over {over} resampled with replacement ({n_boot} refits{compat})"
    if lmarena:
        return "sandwich (arena-rank's), 95%, of the one style-controlled fit (compat lmarena; n_boot 0)"
    return "Wald, 95%, from the inverse Hessian of the one style-controlled fit (n_boot 0)"


def interval_kinds(options: LeaderboardOptions) -> dict[str, str]:
    """What each interval of a board is: the strengths' and the style-controlled strengths' a bootstrap (with
    ``n_boot``; under compat lmarena of battles, and without a bootstrap arena-rank's sandwich), the LC win rates'
    their fits' own.

    >>> kinds = interval_kinds(LeaderboardOptions(n_boot=0))
    >>> kinds["strength"], kinds["style_strength"]
    ('none (n_boot 0)', 'Wald, 95%, from the inverse Hessian of the one style-controlled fit (n_boot 0)')
    >>> interval_kinds(LeaderboardOptions(n_boot=50, compat=("lmarena",)))["style_strength"]
    'bootstrap percentile, 95%, over battles resampled with replacement (50 refits; compat lmarena)'
    >>> interval_kinds(LeaderboardOptions(n_boot=0, compat=("lmarena",)))["elo"]
    "sandwich (arena-rank's), 95%, of the one fit (compat lmarena; n_boot 0)"
    """
    style_compat, lc_compat = split_compat(options.compat)
    if style_compat:
        boot = (
            f"bootstrap percentile, {options.mass:.0%}, over battles resampled with replacement ({options.n_boot} "
            "refits; compat lmarena)"
            if options.n_boot
            else f"sandwich (arena-rank's), {options.mass:.0%}, of the one fit (compat lmarena; n_boot 0)"
        )
    else:
        boot = (
            f"bootstrap percentile, {options.mass:.0%}, over contexts resampled with replacement ({options.n_boot} "
            "refits)"
            if options.n_boot
            else "none (n_boot 0)"
        )
    return {
        "strength": boot,
        "elo": boot,
        "style_strength": _style_kind(options.n_boot, bool(style_compat)),
        "lc_win_rate": "LC win rate -/+ 1.96 standard errors of the mean prediction (AlpacaEval's, compat alpaca-eval)"
        if lc_compat
        else "Wald, 95%, from the inverse Hessian of the length-controlled fit",
        "winrate_estimate": "credible interval of the carried win-rate method (winrate_mass)",
    }


def elo(theta):
    """A strength on the Elo-like scale.

    >>> float(elo(0.0)), round(float(elo(math.log(10.0))), 6)
    (1000.0, 1400.0)
    """
    return ELO_BASE + ELO_PER_NAT * np.asarray(theta, dtype=float)


@dataclass(frozen=True)
class _Rows:
    """The judgments as integer arrays (systems, contexts, judges by index)."""

    aspect: np.ndarray
    context: np.ndarray
    first: np.ndarray
    second: np.ndarray
    points: np.ndarray  # slot A's hard points; nan on error rows
    weight: np.ndarray  # how many times the verdict counts (decisive five-level verdicts more)
    judge: np.ndarray
    ok: np.ndarray  # a verdict, and two different systems
    error: np.ndarray


def _indices(values: Sequence, universe: list) -> np.ndarray:
    pos = {v: i for i, v in enumerate(universe)}
    return np.fromiter((pos[v] for v in values), dtype=np.int64, count=len(values))


def _slot_points(p_a: list, labels: list, errors: list) -> np.ndarray:
    out = np.full(len(p_a), np.nan)
    for i, (p, label, err) in enumerate(zip(p_a, labels, errors)):
        if err is not None:
            continue
        if label is not None:
            if label not in LABEL_POINTS:
                raise ValueError(
                    f"judgments row {i}: label: expected one of {list(LABEL_POINTS)} or null, found {label!r}"
                )
            out[i] = LABEL_POINTS[label]
        elif p is None or not 0.0 <= p <= 1.0:
            raise ValueError(f"judgments row {i}: p_a: expected a float in [0, 1] on a row without error, found {p!r}")
        else:
            out[i] = 1.0 if p > 0.5 else 0.0 if p < 0.5 else 0.5
    return out


def parse_battles(judgments: pa.Table, candidates: pa.Table, decisive_weight: float):
    require_columns(judgments, COLUMNS, "the judgments table")
    require_columns(candidates, ("candidate_id", "system"), "the candidates table")
    system_of = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column("system").to_pylist()))
    cols = {c: judgments.column(c).to_pylist() for c in COLUMNS}
    for slot in ("candidate_a", "candidate_b"):
        for row, cid in enumerate(cols[slot]):
            if cid not in system_of:
                raise ValueError(
                    f"judgments row {row} (context {cols['context_id'][row]!r}, aspect {cols['aspect'][row]!r}): "
                    f"{slot} {cid!r} is not in the candidates table, so its system is unknown"
                )
    sys_a = [system_of[c] for c in cols["candidate_a"]]
    sys_b = [system_of[c] for c in cols["candidate_b"]]
    systems = sorted(set(sys_a) | set(sys_b))
    aspects = sorted(set(cols["aspect"]))
    if OVERALL in aspects:
        raise ValueError(f"aspect {OVERALL!r} is reserved for the pooled leaderboard; rename that aspect")
    contexts = sorted(set(cols["context_id"]))
    identities = sorted(set(zip(*(cols[c] for c in JUDGE_COLUMNS))))
    names = judge_names(identities)
    labels = judgments.column("label").to_pylist() if "label" in judgments.column_names else [None] * len(sys_a)
    points = _slot_points(cols["p_a"], labels, cols["error"])
    first, second = _indices(sys_a, systems), _indices(sys_b, systems)
    error = np.array([e is not None for e in cols["error"]], dtype=bool)
    rows = _Rows(
        aspect=_indices(cols["aspect"], aspects),
        context=_indices(cols["context_id"], contexts),
        first=first,
        second=second,
        points=points,
        weight=np.array(verdict_weights(cols["sampling"], cols["p_a"], decisive_weight), dtype=float),
        judge=_indices(list(zip(*(cols[c] for c in JUDGE_COLUMNS))), identities),
        ok=~error & (first != second),
        error=error,
    )
    return rows, systems, aspects, names


def _fit(rows: _Rows, mask: np.ndarray, n: int, prior: float, weights=None):
    """Strengths (nan for systems without a comparison under ``weights``) from the rows in ``mask``."""
    first, second, points = rows.first[mask], rows.second[mask], rows.points[mask]
    w = rows.weight[mask] if weights is None else weights * rows.weight[mask]
    present = (np.bincount(first, weights=w, minlength=n) + np.bincount(second, weights=w, minlength=n)) > 0
    theta = np.full(n, np.nan)
    W = win_matrix(first, second, points, n, w)
    idx = np.flatnonzero(present)
    theta[idx] = bt_strengths(W[np.ix_(idx, idx)], prior)
    return theta


def _bootstrap(rows: _Rows, mask: np.ndarray, n: int, options: LeaderboardOptions, key: str) -> np.ndarray:
    """``(n_boot, n)`` strengths refitted on contexts resampled with replacement (nan: absent)."""
    ctx_ids, ctx = np.unique(rows.context[mask], return_inverse=True)
    k = len(ctx_ids)
    rng = np.random.default_rng([options.seed, zlib.crc32(key.encode("utf-8"))])
    out = np.full((options.n_boot, n), np.nan)
    for b in range(options.n_boot):
        multiplicity = np.bincount(rng.integers(0, k, size=k), minlength=k).astype(float)
        out[b] = _fit(rows, mask, n, options.prior, multiplicity[ctx])
    return out


def _lmarena(rows: _Rows, mask: np.ndarray, n: int, options: LeaderboardOptions, key: str):
    """Compat lmarena (arena-rank's Bradley-Terry, :func:`pairank.operators.compat.lmarena_bt`) of the rows in
    ``mask``: the strengths (nan: absent), the ``(n_boot, n)`` bootstrap of battles (None with ``n_boot`` 0) and
    else the sandwich interval's ends."""
    first, second = rows.first[mask], rows.second[mask]
    present = np.zeros(n, dtype=bool)
    present[first] = present[second] = True
    idx, pos = np.flatnonzero(present), np.cumsum(present) - 1
    theta = np.full(n, np.nan)
    if not idx.size:
        return theta, None, (theta, theta)
    seed = [options.seed, zlib.crc32(key.encode("utf-8"))]
    try:
        fit = lmarena_bt(
            pos[first],
            pos[second],
            rows.points[mask],
            idx.size,
            weights=rows.weight[mask],
            n_boot=options.n_boot,
            seed=seed,
            mass=options.mass,
        )
    except ValueError as exc:
        raise ValueError(f"aspect {key!r}: {exc}") from None
    theta[idx] = fit["theta"]
    if options.n_boot:
        boot = np.full((options.n_boot, n), np.nan)
        boot[:, idx] = fit["replicates"]
        return theta, boot, None
    low, high = np.full(n, np.nan), np.full(n, np.nan)
    low[idx], high[idx] = fit["low"], fit["high"]
    return theta, None, (low, high)


def _system_stats(rows: _Rows, mask: np.ndarray, errors: np.ndarray, n: int, names: list[str]) -> list[dict]:
    first, second, points = rows.first[mask], rows.second[mask], rows.points[mask]
    both = np.concatenate([first, second])
    mine = np.concatenate([points, 1.0 - points])  # each side's points
    other = np.concatenate([second, first])
    ctx = np.tile(rows.context[mask], 2)
    judge = np.tile(rows.judge[mask], 2)
    err_sys = np.concatenate([rows.first[errors], rows.second[errors]])
    err_rows = np.concatenate([np.flatnonzero(errors), np.flatnonzero(errors)])
    stats = []
    for s in range(n):
        here = both == s
        pts = mine[here]
        stats.append(
            {
                "n_judgments": int(here.sum()),
                "points": float(pts.sum()),
                "n_wins": int((pts == 1.0).sum()),
                "n_losses": int((pts == 0.0).sum()),
                "n_ties": int((pts == 0.5).sum()),
                "n_errors": int(np.unique(err_rows[err_sys == s]).size),
                "n_contexts": int(np.unique(ctx[here]).size),
                "n_opponents": int(np.unique(other[here]).size),
                "judges": sorted(names[j] for j in np.unique(judge[here])),
            }
        )
    return stats


def carried_winrates(
    winrates: pa.Table | None, options: LeaderboardOptions
) -> tuple[str | None, dict[tuple[str, str], dict]]:
    """The baseline and, per (aspect, system), the WINRATES row the leaderboard carries (see the module docstring).

    Rows are pooled ones (judge ``*``, or ``''`` for ``human``). Where several rows of
    one method qualify (several runs), the last one in table order is carried.
    """
    if winrates is None or winrates.num_rows == 0:
        if options.baseline is not None:
            return options.baseline, {}
        return None, {}
    require_columns(winrates, ("aspect", "system", "baseline", "method", "judge", "estimate"), "the win-rate table")
    rows = winrates.to_pylist()
    baselines = sorted({r["baseline"] for r in rows})
    baseline = options.baseline
    if baseline is None:
        if len(baselines) > 1:
            raise ValueError(f"the win-rate tables hold several baselines {baselines}; choose one (baseline=...)")
        baseline = baselines[0]
    elif baseline not in baselines:
        raise ValueError(f"baseline {baseline!r}: the win-rate tables have baselines {baselines} only")
    found: dict[tuple[str, str], dict[str, dict]] = {}
    seen: dict[tuple[str, str], list[str]] = {}
    for r in rows:
        if r["baseline"] != baseline or r["judge"] not in ("*", ""):
            continue
        where = (r["aspect"], r["system"])
        if r["estimate"] is not None:
            found.setdefault(where, {})[r["method"]] = r
        elif r["method"] in options.winrate_methods:
            seen.setdefault(where, []).append(f"{r['method']}: {r.get('status') or 'no estimate'}")
    carried: dict[tuple[str, str], dict] = {}
    for where in set(found) | set(seen):
        by_method = found.get(where, {})
        method = next((m for m in options.winrate_methods if m in by_method), None)
        if method is None:
            why = "; ".join(seen.get(where, [])) or f"no row of {list(options.winrate_methods)}"
            carried[where] = {"winrate_status": f"no estimate ({why})"}
            continue
        r = by_method[method]
        carried[where] = {
            "winrate_method": method,
            "winrate_prior": r.get("prior"),
            "winrate_estimate": r["estimate"],
            "winrate_low": r.get("ci_low"),
            "winrate_high": r.get("ci_high"),
            "winrate_mass": r.get("mass"),
            "winrate_n_pairs": r.get("n_pairs"),
            "winrate_n_judges": r.get("n_judges"),
            "winrate_status": r.get("status") or "ok",
        }
    return baseline, carried


_NO_WINRATE = {
    "winrate_baseline": None,
    "winrate_method": None,
    "winrate_prior": None,
    "winrate_estimate": None,
    "winrate_low": None,
    "winrate_high": None,
    "winrate_mass": None,
    "winrate_n_pairs": None,
    "winrate_n_judges": None,
    "winrate_status": None,
}


def _winrate_fields(aspect: str, system: str, baseline: str | None, carried: dict) -> dict:
    if baseline is None:
        return dict(_NO_WINRATE)
    out = {**_NO_WINRATE, "winrate_baseline": baseline}
    if system == baseline:
        return {**out, "winrate_status": "baseline"}
    if aspect == OVERALL:
        return {**out, "winrate_status": "win rates are per aspect"}
    return {**out, **carried.get((aspect, system), {"winrate_status": "no win-rate row for this system"})}


def leaderboard(
    judgments: pa.Table,
    candidates: pa.Table,
    winrates: pa.Table | None = None,
    options: LeaderboardOptions = LeaderboardOptions(),
    style_features: pa.Table | None = None,
) -> Leaderboard:
    """The LEADERBOARD rows of every aspect and ``overall``, and their counts (see the module docstring).
    ``style_features``: STYLE_FEATURES given with the outputs, used by style control instead of counting them."""
    rows, systems, aspects, names = parse_battles(judgments, candidates, options.decisive_weight)
    baseline, carried = carried_winrates(winrates, options)
    if baseline is not None and systems and baseline not in systems:
        raise ValueError(f"baseline {baseline!r} is not a system of the judgments; systems: {', '.join(systems)}")
    n = len(systems)
    lmarena = split_compat(options.compat)[0] is not None
    out, counts = [], {}
    groups = [(OVERALL, np.ones(len(rows.aspect), dtype=bool))] if aspects else []
    groups += [(a, rows.aspect == i) for i, a in enumerate(aspects)]
    for name, in_group in groups:
        mask = in_group & rows.ok
        errors = in_group & rows.error
        same = in_group & ~rows.error & (rows.first == rows.second)
        stats = _system_stats(rows, mask, errors, n, names)
        if lmarena:
            theta, boot, sandwich = _lmarena(rows, mask, n, options, name)
        else:
            theta, sandwich = _fit(rows, mask, n, options.prior), None
        ranked = [s for s in range(n) if stats[s]["n_judgments"] > 0]
        counts[name] = {
            "judgments": int(in_group.sum()),
            "used": int(mask.sum()),
            "errors": int(errors.sum()),
            "same_system": int(same.sum()),
            "contexts": int(np.unique(rows.context[mask]).size),
            "systems": len(ranked),
            "unranked": [systems[s] for s in range(n) if stats[s]["n_judgments"] == 0 and stats[s]["n_errors"]],
            "judges": sorted({names[j] for j in np.unique(rows.judge[mask])}),
        }
        if not ranked:
            continue
        if not lmarena:
            boot = _bootstrap(rows, mask, n, options, name) if options.n_boot else None
        ranks = min_ranks({s: round(float(theta[s]), 12) for s in ranked})
        tail = (1.0 - options.mass) / 2.0
        for s in sorted(ranked, key=lambda s: (ranks[s], systems[s])):
            low = high = None
            n_boot = 0
            if sandwich is not None:
                low, high = float(sandwich[0][s]), float(sandwich[1][s])
            if boot is not None:
                col = boot[:, s][np.isfinite(boot[:, s])]
                n_boot = int(col.size)
                if n_boot:
                    low, high = (float(v) for v in np.quantile(col, [tail, 1.0 - tail]))
            st = stats[s]
            out.append(
                {
                    "aspect": name,
                    "system": systems[s],
                    "rank": ranks[s],
                    "strength": float(theta[s]),
                    "strength_low": low,
                    "strength_high": high,
                    "elo": float(elo(theta[s])),
                    "elo_low": None if low is None else float(elo(low)),
                    "elo_high": None if high is None else float(elo(high)),
                    "mass": options.mass,
                    "n_boot": n_boot,
                    "win_ratio": st["points"] / st["n_judgments"],
                    **{
                        k: st[k]
                        for k in (
                            "n_judgments",
                            "n_wins",
                            "n_losses",
                            "n_ties",
                            "n_errors",
                            "n_contexts",
                            "n_opponents",
                        )
                    },
                    "n_judges": len(st["judges"]),
                    "judges": st["judges"],
                    **_winrate_fields(name, systems[s], baseline, carried),
                }
            )
    by_aspect = {OVERALL: judgments} if aspects else {}
    by_aspect |= {a: judgments.filter(pc.equal(judgments.column("aspect"), a)) for a in aspects}
    style = board_columns(
        judgments,
        candidates,
        baseline,
        by_aspect,
        given_features(style_features),
        compat=options.compat,
        n_boot=options.n_boot,
        seed=options.seed,
    )
    for row in out:
        row.update(style.get((row["aspect"], row["system"]), {"style_status": "not in the style-controlled fit"}))
    table = pa.Table.from_pylist(out, schema=LEADERBOARD)
    used_judges = sorted({names[j] for j in np.unique(rows.judge[rows.ok])})
    return Leaderboard(table, counts, used_judges, baseline, interval_kinds(options))


def aspect_rows(table: pa.Table, aspect: str) -> pa.Table:
    """The rows of one aspect (or ``overall``), best first."""
    mine = table.filter(pc.equal(table.column("aspect"), aspect))
    return mine.sort_by([("rank", "ascending"), ("system", "ascending")])
