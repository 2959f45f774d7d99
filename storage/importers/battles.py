"""Verdicts made elsewhere (human votes, another judge) as pairank tables: ``pairank import battles``.

A battle is one verdict between two models' replies to one prompt. Layouts:

- ``lmarena`` (the battle logs LMArena publishes, JSON lines, a JSON array or Parquet):
  ``model_a``, ``model_b``, ``winner`` (``model_a``, ``model_b``, ``tie``, ``tie (bothbad)`` or
  ``both_bad``), optional ``question_id``, ``conversation_a`` / ``conversation_b`` (lists of
  ``{role, content}``; both sides share the user's turns), ``category`` and ``conv_metadata``
  with the style counts of each side (``sum_assistant_a_tokens``, ``header_count_a`` ``{h1..h6}``,
  ``list_count_a`` ``{ordered, unordered}``, ``bold_count_a`` ``{**, __}``, and the same for b).
- ``table``: any of those files with the columns mapped (:class:`BattleFields`); the winner may also be
  ``A``, ``B`` or ``tie``.

Written under the destination (each table streamed to a hidden file, moved into place when all is read):

- ``candidates.parquet``: per battle a context ``<battle id>`` (the user's turns; several turns a
  ``conversation``) and one candidate per side, ``<battle id>/<model>`` (the model's last reply; its earlier
  replies in ``prior_replies``). With a context field (``BattleFields.context``, ``--context-field``) the battles
  that name one prompt share its context, ``<prompt id>``, and a model's reply there is one candidate,
  ``<prompt id>/<model>``; each battle stays a judgment of its own (the battle id is in its key), repeated votes
  on one pair too. A log without conversations gets placeholder texts
  (:data:`NO_TEXT`), which rank but carry no style.
- ``judgments.parquet``: one JUDGMENTS row per battle, slot A = model_a: label ``A``, ``B`` or ``tie`` (both
  bad is a tie, as LMArena counts it) with p_a 1, 0 or 0.5; ``raw_text`` keeps the published winner; engine
  ``imported``, model = the judge (``--judge``, default ``human``), revision = the layout, sampling
  ``{"source": <layout>}``, aspect :data:`ASPECT`; ``created_at`` from ``tstamp`` where there is one. The
  leaderboard, ``pairank winrate`` and the replay judge read it as they read pairank's own.
- ``pairwise_labels.parquet`` when the judge is ``human``: the votes as human labels, so ``pairank meta-eval``
  measures another judge against them.
- ``style_features.parquet`` where the log has ``conv_metadata``: per candidate its tokens, headers, bold
  spans and list items (STYLE_FEATURES), which style control then uses instead of counting them in the text.

Refused, naming file, line (or Parquet row) and field: a missing or unknown winner, a missing model or the
same model on both sides, a conversation that is not a list of messages ending with the assistant, two sides
whose user turns differ, a battle id seen twice, battles of one shared context whose prompts differ or that
give one model two replies there, a style count that is not a whole number, a ``tstamp`` that
is not a finite Unix time in seconds within the years 1 to 9999.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from pairank.storage.conversations import dump_messages, dump_replies, transcript
from pairank.storage.fs import Location
from pairank.storage.importers._records import show
from pairank.storage.importers.outputs import SCHEMA as CANDIDATES_OUT
from pairank.storage.importers.outputs import Writer, ident, text
from pairank.storage.importers.sources import Where, records
from pairank.storage.keys import canonical_json, judgment_key, text_hash
from pairank.storage.schemas import JUDGMENTS, PAIRWISE_LABELS, STYLE_FEATURES

#: The aspect of imported verdicts (``overall`` is the leaderboard's pooled row).
ASPECT = "preference"
ENGINE = "imported"
#: The text of a side whose log has no conversation.
NO_TEXT = "(the battle log gives no text)"
EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
#: The ``tstamp`` values a time can hold (seconds since 1970): 0001-01-01 to 9999-12-31 23:59:59 UTC.
TSTAMPS = (
    (dt.datetime(1, 1, 1, tzinfo=dt.UTC) - EPOCH).total_seconds(),
    (dt.datetime(9999, 12, 31, 23, 59, 59, tzinfo=dt.UTC) - EPOCH).total_seconds(),
)
TSTAMP_EXPECTED = (
    f"a finite Unix time in seconds (a number from {TSTAMPS[0]:.0f} to {TSTAMPS[1]:.0f}: the years 1 to 9999)"
)
WINNERS = {
    "model_a": "A",
    "model_b": "B",
    "tie": "tie",
    "tie (bothbad)": "tie",
    "both_bad": "tie",
    "A": "A",
    "B": "B",
}
LAYOUTS = ("lmarena", "table")


@dataclass(frozen=True)
class BattleFields:
    """Which field holds what (``table`` layout; ``lmarena`` uses these defaults)."""

    model_a: str = "model_a"
    model_b: str = "model_b"
    winner: str = "winner"
    id: str | None = "question_id"
    #: The field naming the prompt (the context) that several battles share, e.g. ``question_id`` in a log where
    #: every model meets the baseline on each question; None: each battle is a context of its own.
    context: str | None = None
    category: str | None = "category"
    conversation_a: str = "conversation_a"
    conversation_b: str = "conversation_b"
    judge: str = "human"


def _sides(where: Where, r: dict, f: BattleFields) -> tuple[list[dict] | None, list[str], list[str]]:
    """The user's messages and each side's replies (None, [], [] without conversations)."""
    ca, cb = r.get(f.conversation_a), r.get(f.conversation_b)
    if ca is None and cb is None:
        return None, [], []
    out = []
    for field, conv in ((f.conversation_a, ca), (f.conversation_b, cb)):
        if not isinstance(conv, list) or not conv or not all(isinstance(m, dict) for m in conv):
            raise where.fail(field, "a list of messages {role, content}", repr(conv)[:60])
        roles = [m.get("role") for m in conv]
        contents = [m.get("content") for m in conv]
        if roles[-1] != "assistant" or not all(isinstance(c, str) and c.strip() for c in contents):
            raise where.fail(field, "messages with non-empty content, the last the assistant's", repr(roles))
        user = [{"role": role, "content": c} for role, c in zip(roles, contents) if role != "assistant"]
        out.append((user, [c for role, c in zip(roles, contents) if role == "assistant"]))
    (user_a, replies_a), (user_b, replies_b) = out
    if user_a != user_b:
        raise where.fail(f.conversation_b, f"the user's turns of {f.conversation_a}", "different turns")
    return user_a, replies_a, replies_b


def _count(where: Where, meta: dict, key: str) -> float:
    value = meta.get(key)
    if isinstance(value, dict):
        values = list(value.values())
    else:
        values = [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise where.fail(f"conv_metadata.{key}", "a whole number (or an object of them) >= 0", repr(value)[:60])
    return float(sum(values))


def _style(where: Where, r: dict, side: str) -> dict | None:
    meta = r.get("conv_metadata")
    if meta is None:
        return None
    if not isinstance(meta, dict):
        raise where.fail("conv_metadata", "an object of style counts", repr(meta)[:60])
    return {
        "length": _count(where, meta, f"sum_assistant_{side}_tokens"),
        "headers": _count(where, meta, f"header_count_{side}"),
        "bold": _count(where, meta, f"bold_count_{side}"),
        "lists": _count(where, meta, f"list_count_{side}"),
    }


def _created(where: Where, r: dict) -> dt.datetime:
    """``tstamp`` as a time: seconds since 1970, finite and within the years 1 to 9999 (:data:`TSTAMPS`)."""
    t = r.get("tstamp")
    if t is None:
        return EPOCH
    if isinstance(t, (int, float)) and not isinstance(t, bool):
        try:
            seconds = float(t)
        except OverflowError:  # an int too large for a float
            seconds = math.inf
        if TSTAMPS[0] <= seconds <= TSTAMPS[1]:  # not NaN, not infinite, a year from 1 to 9999
            return EPOCH + dt.timedelta(seconds=seconds)
    raise where.fail("tstamp", TSTAMP_EXPECTED, show(t, 40))


def import_battles(src: list[str], dst: str, fields: BattleFields = BattleFields(), layout: str = "lmarena") -> dict:
    """Read the battle logs ``src`` into the tables under ``dst`` (see the module docstring); the counts."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown battle layout {layout!r}; available: {', '.join(LAYOUTS)}")
    sources = [Location.of(s) for s in src]
    for loc in sources:
        if not loc.exists():
            raise FileNotFoundError(f"{loc.uri}: no such file")
    out = Location.of(dst)
    judge = {"engine": ENGINE, "model": fields.judge, "revision": layout, "sampling": {"source": layout}}
    prompt_hash = text_hash(f"battles/{layout}")
    human = fields.judge == "human"
    writers = {
        "candidates": Writer(out.join("candidates.parquet"), CANDIDATES_OUT),
        "judgments": Writer(out.join("judgments.parquet"), JUDGMENTS),
        "style_features": Writer(out.join("style_features.parquet"), STYLE_FEATURES),
    }
    if human:
        writers["pairwise_labels"] = Writer(out.join("pairwise_labels.parquet"), PAIRWISE_LABELS)
    seen: dict[str, str] = {}  # battle id -> where
    contexts: dict[str, tuple[str, str]] = {}  # shared context id -> (its text, where first)
    written: dict[str, tuple[str, str]] = {}  # candidate id -> (its text, where first)
    counts: dict[str, Any] = {"battles": 0, "ties": 0, "both_bad": 0, "with_style": 0}
    models: set[str] = set()
    try:
        for loc in sources:
            for where, r in records(loc):
                if not isinstance(r, dict):
                    raise where.fail(None, "a battle record (an object)", type(r).__name__)
                a, b = text(where, r, fields.model_a), text(where, r, fields.model_b)
                if a == b:
                    raise where.fail(fields.model_b, f"a model other than {fields.model_a} ({a!r})", repr(b))
                winner = r.get(fields.winner)
                if winner not in WINNERS:
                    raise where.fail(fields.winner, f"one of {list(WINNERS)}", repr(winner)[:40])
                id_field = fields.id if fields.id != fields.context else None  # a shared field names the context
                battle = ident(where, r, id_field) if id_field and r.get(id_field) is not None else None
                battle = battle or f"battle/{text_hash(loc.uri)}/{where.line if where.line is not None else where.row}"
                if battle in seen:
                    hint = f"; if {fields.id} names the prompt that battles share, give --context-field {fields.id}"
                    expected = f"a unique battle id ({battle!r} is also in {seen[battle]}){hint * (not fields.context)}"
                    raise where.fail(fields.id or "id", expected, "again")
                seen[battle] = f"{where.uri} {where.place}"
                ctx = battle if fields.context is None else ident(where, r, fields.context)
                user, replies_a, replies_b = _sides(where, r, fields)
                category = text(where, r, fields.category, optional=True) if fields.category else None
                context = (
                    transcript(user) if user and len(user) > 1 else (user[0]["content"] if user else f"battle {ctx}")
                )
                conversation = dump_messages(user) if user and len(user) > 1 else None
                if fields.context:
                    first = contexts.setdefault(ctx, (context, f"{where.uri} {where.place}"))
                    if first[0] != context:
                        raise where.fail(fields.context, f"the same prompt as context {ctx!r} in {first[1]}", "another")
                cands = {}
                for side, model, replies in (("a", a, replies_a), ("b", b, replies_b)):
                    cid = f"{ctx}/{model}"
                    cands[side] = (cid, replies[-1] if replies else NO_TEXT)
                    if cid in written:  # a model's reply in a context that another battle shares
                        if written[cid][0] != cands[side][1]:
                            field = fields.conversation_a if side == "a" else fields.conversation_b
                            expected = f"{model}'s reply in context {ctx!r} as in {written[cid][1]}"
                            raise where.fail(field, expected, "another reply")
                        continue
                    written[cid] = (cands[side][1], f"{where.uri} {where.place}")
                    earlier = replies[:-1] if conversation is not None else []
                    writers["candidates"].add(
                        {
                            "context_id": ctx,
                            "context": context,
                            "candidate_id": cid,
                            "system": model,
                            "text": cands[side][1],
                            "category": category,
                            "conversation": conversation,
                            "prior_replies": dump_replies(earlier) if earlier else None,
                            "reference": None,
                        }
                    )
                    style = _style(where, r, side)
                    if style is not None:
                        writers["style_features"].add({"candidate_id": cid, **style})
                label = WINNERS[winner]
                (id_a, text_a), (id_b, text_b) = cands["a"], cands["b"]
                # battles that share a context are each a judgment of their own: the battle is in the key, so a
                # repeated vote on one (context, a, b) is kept beside the first, not taken for it
                keyed = {**judge, "battle": battle} if fields.context else judge
                writers["judgments"].add(
                    {
                        "key": judgment_key(keyed, prompt_hash, ASPECT, ctx, context, id_a, text_a, id_b, text_b),
                        "engine": ENGINE,
                        "model": fields.judge,
                        "revision": layout,
                        "prompt_hash": prompt_hash,
                        "sampling": canonical_json(judge["sampling"]),
                        "context_id": ctx,
                        "aspect": ASPECT,
                        "candidate_a": id_a,
                        "candidate_b": id_b,
                        "p_a": {"A": 1.0, "B": 0.0, "tie": 0.5}[label],
                        "logprob_a": None,
                        "logprob_b": None,
                        "label": label,
                        "raw_text": str(winner),
                        "input_tokens": 0,
                        "output_tokens": 0,
                        "seconds": 0.0,
                        "error": None,
                        "created_at": _created(where, r),
                    }
                )
                if human:
                    writers["pairwise_labels"].add(
                        {"context_id": ctx, "candidate_a": id_a, "candidate_b": id_b, "preferred": label}
                    )
                models |= {a, b}
                counts["battles"] += 1
                counts["ties"] += label == "tie"
                counts["both_bad"] += winner in ("tie (bothbad)", "both_bad")
                counts["with_style"] += r.get("conv_metadata") is not None
        if not counts["battles"]:
            raise ValueError(f"{', '.join(s.uri for s in sources)}: no battles")
        for name, w in writers.items():
            if name == "style_features" and not counts["with_style"]:
                w.abort()
                if w.target.exists():
                    w.target.fs.delete_file(w.target.path)  # stale, from an earlier import
                continue
            w.commit()
    except BaseException:
        for w in reversed(writers.values()):  # the first made the destination: it goes last, finding it empty
            w.abort()
        raise
    return {**counts, "models": sorted(models), "judge": fields.judge, "dst": out.uri}


def style_table(rows: list[dict]) -> pa.Table:
    """STYLE_FEATURES rows as a table (for tests and the battles API)."""
    return pa.Table.from_pylist(rows, schema=STYLE_FEATURES)
