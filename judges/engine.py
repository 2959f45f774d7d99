"""What a judge engine declares: its settings, its builder, and the rules a job follows for it.

An engine is one module of ``judges/engines/`` (``vllm.py``, ``http.py``, ``replay.py``,
``simulated.py``) holding one :class:`Engine`:

- ``settings``: a :class:`JudgeSettings` model, the ``judge:`` section of a job spec
  that names the engine (``engine: <name>``); strict (an unknown key is an error that
  lists the allowed ones), frozen, every field described. Its
  :meth:`~JudgeSettings.identity` says what keys a judgment, without starting the engine.
- ``build``: settings -> :class:`~pairank.judges.interface.Judge`, called once in
  each judge actor. Heavy libraries (vLLM) are imported inside it, so only the actors
  load them.
- hooks, each with a default: the judging modes it answers, the settings naming local
  files, how a pool's actor runs it (``placed``, ``batches_in_flight``), the GPUs one
  engine spans (``ranks``), and a notice for the run report.

:data:`pairank.judges.ENGINES` registers the built-in engines by name;
:func:`pairank.judges.register` adds another. A declaration is checked when
it is made::

    >>> class Echo(JudgeSettings):
    ...     engine: Literal["echo"] = Field("echo", description="An echo.")
    >>> Engine("echo", Echo, build=lambda settings: None, modes=("logprob", "debate"))
    Traceback (most recent call last):
    ...
    ValueError: engine 'echo': unknown judging modes ['debate']; the modes are logprob, generate, sample, ...
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args, get_origin

from pydantic import Field

from pairank.judges.interface import Judge
from pairank.operators.settings import Strict

#: The judging modes (``judging.mode``) a job may ask for; each engine declares the ones it answers.
JudgingMode = Literal["logprob", "generate", "sample", "prepair", "prepair_pairwise", "pointwise"]
JUDGING_MODES: tuple[str, ...] = get_args(JudgingMode)
#: The modes of an engine that reads label probabilities and generates nothing.
LOGPROB_ONLY = ("logprob",)

#: What keys a judgment: ``engine``, ``model``, ``revision`` and ``sampling`` (a JSON-able mapping).
Identity = dict[str, Any]


class Labels(Strict):
    a: list[str] = Field(
        ["A", " A"], description="Surface forms of the label for slot A; their probabilities are summed."
    )
    b: list[str] = Field(["B", " B"], description="Surface forms of the label for slot B.")


class JudgeSettings(Strict):
    """The ``judge:`` section of a job spec: ``engine`` names the engine, whose settings model (a subclass
    declaring ``engine: Literal["<name>"]``) holds the other keys."""

    engine: str = Field(..., description="The judge engine.")

    def identity(self) -> Identity:
        """Engine, model, revision and sampling settings: what determines a judgment, and so its key. Known
        without starting the engine; a judge built from these settings labels its rows with it."""
        raise NotImplementedError(f"{type(self).__name__} does not say what keys its judgments")


S = TypeVar("S", bound=JudgeSettings)


def as_written(settings: S, num_gpus: float) -> S:
    """The default ``placed``: an actor runs the settings as the spec wrote them."""
    return settings


def no_choices(settings: JudgeSettings, num_gpus: float) -> list[str]:
    """The default ``choices``: ``placed`` decided nothing worth saying."""
    return []


def asked_or_one(settings: JudgeSettings, asked: int | None) -> int:
    """The default ``batches_in_flight``: ``pool.max_batches_in_flight``, 1 when unset."""
    return asked or 1


def any_batches(settings: JudgeSettings, asked: int) -> None:
    """The default ``check_batches_in_flight``: any number is fine."""


def one_rank(settings: JudgeSettings) -> int:
    """The default ``ranks``: an engine is one process (its actor holds the GPUs ``pool.num_gpus`` gives it)."""
    return 1


def _literal_tag(settings: type[JudgeSettings]) -> object:
    """The one value of the settings' ``engine: Literal[...]`` and its default (``None``: not so declared)."""
    field = settings.model_fields.get("engine")
    if field is None or get_origin(field.annotation) is not Literal or len(get_args(field.annotation)) != 1:
        return None
    (tag,) = get_args(field.annotation)
    return tag if field.default == tag else None


