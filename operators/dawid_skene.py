"""Bayesian Dawid-Skene: the win rate from several imperfect judges, in PyMC.

The setting of :mod:`pairank.operators.winrate` (Gao et al., "Bayesian Calibration of Win
Rate Estimation with LLM Evaluators", EMNLP 2024): each pair has a latent true
class ``z`` (:data:`SYSTEM` = 0, the system's output is better; :data:`BASELINE`
= 1), and the win rate is ``pi = P(z = 0)``, prior ``Beta(1, 1)``. Each judge
``j`` votes 0 or 1 on some of the pairs through its own 2x2 confusion matrix, one
row per true class, each row written by its diagonal:

- ``q0[j] = P(vote 0 | z = 0)``, ``q1[j] = P(vote 1 | z = 1)``.

The prior of the rows (``prior=``):

- ``"none"``: ``q0, q1 ~ Beta(2, 1)``, i.e. row priors Dirichlet([2, 1]) and
  Dirichlet([1, 2]): skewed towards better than chance, which also breaks the
  label-switching symmetry (``pi -> 1 - pi``, ``q0 <-> 1 - q1``);
- ``"ood"``: per-judge hits and misses measured on another labelled set
  (:class:`pairank.operators.winrate.Accuracy`); row prior ``Beta(a, b)`` with ``(a, b)``
  proportional to ``(1 + hits, 1 + misses)`` and rescaled to ``a + b = 2``
  (:func:`ood_prior`), so the other set sets the direction, not the confidence;
- ``"in_dist"``: the ``"none"`` rows, with human labels (``gold``) on some pairs.

``gold`` (0/1 per pair, -1 where unknown) is used whenever it is given, whatever
the ``prior``: a labelled pair contributes ``log pi_z + sum_j log P(v_ij | z)``
with its class observed; ``prior`` only picks the rows' prior (``"in_dist"``
requires ``gold``). An unlabelled pair has its class marginalised so that NUTS
samples only ``pi``, ``q0``, ``q1``::

    log p(v_i) = logsumexp_c [log pi_c + sum_j log P(v_ij | c)]

computed for all pairs at once as one matrix product of one-hot votes
``[vote == 0 | vote == 1]`` (pairs x 2 judges) with the log confusion entries
(2 judges x 2 classes). Identical vote patterns are merged with a weight first
(:func:`prepare`). A pair no judge voted on informs ``pi`` only through its gold
label; without one it carries no information and is dropped.

Sampling: nutpie (default; the compiled model is kept per number of judges and
fed new data, so only the first call of a process compiles: about 10 s with a
warm pytensor cache, 40 s cold, then about 1 s a call on 2 cores; see
``bench/dawid_skene_speed.py``) or PyMC's own NUTS (``sampler="pymc"``, about
8 s a call warm). The result is reported only when the chains agree: the
worst split r_hat over ``pi``, ``q0``, ``q1`` must be at most ``rhat_max`` and
the smallest bulk ESS at least ``ess_min``; otherwise ``estimate`` is ``None``
and ``reason`` names the failed diagnostic. A judge whose posterior mean
``q0 + q1`` is below 1 is modelled as the bad judge it is and flagged
(``below_chance``), never inverted.

PyMC is imported lazily. Before that, pytensor's compile cache is pointed at
``$XDG_CACHE_HOME/pairank/pytensor`` (``~/.cache/pairank/pytensor``) unless
``PYTENSOR_FLAGS`` or a ``.pytensorrc`` already names a compiledir
(:func:`pytensor_flags`); this only takes effect if pytensor was not imported
before.
"""

from __future__ import annotations

import configparser
import functools
import os
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pairank.operators.winrate import (
    BASELINE,
    NO_VOTE,
    SYSTEM,
    Accuracy,
    Summary,
    summarize,
)
from pairank.storage.fs import local_cache_dir

PRIORS = ("none", "ood", "in_dist")
#: The parameters whose r_hat and bulk ESS gate the result.
PARAMETERS = ("pi", "q0", "q1")
#: Beta(2, 1): the rows' prior without outside information (mean 2/3).
WEAK_ROW = (2.0, 1.0)


