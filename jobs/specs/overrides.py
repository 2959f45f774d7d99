"""``--set`` overrides of a spec file, and the spec's tagged sections they may switch.

``judge`` and ``scheduler`` are tagged unions: ``judge.engine`` and ``scheduler.name``
pick the member whose settings the other keys are. A ``--set`` of the tag alone
(``--set scheduler.name=full`` on a file that sets ``anchors`` for ``pairs_anchors``)
means "this scheduler instead": the file's keys that only the former member has are
dropped, and one note names them (:func:`override`). A key the user typed that the new
member does not have is still an error.
"""

from __future__ import annotations

from pydantic import BaseModel

from pairank.jobs.schedulers import REGISTRY
from pairank.judges import ENGINES
from pairank.storage.bounded_yaml import YamlError, load_yaml

#: The tagged sections of a spec: section -> (the key naming its member, the member when that key is unset).
TAGS: dict[str, tuple[str, str | None]] = {"judge": ("engine", None), "scheduler": ("name", "full")}


class SpecError(ValueError):
    """A job spec that does not validate; the message names the file and the keys."""


def unions() -> dict[str, dict[str, type[BaseModel]]]:
    """The tagged unions of the spec: field -> (tag -> member model); the judge's are the engines registered now."""
    return {
        "judge": {name: engine.settings for name, engine in ENGINES.items()},
        "scheduler": dict(REGISTRY),
    }


def apply_overrides(data: dict, overrides: list[str]) -> dict:
    """Apply ``key.sub=value`` overrides (values parsed as YAML, within :mod:`~pairank.storage.bounded_yaml`'s limits).

    >>> apply_overrides({"a": {"b": 1}}, ["a.b=2", "c=s3://x/y"])
    {'a': {'b': 2}, 'c': 's3://x/y'}
    """
    data = dict(data)
    for item in overrides:
        if "=" not in item:
            raise SpecError(f"--set {item!r}: expected key=value")
        key, value = item.split("=", 1)
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            child = dict(child) if isinstance(child, dict) else {}
            node[part] = child
            node = child
        try:
            node[parts[-1]] = load_yaml(value, f"--set {key}") if value else value
        except YamlError as exc:
            raise SpecError(str(exc)) from None
    return data


def switch_members(before: dict, after: dict, overrides: list[str]) -> tuple[dict, list[str]]:
    """``after`` (``before`` with ``overrides`` applied) without the keys of ``before``'s tagged sections that
    belong to the member an override switched away from, and one note per switched section naming them.

    Only a key the file set, that the former member has and the new one has not, is dropped; a key the user typed
    (``--set scheduler.anchors.size=4``) stays, to be refused by validation. A section typed whole
    (``--set 'scheduler={name: full}'``) is the user's own.

    >>> file = {"scheduler": {"name": "pairs_anchors", "anchors": {"size": 6}, "seed": 3}}
    >>> data, notes = switch_members(file, apply_overrides(file, ["scheduler.name=full"]), ["scheduler.name=full"])
    >>> data
    {'scheduler': {'name': 'full', 'seed': 3}}
    >>> notes[0].split(": ", 1)[1]
    "dropped the spec file's scheduler key anchors (a setting of 'pairs_anchors' that 'full' does not have)"
    """
    typed = [item.split("=", 1)[0].split(".") for item in overrides]
    notes = []
    out = dict(after)
    for section, members in unions().items():
        tag, default = TAGS[section]
        was, now = before.get(section), after.get(section)
        if [section, tag] not in typed or [section] in typed or not isinstance(was, dict) or not isinstance(now, dict):
            continue
        old, new = members.get(str(was.get(tag, default))), members.get(str(now.get(tag, default)))
        if old is None or new is None or old is new:
            continue
        mine = {parts[1] for parts in typed if len(parts) > 1 and parts[0] == section}
        dropped = [
            key
            for key in now
            if key in was and key in old.model_fields and key not in new.model_fields and key not in mine
        ]
        if dropped:
            out[section] = {key: value for key, value in now.items() if key not in dropped}
            keys = "keys " + ", ".join(dropped) if len(dropped) > 1 else "key " + dropped[0]
            what = "settings" if len(dropped) > 1 else "a setting"
            notes.append(
                f"--set {section}.{tag}={now.get(tag)}: dropped the spec file's {section} {keys} "
                f"({what} of {was.get(tag, default)!r} that {now.get(tag)!r} does not have)"
            )
    return out, notes


def override(data: dict, overrides: list[str]) -> tuple[dict, list[str]]:
    """``data`` (a spec file's mapping) with ``overrides`` applied and the members they switched cleaned of the
    former member's keys (:func:`switch_members`); returns it and the notes to show."""
    return switch_members(data, apply_overrides(data, overrides), overrides)