@dataclass(frozen=True)
class Engine(Generic[S]):
    """One judge engine: its name in a spec, its settings model, its builder and the hooks a job asks of it."""

    #: The name a spec gives it (``judge.engine``).
    name: str
    #: The settings model: the keys of ``judge:`` for this engine.
    settings: type[S]
    #: settings -> the engine, called once in each judge actor (imports heavy libraries inside).
    build: Callable[[S], Judge]
    #: The judging modes it answers; the spec refuses the others.
    modes: tuple[str, ...] = LOGPROB_ONLY
    #: Settings naming a local file or folder: a relative one is relative to the spec file.
    paths: tuple[str, ...] = ()
    #: Whether ``model`` may name a local folder: one starting with ``.`` or ``/`` is then a path too.
    model_folder: bool = False
    #: (settings, GPUs an actor reserves) -> the settings as that actor runs them (e.g. an engine picked by GPUs).
    placed: Callable[[S, float], S] = as_written
    #: (settings, GPUs an actor reserves) -> lines saying what ``placed`` decides and why ("dtype float32 (...)"),
    #: shown on the console before the engines start and in the run report.
    choices: Callable[[S, float], list[str]] = no_choices
    #: (placed settings, pool.max_batches_in_flight or None) -> the calls one actor runs at once.
    batches_in_flight: Callable[[S, int | None], int] = asked_or_one
    #: (settings, pool.max_batches_in_flight) -> None, or a ValueError naming the keys when the engine cannot.
    check_batches_in_flight: Callable[[S, int], None] = any_batches
    #: A warning the run report opens with (Markdown), e.g. that its verdicts are simulated.
    notice: str | None = None
    #: settings -> the processes one engine spans, each on a GPU of its own when the pool reserves GPUs
    #: (vllm: tensor x pipeline parallel size); the pool gives an engine of several a placement group.
    ranks: Callable[[S], int] = one_rank

    def __post_init__(self) -> None:
        where = f"engine {self.name!r}"
        if not re.fullmatch(r"[a-z][a-z0-9_]*", self.name):
            raise ValueError(f"{where}: a name is lower-case letters, digits and '_', starting with a letter")
        if not (isinstance(self.settings, type) and issubclass(self.settings, JudgeSettings)):
            raise TypeError(f"{where}: settings must be a JudgeSettings model, found {self.settings!r}")
        if _literal_tag(self.settings) != self.name:
            raise ValueError(
                f'{where}: {self.settings.__name__} must declare engine: Literal["{self.name}"] = '
                f'Field("{self.name}", description=...)'
            )
        unknown = [m for m in self.modes if m not in JUDGING_MODES]
        if unknown or not self.modes:
            raise ValueError(f"{where}: unknown judging modes {unknown}; the modes are {', '.join(JUDGING_MODES)}")
        missing = [k for k in self.paths if k not in self.settings.model_fields]
        if missing:
            raise ValueError(f"{where}: paths {missing} are not settings of {self.settings.__name__}")
        undescribed = [k for k, f in self.settings.model_fields.items() if not f.description]
        if undescribed:
            raise ValueError(f"{where}: every setting needs a description; {undescribed} have none")

    def local_paths(self, judge: Mapping[str, object]) -> list[str]:
        """The keys of a ``judge:`` mapping, as a spec writes it, that name local files or folders.

        >>> from pairank.judges import ENGINES
        >>> ENGINES["vllm"].local_paths({"model": "./models/m"}), ENGINES["vllm"].local_paths({"model": "org/m"})
        (['model'], [])
        """
        keys = [k for k in self.paths if isinstance(judge.get(k), str)]
        model = judge.get("model")
        if self.model_folder and isinstance(model, str) and model.startswith((".", "/")):
            keys.append("model")
        return keys