# ---------------------------------------------------------------- results
@dataclass(frozen=True)
class JudgeConfusion:
    """One judge's confusion matrix, by its diagonal (posterior means)."""

    judge: str
    q0: float
    q1: float
    accuracy: float  # posterior mean of (q0 + q1) / 2
    below_chance: bool  # posterior mean q0 + q1 < 1: reported, never inverted


@dataclass(frozen=True)
class DawidSkeneResult:
    """The posterior of the win rate ``pi``, or a refusal when the chains did not converge."""

    estimate: Summary | None  # posterior of pi; None when diagnostics failed
    ok: bool
    reason: str | None
    rhat: float  # worst over pi and the q's
    ess_bulk: float  # worst over pi and the q's
    judges: list[JudgeConfusion]
    prior: str
    n_pairs: int
    n_judges: int
    n_gold: int
    seconds: float  # wall time of compile + sampling
    draws: np.ndarray = field(repr=False)  # the pi draws of all chains


@dataclass(frozen=True)
class EMResult:
    """Crowd-kit's EM Dawid-Skene: the win rate (class-0 prior) and each judge's confusion diagonal."""

    win_rate: float
    judges: list[JudgeConfusion]


@dataclass(frozen=True)
class DSData:
    """What the model reads: sufficient statistics of the votes, the gold labels and the row priors.

    ``J`` judges, ``m`` distinct vote patterns among the unlabelled pairs.
    """

    onehot: np.ndarray  # (m, 2J): [vote == 0 | vote == 1] of each distinct unlabelled pattern
    weight: np.ndarray  # (m,): unlabelled pairs with that pattern
    gold_n: np.ndarray  # (2,): labelled pairs of class 0 and 1
    gold_onehot: np.ndarray  # (2, 2J): the one-hot votes summed over the labelled pairs of each class
    prior_a: np.ndarray  # (2, J): Beta a of q0 (row 0) and q1 (row 1)
    prior_b: np.ndarray  # (2, J): Beta b
    n_pairs: int  # pairs kept (voted on or labelled)
    n_gold: int

    @property
    def n_judges(self) -> int:
        return self.prior_a.shape[1]

    def arrays(self) -> dict[str, np.ndarray]:
        """The model's two data containers (see :func:`build_model`), each with a count column first.

        ``patterns`` (m, 1 + 2J): ``[weight | onehot]``, one row per distinct
        unlabelled vote pattern. ``fixed`` (4, 1 + 2J): ``[0 | a of q0, a of q1]``,
        ``[0 | b of q0, b of q1]``, then per true class ``[labelled pairs |
        summed one-hot votes]``. Two containers rather than six: nutpie compiles
        a wrapper per container, and this halves its compile time.

        >>> d = prepare([[0, 1]], ["a", "b"], gold=[1])
        >>> d.arrays()["fixed"].tolist()
        [[0.0, 2.0, 2.0, 2.0, 2.0], [0.0, 1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.0, 1.0]]
        """
        patterns = (
            np.column_stack([self.weight, self.onehot]) if self.weight.size else np.zeros((0, 1 + 2 * self.n_judges))
        )
        fixed = np.column_stack(
            [
                np.concatenate([[0.0, 0.0], self.gold_n]),
                np.concatenate([self.prior_a.reshape(1, -1), self.prior_b.reshape(1, -1), self.gold_onehot]),
            ]
        )
        return {
            "patterns": np.ascontiguousarray(patterns, dtype=float),
            "fixed": np.ascontiguousarray(fixed, dtype=float),
        }


