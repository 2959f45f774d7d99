"""Bradley-Terry fits: P(x beats y) = 1 / (1 + exp(theta_y - theta_x)).

Two fits of one model, for two uses:

- :func:`bt_strengths`: system strengths of a leaderboard, maximum likelihood on a
  win matrix (ties half a win each way) with choix's iterative Luce spectral ranking
  and a virtual-draw prior (see :mod:`pairank.operators.leaderboard`);
- :func:`bt_laplace`: soft outcomes (the judge's p) within one context, the MAP and
  its Laplace covariance, which adaptive symmetric sampling reads to pick the pairs
  it is least sure of (:func:`prob_order`).

A 2-system check: 3 wins, 1 loss and 2 ties are 4 wins and 2 losses, and
without the prior the MLE is theta_x - theta_y = ln(4/2):

    >>> theta = bt_strengths(np.array([[0.0, 4.0], [2.0, 0.0]]), prior_ties=0)
    >>> round(float(theta[0] - theta[1]), 6) == round(math.log(2), 6)
    True
    >>> bool(np.isfinite(bt_strengths(np.array([[0.0, 9.0], [0.0, 0.0]]))).all())  # unbeaten: finite
    True
"""

from __future__ import annotations

import math
from statistics import NormalDist

import numpy as np

#: Virtual ties of each system against the virtual reference system (the regulariser).
PRIOR_TIES = 1.0


def win_matrix(first: np.ndarray, second: np.ndarray, points: np.ndarray, n: int, weights=None) -> np.ndarray:
    """``W[x, y]``: the (weighted) wins of x over y; slot A gets ``points``, slot B ``1 - points``.

    >>> win_matrix(np.array([0, 1, 0]), np.array([1, 0, 1]), np.array([1.0, 1.0, 0.5]), 2).tolist()
    [[0.0, 1.5], [1.5, 0.0]]

    (The diagonal stays 0: same-system comparisons are dropped before this.)
    """
    w = np.ones(len(first)) if weights is None else np.asarray(weights, dtype=float)
    flat = np.bincount(first * n + second, weights=w * points, minlength=n * n)
    flat += np.bincount(second * n + first, weights=w * (1.0 - points), minlength=n * n)
    W = flat.reshape(n, n)
    np.fill_diagonal(W, 0.0)
    return W


def bt_strengths(wins: np.ndarray, prior_ties: float = PRIOR_TIES) -> np.ndarray:
    """Centred Bradley-Terry log-strengths from a win matrix (ties already half to each side).

    With ``prior_ties > 0`` every system also ties a virtual reference system that
    many times (see the module docstring); the reference is dropped before centring.
    """
    wins = np.asarray(wins, dtype=float)
    n = wins.shape[0]
    if n == 0:
        return np.zeros(0)
    if n == 1:
        return np.zeros(1)
    if prior_ties > 0:
        m = np.zeros((n + 1, n + 1))
        m[:n, :n] = wins
        m[:n, n] = m[n, :n] = prior_ties / 2.0
    else:
        m = wins
    import choix  # here, not at the top: it imports scipy.stats (0.3 s), which a process reading specs needs not

    try:
        theta = choix.ilsr_pairwise_dense(m, alpha=0.0, max_iter=10_000, tol=1e-10)[:n]
    except (RuntimeError, ValueError) as exc:  # choix: no convergence, or no unique stationary distribution
        raise ValueError(
            f"Bradley-Terry fit failed ({exc}); with prior_ties=0 the comparison graph must be strongly connected "
            "(a chain of wins from every system to every other), so an unbeaten system has no finite strength"
        ) from None
    if not np.isfinite(theta).all():
        raise ValueError("Bradley-Terry fit gave non-finite strengths; use prior_ties > 0")
    return theta - theta.mean()


def bt_laplace(
    n: int, winners: np.ndarray, losers: np.ndarray, y: np.ndarray, alpha: float, iters: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Bradley-Terry strengths with soft outcomes: the MAP and its Laplace covariance.

    Comparison k says item ``winners[k]`` beat ``losers[k]`` with weight
    ``y[k]`` in [0, 1] (the judge's p; 1 - y is the weight of the other way).
    The log-posterior ``sum_k y_k log s(d_k) + (1 - y_k) log s(-d_k) - alpha |theta|^2 / 2``,
    ``d_k = theta_w - theta_l``, is concave; Newton's method finds its maximum
    and the inverse of minus its Hessian there is the covariance. choix fits
    the same model for hard outcomes only (and by EP in pure Python, about a
    second per 16-candidate context), hence this small numpy version.

    >>> mean, cov = bt_laplace(2, np.array([0, 0, 1]), np.array([1, 1, 0]), np.array([1.0, 1.0, 0.0]), 0.1)
    >>> bool(mean[0] > mean[1]), bool(np.allclose(cov, cov.T))
    (True, True)

    A tie (y = 0.5) is half a win to each side: it leaves equal strengths equal,
    and it narrows their difference's posterior (the prior alone has variance
    2 / alpha = 20 here):

    >>> mean, cov = bt_laplace(2, np.array([0, 1]), np.array([1, 0]), np.array([0.5, 0.5]), 0.1)
    >>> mean.tolist(), bool(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1] < 20)
    ([0.0, 0.0], True)
    """
    theta = np.zeros(n)
    win, lose = np.asarray(winners, dtype=np.intp), np.asarray(losers, dtype=np.intp)
    y = np.asarray(y, dtype=float)
    eye = alpha * np.eye(n)
    for _ in range(iters):
        s = 1.0 / (1.0 + np.exp(-(theta[win] - theta[lose])))
        grad = -alpha * theta
        np.add.at(grad, win, y - s)
        np.add.at(grad, lose, s - y)
        hess = _bt_hessian(n, win, lose, s * (1.0 - s), eye)
        step = np.clip(np.linalg.solve(hess, grad), -5.0, 5.0)
        theta += step
        if np.max(np.abs(step)) < 1e-10:
            break
    s = 1.0 / (1.0 + np.exp(-(theta[win] - theta[lose])))
    return theta, np.linalg.inv(_bt_hessian(n, win, lose, s * (1.0 - s), eye))


def _bt_hessian(n: int, win: np.ndarray, lose: np.ndarray, v: np.ndarray, eye: np.ndarray) -> np.ndarray:
    """Minus the Hessian of the log-posterior: the prior's precision plus each comparison's s(1 - s)."""
    h = eye.copy()
    np.add.at(h, (win, win), v)
    np.add.at(h, (lose, lose), v)
    np.add.at(h, (win, lose), -v)
    np.add.at(h, (lose, win), -v)
    return h


def prob_order(mean: np.ndarray, cov: np.ndarray, i: int, j: int) -> float:
    """P(theta_i > theta_j) under the Gaussian N(mean, cov): ``Phi(mu_d / sigma_d)``.

    ``mu_d = mean_i - mean_j`` and ``sigma_d^2 = cov_ii + cov_jj - 2 cov_ij``.

    >>> mean, cov = np.array([1.0, 0.0]), np.array([[1.0, 0.5], [0.5, 1.0]])
    >>> round(prob_order(mean, cov, 0, 1), 4), round(prob_order(mean, cov, 1, 0), 4)
    (0.8413, 0.1587)
    """
    var = cov[i, i] + cov[j, j] - 2.0 * cov[i, j]
    return NormalDist().cdf(float(mean[i] - mean[j]) / math.sqrt(max(float(var), 1e-12)))
