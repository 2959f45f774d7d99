"""Schedulers: which comparisons to ask for, one module per family.

- :mod:`~pairank.jobs.schedulers.static`: full, random, no_repeat, symmetric, one_vs_n
  (every pair of a context known up front);
- :mod:`~pairank.jobs.schedulers.pairs`: PAIRS merge sort, greedy and beam;
- :mod:`~pairank.jobs.schedulers.anchors`: scaled PAIRS (sorted anchors, binary insertion);
- :mod:`~pairank.jobs.schedulers.adaptive_symmetric`: Bradley-Terry uncertainty sampling;
- :mod:`~pairank.jobs.schedulers.poe`: Product of Experts (greedy D-optimal comparisons, PoE scores);
- :mod:`~pairank.jobs.schedulers.board`: the systems' board across contexts, to a stated confidence;
- :mod:`~pairank.jobs.schedulers.protocol`: what they share (the adaptive protocol,
  the ledger, seeded order, settings, the reference lockstep loop).

:data:`REGISTRY` maps each name a spec uses to its settings model; the spec's
``scheduler`` is :data:`SchedulerSpec`, the union of them told apart by ``name``
(``full`` when unset), so a setting another scheduler has is an error naming it::

    >>> parse_scheduler({"name": "random", "comparisons": 4}).comparisons
    4
    >>> parse_scheduler({"name": "full", "beam": {"size": 4}})
    Traceback (most recent call last):
    ...
    pydantic_core._pydantic_core.ValidationError: 1 validation error for tagged-union[...]
    full.beam
      Extra inputs are not permitted ...
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Union

from pydantic import Discriminator, Tag, TypeAdapter

from pairank.jobs.schedulers.adaptive_symmetric import (
    AdaptiveSymmetric,
    AdaptiveSymmetricSettings,
    SamplingSpec,
)
from pairank.jobs.schedulers.anchors import (
    AnchorInsertion,
    AnchorSpec,
    PairsAnchorsSettings,
    sample_size,
)
from pairank.jobs.schedulers.board import Board, BoardContext, BoardSettings, board_line, board_summaries
from pairank.jobs.schedulers.pairs import (
    BeamSpec,
    PairsBeam,
    PairsBeamSettings,
    PairsGreedy,
    PairsGreedySettings,
)
from pairank.jobs.schedulers.poe import Poe, PoeSettings
from pairank.jobs.schedulers.protocol import (
    LN2,
    AdaptiveScheduler,
    AdaptiveSettings,
    Pair,
    SchedulerSettings,
    binary_entropy,
    prob_gap_from_u_h,
    rng,
    run_lockstep,
    symmetric_p,
    u_h_from_prob_gap,
)
from pairank.jobs.schedulers.static import (
    FullSettings,
    NoRepeatSettings,
    OneVsNSettings,
    RandomSettings,
    StaticSettings,
    SymmetricSettings,
    schedule,
)

#: Every scheduler by the name a spec gives it: its settings model.
REGISTRY: dict[str, type[SchedulerSettings]] = {
    "full": FullSettings,
    "random": RandomSettings,
    "no_repeat": NoRepeatSettings,
    "symmetric": SymmetricSettings,
    "one_vs_n": OneVsNSettings,
    "pairs_greedy": PairsGreedySettings,
    "pairs_beam": PairsBeamSettings,
    "pairs_anchors": PairsAnchorsSettings,
    "adaptive_symmetric": AdaptiveSymmetricSettings,
    "poe": PoeSettings,
    "board": BoardSettings,
}
STATIC_SCHEDULERS = tuple(name for name, cls in REGISTRY.items() if not cls.adaptive)
ADAPTIVE_SCHEDULERS = tuple(name for name, cls in REGISTRY.items() if cls.adaptive)

#: A machine class: ``cls(context_id, ids, seed, **options)``.
AdaptiveFactory = Callable[..., AdaptiveScheduler]

#: The adaptive machines by name.
ADAPTIVE: dict[str, AdaptiveFactory] = {
    "pairs_greedy": PairsGreedy,
    "pairs_beam": PairsBeam,
    "pairs_anchors": AnchorInsertion,
    "adaptive_symmetric": AdaptiveSymmetric,
    "poe": Poe,
}


def get_adaptive(name: str) -> AdaptiveFactory:
    """Look an adaptive scheduler up by name; an unknown name lists the known ones."""
    try:
        return ADAPTIVE[name]
    except KeyError:
        raise ValueError(f"unknown adaptive scheduler {name!r}; available: {', '.join(sorted(ADAPTIVE))}") from None


def _name(value: object) -> str | None:
    """The union's tag: ``name`` of a mapping (``full`` when unset) or of a settings object."""
    if isinstance(value, dict):
        return value.get("name", "full")
    return getattr(value, "name", None)


#: The ``scheduler`` of a job spec: one of :data:`REGISTRY`'s models, chosen by ``name``.
if TYPE_CHECKING:  # to a type checker, a scheduler's settings are of the common base
    SchedulerSpec = SchedulerSettings
else:
    SchedulerSpec = Annotated[
        Union[tuple(Annotated[cls, Tag(name)] for name, cls in REGISTRY.items())],  # noqa: UP007
        Discriminator(_name),
    ]

_ADAPTER: TypeAdapter = TypeAdapter(SchedulerSpec)


def parse_scheduler(data: dict) -> SchedulerSettings:
    """Validate a ``scheduler`` mapping (as in a spec) into its settings model."""
    return _ADAPTER.validate_python(data)


__all__ = [
    "ADAPTIVE",
    "ADAPTIVE_SCHEDULERS",
    "LN2",
    "REGISTRY",
    "STATIC_SCHEDULERS",
    "AdaptiveFactory",
    "AdaptiveScheduler",
    "AdaptiveSettings",
    "AdaptiveSymmetric",
    "AdaptiveSymmetricSettings",
    "AnchorInsertion",
    "AnchorSpec",
    "Board",
    "BoardContext",
    "BoardSettings",
    "BeamSpec",
    "FullSettings",
    "NoRepeatSettings",
    "OneVsNSettings",
    "Pair",
    "Poe",
    "PoeSettings",
    "PairsAnchorsSettings",
    "PairsBeam",
    "PairsBeamSettings",
    "PairsGreedy",
    "PairsGreedySettings",
    "RandomSettings",
    "SamplingSpec",
    "SchedulerSettings",
    "SchedulerSpec",
    "StaticSettings",
    "SymmetricSettings",
    "binary_entropy",
    "board_line",
    "board_summaries",
    "get_adaptive",
    "parse_scheduler",
    "prob_gap_from_u_h",
    "rng",
    "run_lockstep",
    "sample_size",
    "schedule",
    "symmetric_p",
    "u_h_from_prob_gap",
]
