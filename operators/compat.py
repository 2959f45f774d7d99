"""Compatibility settings: a statistic computed as a peer tool computes it, for a user who must match its board.

pairank's own Bradley-Terry fit (:mod:`pairank.operators.bradley_terry`), style control and length-controlled
(LC) win rates are the defaults (:mod:`pairank.operators.style_control`). Two settings, each named for the tool
it reproduces (docs/leaderboards.md lays each difference beside its measured effect):

``lmarena`` for plain Bradley-Terry (the strengths and Elo as arena-rank's ``BradleyTerry`` fits them)
    - ties (``tie``, ``both_bad``) are an outcome of 0.5, every battle weighs 1 (``PairDataset``'s default, no
      reweighting), and there is no prior: the maximum likelihood, strengths summing to 0, which exists only
      where the comparison graph is strongly connected (pairank's own fit adds one virtual tie per system);
    - the battles are aggregated into unique ``(a, b, outcome)`` rows with their counts, as arena-rank does;
    - intervals: a bootstrap of battles (a multinomial draw of the rows' counts, as arena-rank's, refitted on the
      systems it draws; a draw whose graph is not strongly connected has no maximum and is left out), or with
      no bootstrap its sandwich interval;
    - it is the style-controlled fit below without features: :func:`lmarena_fit` and :func:`lmarena_sandwich`
      with no style columns (so no penalty).

``lmarena`` for style control (style-controlled Bradley-Terry as LMArena fits it with arena-rank's
``ContextualBradleyTerry``)
    - features: for tokens (or characters), headers, bold spans and list items, the normalised difference
      ``(a - b) / (a + b)`` (0 when both are 0), then standardised over the battles (mean 0, population sd 1);
      no slot-A term;
    - each battle weighted by ``1 / max(n_pair, 50)``, ``n_pair`` the battles of its unordered pair of systems,
      the weights scaled to mean 1;
    - the loss is the *mean* weighted log-likelihood plus ``reg / 2 * |beta|^2`` on the style coefficients
      (reg 1.0; the strengths are not penalised, their sum is 0);
    - intervals: a bootstrap of battles (the weights and features of the drawn battles kept), or with no
      bootstrap arena-rank's sandwich interval.

``alpaca-eval`` (length-controlled win rate as AlpacaEval 2.0's GLM ``length_controlled_noreg`` computes it)
    - per system, one row per comparison with the baseline: ``y`` the system's win (tie 0.5), the columns
      ``tanh((len_baseline - len_system) / sd)`` with ``sd`` that system's own sample sd of the length
      differences, the context's instruction difficulty, and a constant; no separate intercept, so the
      constant is penalised like the rest;
    - an L1 penalty (liblinear's objective ``|w|_1 + C * sum cross-entropy``), ``C`` chosen from
      ``logspace(-4, 4, 10)`` by 5-fold cross-validated log loss (folds as scikit-learn's ``GroupKFold`` makes
      them for the rows in the order given), then refitted on all rows;
    - the LC win rate is the mean over the rows of the prediction at length difference 0; its standard error
      the standard error of that mean (AlpacaEval's ``lc_standard_error``);
    - the instruction difficulty of a context is the logit of the mean of every system's ``y`` on it (as
      AlpacaEval's own analysis derives it), with half a win added to keep it finite:
      ``logit((k + 0.5) / (n + 1))``. AlpacaEval's shipped difficulties of its 805 instructions and its
      regularisation towards gamed (verbose/concise) baselines need AlpacaEval's own data and are left out.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit

#: The compatibility settings: name -> the statistic it changes.
COMPAT = {
    "lmarena": "Bradley-Terry and style-controlled Bradley-Terry as LMArena's arena-rank fits them",
    "alpaca-eval": "length-controlled win rate as AlpacaEval 2.0's GLM computes it",
}
LMARENA_REG = 1.0
LMARENA_MIN_PAIR_COUNT = 50
LMARENA_HESSIAN_REG = 1e-5
ALPACA_CS = np.logspace(-4, 4, 10)
ALPACA_FOLDS = 5


#: Per statistic: its name in messages and its compatibility setting.
STATISTICS = {
    "bt": ("Bradley-Terry", "lmarena"),
    "style": ("style control", "lmarena"),
    "lc": ("LC win rates", "alpaca-eval"),
}


def check_compat(value: str | None, statistic: str) -> str | None:
    """``value`` if it names the compatibility setting of ``statistic`` (``"lmarena"`` for Bradley-Terry,
    ``"bt"``, and style control, ``"style"``; ``"alpaca-eval"`` for LC win rates, ``"lc"``), else an error
    listing the allowed names.

    >>> check_compat("lmarena", "style"), check_compat("lmarena", "bt"), check_compat(None, "lc")
    ('lmarena', 'lmarena', None)
    >>> check_compat("alpaca-eval", "bt")
    Traceback (most recent call last):
    ...
    ValueError: compat for Bradley-Terry: expected one of [None, 'lmarena'], found 'alpaca-eval'
    """
    what, allowed = STATISTICS[statistic]
    if value not in (None, allowed):
        raise ValueError(f"compat for {what}: expected one of [None, {allowed!r}], found {value!r}")
    return value


def split_compat(names) -> tuple[str | None, str | None]:
    """The Bradley-Terry and style-control setting (one: ``lmarena`` sets both) and the LC setting of a list of
    compatibility names (each named for its tool).

    >>> split_compat(["alpaca-eval"]), split_compat(["lmarena", "alpaca-eval"])
    ((None, 'alpaca-eval'), ('lmarena', 'alpaca-eval'))
    >>> split_compat(["arena"])
    Traceback (most recent call last):
    ...
    ValueError: compat: expected names from ['lmarena', 'alpaca-eval'], found 'arena'
    """
    for name in names or ():
        if name not in COMPAT:
            raise ValueError(f"compat: expected names from {list(COMPAT)}, found {name!r}")
    names = set(names or ())
    return ("lmarena" if "lmarena" in names else None), ("alpaca-eval" if "alpaca-eval" in names else None)


# ---------------------------------------------------------------------------------------------- LMArena


def lmarena_features(fa: np.ndarray, fb: np.ndarray) -> np.ndarray:
    """Per battle and feature: ``(a - b) / (a + b)`` (0 where both are 0), standardised over the battles.

    >>> lmarena_features(np.array([[3.0], [1.0]]), np.array([[1.0], [1.0]])).round(3).tolist()
    [[1.0], [-1.0]]
    """
    total = fa + fb
    raw = np.divide(fa - fb, total, out=np.zeros_like(total, dtype=float), where=total != 0)
    sd = raw.std(axis=0)
    return (raw - raw.mean(axis=0)) / np.where(sd == 0, 1.0, sd)


def pair_weights(first: np.ndarray, second: np.ndarray, min_count: int = LMARENA_MIN_PAIR_COUNT) -> np.ndarray:
    """``1 / max(n_pair, min_count)`` per battle, scaled to mean 1 (``n_pair``: battles of its unordered pair).

    >>> pair_weights(np.array([0, 1, 0]), np.array([1, 0, 2]), min_count=1).round(3).tolist()
    [0.75, 0.75, 1.5]
    """
    lo, hi = np.minimum(first, second), np.maximum(first, second)
    _, inverse, counts = np.unique(np.column_stack([lo, hi]), axis=0, return_inverse=True, return_counts=True)
    w = 1.0 / np.maximum(counts[inverse.ravel()], min_count)
    return w / w.mean()


def _design(first, second, features, n):
    x = np.zeros((len(first), n))
    x[np.arange(len(first)), first] += 1.0
    x[np.arange(len(first)), second] -= 1.0
    return np.column_stack([x, features])


def lmarena_fit(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, n: int, reg: float = LMARENA_REG, counts: np.ndarray | None = None
) -> np.ndarray:
    """The minimiser of ``-mean(w * loglik) + reg / 2 * |beta|^2`` over strengths (sum 0) and coefficients
    ``beta`` (the columns after the first ``n``), by Newton's method. ``counts``: the battles each row stands
    for (unset: one each); the mean is over the battles."""
    k = x.shape[1]
    c = np.ones(len(y)) if counts is None else np.asarray(counts, dtype=float)
    penalty = np.r_[np.zeros(n), np.full(k - n, reg)]
    gauge = np.zeros(k)
    gauge[:n] = 1.0 / np.sqrt(n)
    beta = np.zeros(k)
    m = c.sum()
    cw = c * w
    for _ in range(100):
        p = expit(x @ beta)
        grad = x.T @ (cw * (p - y)) / m + penalty * beta
        hess = (x * (cw * p * (1 - p))[:, None]).T @ x / m + np.diag(penalty) + np.outer(gauge, gauge)
        step = np.linalg.solve(hess, grad)
        beta = beta - step
        if np.max(np.abs(step)) < 1e-12:
            break
    beta[:n] -= beta[:n].mean()
    return beta


def lmarena_sandwich(
    x: np.ndarray, y: np.ndarray, w: np.ndarray, beta: np.ndarray, n: int, counts: np.ndarray | None = None
) -> np.ndarray:
    """Standard errors of the strengths and coefficients from arena-rank's sandwich estimator
    ``H^-1 G H^-1 / m`` (``H`` the Hessian of the mean log-likelihood with 1e-5 on its diagonal, ``G`` the
    gradients' covariance less the penalty's share; ``m`` the battles, ``counts`` of them per row)."""
    k = x.shape[1]
    c = np.ones(len(y)) if counts is None else np.asarray(counts, dtype=float)
    m = c.sum()
    p = expit(x @ beta)
    hess = (x * (c * w * p * (1 - p))[:, None]).T @ x / m + LMARENA_HESSIAN_REG * np.eye(k)
    grads = (w * (y - p))[:, None] * x
    shrunk = np.r_[np.zeros(n), beta[n:]]
    cov = (grads * c[:, None]).T @ grads / m - (LMARENA_REG**2 / m) * np.outer(shrunk, shrunk)
    inv = np.linalg.inv(hess)
    return np.sqrt(np.diag(inv @ cov @ inv) / m)


def strongly_connected(first: np.ndarray, second: np.ndarray, y: np.ndarray, n: int) -> bool:
    """Whether every system has a chain of wins (a tie is half a win each way) to every other: where the
    Bradley-Terry maximum likelihood without a prior exists.

    >>> strongly_connected(np.array([0, 1]), np.array([1, 2]), np.array([1.0, 0.5]), 3)  # 0 never lost
    False
    >>> strongly_connected(np.array([0, 1, 2]), np.array([1, 2, 0]), np.array([1.0, 0.5, 1.0]), 3)
    True
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    beats = np.r_[first[y > 0], second[y < 1]], np.r_[second[y > 0], first[y < 1]]
    graph = coo_matrix((np.ones(len(beats[0])), beats), shape=(n, n))
    return n <= 1 or connected_components(graph, directed=True, connection="strong")[0] == 1


