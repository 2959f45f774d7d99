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

import hashlib
import json


def text_hash(text: str) -> str:
    """Short hex digest of a text."""
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
    payload = canonical_json(
        {
            "judge": judge,
            "prompt": prompt_hash,
            "aspect": aspect,
            "context": [context_id, text_hash(context)],
            "a": [candidate_a, text_hash(text_a)],
            "b": [candidate_b, text_hash(text_b)],
        }
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:32]
