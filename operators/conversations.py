"""Conversations in prompts: what a judge sees of a multi-turn context and of a candidate's replies.

CANDIDATES may carry a context as a conversation, a candidate's replies to its
earlier turns, and a reference answer (optional columns; :mod:`pairank.storage.conversations`).
A prompt template still has one ``{context}`` and one text per candidate; these
functions make those texts, turn by turn:

- the **context**: each message under its role and turn number, then the reference
  answer where there is one (:func:`context_view`);
- a **candidate** with earlier replies (MT-Bench's second turn): its reply to each
  user turn, the last one marked as the reply to judge (:func:`candidate_view`).

Without those columns a context and a candidate are their texts, unchanged (so the
judgment keys of every table without them stay as they were).

    >>> conv = '[{"role":"user","content":"Name a prime."},{"role":"user","content":"And an even one?"}]'
    >>> print(context_view("(transcript)", conv, None))
    User, turn 1:
    Name a prime.
    <BLANKLINE>
    User, turn 2:
    And an even one?
    >>> print(candidate_view("2.", '["3."]'))
    Reply to turn 1:
    3.
    <BLANKLINE>
    Reply to turn 2 (the reply to judge):
    2.
"""

from __future__ import annotations

import json

import pyarrow as pa

from pairank.storage.conversations import parse_messages
from pairank.storage.schemas import CONVERSATION, PRIOR_REPLIES, REFERENCE

_ROLE = {"system": "System", "user": "User", "assistant": "Assistant"}


def context_view(context: str, conversation: str | None, reference: str | None) -> str:
    """What the judge sees of a context: the conversation turn by turn (else ``context``), and the reference."""
    if conversation is None:
        text = context
    else:
        parts, turn = [], 0
        for m in parse_messages(conversation):
            if m["role"] == "user":
                turn += 1
                parts.append(f"User, turn {turn}:\n{m['content']}")
            else:
                parts.append(f"{_ROLE[m['role']]}:\n{m['content']}")
        text = "\n\n".join(parts)
    if reference is not None:
        text += f"\n\nReference answer (correct, for comparison):\n{reference}"
    return text


def candidate_view(text: str, prior_replies: str | None) -> str:
    """What the judge sees of a candidate: its text, or with earlier replies each reply under its turn."""
    if prior_replies is None:
        return text
    replies = json.loads(prior_replies)  # checked against the conversation when the table was read
    parts = [f"Reply to turn {i}:\n{r}" for i, r in enumerate(replies, 1)]
    parts.append(f"Reply to turn {len(replies) + 1} (the reply to judge):\n{text}")
    return "\n\n".join(parts)


def _column(table: pa.Table, name: str) -> list:
    return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows


def context_texts(candidates: pa.Table) -> dict[str, str]:
    """``context_id -> what the judge sees`` (:func:`context_view`) of a CANDIDATES table."""
    ids, contexts = candidates.column("context_id").to_pylist(), candidates.column("context").to_pylist()
    convs, refs = _column(candidates, CONVERSATION.name), _column(candidates, REFERENCE.name)
    if not any(convs) and not any(refs):
        return dict(zip(ids, contexts))
    out: dict[str, str] = {}
    for ctx, context, conv, ref in zip(ids, contexts, convs, refs):
        if ctx not in out:
            out[ctx] = context_view(context, conv, ref)
    return out


def candidate_texts(candidates: pa.Table) -> dict[str, str]:
    """``candidate_id -> what the judge sees`` (:func:`candidate_view`) of a CANDIDATES table."""
    ids, texts = candidates.column("candidate_id").to_pylist(), candidates.column("text").to_pylist()
    prior = _column(candidates, PRIOR_REPLIES.name)
    if not any(prior):
        return dict(zip(ids, texts))
    return {cid: candidate_view(t, p) for cid, t, p in zip(ids, texts, prior)}
