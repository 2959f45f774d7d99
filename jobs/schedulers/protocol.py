"""What every scheduler shares: the adaptive protocol, the ledger of asked pairs, seeded order, settings.

A static scheduler sees the candidate ids of one context and emits all its pairs
at once (:mod:`pairank.jobs.schedulers.static`). An adaptive scheduler is a state
machine per context: a driver collects :meth:`AdaptiveScheduler.next_requests`
from every unfinished machine, judges them as one batch and hands each machine
its answers with :meth:`AdaptiveScheduler.observe`, where ``p_a[(a, b)]`` is the
probability that ``a`` (in slot A) is better than ``b``.

Protocol details a driver relies on:

* :meth:`next_requests` returns only pairs never requested before (``[]`` while
  the machine waits for answers it already asked for, or when it is done). A
  pair asked but not yet answered stays in :attr:`pending`; the merge that needs
  it waits, other merges go on. It is never asked again: the driver owes an
  answer (a failed judgment must still be answered, e.g. with 0.5, or that
  context stalls).
* :meth:`observe` may carry fewer pairs than were asked (the rest may come in a
  later call), and pairs that were never asked (e.g. from the judgment cache or
  a resumed run): these are kept and reused, so their comparisons are never
  requested. A pair answered twice keeps its first value.

Each context draws from its own generator, seeded by the job seed and the context
id (:func:`rng`), so a context's requests do not depend on which other contexts are
in the job or in what order they come.

Each scheduler declares its settings as a pydantic model here (the shared fields)
and in its own module (the rest); the job spec's ``scheduler`` is the union of them,
told apart by ``name``, so a setting that does not apply to the chosen scheduler is
an error that names it.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import TYPE_CHECKING, ClassVar, Protocol, runtime_checkable

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

Pair = tuple[str, str]
#: ``lookup(x, y)``: P(x better than y) if known, else None.
Lookup = Callable[[str, str], "float | None"]

LN2 = math.log(2.0)
#: Floor for a probability inside a logarithm (a path score stays finite).
P_FLOOR = 1e-300


def rng(seed: int, context_id: str) -> np.random.Generator:
    """A generator for one context, stable across processes and Python versions."""
    digest = hashlib.sha256(f"{seed}\x00{context_id}".encode()).digest()
    return np.random.default_rng(int.from_bytes(digest[:8], "little"))


# ---------------------------------------------------------------------------
# settings


class SchedulerSettings(BaseModel):
    """The settings every scheduler has. YAML fills them in; an unknown key is an error."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
    #: Adaptive schedulers run as machines in lockstep rounds; static ones emit every pair at once.
    adaptive: ClassVar[bool] = False

    if TYPE_CHECKING:  # every scheduler's settings declare ``name: Literal["<its name>"]``
        name: str

    seed: int = Field(0, description="Seed; the same seed gives the same requests.")


class AdaptiveSettings(SchedulerSettings):
    """The settings every adaptive scheduler has; :meth:`machine` builds one context's machine."""

    adaptive: ClassVar[bool] = True

    budget: int | None = Field(
        None,
        ge=1,
        description="Most comparisons (ordered pairs, cached or judged) the whole run may use; the run stops "
        "before a round that would exceed it and ranks unfinished contexts by win ratio only.",
    )
    repeats: int = Field(
        1,
        ge=1,
        description="Run the scheduler with seeds seed .. seed+repeats-1 in the same rounds and report the "
        "mean and standard error of Spearman across seeds (a transitivity check).",
    )

    def machine(self, context_id: str, ids: list[str], seed: int) -> AdaptiveScheduler:
        """The machine for one context with these settings."""
        raise NotImplementedError

    def machines(
        self, contexts: Mapping[str, Sequence[str]], system: Mapping[str, str], seed: int
    ) -> Sequence[AdaptiveScheduler]:
        """The machines of one aspect and seed, one per context in ``contexts``' order (``system``: each
        candidate's system). A scheduler that ranks systems across contexts shares one state among them."""
        return [self.machine(ctx, list(ids), seed) for ctx, ids in contexts.items()]


# ---------------------------------------------------------------------------
# maths


def binary_entropy(p: float) -> float:
    """Entropy of a Bernoulli(p) in nats: 0 at p in {0, 1}, ln 2 at p = 0.5.

    >>> binary_entropy(0.5) == math.log(2)
    True
    >>> round(binary_entropy(0.6), 4), binary_entropy(1.0)
    (0.673, 0.0)
    """
    p = check_probability(p, "p")
    return 0.0 - sum(q * math.log(q) for q in (p, 1.0 - p) if q > 0.0)