# ---------------------------------------------------------------- data preparation (pure)
def check_votes(votes, judges: Sequence[str]) -> np.ndarray:
    """``votes`` as an int array (pairs, judges) with values in {-1, 0, 1}, one column per judge name.

    >>> check_votes([[0, 1], [-1, 0]], ["a", "b"]).dtype.kind
    'i'
    >>> check_votes([[0, 2]], ["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: dawid_skene: votes must be -1 (no vote), 0 (system) or 1 (baseline), found 2 at pair 0, judge 'b'
    """
    v = np.asarray(votes)
    if v.ndim != 2:
        raise ValueError(f"dawid_skene: votes must be a 2-d array (pairs, judges), found shape {v.shape}")
    names = list(judges)
    if v.shape[1] != len(names):
        raise ValueError(f"dawid_skene: votes has {v.shape[1]} judge columns but {len(names)} judge names were given")
    if not names:
        raise ValueError("dawid_skene: need at least one judge")
    if len(set(names)) != len(names):
        raise ValueError(f"dawid_skene: judge names must be unique, found {names}")
    if v.dtype.kind not in "biuf":
        raise ValueError(f"dawid_skene: votes must be integers -1, 0 or 1, found dtype {v.dtype}")
    bad = ~np.isin(v, (NO_VOTE, SYSTEM, BASELINE))
    if bad.any():
        i, j = (int(k) for k in np.argwhere(bad)[0])
        raise ValueError(
            f"dawid_skene: votes must be -1 (no vote), 0 (system) or 1 (baseline), "
            f"found {v[i, j]} at pair {i}, judge {names[j]!r}"
        )
    v = v.astype(np.int64)
    return v


def check_gold(gold, n_pairs: int) -> np.ndarray:
    """``gold`` as an int vector of length ``n_pairs`` with values in {-1, 0, 1} (all -1 when ``None``).

    >>> check_gold(None, 3)
    array([-1, -1, -1])
    """
    if gold is None:
        return np.full(n_pairs, NO_VOTE)
    g = np.asarray(gold)
    if g.dtype.kind not in "biuf":
        raise ValueError(f"dawid_skene: gold must be integers -1, 0 or 1, found dtype {g.dtype}")
    if g.shape != (n_pairs,):
        raise ValueError(f"dawid_skene: gold must have one label per pair, shape ({n_pairs},), found {g.shape}")
    if g.size and not np.all(np.isin(g, (NO_VOTE, SYSTEM, BASELINE))):
        i = int(np.argmax(~np.isin(g, (NO_VOTE, SYSTEM, BASELINE))))
        raise ValueError(f"dawid_skene: gold must be -1 (unknown), 0 or 1, found {g[i]} at pair {i}")
    return g.astype(np.int64)


def ood_prior(hits: int, misses: int) -> tuple[float, float]:
    """Beta(a, b) proportional to (1 + hits, 1 + misses), rescaled to a + b = 2.

    The other set gives the direction (the prior mean), not the confidence:

    >>> ood_prior(8, 2)
    (1.5, 0.5)
    >>> ood_prior(0, 0)
    (1.0, 1.0)
    """
    if hits < 0 or misses < 0:
        raise ValueError(f"ood_prior: hits and misses must be >= 0, found {hits}, {misses}")
    a, b = 1.0 + hits, 1.0 + misses
    return 2 * a / (a + b), 2 * b / (a + b)


