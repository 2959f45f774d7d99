"""Product-of-Experts scores from pairwise judgments, and which comparisons to make next.

After Liusie, Raina, Fathullah and Gales, "Efficient LLM Comparative Assessment: a
Product of Experts Framework for Pairwise Comparisons" (EMNLP 2024, arXiv 2405.05894).
Each judgment of candidate i (slot A) against j (slot B) with probability p is an
*expert* on the score difference ``s_i - s_j``; the scores maximise the product of
the experts.

* **Gaussian experts**: ``s_i - s_j ~ N(p - beta, sigma^2)``. The product is a
  Gaussian whose mode is a least-squares solve, ``(W^T W) s = W^T mu`` with one row
  ``e_i - e_j`` of W and ``mu = p - beta`` per judgment. The scale of ``mu`` and
  sigma do not change the ranking. ``beta = 0.5`` plainly; the *debiased* expert
  uses the mean p of the context's judgments, which takes out a judge's constant
  pull towards one slot (:func:`gaussian_scores`).
* **Bradley-Terry experts**: ``sigma(s_i - s_j + gamma)^p (1 - sigma(s_i - s_j + gamma))^(1 - p)``,
  with ``gamma = 0`` plainly or ``logit(mean p)`` debiased; no closed form, so
  Newton's method (:func:`bt_scores`).
* **Selection**: the Gaussian product's precision is ``W^T W / sigma^2`` whatever the
  judge answers, so the comparison that most raises the probability of the
  solution (the determinant of the precision, ``det(A + v v^T) = det(A) (1 + v^T A^-1 v)``)
  is the pair with the largest ``v^T (W^T W)^+ v``: the largest variance of its
  score difference, i.e. the largest effective resistance between the two in the
  graph of comparisons made. Greedily from a chain, one pair at a time
  (:func:`d_optimal_sequence`). It never reads a verdict, so a sequence serves
  every context of the same size.

Scores are computed for many contexts at once: every function takes stacked
``(C, N, N)`` arrays, ``counts[c, i, j]`` the judgments of context c with i in
slot A and j in slot B, and ``sums[c, i, j]`` the sum of their p. A context's
result depends only on its own arrays (Newton's method stops each context on its
own), so it is the same whichever contexts share the batch.

A 3-candidate check against a direct least-squares fit of the same experts::

    >>> counts = np.zeros((1, 3, 3)); sums = np.zeros((1, 3, 3))
    >>> for i, j, p in [(0, 1, 0.9), (1, 2, 0.7), (0, 2, 0.8)]:
    ...     counts[0, i, j] += 1; sums[0, i, j] += p
    >>> s = gaussian_scores(counts, sums, np.array([0.5]))[0]
    >>> w = np.array([[1.0, -1, 0], [0, 1, -1], [1, 0, -1]])
    >>> bool(np.allclose(s, np.linalg.lstsq(w, np.array([0.4, 0.2, 0.3]), rcond=None)[0]))
    True
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict

import numpy as np
from scipy.special import expit, log_expit

#: Ridge on the Gaussian normal equations: it only picks the least-norm solution of a disconnected graph.
RIDGE = 1e-9
#: Relative tolerance within which two selection scores are equal (the first in pair order wins).
TIE = 1e-12


def laplacian(weights: np.ndarray) -> np.ndarray:
    """``diag(rowsum(w + w^T)) - (w + w^T)`` for each stacked ``(C, N, N)`` matrix of pair weights."""
    sym = weights + np.swapaxes(weights, -1, -2)
    out = -sym
    idx = np.arange(weights.shape[-1])
    out[..., idx, idx] = sym.sum(axis=-1)
    return out


def _centred_solve(matrix: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """Solve ``(matrix + J/N + ridge I) x = rhs`` per context: the least-norm solution, centred."""
    n = matrix.shape[-1]
    system = matrix + 1.0 / n + RIDGE * np.eye(n)
    x = np.linalg.solve(system, rhs[..., None])[..., 0]
    return x - x.mean(axis=-1, keepdims=True)


def gaussian_scores(counts: np.ndarray, sums: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """The Gaussian PoE's scores ``(C, N)``: the least-squares fit, centred (``beta``: one per context).

    The normal equations of ``min sum_k (s_i - s_j - (p_k - beta))^2`` are
    ``L s = b`` with L the Laplacian of the comparison counts and
    ``b_i = sum_j m_ij - m_ji``, ``m = sums - beta counts``. Scores are only
    defined up to a constant; the paper pins ``s_1 = 0``, this centres them, which
    ranks the same. A disconnected graph gets the least-norm solution (each part
    centred on its own).
    """
    m = sums - beta[:, None, None] * counts
    b = m.sum(axis=-1) - m.sum(axis=-2)
    return _centred_solve(laplacian(counts), b)


def gaussian_posterior(
    counts: np.ndarray, sums: np.ndarray, beta: np.ndarray, squares: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Scores and their covariance ``sigma^2 (W^T W)^+`` with sigma^2 estimated from the residuals.

    ``squares``: the sum of p^2 over each context's judgments. At the least-squares
    optimum ``RSS = mu^T mu - s^T W^T mu``, and ``sigma^2 = RSS / (K - N + 1)`` with
    K judgments; with no residual degrees of freedom (``K <= N - 1``) the
    covariance is infinite (every order uncertain).
    """
    n = counts.shape[-1]
    m = sums - beta[:, None, None] * counts
    b = m.sum(axis=-1) - m.sum(axis=-2)
    lap = laplacian(counts)
    s = _centred_solve(lap, b)
    k = counts.sum(axis=(-1, -2))
    mu2 = squares - 2.0 * beta * sums.sum(axis=(-1, -2)) + beta**2 * k
    rss = np.maximum(mu2 - np.einsum("ci,ci->c", s, b), 0.0)
    dof = k - (n - 1)
    sigma2 = np.divide(rss, dof, out=np.full(len(k), np.inf), where=dof > 0)
    inv = np.linalg.inv(lap + 1.0 / n + RIDGE * np.eye(n))
    with np.errstate(invalid="ignore"):
        cov = np.where(np.isfinite(sigma2)[:, None, None], sigma2[:, None, None] * inv, np.inf)
    return s, cov