def u_h_from_prob_gap(g: float) -> float:
    """The entropy threshold U_h that prunes exactly where the public code does.

    The public PAIRS code prunes a branch when the other choice's probability
    exceeds ``0.5 + g``; both branches survive iff ``max(p, 1 - p) <= 0.5 + g``.
    H is symmetric about 0.5 and falls as ``max(p, 1 - p)`` grows, so that is
    ``H(p) >= H(0.5 + g)``, i.e. ``U_h = H(0.5 + g)`` (up to the boundary, where
    this module branches only on ``H(p) > U_h``).

    >>> round(u_h_from_prob_gap(0.1), 3)
    0.673
    >>> round(u_h_from_prob_gap(0.2), 3), u_h_from_prob_gap(0.5)
    (0.611, 0.0)
    """
    if not (isinstance(g, (int, float)) and 0.0 <= g <= 0.5):
        raise ValueError(f"probability gap: expected a number in [0, 0.5], found {g!r}")
    return binary_entropy(0.5 + g)


def prob_gap_from_u_h(u: float) -> float:
    """Inverse of :func:`u_h_from_prob_gap`: the gap g with ``H(0.5 + g) = u``.

    The binary entropy has no closed-form inverse; g is found by Brent's method
    on [0, 0.5], where ``H(0.5 + g)`` falls strictly from ln 2 to 0.

    >>> round(prob_gap_from_u_h(0.6), 4)   # the default U_h branches for p in about (0.29, 0.71)
    0.2124
    >>> round(prob_gap_from_u_h(u_h_from_prob_gap(0.1)), 9)
    0.1
    >>> prob_gap_from_u_h(math.log(2)), prob_gap_from_u_h(0.0)
    (0.0, 0.5)
    """
    if not (isinstance(u, (int, float)) and 0.0 <= u <= LN2 + 1e-15):
        raise ValueError(f"entropy threshold U_h: expected a number in [0, ln 2 = {LN2:.6f}], found {u!r}")
    if u >= LN2:
        return 0.0
    if u == 0.0:
        return 0.5
    from scipy.optimize import brentq  # here: every process that reads a spec imports this module (0.2 s)

    return float(brentq(lambda g: binary_entropy(0.5 + g) - u, 0.0, 0.5, xtol=1e-14, rtol=1e-14))


def symmetric_p(p_ab: float, p_ba: float) -> float:
    """P(a better than b) from both orders: ``(p(a, b) + 1 - p(b, a)) / 2``.

    A judge that only prefers slot A (the same p in both orders) gives 0.5.

    >>> symmetric_p(0.8, 0.4)
    0.7
    >>> symmetric_p(0.9, 0.9)
    0.5
    """
    return 0.5 + (check_probability(p_ab, "p_ab") - check_probability(p_ba, "p_ba")) / 2.0


def check_probability(p: float, what: str) -> float:
    try:
        value = float(p)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value <= 1.0:  # also rejects NaN
        raise ValueError(f"{what}: expected a probability in [0, 1], found {p!r}")
    return value


# ---------------------------------------------------------------------------
# checks and seeded order shared by the machines


def distinct_ids(context_id: str, ids: Iterable[str]) -> list[str]:
    """The ids as a list; a repeated id is an error naming the repeats."""
    ids = list(ids)
    dupes = sorted(x for x, n in Counter(ids).items() if n > 1)
    if dupes:
        raise ValueError(f"context {context_id!r}: candidate ids must be distinct; repeated: {dupes}")
    return ids


def seeded_shuffle(ids: Iterable[str], gen: np.random.Generator) -> list[str]:
    """A seeded shuffle of the sorted ids: the same for the same ids in any order."""
    ordered = sorted(ids)
    return [ordered[k] for k in gen.permutation(len(ordered))]


def _checked(context_id: str, ids: AbstractSet[str], p_a: Mapping[Pair, float]) -> dict[Pair, float]:
    """Validate all of ``p_a`` before any is stored (a bad entry stores none of the call)."""
    checked: dict[Pair, float] = {}
    for pair, p in p_a.items():
        if not (isinstance(pair, tuple) and len(pair) == 2 and pair[0] != pair[1] and set(pair) <= ids):
            raise ValueError(f"context {context_id!r}: {pair!r} is not a pair of two distinct candidates")
        checked[pair] = check_probability(p, f"context {context_id!r}: p_a for {pair!r}")
    return checked


def _read(known: Mapping[Pair, float], x: str, y: str, symmetric: bool) -> float | None:
    """P(x better than y) from the known judgments, None if missing.

    Plain: the judgment of ``(x, y)``. Symmetric: :func:`symmetric_p` of both
    orders, None until both are known.
    """
    if not symmetric:
        return known.get((x, y))
    p_xy, p_yx = known.get((x, y)), known.get((y, x))
    if p_xy is None or p_yx is None:
        return None
    return symmetric_p(p_xy, p_yx)