def lmarena_bt(
    first: np.ndarray,
    second: np.ndarray,
    y: np.ndarray,
    n: int,
    *,
    weights: np.ndarray | None = None,
    n_boot: int = 0,
    seed=0,
    mass: float = 0.95,
) -> dict:
    """The ``lmarena`` plain Bradley-Terry fit (see the module docstring) of battles ``first`` vs ``second`` with
    slot A's outcome ``y`` (1, 0.5 or 0) among ``n`` systems, each of which has a battle: ``theta``
    (natural-log scale, sum 0), ``low``/``high`` (percentiles of ``replicates``: ``n_boot`` multinomial draws
    of the battles, each refitted on the systems it draws, nan for the others and for every system of a draw
    that is not strongly connected; else sandwich intervals) and ``interval``. ``weights``: each battle's
    weight in the likelihood (unset: 1; the leaderboard's decisive verdicts weigh more); ``seed``: anything
    :func:`numpy.random.default_rng` takes. A comparison graph that is not strongly connected has no maximum:
    a ValueError.

    >>> fit = lmarena_bt(np.array([0, 1, 1, 0]), np.array([1, 0, 0, 1]), np.array([1.0, 1.0, 0.0, 0.5]), 2)
    >>> round(float(fit["theta"][0] - fit["theta"][1]), 6) == round(float(np.log(2.5 / 1.5)), 6), fit["interval"]
    (True, "sandwich (arena-rank's), 95%, compat lmarena")
    """
    from scipy.stats import norm

    w = np.ones(len(y)) if weights is None else np.asarray(weights, dtype=float)
    if not strongly_connected(first, second, y, n):
        raise ValueError(
            "compat lmarena (arena-rank's Bradley-Terry, no prior): the comparison graph is not strongly connected "
            "(some systems have no chain of wins to some others), so the maximum-likelihood strengths do not exist; "
            "pairank's own fit (its virtual ties) keeps them finite"
        )
    keys, counts = np.unique(np.column_stack([first, second, y, w]), axis=0, return_counts=True)
    a, b, yy, ww = keys[:, 0].astype(np.int64), keys[:, 1].astype(np.int64), keys[:, 2], keys[:, 3]
    x = _design(a, b, np.zeros((len(keys), 0)), n)
    theta = lmarena_fit(x, yy, ww, n, counts=counts)
    rng = np.random.default_rng(seed)
    reps = np.full((n_boot, n), np.nan)
    for r in range(n_boot):
        drawn = rng.multinomial(len(y), counts / len(y)).astype(float)
        used = drawn > 0
        here = np.zeros(n, dtype=bool)
        here[a[used]] = here[b[used]] = True
        pos, k = np.cumsum(here) - 1, int(here.sum())
        if strongly_connected(pos[a[used]], pos[b[used]], yy[used], k):
            sub = _design(pos[a[used]], pos[b[used]], np.zeros((int(used.sum()), 0)), k)
            reps[r, here] = lmarena_fit(sub, yy[used], ww[used], k, counts=drawn[used])
    if n_boot:
        tail = (1.0 - mass) / 2.0
        columns = [reps[np.isfinite(reps[:, j]), j] for j in range(n)]
        low, high = (np.array([np.quantile(c, q) if c.size else np.nan for c in columns]) for q in (tail, 1 - tail))
        interval = (
            f"bootstrap percentile, {mass:.0%}, over battles resampled with replacement ({n_boot} refits; "
            "compat lmarena)"
        )
    else:
        se = lmarena_sandwich(x, yy, ww, theta, n, counts=counts)
        z = norm.ppf(0.5 + mass / 2.0)
        low, high = theta - z * se, theta + z * se
        interval = f"sandwich (arena-rank's), {mass:.0%}, compat lmarena"
    return {"theta": theta, "low": low, "high": high, "replicates": reps, "interval": interval}


