"""Win-rate tables: every estimator on the votes of one (system, baseline, aspect).

Methods (rows of :data:`pairank.storage.schemas.WINRATES`):

- ``human``: the win rate over the pairs with a human truth, ``Beta(1 + wins, 1 + losses)``
  (the reference the others are measured against, where labels exist);
- ``observed``: each judge's raw win rate ``k`` with its Beta posterior, and all
  judges' votes pooled (``judge = '*'``);
- ``bwrs``: Bayesian Win Rate Sampling (:func:`pairank.operators.winrate.bwrs`), pooled
  over judges; needs accuracies, so a prior of ``in_dist`` or ``ood``;
- ``dawid_skene``: Bayesian Dawid-Skene in PyMC (:mod:`pairank.operators.dawid_skene`);
  refused (estimate null, status says why) when its diagnostics fail;
- ``dawid_skene_em``: crowd-kit's EM Dawid-Skene, a point estimate to cross-check.

Priors: ``none`` (no human labels), ``in_dist`` (a seeded ``gold_fraction`` of
the labelled pairs is revealed: BWRS measures q0, q1 on them, Dawid-Skene
observes their latent class) and ``ood`` (accuracies measured on another
labelled set, per judge name).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from pairank.operators.votes import PairVotes
from pairank.operators.winrate import (
    NO_VOTE,
    SYSTEM,
    Accuracy,
    Counts,
    Summary,
    accuracies,
    bwrs,
    observed,
)

METHODS = ("human", "observed", "bwrs", "dawid_skene", "dawid_skene_em")
PRIORS = ("none", "in_dist", "ood")


@dataclass(frozen=True)
class WinRateOptions:
    """How to estimate; see the module docstring. ``ds`` holds keyword arguments of ``dawid_skene``."""

    methods: Sequence[str] = ("human", "observed", "bwrs", "dawid_skene")
    prior: str = "none"
    gold_fraction: float = 0.1
    ood: Mapping[str, Accuracy] | None = None
    draws: int = 10000
    seed: int = 0
    mass: float = 0.95
    ds: Mapping = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            raise ValueError(f"unknown win-rate methods {unknown}; available: {', '.join(METHODS)}")
        if self.prior not in PRIORS:
            raise ValueError(f"unknown prior {self.prior!r}; available: {', '.join(PRIORS)}")
        if not 0 < self.gold_fraction <= 1:
            raise ValueError(f"gold_fraction must be in (0, 1], found {self.gold_fraction}")
        if self.prior == "ood" and self.ood is None:
            raise ValueError("prior 'ood' needs accuracies measured on another labelled set (ood=...)")


def gold_mask(truth: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """A seeded choice of ``round(fraction * labelled)`` labelled pairs (at least one if any is labelled).

    >>> int(gold_mask(np.array([0, 1, -1, 0, 1]), 0.5, 0).sum())
    2
    """
    known = np.flatnonzero(np.asarray(truth) != NO_VOTE)
    take = min(known.size, max(1, round(fraction * known.size))) if known.size else 0
    mask = np.zeros(len(truth), dtype=bool)
    mask[np.random.default_rng(seed).choice(known, size=take, replace=False)] = True
    return mask


def _row(where: dict, method: str, prior: str, judge: str, s: Summary | None, **extra) -> dict:
    return {
        **where,
        "method": method,
        "prior": prior,
        "judge": judge,
        "estimate": s.mean if s else None,
        "mode": s.mode if s else None,
        "ci_low": s.low if s else None,
        "ci_high": s.high if s else None,
        "mass": s.mass if s else extra.pop("mass", 0.95),
        "n_pairs": 0,
        "n_judges": 0,
        "n_gold": 0,
        "n_ties": 0,
        "draws_kept": None,
        "draws_dropped": None,
        "rhat": None,
        "ess_bulk": None,
        "status": "ok",
        **extra,
    }


def win_rates(
    votes: PairVotes, aspect: str, system: str, baseline: str, options: WinRateOptions = WinRateOptions()
) -> tuple[list[dict], list[dict]]:
    """Rows of WINRATES and WINRATE_JUDGES for one (system, baseline, aspect)."""
    where = {"aspect": aspect, "system": system, "baseline": baseline}
    mass = options.mass
    V, truth = votes.votes, votes.truth
    used = (V != NO_VOTE).any(axis=1) | (truth != NO_VOTE)
    n_pairs, n_judges, n_ties = int(used.sum()), len(votes.judges), int(votes.ties.sum())
    common = {"n_pairs": n_pairs, "n_ties": n_ties, "mass": mass}
    gold = gold_mask(truth, options.gold_fraction, options.seed) if options.prior == "in_dist" else None
    q = _accuracies(votes, options, gold)
    rows: list[dict] = []
    if "human" in options.methods:
        known = truth != NO_VOTE
        c = Counts(int((truth[known] == SYSTEM).sum()), int((truth[known] != SYSTEM).sum()))
        s = c.posterior(mass) if c.n else None
        rows.append(
            _row(
                where,
                "human",
                "",
                "",
                s,
                **{**common, "n_gold": c.n},
                status="ok" if c.n else "no human truth for these pairs",
            )
        )
    if "observed" in options.methods:
        for j, name in enumerate(votes.judges):
            c = observed(V[:, j])
            rows.append(
                _row(
                    where,
                    "observed",
                    "",
                    name,
                    c.posterior(mass) if c.n else None,
                    **{**common, "n_judges": 1, "n_ties": int(votes.ties[j])},
                    status="ok" if c.n else "no votes",
                )
            )
        c = observed(V)
        rows.append(
            _row(
                where,
                "observed",
                "",
                "*",
                c.posterior(mass) if c.n else None,
                **{**common, "n_judges": n_judges},
                status="ok" if c.n else "no votes",
            )
        )
    if "bwrs" in options.methods:
        rows.append(_bwrs_row(where, votes, q, options, common, gold))
    ds = None
    if "dawid_skene" in options.methods:
        ds, row = _dawid_skene_row(where, votes, q, gold, options, common)
        rows.append(row)
    if "dawid_skene_em" in options.methods:
        from pairank.operators.dawid_skene import em_dawid_skene

        em = em_dawid_skene(V, votes.judges)
        point = Summary(em.win_rate, em.win_rate, em.win_rate, em.win_rate, mass, 0)
        rows.append(
            _row(
                where,
                "dawid_skene_em",
                "none",
                "*",
                point,
                **{**common, "n_judges": n_judges},
                status="ok (EM point estimate, no interval)",
            )
        )
    return rows, _judge_rows(where, votes, q, ds)


def _accuracies(votes: PairVotes, options: WinRateOptions, gold: np.ndarray | None) -> dict[str, Accuracy]:
    if options.prior == "in_dist" and gold is not None:  # (gold is drawn exactly for in_dist)
        masked = np.where(gold, votes.truth, NO_VOTE)
        return {name: accuracies(votes.votes[:, j], masked) for j, name in enumerate(votes.judges)}
    if options.prior == "ood" and options.ood is not None:  # (WinRateOptions requires ood for it)
        return {name: options.ood[name] for name in votes.judges if name in options.ood}
    return {}


def _bwrs_row(
    where: dict, votes: PairVotes, q: dict[str, Accuracy], options: WinRateOptions, common: dict, gold
) -> dict:
    names = [n for n in votes.judges if n in q and (q[n].q0.n or q[n].q1.n)]
    if options.prior == "none" or not names:
        why = (
            "needs judge accuracies: set prior in_dist or ood"
            if options.prior == "none"
            else f"no judge has {options.prior} accuracies"
        )
        return _row(where, "bwrs", options.prior, "*", None, **common, status=why)
    k = [observed(votes.judge(n)) for n in names]
    r = bwrs(k, [q[n] for n in names], names, draws=options.draws, seed=options.seed, mass=options.mass)
    chance = sum(j.below_chance for j in r.judges)
    status = "ok" if r.summary else "every draw was dropped"
    if r.dropped:
        status += (
            f"; dropped {r.dropped} of {r.drawn} draws ({chance} with q0 + q1 <= 1, "
            f"{r.dropped - chance} outside (0, 1))"
        )
    skipped = len(votes.judges) - len(names)
    if skipped:
        status += f"; {skipped} judge(s) without {options.prior} accuracies left out"
    # Labelled pairs behind the accuracies: those revealed (in_dist) or the other set's.
    n_gold = int(gold.sum()) if gold is not None else max(q[n].q0.n + q[n].q1.n for n in names)
    return _row(
        where,
        "bwrs",
        options.prior,
        "*",
        r.summary,
        **{**common, "n_judges": len(names), "n_gold": n_gold},
        draws_kept=int(r.draws.size),
        draws_dropped=r.dropped,
        status=status,
    )


def _dawid_skene_row(where, votes, q, gold, options, common):
    from pairank.operators.dawid_skene import dawid_skene

    names = votes.judges
    kwargs = dict(options.ds)
    if options.prior == "in_dist":
        kwargs["gold"] = np.where(gold, votes.truth, NO_VOTE)
    if options.prior == "ood":
        missing = [n for n in names if n not in q]
        if missing:
            return None, _row(
                where, "dawid_skene", "ood", "*", None, **common, status=f"no ood accuracies for judges {missing}"
            )
        kwargs["ood"] = [q[n] for n in names]
    res = dawid_skene(votes.votes, names, prior=options.prior, seed=options.seed, mass=options.mass, **kwargs)
    status = "ok" if res.ok else f"refused: {res.reason}"
    bad = [j.judge for j in res.judges if j.below_chance]
    if bad:
        status += f"; below chance: {', '.join(bad)}"
    return res, _row(
        where,
        "dawid_skene",
        options.prior,
        "*",
        res.estimate,
        **{**common, "n_judges": res.n_judges, "n_gold": res.n_gold},
        draws_kept=int(res.draws.size),
        rhat=res.rhat,
        ess_bulk=res.ess_bulk,
        status=status,
    )


def _judge_rows(where: dict, votes: PairVotes, q: dict[str, Accuracy], ds) -> list[dict]:
    out = []
    for j, name in enumerate(votes.judges):
        c = observed(votes.votes[:, j])
        acc = q.get(name)
        conf = ds.judges[j] if ds is not None else None
        if acc is not None and (acc.q0.n and acc.q1.n):
            below = acc.below_chance
        else:
            below = bool(conf.below_chance) if conf is not None else False
        out.append(
            {
                **where,
                "judge": name,
                "n_votes": c.n,
                "n_ties": int(votes.ties[j]),
                "k": c.rate,
                "q0": acc.q0.rate if acc else None,
                "q1": acc.q1.rate if acc else None,
                "n_q0": acc.q0.n if acc else 0,
                "n_q1": acc.q1.n if acc else 0,
                "ds_q0": conf.q0 if conf else None,
                "ds_q1": conf.q1 if conf else None,
                "below_chance": below,
            }
        )
    return out
