"""pairank's one YAML reader: a file that cannot hurt (specs, ``--set`` values, prompts' ``domain.yaml``).

YAML's anchors and aliases let a few hundred bytes name a document of gigabytes
(``&a [x, x, ...]``, ``&b [*a, *a, ...]``, ...: the "billion laughs"). Aliases
are allowed here, and merge keys (``<<: *defaults``), but every alias counts as a
copy of what it names, and a document is refused when:

- its text is over :data:`MAX_BYTES` bytes;
- it would expand (aliases copied out) to over :data:`MAX_BYTES`, measured as
  the length of its scalars plus two per collection (about its size as JSON);
- it nests deeper than :data:`MAX_DEPTH` collections;
- an alias sits inside the node it names (a recursive structure).

The size is measured on YAML's event stream, before any node or Python object is
built; the error names the file, line, column and key where the limit was crossed.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceStartEvent,
)

from pairank.storage.fs import decode_utf8

#: Most bytes of a YAML file's text, and of the document it expands to with its aliases copied out.
MAX_BYTES = 1 << 20
#: Most collections (mappings, sequences) nested in one another.
MAX_DEPTH = 64


class YamlError(ValueError):
    """A YAML text that is not valid YAML or breaks a limit; the message names the source and where."""


@dataclass
class _Frame:
    """An open mapping or sequence: where it began in the expanded size, and the key or index being read."""

    mapping: bool
    start: int
    anchor: str | None
    key: str = "?"
    index: int = 0
    expecting_key: bool = True

    def position(self) -> str:
        return self.key if self.mapping else str(self.index)

    def done(self, key: str | None = None) -> None:
        """One child node of this collection was read (``key``: the scalar it was, when it was a mapping's key)."""
        if not self.mapping:
            self.index += 1
        elif self.expecting_key:
            self.key, self.expecting_key = (key if key is not None else "?"), False
        else:
            self.expecting_key = True


def _where(source: str, event, frames: list[_Frame]) -> str:
    key = ".".join(f.position() for f in frames if not (f.mapping and f.expecting_key))
    mark = event.start_mark
    at = f"line {mark.line + 1}, column {mark.column + 1}"
    return f"{source}: {at}" + (f" (key {key})" if key else "")


def measure(text: str, source: str, limit: int = MAX_BYTES, depth: int = MAX_DEPTH) -> int:
    """The size ``text`` expands to with its aliases copied out; :class:`YamlError` past ``limit`` or ``depth``.

    >>> measure("a: [1, 22]", "x.yaml")
    11
    >>> measure("a: &x [1, 22]\\nb: *x", "x.yaml")
    20
    >>> measure("a: &x [1, 2]\\nb: [*x, *x, *x]", "x.yaml", limit=20)
    Traceback (most recent call last):
    ...
    pairank.storage.bounded_yaml.YamlError: x.yaml: line 2, column 9 (key b.1): the YAML expands to over 20 bytes ...
    """
    anchors: dict[str, int] = {}
    frames: list[_Frame] = []
    total = 0

    def grow(event, n: int) -> None:
        nonlocal total
        total += n
        if total > limit:
            raise YamlError(
                f"{_where(source, event, frames)}: the YAML expands to over {limit:,} bytes with its aliases copied "
                "out, the most pairank reads (an alias counts as a copy of what it names)"
            )

    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, ScalarEvent):
                grow(event, len(event.value) + 1)
                if event.anchor:
                    anchors[event.anchor] = len(event.value) + 1
                is_key = bool(frames) and frames[-1].mapping and frames[-1].expecting_key
                if frames:
                    frames[-1].done(event.value if is_key else None)
            elif isinstance(event, AliasEvent):
                if any(f.anchor == event.anchor for f in frames):
                    raise YamlError(
                        f"{_where(source, event, frames)}: the alias *{event.anchor} is inside the node it names "
                        "(a recursive structure); pairank reads YAML without recursive aliases"
                    )
                if event.anchor not in anchors:
                    raise YamlError(f"{_where(source, event, frames)}: the alias *{event.anchor} names no anchor")
                grow(event, anchors[event.anchor])
                if frames:
                    frames[-1].done()
            elif isinstance(event, (MappingStartEvent, SequenceStartEvent)):
                if len(frames) >= depth:
                    raise YamlError(
                        f"{_where(source, event, frames)}: collections nested more than {depth} deep; "
                        f"pairank reads YAML nested at most {depth} deep"
                    )
                grow(event, 2)
                frames.append(_Frame(isinstance(event, MappingStartEvent), total - 2, event.anchor))
            elif isinstance(event, CollectionEndEvent):
                frame = frames.pop()
                if frame.anchor:
                    anchors[frame.anchor] = total - frame.start
                if frames:
                    frames[-1].done()
    except yaml.YAMLError as exc:
        raise YamlError(f"{source}: not valid YAML: {exc}") from None
    return total


def load_yaml(data: str | bytes, source: str, limit: int = MAX_BYTES):
    """The Python value of the YAML ``data`` (text, or UTF-8 bytes) named ``source``, within the limits above.

    >>> load_yaml("base: &b {x: 1}\\nrun: {<<: *b, y: 2}", "spec.yaml")
    {'base': {'x': 1}, 'run': {'x': 1, 'y': 2}}
    >>> load_yaml(b"a: 1\\nb: \\xff", "spec.yaml")
    Traceback (most recent call last):
    ...
    ValueError: spec.yaml: line 2, column 4: not UTF-8 text (byte 0xff)
    """
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > limit:
        raise YamlError(f"{source}: {size:,} bytes; pairank reads YAML files of at most {limit:,} bytes")
    text = decode_utf8(data, source) if isinstance(data, bytes) else data
    measure(text, source, limit)
    try:
        return yaml.load(text, Loader=yaml.SafeLoader)  # the safe loader, on a measured text
    except yaml.YAMLError as exc:
        raise YamlError(f"{source}: not valid YAML: {exc}") from None