def lmarena_style(
    first: np.ndarray,
    second: np.ndarray,
    y: np.ndarray,
    fa: np.ndarray,
    fb: np.ndarray,
    n: int,
    *,
    n_boot: int = 0,
    seed: int = 0,
    mass: float = 0.95,
) -> dict:
    """The ``lmarena`` style-controlled fit (see the module docstring): ``theta`` (strengths, natural-log scale,
    sum 0), ``beta`` (one per feature), ``low``/``high`` (percentiles of ``replicates`` with a bootstrap of
    battles, else sandwich intervals) and ``interval`` (what kind)."""
    from scipy.stats import norm

    x = _design(first, second, lmarena_features(fa, fb), n)
    w = pair_weights(first, second)
    coef = lmarena_fit(x, y, w, n)
    theta = coef[:n]
    rng = np.random.default_rng(seed)
    reps = np.empty((n_boot, n))
    for r in range(n_boot):
        idx = rng.integers(0, len(y), size=len(y))
        reps[r] = lmarena_fit(x[idx], y[idx], w[idx], n)[:n]
    if n_boot:
        tail = (1.0 - mass) / 2.0
        low, high = np.quantile(reps, tail, axis=0), np.quantile(reps, 1.0 - tail, axis=0)
        interval = (
            f"bootstrap percentile, {mass:.0%}, over battles resampled with replacement ({n_boot} refits; "
            "compat lmarena)"
        )
    else:
        se = lmarena_sandwich(x, y, w, coef, n)
        low, high = theta - norm.ppf(0.5 + mass / 2.0) * se[:n], theta + norm.ppf(0.5 + mass / 2.0) * se[:n]
        interval = f"sandwich (arena-rank's), {mass:.0%}, compat lmarena"
    beta_se = lmarena_sandwich(x, y, w, coef, n)[n:]
    return {
        "theta": theta,
        "beta": coef[n:],
        "beta_se": beta_se,
        "low": low,
        "high": high,
        "replicates": reps,
        "interval": interval,
    }


