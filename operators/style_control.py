"""Scores that see through style: length-controlled win rates and style-controlled Bradley-Terry.

Judges prefer longer answers (the longer one wins about 68% of GPT-4's MT-Bench
comparisons) and answers with more markdown, so a leaderboard that cannot tell style
from substance rewards verbosity. Two controls, both from the judgments and the
candidates' texts:

**Length-controlled win rate** against a baseline (after AlpacaEval 2, Dubois et al.
2024): one fit over every system's decisive comparisons with the baseline's output on
the same context, for system ``m``::

    logit P(m wins) = theta_m + beta * tanh(d / s) + gamma * slot

with ``d`` the length difference (m minus baseline, in characters), ``s`` its
standard deviation over all the systems' comparisons, and ``slot`` +1 when m was in
slot A, -1 in slot B (position bias). The length and slot coefficients are the
judge's, so they are shared: a system whose outputs are all longer than the baseline's
has its win rate at equal length read off the judge's length preference measured on
every system, not extrapolated from its own comparisons (a coefficient per system made
the LC win rates of verbose systems noisy: Spearman with the truth 0.88-0.91 against
0.97 shared, BENCHMARKS.md section 14). The length-controlled win rate is
``sigmoid(theta_m)``: the win rate at equal length, slots balanced; its interval the 95%
Wald interval of ``theta_m``. Adding a system moves the others' only through ``beta``,
``gamma`` and ``s``. (AlpacaEval's instruction-difficulty term is left out: measured, it
narrows the interval and it no longer holds the truth when the baseline is verbose.)

**Style-controlled Bradley-Terry** (after LMArena's style control): one fit over
every decisive comparison, ::

    logit P(a beats b) = theta_sys(a) - theta_sys(b) + beta_len * log(len(a) / len(b))
                         + sum_k beta_k * (f_k(a) - f_k(b)) / (f_k(a) + f_k(b)) + gamma

with markdown features ``f``: headers, bold spans and list items (the normalised
difference is 0 when both have none; LMArena's normalisation). Length enters as the
log ratio, so ``beta_len`` is on the scale of the judge-bias report's length
coefficient (:mod:`pairank.operators.judge_bias`). The strengths ``theta`` are the
systems' substance; ``beta`` says how much each style element buys (reported with
standard errors); ``gamma`` is the slot-A bias.

Ties count half a win to each side (a fractional outcome); error rows are left out.
Intervals are 95% Wald intervals from the fit's inverse Hessian; the style-controlled
strengths', given a bootstrap count (the leaderboard's ``--n-boot``), are the percentiles
of refits on contexts resampled with replacement (:func:`context_bootstrap`). A fit whose outcomes
are separated (a judge that always picks one slot, or one system that always wins)
has no finite maximum: it is reported as not identified (:data:`SEPARATED`), not
with the huge numbers the small ridge would give it.
"""

from __future__ import annotations

import math
import re
import warnings
import zlib
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from scipy.special import expit

from pairank.operators.compat import split_compat

#: Style features of the style-controlled fit: name -> what is counted in a text.
STYLE_FEATURES = {
    "length": lambda t: len(t),
    "headers": lambda t: len(re.findall(r"(?m)^\s{0,3}#{1,6}\s", t)),
    "bold": lambda t: len(re.findall(r"\*\*[^*\n]+\*\*|__[^_\n]+__", t)),
    "lists": lambda t: len(re.findall(r"(?m)^\s*(?:[-*+]|\d+[.)])\s", t)),
}
Z95 = 1.959963984540054
#: A coefficient or standard error past these (in logits) means the outcomes were separated: no finite fit.
SEPARATED = (8.0, 5.0)


def separated(coef: np.ndarray, cov: np.ndarray, x: np.ndarray | None = None) -> bool:
    """Whether a fit ran off to the ridge's bound (see :data:`SEPARATED`); with ``x``, only the coefficients of
    columns that are not all zero count (a style element no output has is simply absent).

    >>> separated(np.array([0.5, -1.0]), np.eye(2)), separated(np.array([15.0]), np.eye(1))
    (False, True)
    """
    present = np.ones(len(coef), dtype=bool) if x is None else np.any(x != 0, axis=0)
    coef, se = coef[present], np.sqrt(np.diag(cov))[present]
    return bool(np.max(np.abs(coef), initial=0.0) > SEPARATED[0] or np.max(se, initial=0.0) > SEPARATED[1])


