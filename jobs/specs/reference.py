"""``pairank spec-reference``: the job spec reference, written from the spec models themselves.

Every key of a job spec, its type, its default and its description come from the
pydantic models of :mod:`pairank.jobs.specs.job`, :mod:`pairank.jobs.schedulers` and the
registered judge engines (:data:`pairank.judges.ENGINES`), so the reference
cannot drift from what the loader accepts; ``docs/specs.md`` is
this module's output, and a test checks that it is current.
"""

from __future__ import annotations

import json
import re
import types
import typing
from dataclasses import dataclass

from pydantic import BaseModel

from pairank.jobs.specs.job import JobSpec, unions

HEADER = """# Job spec reference

Every key of a job spec (YAML; `--set key=value` overrides one). Written by
`pairank spec-reference --out docs/specs.md` from the field descriptions of
`jobs/specs/job.py`, `jobs/schedulers/` and the judge engines (`judges/engines/`);
do not edit by hand (a test checks that it is current). Paths in a spec file are relative to the file.
"""


@dataclass(frozen=True)
class Section:
    """One table: the keys of one model at one place in the spec."""

    path: str
    title: str
    model: type[BaseModel]


def _members(annotation) -> list:
    """The types a field may hold: the members of a union (Optional included), or the type itself."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [m for a in typing.get_args(annotation) for m in _members(a)]
    return [annotation]


def _models(annotation) -> list[type[BaseModel]]:
    return [m for m in _members(annotation) if isinstance(m, type) and issubclass(m, BaseModel)]


def _type(annotation) -> str:
    """A type as a reader writes it in YAML terms.

    >>> _type(int | None), _type(list[str]), _type(typing.Literal["a", "b"])
    ('int or null', 'list of str', '"a" or "b"')
    """
    members = _members(annotation)
    if len(members) > 1:
        return " or ".join(dict.fromkeys(_type(m) for m in members))
    (a,) = members
    if a is type(None):
        return "null"
    if a is typing.Any:
        return "any"
    origin, args = typing.get_origin(a), typing.get_args(a)
    if origin is typing.Literal:
        return " or ".join(json.dumps(x) for x in args)
    if origin in (list, tuple, set):
        inner = dict.fromkeys(_type(x) for x in args if x is not Ellipsis)
        return f"list of {' or '.join(inner)}" if inner else "list"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}" if args else "mapping"
    if isinstance(a, type) and issubclass(a, BaseModel):
        return "section"
    return getattr(a, "__name__", str(a))


def _default(field) -> str:
    if field.is_required():
        return "required"
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return "(its section)"
    return f"`{json.dumps(value, default=str)}`"


def _cell(text: str) -> str:
    return re.sub(r"\s+", " ", text).replace("|", "\\|").strip()


def _discriminator(model: type[BaseModel]) -> str | None:
    """``engine: vllm`` or ``name: full`` for a member of a tagged union."""
    for key in ("engine", "name"):
        field = model.model_fields.get(key)
        if field is not None and typing.get_origin(field.annotation) is typing.Literal:
            return f"{key}: {typing.get_args(field.annotation)[0]}"
    return None


def sections(model: type[BaseModel] = JobSpec, path: str = "", title: str = "Top level") -> list[Section]:
    """The tables of the reference, depth first, in the models' field order."""
    out = [Section(path, title, model)]
    tagged = unions() if model is JobSpec else {}
    for name, field in model.model_fields.items():
        key = f"{path}.{name}" if path else name
        nested = list(tagged[name].values()) if name in tagged else _models(field.annotation)
        for sub in nested:
            tag = _discriminator(sub) if len(nested) > 1 else None
            out += sections(sub, key, f"`{key}`" + (f" ({tag})" if tag else ""))
    return out


def render() -> str:
    """The whole reference, Markdown."""
    parts = [HEADER]
    for section in sections():
        parts.append(f"\n## {section.title}\n")
        doc = (section.model.__doc__ or "").strip().split("\n\n")[0]
        if doc and section.path:
            parts.append(_cell(doc) + "\n")
        parts.append("| key | type | default | description |\n|---|---|---|---|")
        for name, field in section.model.model_fields.items():
            key = f"{section.path}.{name}" if section.path else name
            kind = _type(field.annotation)
            parts.append(f"| `{key}` | {_cell(kind)} | {_cell(_default(field))} | {_cell(field.description or '')} |")
    return "\n".join(parts) + "\n"