# ------------------------------------------------------------------------------------------ AlpacaEval


#: ``compat: alpaca-eval`` is refused when more than this share of the baseline's comparisons are alone in their
#: context: their instruction difficulty would be their own result, and the LC win rate the raw one.
ALONE_SHARE = 0.5


def difficulty_unknown(contexts: list, baseline: str) -> str | None:
    """Why AlpacaEval's instruction difficulty cannot be estimated from these comparisons with ``baseline`` (one
    context each), or None. Each context's difficulty is the share of wins of the systems judged against the
    baseline there: a context with one comparison gives back that comparison's own result, so where most are alone
    the GLM's LC win rate is the raw win rate (each battle a context of its own, as battles imported without a
    context field are).

    >>> difficulty_unknown(["q1", "q1", "q2", "q2"], "b") is None
    True
    >>> print(difficulty_unknown(["b1", "b2", "b3", "q", "q"], "base"))  # doctest: +NORMALIZE_WHITESPACE
    compat alpaca-eval: 3 of the 5 comparisons with base are the only one of their context (3 of 4 contexts), so
    their instruction difficulty would be their own result and the LC win rate the raw win rate; judge several
    systems against base on each context (battles: `pairank import battles --context-field FIELD` naming the
    prompt they share), or leave out compat alpaca-eval
    """
    per: dict = {}
    for c in contexts:
        per[c] = per.get(c, 0) + 1
    alone = [c for c, n in per.items() if n == 1]
    if not contexts or len(alone) <= ALONE_SHARE * len(contexts):
        return None
    return (
        f"compat alpaca-eval: {len(alone)} of the {len(contexts)} comparisons with {baseline} are the only one of "
        f"their context ({len(alone)} of {len(per)} contexts), so their instruction difficulty would be their own "
        f"result and the LC win rate the raw win rate; judge several systems against {baseline} on each context "
        "(battles: `pairank import battles --context-field FIELD` naming the prompt they share), or leave out "
        "compat alpaca-eval"
    )