def fit_logistic(
    x: np.ndarray,
    y: np.ndarray,
    ridge: np.ndarray | float = 1e-6,
    iters: int = 50,
    weights: np.ndarray | None = None,
    start: np.ndarray | None = None,
):
    """Maximum-likelihood logistic regression with fractional outcomes ``y`` in [0, 1] and an L2 ``ridge`` per
    coefficient (Newton's method from ``start``, default 0), each row counted ``weights`` times (default once).
    Returns the coefficients and their covariance (the inverse Hessian).

    >>> x = np.array([[1.0], [1.0], [1.0], [1.0]]); y = np.array([1.0, 1.0, 1.0, 0.0])
    >>> coef, cov = fit_logistic(x, y)
    >>> round(float(expit(coef[0])), 4)   # the intercept alone recovers the mean
    0.75
    """
    k = x.shape[1]
    penalty = np.broadcast_to(np.asarray(ridge, dtype=float), (k,))
    w = np.ones(len(y)) if weights is None else weights
    beta = np.zeros(k) if start is None else np.array(start, dtype=float)
    for _ in range(iters):
        p = expit(x @ beta)
        grad = x.T @ (w * (y - p)) - penalty * beta
        hess = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    p = expit(x @ beta)
    hess = (x * (w * p * (1 - p))[:, None]).T @ x + np.diag(penalty)
    return beta, np.linalg.inv(hess)