def bt_scores(
    counts: np.ndarray,
    sums: np.ndarray,
    gamma: np.ndarray,
    alpha: float,
    iters: int = 100,
    covariance: bool = False,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The Bradley-Terry PoE's scores ``(C, N)`` by Newton's method, and optionally the Laplace covariance.

    Maximises ``sum_ij sums_ij log sigma(d_ij) + (counts_ij - sums_ij) log sigma(-d_ij) - alpha |s|^2 / 2``
    with ``d_ij = s_i - s_j + gamma`` (``gamma`` one per context: slot A's pull).
    With ``alpha = 0`` (no prior) the scores are kept centred; on separated
    verdicts (one candidate wins everything) they grow until the iterations run
    out, as an unregularised fit does. Each context stops when its step is below
    1e-10 (steps are clipped to +-5), so its result does not depend on the others.
    """
    c, n, _ = counts.shape
    s = np.zeros((c, n))
    active = np.ones(c, dtype=bool)
    eye = np.eye(n)
    for _ in range(iters):
        if not active.any():
            break
        k = np.flatnonzero(active)
        sk = s[k]
        d = sk[:, :, None] - sk[:, None, :] + gamma[k, None, None]
        prob = expit(d)
        resid = sums[k] - counts[k] * prob
        grad = resid.sum(axis=-1) - resid.sum(axis=-2) - alpha * sk
        hess = laplacian(counts[k] * prob * (1.0 - prob)) + alpha * eye
        if alpha == 0.0:
            hess = hess + 1.0 / n + RIDGE * eye
        step = np.clip(np.linalg.solve(hess, grad[..., None])[..., 0], -5.0, 5.0)
        if alpha == 0.0:
            step -= step.mean(axis=-1, keepdims=True)
        s[k] = sk + step
        active[k[np.max(np.abs(step), axis=-1) < 1e-10]] = False
    if not covariance:
        return s, None
    d = s[:, :, None] - s[:, None, :] + gamma[:, None, None]
    prob = expit(d)
    hess = laplacian(counts * prob * (1.0 - prob)) + alpha * eye
    if alpha == 0.0:
        hess = hess + 1.0 / n + RIDGE * eye
    return s, np.linalg.inv(hess)


def bt_log_likelihood(s: np.ndarray, counts: np.ndarray, sums: np.ndarray, gamma: float, alpha: float) -> float:
    """The objective :func:`bt_scores` maximises, for one context (tests compare optimisers on it)."""
    d = s[:, None] - s[None, :] + gamma
    return float(np.sum(sums * log_expit(d) + (counts - sums) * log_expit(-d)) - alpha * np.dot(s, s) / 2.0)


def difference_variance(cov: np.ndarray) -> np.ndarray:
    """``cov_ii + cov_jj - 2 cov_ij`` for every pair: the variance of each score difference."""
    diag = np.diagonal(cov, axis1=-2, axis2=-1)
    return diag[..., :, None] + diag[..., None, :] - 2.0 * cov


# ---------------------------------------------------------------------------
# selection


def chain(n: int) -> list[tuple[int, int]]:
    """The starting comparisons: each position against the next (``n - 1`` pairs, a spanning path)."""
    return [(i, i + 1) for i in range(n - 1)]


def first_max(score: np.ndarray) -> int:
    """The flat index of the largest entry, the first in order among those within :data:`TIE` of it.

    >>> first_max(np.array([1.0, 3.0, 3.0 - 1e-15, 2.0]))
    1
    >>> first_max(np.array([-np.inf, 2.0 + 1e-15, 2.0]))
    1
    """
    top = float(score.max())
    return int(np.argmax(score >= top - TIE * abs(top)))


class _Greedy:
    """One greedy D-optimal sequence, grown on demand: the chain, then the pair of largest variance each step.

    ``inv`` is a generalised inverse of the Laplacian of the picks so far
    (``(L + J/N)^-1``; any one gives the same differences), ``var`` the variance
    of every pair's difference under it, kept up to date by Sherman-Morrison
    rank-one updates: with ``u = inv v``, ``inv -= u u^T / (1 + v^T u)`` and
    ``var_ij -= (u_i - u_j)^2 / (1 + v^T u)``. A pair may be picked ``max_picks``
    times (2 where each order is one judgment); ``var`` holds -inf where a pair
    may not be picked (below the diagonal, or used up), so a step is an argmax.
    About 4 ms a step at N = 1,000 (a few passes over N^2 numbers).
    """

    def __init__(self, n: int, max_picks: int) -> None:
        self.n, self.max_picks = n, max_picks
        self.picks: list[tuple[int, int]] = chain(n)
        self.left = {}  # pair -> picks left, for pairs picked at least once
        self.inv = np.linalg.inv(laplacian(np.eye(n, k=1)) + 1.0 / n)
        self.var = difference_variance(self.inv)
        self.var[np.tril_indices(n)] = -np.inf
        for pair in self.picks:
            self._used(pair)
        self.tmp = np.empty((n, n))
        self.lock = threading.Lock()

    def _used(self, pair: tuple[int, int]) -> None:
        left = self.left.get(pair, self.max_picks) - 1
        self.left[pair] = left
        if left == 0:
            self.var[pair] = -np.inf

    @property
    def exhausted(self) -> int:
        """Picks possible in all: every pair ``max_picks`` times."""
        return self.max_picks * self.n * (self.n - 1) // 2

    def extend(self, length: int) -> None:
        length = min(length, self.exhausted)
        inv, var, tmp = self.inv, self.var, self.tmp
        while len(self.picks) < length:
            i, j = divmod(first_max(var.ravel()), self.n)
            u = inv[:, i] - inv[:, j]
            den = 1.0 + u[i] - u[j]
            np.multiply(u[:, None], (u / den)[None, :], out=tmp)
            inv -= tmp
            w = u / math.sqrt(den)
            np.subtract.outer(w, w, out=tmp)
            np.square(tmp, out=tmp)
            var -= tmp
            self.picks.append((i, j))
            self._used((i, j))


_SEQUENCES: OrderedDict[tuple[int, int], _Greedy] = OrderedDict()
_SEQUENCES_LOCK = threading.Lock()
#: Sequences kept (by size and picks per pair), least recently used dropped first.
SEQUENCES_KEPT = 16


def d_optimal_sequence(n: int, length: int, max_picks: int = 1) -> list[tuple[int, int]]:
    """The first ``length`` comparisons (position pairs ``(i, j)``, ``i < j``) of the greedy D-optimal design.

    The chain ``(0, 1), (1, 2), ..., (n - 2, n - 1)`` first (it connects the
    graph), then each step the pair whose score difference has the largest
    variance given the pairs so far (ties: the first in row order), each pair at
    most ``max_picks`` times. The outcomes never enter, so the sequence is the
    paper's for every context of ``n`` candidates. Grown on demand and kept per
    ``(n, max_picks)``; a shorter request is a prefix of a longer one. At most
    ``max_picks n (n - 1) / 2`` pairs.

    >>> d_optimal_sequence(4, 6)
    [(0, 1), (1, 2), (2, 3), (0, 3), (0, 2), (1, 3)]
    """
    if n < 2 or length <= 0:
        return []
    key = (n, max_picks)
    with _SEQUENCES_LOCK:
        greedy = _SEQUENCES.get(key)
        if greedy is None:
            greedy = _SEQUENCES[key] = _Greedy(n, max_picks)
        _SEQUENCES.move_to_end(key)
        while len(_SEQUENCES) > SEQUENCES_KEPT:
            _SEQUENCES.popitem(last=False)
    with greedy.lock:
        greedy.extend(length)
        return greedy.picks[: min(length, greedy.exhausted)]


def d_optimal_picks(cov: np.ndarray, weight: np.ndarray, allowed: np.ndarray, room: int, disjoint: bool) -> list:
    """Greedy D-optimal pairs for one context with weighted experts (a Bradley-Terry posterior).

    A comparison of i and j adds ``weight_ij v v^T`` to the precision (its Fisher
    information at the current estimate); the pair that most raises the
    determinant maximises ``weight_ij var_ij`` with ``var`` from ``cov`` (the
    posterior covariance), updated by Sherman-Morrison after each pick. Only pairs
    with ``allowed[i, j]`` (i < j) are picked, at most ``room``; ``disjoint``:
    no candidate twice. Returns ``[(i, j), ...]`` in pick order.
    """
    cov = np.array(cov, dtype=np.float64)
    var = difference_variance(cov)
    ok = np.triu(np.asarray(allowed, dtype=bool), 1)
    out: list[tuple[int, int]] = []
    while len(out) < room and ok.any():
        gain = np.where(ok, weight * var, -np.inf)
        i, j = divmod(first_max(gain.ravel()), cov.shape[0])
        out.append((i, j))
        ok[i, j] = False
        if disjoint:
            ok[[i, j], :] = False
            ok[:, [i, j]] = False
        u = cov[:, i] - cov[:, j]
        den = 1.0 / weight[i, j] + u[i] - u[j] if weight[i, j] > 0 else math.inf
        cov -= np.outer(u, u) / den
        du = u[:, None] - u[None, :]
        var -= du * du / den
    return out