def instruction_difficulty(contexts: list, y: np.ndarray) -> dict:
    """Per context: ``logit((k + 0.5) / (n + 1))`` of the systems' wins ``k`` in its ``n`` comparisons.

    >>> {c: round(v, 3) for c, v in instruction_difficulty(["q", "q", "r"], np.array([1.0, 0.5, 0.0])).items()}
    {'q': 0.693, 'r': -1.099}
    """
    sums: dict = {}
    for c, v in zip(contexts, y):
        k, m = sums.get(c, (0.0, 0))
        sums[c] = (k + float(v), m + 1)
    return {c: float(np.log((k + 0.5) / (m - k + 0.5))) for c, (k, m) in sums.items()}


def _cross_entropy(z: np.ndarray, y: np.ndarray) -> np.ndarray:
    return -(y * log_expit(z) + (1.0 - y) * log_expit(-z))


def l1_logistic(x: np.ndarray, y: np.ndarray, c: float, tol: float = 1e-10) -> np.ndarray:
    """The minimiser of ``|w|_1 + c * sum_i CE(y_i, sigmoid(x_i . w))`` (liblinear's L1 logistic regression
    without an intercept; ``y`` in [0, 1]), by proximal Newton steps (coordinate descent on the quadratic model,
    then a backtracking line search).

    >>> x = np.ones((4, 1)); y = np.array([1.0, 1.0, 1.0, 0.0])
    >>> round(float(expit(l1_logistic(x, y, 1e4)[0])), 3), float(l1_logistic(x, y, 1e-4)[0])
    (0.75, 0.0)
    """
    m, k = x.shape
    lam = 1.0 / (c * m)  # the objective divided by c * m: lam * |w|_1 + mean CE

    def objective(w):
        return lam * np.abs(w).sum() + _cross_entropy(x @ w, y).mean()

    w = np.zeros(k)
    value = objective(w)
    for _ in range(200):
        p = expit(x @ w)
        g = x.T @ (p - y) / m
        h = (x * (p * (1 - p))[:, None]).T @ x / m
        d = np.zeros(k)
        for _ in range(500):  # coordinate descent on g.d + d.H.d / 2 + lam |w + d|_1
            change = 0.0
            for j in range(k):
                if h[j, j] <= 0:
                    continue
                grad_j = g[j] + h[j] @ d - h[j, j] * d[j]
                z = w[j] - grad_j / h[j, j]
                new = np.sign(z) * max(abs(z) - lam / h[j, j], 0.0) - w[j]
                change = max(change, abs(new - d[j]))
                d[j] = new
            if change < tol:
                break
        step = 1.0
        while step > 1e-12:
            trial = objective(w + step * d)
            if trial <= value:
                break
            step /= 2.0
        else:
            break
        w, previous, value = w + step * d, value, trial
        if np.max(np.abs(step * d)) < tol or previous - value < 1e-16:
            break
    return w