def row_priors(prior: str, n_judges: int, ood: Sequence[Accuracy] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Beta ``a`` and ``b`` of each judge's q0 (row 0) and q1 (row 1), shape (2, n_judges).

    >>> a, b = row_priors("none", 2)
    >>> a.tolist(), b.tolist()
    ([[2.0, 2.0], [2.0, 2.0]], [[1.0, 1.0], [1.0, 1.0]])
    """
    if prior not in PRIORS:
        raise ValueError(f"dawid_skene: unknown prior {prior!r}; expected one of {', '.join(PRIORS)}")
    if prior != "ood":
        if ood is not None:
            raise ValueError(f"dawid_skene: ood accuracies were given but prior is {prior!r}; use prior='ood'")
        return np.full((2, n_judges), WEAK_ROW[0]), np.full((2, n_judges), WEAK_ROW[1])
    if ood is None or len(ood) != n_judges:
        found = "none" if ood is None else len(ood)
        raise ValueError(f"dawid_skene: prior 'ood' needs one Accuracy per judge ({n_judges}), found {found}")
    a, b = np.empty((2, n_judges)), np.empty((2, n_judges))
    for j, acc in enumerate(ood):
        if not isinstance(acc, Accuracy):
            raise TypeError(f"dawid_skene: ood[{j}] must be an operators.winrate.Accuracy, found {type(acc).__name__}")
        for row, counts in enumerate((acc.q0, acc.q1)):
            a[row, j], b[row, j] = ood_prior(counts.hits, counts.misses)
    return a, b


def onehot(votes: np.ndarray) -> np.ndarray:
    """``[votes == 0 | votes == 1]`` as floats, shape (pairs, 2 judges); a no-vote is all zeros.

    >>> onehot(np.array([[0, 1, -1]])).tolist()
    [[1.0, 0.0, 0.0, 0.0, 1.0, 0.0]]
    """
    return np.concatenate([votes == SYSTEM, votes == BASELINE], axis=1).astype(float)


def distinct_rows(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of ``x`` and how often each occurs (rows sorted).

    >>> rows, counts = distinct_rows(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0]]))
    >>> rows.tolist(), counts.tolist()
    ([[0.0, 1.0], [1.0, 0.0]], [1.0, 2.0])
    """
    if x.shape[0] == 0:
        return x.reshape(0, x.shape[1]), np.zeros(0)
    rows, counts = np.unique(x, axis=0, return_counts=True)
    return rows, counts.astype(float)


def prepare(
    votes,
    judges: Sequence[str],
    prior: str = "none",
    gold=None,
    ood: Sequence[Accuracy] | None = None,
) -> DSData:
    """Validate the inputs and reduce them to the model's sufficient statistics.

    >>> d = prepare([[0, 0], [0, 0], [1, -1], [-1, -1]], ["a", "b"], gold=[-1, -1, 1, -1])
    >>> d.onehot.tolist(), d.weight.tolist(), d.gold_n.tolist(), d.n_pairs, d.n_gold
    ([[1.0, 1.0, 0.0, 0.0]], [2.0], [0.0, 1.0], 3, 1)
    >>> d.gold_onehot.tolist()  # labelled class-1 pair: judge a voted 1
    [[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    """
    v = check_votes(votes, judges)
    g = check_gold(gold, v.shape[0])
    if prior == "in_dist" and not np.any(g != NO_VOTE):
        raise ValueError("dawid_skene: prior 'in_dist' needs gold labels (0/1) on some pairs, found none")
    a, b = row_priors(prior, v.shape[1], ood)
    voted = np.any(v != NO_VOTE, axis=1)
    known = g != NO_VOTE
    if not np.any(voted | known):
        raise ValueError(f"dawid_skene: none of the {v.shape[0]} pairs has a vote or a gold label; nothing to estimate")
    x = onehot(v)
    patterns, weight = distinct_rows(x[voted & ~known])
    gold_onehot = np.stack([x[g == c].sum(axis=0) for c in (SYSTEM, BASELINE)])
    gold_n = np.array([np.sum(g == SYSTEM), np.sum(g == BASELINE)], dtype=float)
    return DSData(patterns, weight, gold_n, gold_onehot, a, b, int(np.sum(voted | known)), int(known.sum()))


# ---------------------------------------------------------------- pytensor / PyMC
def pytensor_flags(flags: str, compiledir: Path, rc_mentions: bool = False) -> str:
    """``PYTENSOR_FLAGS`` with ``base_compiledir`` added unless a compiledir is already chosen.

    >>> pytensor_flags("", Path("/c"))
    'base_compiledir=/c'
    >>> pytensor_flags("floatX=float64", Path("/c"))
    'floatX=float64,base_compiledir=/c'
    >>> pytensor_flags("base_compiledir=/mine", Path("/c"))
    'base_compiledir=/mine'
    """
    if "compiledir" in flags or rc_mentions:
        return flags
    return ",".join(part for part in (flags.strip(","), f"base_compiledir={compiledir}") if part)


def _rc_mentions_compiledir() -> bool:
    """Whether a pytensor config file (``$PYTENSORRC``, ``~/.pytensorrc``) sets a compiledir."""
    paths = os.environ.get("PYTENSORRC", "~/.pytensorrc:~/.pytensorrc.txt").split(os.pathsep)
    parser = configparser.ConfigParser()
    try:
        parser.read([os.path.expanduser(p) for p in paths])
    except configparser.Error:
        return False
    return any("compiledir" in key for section in parser.sections() for key in parser[section])


def _pymc():
    """Import PyMC, pointing pytensor's compile cache at the pairank cache first."""
    os.environ["PYTENSOR_FLAGS"] = pytensor_flags(
        os.environ.get("PYTENSOR_FLAGS", ""), local_cache_dir() / "pytensor", _rc_mentions_compiledir()
    )
    import pymc

    return pymc


def build_model(data: DSData):
    """The PyMC model: ``pi``, ``q0``, ``q1`` free, the latent classes marginalised.

    Every array of ``data`` is a data container (:meth:`DSData.arrays`) and only
    the number of judges is fixed in the graph, so a model compiled once serves
    any votes of that many judges.
    """
    pm = _pymc()
    import pytensor.tensor as pt

    n_judges = data.n_judges
    with pm.Model() as model:
        arrays = data.arrays()
        patterns = pm.Data("patterns", arrays["patterns"])
        fixed = pm.Data("fixed", arrays["fixed"])
        a, b = fixed[0, 1:], fixed[1, 1:]
        start = np.full(n_judges, 2 / 3)
        pi = pm.Beta("pi", 1.0, 1.0, initval=0.5)
        q0 = pm.Beta("q0", a[:n_judges], b[:n_judges], shape=n_judges, initval=start)
        q1 = pm.Beta("q1", a[n_judges:], b[n_judges:], shape=n_judges, initval=start)
        # log P(vote | class): rows [vote 0 of each judge | vote 1 of each judge], columns the true class.
        log_confusion = pt.stack(
            [pt.concatenate([pt.log(q0), pt.log1p(-q0)]), pt.concatenate([pt.log1p(-q1), pt.log(q1)])], axis=1
        )
        log_class = pt.stack([pt.log(pi), pt.log1p(-pi)])
        joint = pt.dot(patterns[:, 1:], log_confusion) + log_class  # (patterns, 2)
        pm.Potential("unlabelled", pt.dot(patterns[:, 0], pt.logsumexp(joint, axis=1)))
        gold = fixed[2:]  # per true class: [labelled pairs | summed one-hot votes]
        pm.Potential("labelled", pt.dot(gold[:, 0], log_class) + pt.sum(gold[:, 1:].T * log_confusion))
    return model


def placeholder(n_judges: int) -> DSData:
    """Data of the right shapes to compile a model for ``n_judges`` judges."""
    x = np.zeros((1, 2 * n_judges))
    ones = np.ones((2, n_judges))
    return DSData(x, np.ones(1), np.zeros(2), np.zeros((2, 2 * n_judges)), ones, ones, 1, 0)


@functools.lru_cache(maxsize=8)
def _compiled_nutpie(n_judges: int):
    """nutpie's compiled model for ``n_judges`` judges, kept for the process; feed data with ``with_data``."""
    import nutpie

    return nutpie.compile_pymc_model(build_model(placeholder(n_judges)))


def _sample_nutpie(data: DSData, draws: int, tune: int, chains: int, cores: int, seed: int):
    import nutpie

    compiled = _compiled_nutpie(data.n_judges).with_data(**data.arrays())
    return nutpie.sample(
        compiled, draws=draws, tune=tune, chains=chains, cores=cores, seed=seed, progress_bar=False
    ).posterior


def _sample_pymc(data: DSData, draws: int, tune: int, chains: int, cores: int, seed: int):
    pm = _pymc()
    with build_model(data):
        idata = pm.sample(
            draws=draws,
            tune=tune,
            chains=chains,
            cores=cores,
            random_seed=seed,
            progressbar=False,
            compute_convergence_checks=False,
        )
    return idata.posterior


SAMPLE = {"nutpie": _sample_nutpie, "pymc": _sample_pymc}


# ---------------------------------------------------------------- diagnostics and summaries
def diagnostics(posterior, judges: Sequence[str]) -> tuple[tuple[float, str], tuple[float, str]]:
    """The worst split r_hat and the smallest bulk ESS over :data:`PARAMETERS`, each with what it belongs to.

    A non-finite value (e.g. a parameter that never moved) counts as the worst.
    """
    import arviz as az

    sub = posterior[list(PARAMETERS)]
    rhat = labelled(az.rhat(sub), judges)
    ess = labelled(az.ess(sub, method="bulk"), judges)
    worst_rhat = max(rhat, key=lambda kv: kv[0] if np.isfinite(kv[0]) else np.inf)
    worst_ess = min(ess, key=lambda kv: kv[0] if np.isfinite(kv[0]) else -np.inf)
    return worst_rhat, worst_ess


def labelled(values: Mapping, judges: Sequence[str]) -> list[tuple[float, str]]:
    """Each scalar of :data:`PARAMETERS` in ``values`` with its label: ``pi``, ``q0 of 'judge'``.

    >>> labelled({"pi": np.array(1.0), "q0": np.array([2.0]), "q1": np.array([3.0])}, ["j"])
    [(1.0, 'pi'), (2.0, "q0 of 'j'"), (3.0, "q1 of 'j'")]
    """
    out = []
    for name in PARAMETERS:
        x = np.asarray(getattr(values[name], "values", values[name]), dtype=float)
        if x.ndim == 0:
            out.append((float(x), name))
        else:
            out += [(float(v), f"{name} of {judges[j]!r}") for j, v in enumerate(x.ravel())]
    return out


def refusal(rhat: tuple[float, str], ess: tuple[float, str], rhat_max: float, ess_min: float) -> str | None:
    """Why the posterior must not be reported, or ``None`` when both diagnostics pass.

    >>> refusal((1.003, "pi"), (2400.0, "q0 of 'a'"), 1.01, 1000) is None
    True
    >>> refusal((1.05, "q1 of 'b'"), (80.0, "pi"), 1.01, 1000)
    "r_hat 1.05 > 1.01 (worst: q1 of 'b'); bulk ESS 80 < 1000 (worst: pi)"
    """
    reasons = []
    if not (np.isfinite(rhat[0]) and rhat[0] <= rhat_max):
        reasons.append(f"r_hat {rhat[0]:.4g} > {rhat_max:g} (worst: {rhat[1]})")
    if not (np.isfinite(ess[0]) and ess[0] >= ess_min):
        reasons.append(f"bulk ESS {ess[0]:.0f} < {ess_min:g} (worst: {ess[1]})")
    return "; ".join(reasons) or None


def confusions(judges: Sequence[str], q0: np.ndarray, q1: np.ndarray) -> list[JudgeConfusion]:
    """Per-judge posterior means from draws ``q0``, ``q1`` of shape (draws, judges).

    >>> [c.below_chance for c in confusions(["a", "b"], np.array([[0.9, 0.3]]), np.array([[0.8, 0.2]]))]
    [False, True]
    """
    m0, m1, acc = q0.mean(axis=0), q1.mean(axis=0), ((q0 + q1) / 2).mean(axis=0)
    return [
        JudgeConfusion(name, float(m0[j]), float(m1[j]), float(acc[j]), bool(m0[j] + m1[j] < 1))
        for j, name in enumerate(judges)
    ]


# ---------------------------------------------------------------- the estimators
def dawid_skene(
    votes,
    judges: Sequence[str],
    *,
    prior: str = "none",
    gold=None,
    ood: Sequence[Accuracy] | None = None,
    draws: int = 4000,
    tune: int = 1000,
    chains: int = 2,
    cores: int = 2,
    seed: int = 0,
    mass: float = 0.95,
    rhat_max: float = 1.01,
    ess_min: float = 1000,
    sampler: str = "nutpie",
) -> DawidSkeneResult:
    """Posterior of the win rate ``pi`` under Bayesian Dawid-Skene (see the module docstring).

    ``votes``: int array (pairs, judges) of 0, 1 and -1 (no vote); ``judges``: one
    name per column; ``gold``: 0/1 per pair where a human label is known, -1
    elsewhere; ``ood``: one :class:`~pairank.operators.winrate.Accuracy` per judge for
    ``prior="ood"``. ``draws`` and ``tune`` are per chain. The estimate is
    ``None`` (and ``ok`` False) when the worst r_hat exceeds ``rhat_max`` or the
    smallest bulk ESS is below ``ess_min``.
    """
    if sampler not in SAMPLE:
        raise ValueError(f"dawid_skene: unknown sampler {sampler!r}; expected one of {', '.join(SAMPLE)}")
    for name, value, low in (("draws", draws, 1), ("tune", tune, 0), ("chains", chains, 1), ("cores", cores, 1)):
        if not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"dawid_skene: {name} must be an integer >= {low}, found {value!r}")
    names = list(judges)
    data = prepare(votes, names, prior, gold, ood)
    started = time.perf_counter()
    posterior = SAMPLE[sampler](data, int(draws), int(tune), int(chains), int(cores), int(seed))
    seconds = time.perf_counter() - started
    rhat, ess = diagnostics(posterior, names)
    reason = refusal(rhat, ess, rhat_max, ess_min)
    pi = np.asarray(posterior["pi"].values, dtype=float).ravel()
    q0 = np.asarray(posterior["q0"].values, dtype=float).reshape(-1, data.n_judges)
    q1 = np.asarray(posterior["q1"].values, dtype=float).reshape(-1, data.n_judges)
    return DawidSkeneResult(
        estimate=None if reason else summarize(pi, mass),
        ok=reason is None,
        reason=reason,
        rhat=rhat[0],
        ess_bulk=ess[0],
        judges=confusions(names, q0, q1),
        prior=prior,
        n_pairs=data.n_pairs,
        n_judges=data.n_judges,
        n_gold=data.n_gold,
        seconds=seconds,
        draws=pi,
    )


