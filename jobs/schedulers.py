"""Static schedulers: which ordered pairs (a in slot A, b in slot B) to judge.

A static scheduler sees the candidate ids of one context and emits all its pairs
at once. Each context draws from its own generator, seeded by the job seed and
the context id, so a context's pairs do not depend on which other contexts are
in the job or in what order they come::

    >>> full(["x", "y", "z"], None, rng(0, "c"))
    [('x', 'y'), ('x', 'z'), ('y', 'x'), ('y', 'z'), ('z', 'x'), ('z', 'y')]
    >>> sorted(symmetric(["x", "y", "z"], 2, rng(0, "c")))  # one unordered pair, both orders
    [('x', 'y'), ('y', 'x')]
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable, Sequence

import numpy as np

Pair = tuple[str, str]


def rng(seed: int, context_id: str) -> np.random.Generator:
    """A generator for one context, stable across processes and Python versions."""
    digest = hashlib.sha256(f"{seed}\x00{context_id}".encode("utf-8")).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


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


def schedule(name: str, contexts: dict[str, Sequence[str]], r: int | None, seed: int) -> dict[str, list[Pair]]:
    """Pairs for every context: ``{context_id: [(a, b), ...]}``."""
    fn = get_scheduler(name)
    if name != "full":
        _need(r)
    return {ctx: fn(sorted(ids), r, rng(seed, ctx)) for ctx, ids in contexts.items()}
