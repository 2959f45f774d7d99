"""Static schedulers: which ordered pairs (a in slot A, b in slot B) to judge.

A static scheduler sees the candidate ids of one context and emits all its pairs
at once. Each context draws from its own generator, seeded by the job seed and
the context id, so a context's pairs do not depend on which other contexts are
in the job or in what order they come::

    >>> full(["x", "y", "z"], None, rng(0, "c"))
    [('x', 'y'), ('x', 'z'), ('y', 'x'), ('y', 'z'), ('z', 'x'), ('z', 'y')]
    >>> sorted(symmetric(["x", "y", "z"], 2, rng(0, "c")))  # one unordered pair, both orders
    [('x', 'y'), ('y', 'x')]

``one_vs_n`` needs each candidate's system: it pairs the baseline system's
candidate with every other candidate of the context, in both orders (for win
rates against a baseline, :mod:`pairank.operators.winrate`)::

    >>> one_vs_n({"x": "base", "y": "s1", "z": "s2"}, "base")
    [('y', 'x'), ('x', 'y'), ('z', 'x'), ('x', 'z')]
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np
from pydantic import Field, model_validator

from pairank.jobs.schedulers.protocol import Pair, SchedulerSettings, rng


def _unordered(ids: Sequence[str]) -> list[Pair]:
    return list(itertools.combinations(ids, 2))


def full(ids: Sequence[str], r: int | None, gen: np.random.Generator) -> list[Pair]:
    """All N(N-1) ordered pairs."""
    return list(itertools.permutations(ids, 2))


def random(ids: Sequence[str], r: int | None, gen: np.random.Generator) -> list[Pair]:
    """R ordered pairs drawn without replacement (both orders of a pair may be drawn)."""
    pairs = full(ids, None, gen)
    take = min(_need(r), len(pairs))
    return [pairs[i] for i in gen.choice(len(pairs), size=take, replace=False)]


def no_repeat(ids: Sequence[str], r: int | None, gen: np.random.Generator) -> list[Pair]:
    """R distinct unordered pairs, each in one random order."""
    pairs = _unordered(ids)
    take = min(_need(r), len(pairs))
    out = []
    for i in gen.choice(len(pairs), size=take, replace=False):
        a, b = pairs[i]
        out.append((a, b) if gen.random() < 0.5 else (b, a))
    return out


def symmetric(ids: Sequence[str], r: int | None, gen: np.random.Generator) -> list[Pair]:
    """R/2 distinct unordered pairs, each in both orders (R rounded down to even)."""
    pairs = _unordered(ids)
    take = min(_need(r) // 2, len(pairs))
    out = []
    for i in gen.choice(len(pairs), size=take, replace=False):
        a, b = pairs[i]
        out += [(a, b), (b, a)]
    return out


def one_vs_n(systems: dict[str, str], baseline: str) -> list[Pair]:
    """Each candidate against the baseline's, in both orders; no pairs if the baseline did not answer."""
    base = sorted(cid for cid, sys in systems.items() if sys == baseline)
    if len(base) > 1:
        raise ValueError(f"one_vs_n: baseline {baseline!r} has {len(base)} candidates in one context: {base}")
    if not base:
        return []
    out = []
    for cid in sorted(systems):
        if cid != base[0]:
            out += [(cid, base[0]), (base[0], cid)]
    return out


def _need(r: int | None) -> int:
    if r is None:
        raise ValueError("partial schedulers need `comparisons` (R) per context")
    return r


SCHEDULERS: dict[str, Callable[[Sequence[str], int | None, np.random.Generator], list[Pair]]] = {
    "full": full,
    "random": random,
    "no_repeat": no_repeat,
    "symmetric": symmetric,
}


def get_scheduler(name: str):
    """Look a static scheduler up by name; an unknown name lists the known ones."""
    try:
        return SCHEDULERS[name]
    except KeyError:
        raise ValueError(f"unknown scheduler {name!r}; available: {', '.join(sorted(SCHEDULERS))}") from None


def schedule(
    name: str,
    contexts: dict[str, Sequence[str]],
    r: int | None,
    seed: int,
    systems: dict[str, str] | None = None,
    baseline: str | None = None,
) -> dict[str, list[Pair]]:
    """Pairs for every context: ``{context_id: [(a, b), ...]}``.

    ``one_vs_n`` needs ``systems`` (candidate id -> system) and ``baseline``.
    """
    if name == "one_vs_n":
        if baseline is None or systems is None:
            raise ValueError("scheduler one_vs_n needs a baseline system (scheduler.baseline)")
        if baseline not in set(systems.values()):
            raise ValueError(
                f"scheduler one_vs_n: no candidate of baseline system {baseline!r}; "
                f"systems: {', '.join(sorted(set(systems.values())))}"
            )
        return {ctx: one_vs_n({c: systems[c] for c in ids}, baseline) for ctx, ids in contexts.items()}
    fn = get_scheduler(name)
    if name != "full":
        _need(r)
    return {ctx: fn(sorted(ids), r, rng(seed, ctx)) for ctx, ids in contexts.items()}


# ---------------------------------------------------------------------------
# settings


class StaticSettings(SchedulerSettings):
    """A static scheduler: every pair of a context known up front."""

    def pairs(self, contexts: dict[str, Sequence[str]], systems: dict[str, str]) -> dict[str, list[Pair]]:
        """``{context_id: [(a, b), ...]}``; ``systems`` maps candidate id -> system."""
        return schedule(
            self.name, contexts, getattr(self, "comparisons", None), self.seed, systems, getattr(self, "baseline", None)
        )


COMPARISONS = Field(..., ge=1, description="R, comparisons per context and aspect.")


class FullSettings(StaticSettings):
    name: Literal["full"] = Field("full", description="All N(N-1) ordered pairs.")


class RandomSettings(StaticSettings):
    name: Literal["random"] = Field("random", description="R ordered pairs at random.")
    comparisons: int = COMPARISONS


class NoRepeatSettings(StaticSettings):
    name: Literal["no_repeat"] = Field("no_repeat", description="R unordered pairs, one random order each.")
    comparisons: int = COMPARISONS


class SymmetricSettings(StaticSettings):
    name: Literal["symmetric"] = Field("symmetric", description="R/2 unordered pairs, both orders.")
    comparisons: int = COMPARISONS


class OneVsNSettings(StaticSettings):
    name: Literal["one_vs_n"] = Field(
        "one_vs_n", description="Every system's candidate against the baseline's, both orders."
    )
    baseline: str | None = Field(None, description="The baseline system every other system is paired with.")

    @model_validator(mode="after")
    def _baseline(self) -> OneVsNSettings:
        if not self.baseline:
            raise ValueError("scheduler one_vs_n needs `baseline` (the system every other system is compared with)")
        return self