def em_dawid_skene(votes, judges: Sequence[str], n_iter: int = 100) -> EMResult:
    """Crowd-kit's EM Dawid-Skene (a point estimate) as a cross-check of :func:`dawid_skene`.

    The win rate is the fitted prior of class 0; ``accuracy`` is ``(q0 + q1) / 2``.
    """
    try:
        from crowdkit.aggregation import DawidSkene
    except ImportError as e:
        raise ImportError("em_dawid_skene needs crowd-kit: pip install crowd-kit") from e
    import pandas as pd

    names = list(judges)
    v = check_votes(votes, names)
    pair, judge = np.nonzero(v != NO_VOTE)
    if pair.size == 0:
        raise ValueError("em_dawid_skene: no votes at all")
    frame = pd.DataFrame({"task": pair, "worker": [names[j] for j in judge], "label": v[pair, judge]})
    with warnings.catch_warnings():  # crowd-kit 1.4 uses pandas keywords that pandas 3 deprecates
        warnings.filterwarnings("ignore", module="crowdkit")
        model = DawidSkene(n_iter=n_iter).fit(frame)
    errors = model.errors_  # rows (worker, observed label), columns the true label: P(observed | true)
    q0 = np.array([[_cell(errors, name, SYSTEM, SYSTEM) for name in names]])
    q1 = np.array([[_cell(errors, name, BASELINE, BASELINE) for name in names]])
    assert model.priors_ is not None  # (fit set it)
    return EMResult(float(_get(model.priors_, SYSTEM, 0.0)), confusions(names, q0, q1))


def _get(series: Mapping, key: int, default: float) -> float:
    return float(series[key]) if key in series else default


def _cell(errors, worker: str, observed: int, true: int) -> float:
    """P(observed | true) of ``worker``; a judge never seen voting on that class keeps a chance 0.5."""
    try:
        return float(errors.loc[(worker, observed), true])
    except KeyError:
        return 0.5
