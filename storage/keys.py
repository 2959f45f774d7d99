"""Stable keys: a hash of everything that determines a judgment's outcome.

The key covers the judge identity (engine, model, revision, sampling settings),
the prompt template hash, the aspect, the context and both candidates in slot
order, each by id and by a hash of its text. Change any of them and the key
changes, so a cached judgment is reused only when it would come out the same::

    >>> k1 = judgment_key({"model": "m"}, "h", "coherence", "c1", "doc", "x", "tx", "y", "ty")
    >>> k2 = judgment_key({"model": "m"}, "h", "coherence", "c1", "doc", "y", "ty", "x", "tx")
    >>> k1 != k2 and len(k1) == 32
    True
"""

from __future__ import annotations

import functools
import hashlib
import json


@functools.lru_cache(maxsize=512)
def text_hash(text: str) -> str:
    """Short hex digest of a text. Kept for the last few thousand texts: a static run keys a context's pairs
    together, each text many times (bench/stream_ceiling.py)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def canonical_json(obj) -> str:
    """JSON with sorted keys and no whitespace: the same object, the same string."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def sampling_mode(sampling: str | None) -> str | None:
    """The ``mode`` of a judgment's sampling JSON (e.g. an LLMBar prompting mode), or None.

    >>> sampling_mode('{"mode":"CoT"}'), sampling_mode("{}"), sampling_mode("not json")
    ('CoT', None, None)
    """
    try:
        value = json.loads(sampling or "{}")
    except json.JSONDecodeError:
        return None
    return value.get("mode") if isinstance(value, dict) else None


def judgment_key(
    judge: dict,
    prompt_hash: str,
    aspect: str,
    context_id: str,
    context: str,
    candidate_a: str,
    text_a: str,
    candidate_b: str,
    text_b: str,
) -> str:
    """The key of one judgment (see the module docstring)."""
    return key_of(
        canonical_json(judge), prompt_hash, aspect, context_id, context, candidate_a, text_a, candidate_b, text_b
    )


def key_of(
    judge_json: str,
    prompt_hash: str,
    aspect: str,
    context_id: str,
    context: str,
    candidate_a: str,
    text_a: str,
    candidate_b: str,
    text_b: str,
) -> str:
    """:func:`judgment_key` with the judge identity given as its :func:`canonical_json` (made once per run, not
    once per key). The payload is the canonical JSON of the key's fields, written member by member in sorted
    order: the same text :func:`canonical_json` makes of them as one object.

    >>> judge = {"model": "m", "sampling": {"t": 0}}
    >>> args = ("h", "coherence", "c1", "doc", "x", "tx", "y", "ty")
    >>> key_of(canonical_json(judge), *args) == judgment_key(judge, *args)
    True
    """
    payload = (
        f'{{"a":{_pair(candidate_a, text_a)},"aspect":{_string(aspect)},"b":{_pair(candidate_b, text_b)},'
        f'"context":{_pair(context_id, context)},"judge":{judge_json},"prompt":{_string(prompt_hash)}}}'
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]


def _string(value: str) -> str:
    return canonical_json(value) if type(value) is not str else json.encoder.encode_basestring_ascii(value)


def _pair(name: str, text: str) -> str:
    """``[name, text_hash(text)]`` as canonical JSON."""
    return f"[{_string(name)},{_string(text_hash(text))}]"