def _folds(m: int, n_splits: int = ALPACA_FOLDS) -> np.ndarray:
    """The fold of each of ``m`` rows as scikit-learn's ``GroupKFold`` assigns one-row groups: the last row to
    fold 0, the one before to fold 1, and so on.

    >>> _folds(7, 5).tolist()
    [1, 0, 4, 3, 2, 1, 0]
    """
    return (m - 1 - np.arange(m)) % n_splits


def alpaca_glm(delta_len: np.ndarray, y: np.ndarray, difficulty: np.ndarray, scale: float | None = None) -> dict:
    """AlpacaEval's length-controlled win rate of one system (see the module docstring). ``delta_len``: the
    baseline's length minus the system's per comparison; ``y``: the system's win (tie 0.5); ``difficulty``:
    each comparison's instruction difficulty. Returns ``lc`` and ``se`` (in [0, 1]), ``C`` and ``coef``
    (length, difficulty, constant). ``scale``: the length differences' divisor (unset: their own sd)."""
    sd = scale or (float(np.std(delta_len, ddof=1)) if len(delta_len) > 1 else 0.0)
    x = np.column_stack([np.tanh(delta_len / (sd if sd > 0 else 1.0)), difficulty, np.ones_like(y)])
    folds = _folds(len(y)) if len(y) >= ALPACA_FOLDS else None
    best = ALPACA_CS[-1]
    if folds is not None:
        scores = np.zeros(len(ALPACA_CS))
        for fold in range(ALPACA_FOLDS):
            test = folds == fold
            for i, c in enumerate(ALPACA_CS):
                w = l1_logistic(x[~test], y[~test], c)
                p = np.clip(expit(x[test] @ w), 1e-15, 1 - 1e-15)
                scores[i] -= float(np.mean(-(y[test] * np.log(p) + (1 - y[test]) * np.log(1 - p))))
        best = float(ALPACA_CS[int(np.argmax(scores))])
    coef = l1_logistic(x, y, best)
    predicted = expit(np.column_stack([np.zeros_like(y), difficulty, np.ones_like(y)]) @ coef)
    se = float(np.std(predicted, ddof=1) / np.sqrt(len(y))) if len(y) > 1 else 0.0
    return {"lc": float(predicted.mean()), "se": se, "C": best, "coef": coef}
