"""Conversations: a context of several messages, and a candidate's replies to it.

A context that is more than one user message (a system prompt, earlier turns) is
kept as a conversation in CANDIDATES' optional ``conversation`` column: JSON of a
list of messages ``{"role": "system" | "user" | "assistant", "content": text}``,
at most one system message and only first, ending with a user message. The
``context`` column holds its :func:`transcript`, so every reader of a context
text (keys, reports, length features) keeps working; prompts show the messages
turn by turn (:mod:`pairank.operators.conversations`).

A candidate that answers several user turns with its own replies (MT-Bench's
second turn follows the model's own first answer) carries those earlier replies
in ``prior_replies``: JSON of a list of texts, one per *open* user turn before the
last (:func:`open_turns`: a user message the conversation gives no assistant reply to).

    >>> msgs = parse_messages('[{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},'
    ...                       ' {"role": "user", "content": "Bye?"}]')
    >>> print(transcript(msgs))
    [user]
    Hi
    <BLANKLINE>
    [assistant]
    Hello
    <BLANKLINE>
    [user]
    Bye?
    >>> open_turns(msgs)
    1
"""

from __future__ import annotations

import json
from typing import Any

ROLES = ("system", "user", "assistant")


class ConversationError(ValueError):
    """A conversation (or prior replies) that is not as :mod:`pairank.storage.conversations` describes."""


def check_messages(value: Any) -> list[dict[str, str]]:
    """``value`` as a list of messages (see the module docstring), else a :class:`ConversationError` saying what
    is wrong.

    >>> try:
    ...     check_messages([{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}])
    ... except ConversationError as exc:
    ...     print(exc)
    the last message: expected role 'user', found 'assistant'
    """
    if not isinstance(value, list) or not value:
        raise ConversationError(f"expected a non-empty list of messages, found {_show(value)}")
    out = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            raise ConversationError(f"message {i}: expected an object with exactly role and content, found {_show(m)}")
        role, content = m["role"], m["content"]
        if role not in ROLES:
            raise ConversationError(f"message {i}: expected a role of {list(ROLES)}, found {role!r}")
        if role == "system" and i != 0:
            raise ConversationError(f"message {i}: a system message comes first, or not at all")
        if not isinstance(content, str) or not content.strip():
            raise ConversationError(f"message {i}: expected a non-empty text as content, found {_show(content)}")
        out.append({"role": role, "content": content})
    if out[-1]["role"] != "user":
        raise ConversationError(f"the last message: expected role 'user', found {out[-1]['role']!r}")
    return out


def parse_messages(text: str) -> list[dict[str, str]]:
    """The messages of a ``conversation`` value (JSON), checked."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConversationError(f"expected JSON of a list of messages ({exc.msg} at column {exc.colno})") from None
    return check_messages(value)


def dump_messages(messages: list[dict[str, str]]) -> str:
    """The canonical JSON of checked messages (the ``conversation`` value)."""
    return json.dumps(check_messages(messages), ensure_ascii=False, separators=(",", ":"))


def open_turns(messages: list[dict[str, str]]) -> int:
    """How many user messages the conversation leaves without an assistant reply (the last one always): the
    candidate answers each, its earlier answers in ``prior_replies``.

    >>> open_turns([{"role": "user", "content": "q1"}, {"role": "user", "content": "q2"}])
    2
    """
    return sum(
        m["role"] == "user" and (i + 1 == len(messages) or messages[i + 1]["role"] != "assistant")
        for i, m in enumerate(messages)
    )


def transcript(messages: list[dict[str, str]]) -> str:
    """The conversation as one text: each message under its role in brackets, separated by blank lines."""
    return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages)


def parse_replies(text: str, turns: int) -> list[str]:
    """The texts of a ``prior_replies`` value: a JSON list of ``turns`` non-empty texts."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConversationError(f"expected JSON of a list of texts ({exc.msg} at column {exc.colno})") from None
    return check_replies(value, turns)


def check_replies(value: Any, turns: int) -> list[str]:
    """``value`` as ``turns`` replies (one per earlier user turn), else a :class:`ConversationError`."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConversationError(f"expected a list of non-empty texts, found {_show(value)}")
    if len(value) != turns:
        raise ConversationError(
            f"expected {turns} earlier replies (one per open user turn before the last), found {len(value)}"
        )
    return list(value)


def dump_replies(replies: list[str]) -> str:
    """The canonical JSON of a candidate's earlier replies (the ``prior_replies`` value)."""
    return json.dumps(list(replies), ensure_ascii=False, separators=(",", ":"))


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
