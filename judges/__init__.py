"""Judges: one module per engine, looked up by name in :data:`ENGINES`.

Each built-in engine is declared in its own module of :mod:`pairank.judges.engines` (:mod:`~.engines.vllm`,
:mod:`~.engines.http`, :mod:`~.engines.replay`, :mod:`~.engines.simulated`; each builds its judge from a
``*_judge`` module beside it, imported only when an engine is built): its settings model, builder, identity and
hooks (:class:`~pairank.judges.engine.Engine`). :data:`ENGINES` holds them, listed
here by hand; :func:`register` adds another engine, declared anywhere, before a spec names it.
Nothing registers itself on import.

- :func:`parse_judge` validates a ``judge:`` mapping with the settings model its ``engine``
  names (a job spec's ``judge`` section does so);
- :func:`judge_identity` says what keys a judgment, without starting the engine;
- :func:`make_judge` builds the engine (once per actor)::

    >>> settings = parse_judge({"engine": "simulated", "noise": 0.2})
    >>> judge_identity(settings)["engine"], type(make_judge(settings)).__name__
    ('simulated', 'SimulatedJudge')
    >>> get_engine("gpt")
    Traceback (most recent call last):
    ...
    ValueError: unknown judge engine 'gpt'; available: http, replay, simulated, vllm
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any

from pydantic import Field, TypeAdapter

from pairank.judges.engine import Engine, Identity, JudgeSettings
from pairank.judges.engines import http, replay, simulated, vllm
from pairank.judges.interface import Judge

#: The engines that come with pairank, in the order the spec reference lists them.
BUILT_IN: tuple[Engine[Any], ...] = (
    vllm.ENGINE,
    http.ENGINE,
    replay.ENGINE,
    simulated.ENGINE,
)

#: Every engine a spec may name (``judge.engine``), by name.
ENGINES: dict[str, Engine[Any]] = {engine.name: engine for engine in BUILT_IN}


def register(engine: Engine[Any]) -> Engine[Any]:
    """Add ``engine`` to :data:`ENGINES` (again: nothing happens); another engine of its name is an error."""
    if not isinstance(engine, Engine):
        raise TypeError(f"register: expected an Engine declaration, found {type(engine).__name__}")
    taken = ENGINES.get(engine.name)
    if taken is not None and taken != engine:
        raise ValueError(
            f"judge engine {engine.name!r} is registered already (settings {taken.settings.__name__}); "
            "unregister it first or choose another name"
        )
    ENGINES[engine.name] = engine
    return engine


def unregister(name: str) -> Engine[Any]:
    """Remove the engine ``name`` (one :func:`register` added; the built-in ones stay) and return it."""
    if any(engine.name == name for engine in BUILT_IN):
        raise ValueError(f"judge engine {name!r} is built in; it cannot be unregistered")
    engine = get_engine(name)
    del ENGINES[name]
    return engine


def get_engine(name: str) -> Engine[Any]:
    """The engine called ``name``; an unknown name lists the registered ones."""
    try:
        return ENGINES[name]
    except KeyError:
        raise ValueError(f"unknown judge engine {name!r}; available: {', '.join(sorted(ENGINES))}") from None


def engine_of(settings: JudgeSettings) -> Engine[Any]:
    """The engine whose settings these are."""
    return get_engine(settings.engine)


def make_judge(settings: JudgeSettings) -> Judge:
    """The engine of ``settings``, built (in this process: a judge actor's)."""
    return engine_of(settings).build(settings)


def judge_identity(settings: JudgeSettings) -> Identity:
    """What keys a judgment of ``settings``, known without starting the engine."""
    return settings.identity()


@lru_cache(maxsize=8)
def _adapter(models: tuple[type[JudgeSettings], ...]) -> TypeAdapter[JudgeSettings]:
    """A validator of the tagged union of ``models``, told apart by ``engine``."""
    union: Any = models[0]
    for model in models[1:]:
        union = union | model
    tagged: Any = Annotated[union, Field(discriminator="engine")] if len(models) > 1 else union
    return TypeAdapter(tagged)


def parse_judge(data: object) -> JudgeSettings:
    """``data`` (a ``judge:`` mapping, or settings) validated by the settings model its ``engine`` names.

    Errors are pydantic's for a tagged union of the registered engines: an unknown engine is
    ``union_tag_invalid``, and the location of an error inside a model starts with its engine
    (``('vllm', 'labels', 'c')``), as in a union written out by hand.
    """
    return _adapter(tuple(engine.settings for engine in ENGINES.values())).validate_python(data)


def judge_paths(judge: object) -> list[str]:
    """The keys of a ``judge:`` mapping, as a spec writes it, that name local files or folders (none when the
    mapping names no registered engine)."""
    if not isinstance(judge, dict):
        return []
    engine = ENGINES.get(str(judge.get("engine")))
    return engine.local_paths(judge) if engine is not None else []


__all__ = [
    "BUILT_IN",
    "ENGINES",
    "Engine",
    "JudgeSettings",
    "engine_of",
    "get_engine",
    "judge_identity",
    "judge_paths",
    "make_judge",
    "parse_judge",
    "register",
    "unregister",
]