def context_bootstrap(
    x: np.ndarray,
    y: np.ndarray,
    ridge: np.ndarray,
    contexts: list,
    n: int,
    n_boot: int,
    seed: int,
    start: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """The 95% percentile interval of the first ``n`` coefficients (the strengths, centred) of ``n_boot`` refits
    of :func:`fit_logistic` on contexts resampled with replacement (a context carries all its rows, as the
    leaderboard's Bradley-Terry bootstrap resamples them), each started from ``start`` (the full fit: fewer
    Newton steps). A system absent from a resample is left out of that refit (the others centred without it);
    one absent from every resample has a nan interval (null in the tables)."""
    groups = np.unique(np.asarray(contexts, dtype=object).astype(str), return_inverse=True)[1]
    k = int(groups.max()) + 1
    rng = np.random.default_rng(seed)
    reps = np.full((n_boot, n), np.nan)
    for r in range(n_boot):
        w = np.bincount(rng.integers(0, k, size=k), minlength=k).astype(float)[groups]
        present = np.any(x[w > 0, :n] != 0, axis=0)
        coef, _ = fit_logistic(x, y, ridge=ridge, weights=w, start=start)
        reps[r, present] = coef[:n][present] - coef[:n][present].mean()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-nan columns: a system in no resample
        return np.nanquantile(reps, 0.025, axis=0), np.nanquantile(reps, 0.975, axis=0)


def _outcomes(judgments: pa.Table) -> dict[str, list]:
    """Decisive or tied verdicts: (context, a, b, y) with y = 1 when slot A won, 0.5 on a tie."""
    cols = {c: judgments.column(c).to_pylist() for c in ("context_id", "candidate_a", "candidate_b", "label", "error")}
    out: dict[str, list] = {"context_id": [], "a": [], "b": [], "y": []}
    for ctx, a, b, label, error in zip(*cols.values()):
        if error is not None or label not in ("A", "B", "tie"):
            continue
        out["context_id"].append(ctx)
        out["a"].append(a)
        out["b"].append(b)
        out["y"].append({"A": 1.0, "B": 0.0, "tie": 0.5}[label])
    return out


def _candidates(candidates: pa.Table) -> tuple[dict[str, str], dict[str, str]]:
    ids = candidates.column("candidate_id").to_pylist()
    systems, texts = candidates.column("system").to_pylist(), candidates.column("text").to_pylist()
    return dict(zip(ids, systems)), dict(zip(ids, texts))


def _interval(theta: float, se: float) -> tuple[float, float, float]:
    return float(expit(theta)), float(expit(theta - Z95 * se)), float(expit(theta + Z95 * se))


def length_controlled_winrates(
    judgments: pa.Table, candidates: pa.Table, baseline: str, compat: str | None = None
) -> pa.Table:
    """Per system: raw and length-controlled win rate against ``baseline`` (see the module docstring;
    ``compat="alpaca-eval"``: AlpacaEval's GLM, :mod:`pairank.operators.compat`)."""
    system_of, text_of = _candidates(candidates)
    if baseline not in set(system_of.values()):
        raise ValueError(f"length-controlled win rates: baseline {baseline!r} is not a system of the candidates")
    rows: dict[str, list[tuple]] = {}  # system -> (length diff, slot, y of the system, context)
    o = _outcomes(judgments)
    for ctx, a, b, y in zip(o["context_id"], o["a"], o["b"], o["y"]):
        sa, sb = system_of.get(a), system_of.get(b)
        if sa is None or sb is None or (sa == baseline) == (sb == baseline):
            continue
        if sb == baseline:
            rows.setdefault(sa, []).append((len(text_of[a]) - len(text_of[b]), 1.0, y, ctx))
        else:
            rows.setdefault(sb, []).append((len(text_of[b]) - len(text_of[a]), -1.0, 1.0 - y, ctx))
    return lc_table(rows, baseline, compat)


def shared_fit(owner: np.ndarray, z: np.ndarray, y: np.ndarray, n: int, ridge: tuple = (1e-6, 1e-2), iters: int = 50):
    """:func:`fit_logistic` of ``logit P = theta[owner] + z @ phi`` (a strength per system, coefficients shared)
    with ridges ``(on theta, on phi)``, the Hessian assembled per system, so that the rows never meet a
    rows x systems matrix. Returns ``[theta, phi]`` and their covariance (the inverse Hessian).

    >>> coef, cov = shared_fit(np.array([0, 0, 1, 1]), np.zeros((4, 1)), np.array([1.0, 0.0, 1.0, 1.0]), 2)
    >>> round(float(coef[0]), 4), bool(coef[1] > 8)   # a system that always wins runs off to the ridge's bound
    (0.0, True)
    """
    k = z.shape[1]
    penalty = np.r_[np.full(n, ridge[0]), np.full(k, ridge[1])]

    def hessian(p: np.ndarray) -> np.ndarray:
        w = p * (1 - p)
        h = np.diag(penalty)
        h[np.arange(n), np.arange(n)] += np.bincount(owner, weights=w, minlength=n)
        cross = np.stack([np.bincount(owner, weights=w * z[:, c], minlength=n) for c in range(k)], axis=1)
        h[:n, n:], h[n:, :n] = cross, cross.T
        h[n:, n:] += (z * w[:, None]).T @ z
        return h

    beta = np.zeros(n + k)
    for _ in range(iters):
        r = y - expit(beta[owner] + z @ beta[n:])
        grad = np.r_[np.bincount(owner, weights=r, minlength=n), z.T @ r] - penalty * beta
        step = np.linalg.solve(hessian(expit(beta[owner] + z @ beta[n:])), grad)
        beta = beta + step
        if np.max(np.abs(step)) < 1e-10:
            break
    return beta, np.linalg.inv(hessian(expit(beta[owner] + z @ beta[n:])))


def lc_table(rows: dict[str, list[tuple]], baseline: str, compat: str | None = None) -> pa.Table:
    """LC_WINRATES from each system's comparisons with the baseline: ``(length difference (system minus
    baseline), slot (+1 when the system was A), the system's y, context)``. One fit over every system's rows
    (see the module docstring): a strength per system, the judge's length and slot coefficients shared."""
    if compat == "alpaca-eval":
        return _alpaca_lc_table(rows, baseline)
    systems = sorted(rows)
    every = [r for s in systems for r in rows[s]]
    owner = np.array([j for j, s in enumerate(systems) for _ in rows[s]], dtype=int)
    d, slot, y = (np.array([r[k] for r in every], dtype=float) for k in range(3))
    scale = float(d.std()) if d.size and d.std() > 0 else 1.0
    n = len(systems)
    z = np.column_stack([np.tanh(d / scale), slot])
    in_a, judged = np.bincount(owner, weights=slot > 0, minlength=n), np.bincount(owner, minlength=n)
    if np.all((in_a == 0) | (in_a == judged)):  # each system in one slot order: the slot term is a sum of the
        z = z[:, :1]  # strengths, left out
    coef, cov = shared_fit(owner, z, y, n) if n else (np.zeros(0), np.zeros((0, 0)))
    judge_separated = n > 0 and separated(coef[n:], cov[n:, n:], z)
    out = []
    for j, system in enumerate(systems):
        mine = y[owner == j]
        lost = judge_separated or separated(coef[j : j + 1], cov[j : j + 1, j : j + 1])
        lc, low, high = (None, None, None) if lost else _interval(coef[j], math.sqrt(cov[j, j]))
        out.append(
            {
                "system": system,
                "baseline": baseline,
                "n": len(mine),
                "win_rate": float(mine.mean()),
                "lc_win_rate": lc,
                "lc_low": low,
                "lc_high": high,
                "length_coef": None if lc is None else float(coef[n]),
                "length_se": None if lc is None else float(math.sqrt(cov[n, n])),
            }
        )
    return pa.Table.from_pylist(out, schema=LC_WINRATES)


def _alpaca_lc_table(rows: dict[str, list[tuple]], baseline: str) -> pa.Table:
    """LC_WINRATES by AlpacaEval's GLM: ``lc_low``/``lc_high`` are the LC win rate -/+ 1.96 of its standard
    error (AlpacaEval's ``lc_standard_error``); ``length_se`` is null (an L1 fit has no Wald error)."""
    from pairank.operators.compat import alpaca_glm, difficulty_unknown, instruction_difficulty

    every = [r for rs in rows.values() for r in rs]
    problem = difficulty_unknown([r[3] for r in every], baseline)
    if problem is not None:
        raise ValueError(problem)
    difficulty = instruction_difficulty([r[3] for r in every], np.array([r[2] for r in every], dtype=float))
    out = []
    for system in sorted(rows):
        d = np.array([-r[0] for r in rows[system]], dtype=float)  # AlpacaEval: baseline minus system
        y = np.array([r[2] for r in rows[system]], dtype=float)
        fit = alpaca_glm(d, y, np.array([difficulty[r[3]] for r in rows[system]]))
        out.append(
            {
                "system": system,
                "baseline": baseline,
                "n": len(y),
                "win_rate": float(y.mean()),
                "lc_win_rate": fit["lc"],
                "lc_low": max(0.0, fit["lc"] - Z95 * fit["se"]),
                "lc_high": min(1.0, fit["lc"] + Z95 * fit["se"]),
                "length_coef": float(fit["coef"][0]),
                "length_se": None,
            }
        )
    return pa.Table.from_pylist(out, schema=LC_WINRATES)


def style_features(text: str) -> dict[str, float]:
    """The style counts of a text.

    >>> style_features("# Title\\n\\n- **one**\\n- two\\n")
    {'length': 25.0, 'headers': 1.0, 'bold': 1.0, 'lists': 2.0}
    """
    return {name: float(count(text)) for name, count in STYLE_FEATURES.items()}


class Separated(ValueError):
    """A fit whose outcomes are separated: its maximum-likelihood estimate is infinite."""


def given_features(style: pa.Table | None) -> dict[str, dict[str, float]]:
    """``candidate_id -> {feature: count}`` from a STYLE_FEATURES table (none: ``{}``)."""
    if style is None:
        return {}
    cols = {c: style.column(c).to_pylist() for c in ("candidate_id", *STYLE_FEATURES)}
    return {cid: {f: float(cols[f][i]) for f in STYLE_FEATURES} for i, cid in enumerate(cols["candidate_id"])}


def style_controlled_bt(
    judgments: pa.Table,
    candidates: pa.Table,
    given: dict[str, dict[str, float]] | None = None,
    compat: str | None = None,
    n_boot: int = 0,
    seed: int = 0,
) -> tuple[pa.Table, pa.Table]:
    """Systems' strengths with style held equal, and the style coefficients (see the module docstring).
    ``given``: style counts per candidate id (:func:`given_features`), used instead of counting them in the text.
    The strengths' 95% intervals: with ``n_boot`` 0 Wald's (from the inverse Hessian), else the percentiles of
    ``n_boot`` refits on contexts resampled with replacement (:func:`context_bootstrap`, seeded by ``seed``).
    ``compat="lmarena"``: the fit as LMArena's arena-rank makes it, with its sandwich intervals, or with
    ``n_boot`` its bootstrap of battles (:func:`pairank.operators.compat.lmarena_style`)."""
    system_of, text_of = _candidates(candidates)
    o = _outcomes(judgments)
    keep = [
        i
        for i, (a, b) in enumerate(zip(o["a"], o["b"]))
        if a in system_of and b in system_of and system_of[a] != system_of[b]
    ]
    systems = sorted({system_of[o[s][i]] for i in keep for s in ("a", "b")})
    if len(systems) < 2:
        raise ValueError("style-controlled Bradley-Terry: needs comparisons between at least two systems")
    index = {s: j for j, s in enumerate(systems)}
    given = given or {}
    feats = {c: given.get(c) or style_features(text_of[c]) for c in {o[s][i] for i in keep for s in ("a", "b")}}
    names = list(STYLE_FEATURES)
    if compat == "lmarena":
        return _lmarena_bt(o, keep, systems, system_of, feats, n_boot, seed)
    x = np.zeros((len(keep), len(systems) + len(names) + 1))
    for r, i in enumerate(keep):
        a, b = o["a"][i], o["b"][i]
        x[r, index[system_of[a]]] += 1.0
        x[r, index[system_of[b]]] -= 1.0
        for k, name in enumerate(names):
            fa, fb = feats[a][name], feats[b][name]
            if name == "length":
                x[r, len(systems) + k] = math.log(max(fa, 1.0) / max(fb, 1.0))
            else:
                x[r, len(systems) + k] = (fa - fb) / (fa + fb) if fa + fb > 0 else 0.0
        x[r, -1] = 1.0  # slot A
    y = np.array([o["y"][i] for i in keep])
    # a small ridge on the strengths fixes their sum (they are identified only up to a constant)
    ridge = np.array([1e-4] * len(systems) + [1e-6] * (len(names) + 1))
    coef, cov = fit_logistic(x, y, ridge=ridge)
    n = len(systems)
    center = np.eye(n) - 1.0 / n  # strengths centred on 0, with their covariance
    theta, theta_cov = center @ coef[:n], center @ cov[:n, :n] @ center.T
    theta_se = np.sqrt(np.diag(theta_cov))
    style = slice(n, None)
    if separated(theta, theta_cov) or separated(coef[style], cov[style, style], x[:, style]):
        raise Separated(
            "style-controlled Bradley-Terry: the outcomes are separated (one slot or one system always "
            "wins): no finite fit"
        )
    if n_boot:
        low, high = context_bootstrap(x, y, ridge, [o["context_id"][i] for i in keep], n, n_boot, seed, coef)
    else:
        low, high = theta - Z95 * theta_se, theta + Z95 * theta_se
    strengths: list[dict[str, Any]] = sorted(
        (
            {
                "system": s,
                "strength": float(theta[j]),
                "strength_low": None if math.isnan(low[j]) else float(low[j]),
                "strength_high": None if math.isnan(high[j]) else float(high[j]),
            }
            for j, s in enumerate(systems)
        ),
        key=lambda r: -r["strength"],
    )
    for rank, row in enumerate(strengths, 1):
        row["rank"] = rank
    se = np.sqrt(np.diag(cov))
    coefs = [
        {"feature": name, "coef": float(coef[n + k]), "se": float(se[n + k])}
        for k, name in enumerate([*names, "slot_a"])
    ]
    return pa.Table.from_pylist(strengths, schema=STYLE_BT), pa.Table.from_pylist(coefs, schema=STYLE_COEFS)


def _lmarena_bt(o: dict, keep: list[int], systems: list[str], system_of: dict, feats: dict, n_boot: int, seed: int):
    from pairank.operators.compat import lmarena_style

    index = {s: j for j, s in enumerate(systems)}
    first = np.array([index[system_of[o["a"][i]]] for i in keep])
    second = np.array([index[system_of[o["b"][i]]] for i in keep])
    fa, fb = (np.array([[feats[o[s][i]][f] for f in STYLE_FEATURES] for i in keep]) for s in ("a", "b"))
    fit = lmarena_style(
        first, second, np.array([o["y"][i] for i in keep]), fa, fb, len(systems), n_boot=n_boot, seed=seed
    )
    theta = fit["theta"]
    if not np.all(np.isfinite(theta)) or separated(theta, np.diag((fit["high"] - theta) ** 2 / Z95**2)):
        raise Separated("style-controlled Bradley-Terry (compat lmarena): the outcomes are separated: no finite fit")
    order = sorted(range(len(systems)), key=lambda j: -theta[j])
    strengths = [
        {
            "system": systems[j],
            "strength": float(theta[j]),
            "strength_low": float(fit["low"][j]),
            "strength_high": float(fit["high"][j]),
            "rank": rank,
        }
        for rank, j in enumerate(order, 1)
    ]
    coefs = [
        {"feature": f, "coef": float(c), "se": float(se)}
        for f, c, se in zip(STYLE_FEATURES, fit["beta"], fit["beta_se"])
    ]
    return pa.Table.from_pylist(strengths, schema=STYLE_BT), pa.Table.from_pylist(coefs, schema=STYLE_COEFS)


LC_WINRATES = pa.schema(
    [
        ("system", pa.string()),
        ("baseline", pa.string()),
        ("n", pa.int64()),
        ("win_rate", pa.float64()),
        ("lc_win_rate", pa.float64()),
        ("lc_low", pa.float64()),
        ("lc_high", pa.float64()),
        ("length_coef", pa.float64()),
        ("length_se", pa.float64()),
    ]
)
STYLE_BT = pa.schema(
    [
        ("system", pa.string()),
        ("strength", pa.float64()),
        ("strength_low", pa.float64()),
        ("strength_high", pa.float64()),
        ("rank", pa.int64()),
    ]
)
STYLE_COEFS = pa.schema([("feature", pa.string()), ("coef", pa.float64()), ("se", pa.float64())])


def style_control_section(
    judgments: pa.Table, candidates: pa.Table, baseline: str | None = None, compat: tuple[str, ...] = ()
) -> list[dict]:
    """Per aspect: the style-controlled strengths and coefficients, and (with a baseline) the length-controlled
    win rates; an aspect whose comparisons involve fewer than two systems is left out. ``compat``: names of
    :data:`pairank.operators.compat.COMPAT`."""
    style_compat, lc_compat = split_compat(compat)
    out = []
    for aspect in sorted(set(judgments.column("aspect").to_pylist())):
        mine = judgments.filter(pc.equal(judgments.column("aspect"), aspect))
        try:
            strengths, coefs = style_controlled_bt(mine, candidates, compat=style_compat)
            section = {"aspect": aspect, "strengths": strengths.to_pylist(), "coefficients": coefs.to_pylist()}
        except Separated as exc:
            section = {"aspect": aspect, "not_identified": str(exc)}
        except ValueError:
            continue
        if baseline is not None and baseline in set(candidates.column("system").to_pylist()):
            lc = length_controlled_winrates(mine, candidates, baseline, lc_compat)
            section["length_controlled"] = lc.to_pylist()
        out.append(section)
    return out


def board_columns(
    judgments: pa.Table,
    candidates: pa.Table,
    baseline: str | None,
    groups: dict[str, pa.Table],
    given: dict[str, dict[str, float]] | None = None,
    compat: tuple[str, ...] = (),
    n_boot: int = 0,
    seed: int = 0,
) -> dict[tuple[str, str], dict]:
    """The leaderboard's style-controlled columns (``style_*``, ``lc_*``; see LEADERBOARD) per (group, system),
    ``groups`` naming each aspect's (or the pooled) judgments. Without candidate texts, or where the fit is not
    identified, the values are null and ``style_status`` says why. ``compat``: names of
    :data:`pairank.operators.compat.COMPAT`. ``n_boot``: the bootstrap refits behind ``style_low``/``style_high``
    (:func:`style_controlled_bt`; 0: Wald's, or under compat lmarena the sandwich interval), seeded by
    ``(seed, group)`` as the leaderboard's strengths are; the LC intervals take none."""
    style_compat, lc_compat = split_compat(compat)
    missing = (
        "no candidate texts"
        if "text" not in candidates.column_names
        else ("no verdict labels" if "label" not in judgments.column_names else None)
    )
    if missing:
        return {(g, s): {"style_status": missing} for g in groups for s in set(candidates.column("system").to_pylist())}
    system_of, _ = _candidates(candidates)
    out: dict[tuple[str, str], dict] = {}
    for group, mine in groups.items():
        try:
            group_seed = zlib.crc32(f"{seed}/{group}".encode())
            strengths, _ = style_controlled_bt(mine, candidates, given, style_compat, n_boot, group_seed)
        except ValueError as exc:  # Separated, or fewer than two systems compared
            not_identified = isinstance(exc, Separated)
            status = "not identified (separated outcomes)" if not_identified else str(exc).split(": ", 1)[-1]
            ids = mine.column("candidate_a").to_pylist() + mine.column("candidate_b").to_pylist()
            out.update({(group, system_of[c]): {"style_status": status} for c in ids if c in system_of})
            continue
        for r in strengths.to_pylist():
            out[(group, r["system"])] = {
                "style_strength": r["strength"],
                "style_low": r["strength_low"],
                "style_high": r["strength_high"],
                "style_rank": r["rank"],
                "style_status": "ok",
            }
        if baseline is None or baseline not in set(system_of.values()):
            continue
        for r in length_controlled_winrates(mine, candidates, baseline, lc_compat).to_pylist():
            out.setdefault((group, r["system"]), {"style_status": "ok"}).update(
                lc_win_rate=r["lc_win_rate"], lc_low=r["lc_low"], lc_high=r["lc_high"]
            )
    return out


#: An LC win rate extrapolates when at least this share of a system's pairs with the baseline lie on one side.
EXTRAPOLATES = 0.9


def length_sides(judgments: pa.Table, candidates: pa.Table, baseline: str) -> dict[str, tuple[int, int, int]]:
    """Per system: how many of its decisive or tied comparisons with the baseline have its output shorter, longer,
    and in all (characters)."""
    system_of, text_of = _candidates(candidates)
    out: dict[str, list[int]] = {}
    o = _outcomes(judgments)
    for a, b in zip(o["a"], o["b"]):
        sa, sb = system_of.get(a), system_of.get(b)
        if sa is None or sb is None or (sa == baseline) == (sb == baseline):
            continue
        mine, base = (a, b) if sb == baseline else (b, a)
        n = out.setdefault(system_of[mine], [0, 0, 0])
        n[0] += len(text_of[mine]) < len(text_of[base])
        n[1] += len(text_of[mine]) > len(text_of[base])
        n[2] += 1
    return {s: (n[0], n[1], n[2]) for s, n in sorted(out.items())}


def lc_warnings(judgments: pa.Table, candidates: pa.Table, baseline: str, share: float = EXTRAPOLATES) -> list[str]:
    """A warning for each system whose length-controlled win rate is an extrapolation: its outputs are shorter (or
    longer) than the baseline's in at least ``share`` of its comparisons with it, so the fit reads the win rate at
    equal length off a range of length differences the data barely reaches.

    >>> import pyarrow as pa
    >>> c = pa.table({"candidate_id": ["x1", "b1", "x2", "b2"], "system": ["x", "b", "x", "b"],
    ...               "text": ["hi", "a longer answer", "yo", "another long one"]})
    >>> j = pa.table({"context_id": ["1", "2"], "candidate_a": ["x1", "b2"], "candidate_b": ["b1", "x2"],
    ...               "label": ["A", "A"], "error": [None, None]})
    >>> print(*lc_warnings(j, c, "b"))  # doctest: +NORMALIZE_WHITESPACE
    x: the length-controlled win rate against b extrapolates: its outputs are shorter than b's in 2 of its 2
    comparisons (100%)
    """
    out = []
    for system, (shorter, longer, n) in length_sides(judgments, candidates, baseline).items():
        for count, word in ((shorter, "shorter"), (longer, "longer")):
            if n and count / n >= share:
                out.append(
                    f"{system}: the length-controlled win rate against {baseline} extrapolates: its outputs are "
                    f"{word} than {baseline}'s in {count} of its {n} comparisons ({count / n:.0%})"
                )
    return out