class Ledger:
    """What a machine asked for and was answered: the bookkeeping every machine shares.

    ``_p`` holds each answer given (a pair answered twice keeps its first value)
    and ``_asked`` each pair requested. A machine sets ``context_id``,
    ``symmetric`` and ``_ids`` (its candidates) and calls :meth:`_open_ledger`.
    """

    context_id: str
    symmetric: bool
    _ids: AbstractSet[str]

    def _open_ledger(self) -> None:
        self._p: dict[Pair, float] = {}
        self._asked: set[Pair] = set()

    @property
    def asked(self) -> int:
        return len(self._asked)

    @property
    def pending(self) -> frozenset[Pair]:
        return frozenset(pair for pair in self._asked if pair not in self._p)

    def _ask(self, pairs: Iterable[Pair]) -> list[Pair]:
        """The comparisons ``pairs`` need (both orders when symmetric) that were never asked nor answered; now asked."""
        out: list[Pair] = []
        for x, y in pairs:
            for pair in ((x, y), (y, x)) if self.symmetric else ((x, y),):
                if pair not in self._asked and pair not in self._p:
                    self._asked.add(pair)
                    out.append(pair)
        return out

    def _record(self, p_a: Mapping[Pair, float]) -> dict[Pair, float]:
        """Check all of ``p_a``, then keep each answer not already known; returns the checked answers."""
        checked = _checked(self.context_id, self._ids, p_a)
        for pair, value in checked.items():
            self._p.setdefault(pair, value)
        return checked

    def _lookup(self, x: str, y: str) -> float | None:
        return _read(self._p, x, y, self.symmetric)


def check_int(value: object, what: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what}: expected an integer >= {minimum}, found {value!r}")
    return value


def check_real(value: object, what: str, ok: Callable[[float], bool], expected: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not ok(float(value)):
        raise ValueError(f"{what}: expected {expected}, found {value!r}")
    return float(value)


# ---------------------------------------------------------------------------
# the protocol


@runtime_checkable
class AdaptiveScheduler(Protocol):
    """One context's adaptive scheduler, advanced by a driver in rounds."""

    context_id: str

    @property
    def asked(self) -> int:
        """Distinct ordered pairs requested so far."""
        ...

    def next_requests(self) -> list[Pair]:
        """Ordered pairs (a in slot A, b in slot B) wanted now; [] when waiting or done."""
        ...

    def observe(self, p_a: Mapping[Pair, float]) -> None:
        """Judgments for (some of) the asked pairs; ``p_a[(a, b)]`` = P(a better than b)."""
        ...

    @property
    def pending(self) -> frozenset[Pair]:
        """Pairs requested and not yet answered."""
        ...

    @property
    def done(self) -> bool: ...

    def ranking(self) -> list[str]:
        """Best first; only once done."""
        ...


# ---------------------------------------------------------------------------
# the reference lockstep loop

#: A judge for one round: ``[(context_id, a, b), ...] -> [p_a, ...]`` in the same order.
RoundJudge = Callable[[list[tuple[str, str, str]]], Sequence[float]]


def run_lockstep(
    machines: Iterable[AdaptiveScheduler],
    judge: RoundJudge,
    max_comparisons: int | None = None,
) -> dict:
    """Advance all machines in rounds, one ``judge`` call per round.

    A round gathers the new requests of every unfinished machine as
    ``(context_id, a, b)``, judges them in one call and feeds each machine its
    answers. It stops when every machine is done, or before a round that would
    take the judged total past ``max_comparisons`` (ordered pairs; that round's
    pairs stay pending in their machines and are not judged).

    Returns ``{"rounds": [{"requests": n, "done": contexts done after it}, ...],
    "comparisons": pairs judged, "done": all finished, "stopped": "done" | "budget"}``.

    >>> from pairank.jobs.schedulers.pairs import PairsGreedy
    >>> ms = [PairsGreedy(c, ["a", "b", "c", "d"], seed=1) for c in ("q1", "q2")]
    >>> stats = run_lockstep(ms, lambda reqs: [float(a < b) for _, a, b in reqs])
    >>> [m.ranking() for m in ms], stats["done"], len(stats["rounds"]) < stats["comparisons"]
    ([['a', 'b', 'c', 'd'], ['a', 'b', 'c', 'd']], True, True)
    """
    machines = list(machines)
    by_id: dict[str, AdaptiveScheduler] = {}
    for m in machines:
        if m.context_id in by_id:
            raise ValueError(f"two machines for context {m.context_id!r}")
        by_id[m.context_id] = m
    rounds: list[dict[str, int]] = []
    judged = 0
    stopped = "done"
    while not all(m.done for m in machines):
        batch = [(m.context_id, a, b) for m in machines if not m.done for a, b in m.next_requests()]
        if not batch:
            stuck = sorted(m.context_id for m in machines if not m.done)
            raise RuntimeError(f"no requests but contexts not done (answers missing?): {stuck[:10]}")
        if max_comparisons is not None and judged + len(batch) > max_comparisons:
            stopped = "budget"
            break
        ps = list(judge(batch))
        if len(ps) != len(batch):
            raise ValueError(f"judge returned {len(ps)} probabilities for {len(batch)} requests")
        judged += len(batch)
        answers: dict[str, dict[Pair, float]] = defaultdict(dict)
        for (ctx, a, b), p in zip(batch, ps):
            answers[ctx][(a, b)] = p
        for ctx, p_a in answers.items():
            by_id[ctx].observe(p_a)
        rounds.append({"requests": len(batch), "done": sum(m.done for m in machines)})
    return {"rounds": rounds, "comparisons": judged, "done": stopped == "done", "stopped": stopped}
