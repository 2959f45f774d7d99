"""Outputs in the field's formats, read into a CANDIDATES table: ``pairank import outputs``.

Formats (each read from the projects' published layouts; the fields named here are all
that is read, others are ignored; a name may spell ``-`` as ``_``: ``alpaca_eval``, as
AlpacaEval's package is called, is ``alpaca-eval``):

- ``alpaca-eval``: JSON arrays (or JSON lines) of ``{instruction, output, generator}``
  records, e.g. one ``model_outputs.json`` per model. ``dataset`` is the category.
  Context id ``alpaca/<hash of the instruction>`` (AlpacaEval matches outputs by their
  instruction); system = ``generator``.
- ``arena-hard``: a folder with ``question.jsonl`` and ``model_answer/<model>.jsonl``, in
  either published layout. v0.1: questions ``{question_id, category, turns: [{content}]}``,
  answers ``{question_id, model_id, choices: [{turns: [{content}]}]}``. v2.0: questions
  ``{uid, category, prompt}``, answers ``{uid, model, messages: [..., {role: assistant,
  content: {answer}}]}``. Context id = the question's id; the category is ``category``.
- ``mt-bench``: a folder with ``question.jsonl`` (``{question_id, category, turns: [q1, q2],
  reference?: [r1, r2]}``), ``model_answer/<model>.jsonl`` (``{question_id, model_id,
  choices: [{turns: [a1, a2]}]}``) and optionally one ``reference_answer/<model>.jsonl``
  of the same layout. Each turn is a context, ``<question_id>/turn<t>``, as MT-Bench's
  pairwise judge sees it: turn 2 is the conversation of both questions, and each
  candidate carries its own first answer in ``prior_replies``.
- ``table``: JSON lines, a JSON array, CSV or Parquet (by suffix) with the fields named by
  :class:`Fields` (``--context-field``, ``--output-field``, ...). A context field holding a
  list of messages is a conversation.

Ids: a candidate is ``<context id>/<system>``, so importing the same outputs again gives
the same ids, and importing a grown set into the same folder keeps every candidate
already there (its id, its text: a changed text under a known id is refused) and adds
the new ones: a nightly job reading that folder sees the new systems.

Streaming: records are read one at a time (:mod:`pairank.storage.importers.sources`)
and written in row groups of :data:`ROWS_PER_GROUP` to a hidden file, moved into place
when everything is checked: nothing half-written is ever visible. Memory holds one
small entry per candidate and per context (ids, hashes, where first seen), never the
texts.

Refused, naming file, line (or Parquet row) and field: a missing field, a value of the
wrong type, an empty output, a line that is not JSON, a duplicate id, a context whose
text (or category, conversation, reference) differs between its records, an answer to
an unknown question, a context with fewer than 2 candidates (unless ``part``).
"""

from __future__ import annotations

import contextlib
import os
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, overload

import pyarrow as pa
import pyarrow.parquet as pq

from pairank.storage.conversations import ConversationError, check_messages, dump_messages, dump_replies, transcript
from pairank.storage.errors import DiskFull, is_disk_full
from pairank.storage.fs import Location, remove_stale_temporaries, temporary_path
from pairank.storage.importers.sources import Where, parquet_batches, records
from pairank.storage.keys import text_hash
from pairank.storage.schemas import CANDIDATE_OPTIONAL, CANDIDATES
from pairank.storage.validation import TableError, validate

#: The table written: CANDIDATES and every optional column (null where a format has none).
SCHEMA = pa.schema([*CANDIDATES, *CANDIDATE_OPTIONAL])
ROWS_PER_GROUP = 8192
FORMATS = ("alpaca-eval", "arena-hard", "mt-bench", "table")


@dataclass(frozen=True)
class Fields:
    """Where a ``table`` record keeps each value (field names); ``system_name``: one system for every record."""

    context: str = "prompt"
    output: str = "output"
    system: str | None = "model"
    id: str | None = None
    category: str | None = None
    reference: str | None = None
    system_prompt: str | None = None
    system_name: str | None = None


@overload
def text(where: Where, record: Any, field: str, optional: Literal[False] = False) -> str: ...
@overload
def text(where: Where, record: Any, field: str, optional: bool) -> str | None: ...
def text(where: Where, record: Any, field: str, optional: bool = False) -> str | None:
    """``record[field]`` as a non-empty text (a number is not a text), else an error naming the field."""
    if not isinstance(record, dict):
        raise where.fail(None, "a JSON object (a record)", type(record).__name__)
    if field not in record or record[field] is None:
        if optional:
            return None
        raise where.fail(field, "a field " + repr(field), "none" if field not in record else "null")
    value = record[field]
    if not isinstance(value, str):
        raise where.fail(field, "a text", f"{type(value).__name__} {_show(value)}")
    if not value.strip():
        raise where.fail(field, "a non-empty text", repr(value))
    return value


def ident(where: Where, record: Any, field: str) -> str:
    """An id field: a non-empty text or a whole number, as text."""
    value = record.get(field) if isinstance(record, dict) else None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return text(where, record, field)


def listed(where: Where, record: dict, field: str) -> list:
    value = record.get(field)
    if field not in record:
        raise where.fail(field, "a field " + repr(field), "none")
    if not isinstance(value, list) or not value:
        raise where.fail(field, "a non-empty list", _show(value))
    return value


def _show(value: Any, limit: int = 60) -> str:
    t = repr(value)
    return t if len(t) <= limit else t[: limit - 3] + "..."


def row(
    ctx: str,
    system: str,
    output: str,
    *,
    context: str | None = None,
    messages: list[dict] | None = None,
    prior: list[str] | None = None,
    category: str | None = None,
    reference: str | None = None,
) -> dict:
    """A candidate row; a conversation of one user message is that message's text."""
    if messages is not None and len(messages) == 1:
        context, messages = messages[0]["content"], None
    return {
        "context_id": ctx,
        "context": transcript(messages) if messages is not None else context,
        "candidate_id": f"{ctx}/{system}",
        "system": system,
        "text": output,
        "category": category,
        "conversation": dump_messages(messages) if messages is not None else None,
        "prior_replies": dump_replies(prior) if prior else None,
        "reference": reference,
    }


# --- formats -------------------------------------------------------------------------------------


def alpaca_eval(sources: list[Location], fields: Fields) -> Iterator[tuple[Where, dict]]:
    for loc in sources:
        for where, r in records(loc, "jsonl" if loc.path.endswith(".jsonl") else "json"):
            instruction = text(where, r, "instruction")
            system = fields.system_name or text(where, r, "generator")
            ctx = f"alpaca/{text_hash(instruction)}"
            yield (
                where,
                row(
                    ctx,
                    system,
                    text(where, r, "output"),
                    context=instruction,
                    category=text(where, r, "dataset", optional=True),
                ),
            )


def _folder_files(src: Location, name: str, required: bool = True) -> list[Location]:
    folder = src.join(name)
    files = folder.files(".jsonl") if folder.is_dir() else []
    if required and not files:
        raise FileNotFoundError(f"{folder.uri}: no <model>.jsonl answer files")
    return files


def _only_folder(sources: list[Location], fmt: str) -> Location:
    if len(sources) != 1 or not sources[0].is_dir():
        raise ValueError(f"{fmt}: expected one source folder (with question.jsonl and model_answer/), found {sources}")
    return sources[0]


def arena_hard(sources: list[Location], fields: Fields) -> Iterator[tuple[Where, dict]]:
    src = _only_folder(sources, "arena-hard")
    questions: dict[str, tuple[list[dict], str | None]] = {}
    for where, q in records(src.join("question.jsonl"), "jsonl"):
        if isinstance(q, dict) and "uid" in q:  # v2.0
            qid, msgs = ident(where, q, "uid"), [{"role": "user", "content": text(where, q, "prompt")}]
        else:  # v0.1
            qid = ident(where, q, "question_id")
            msgs = [
                {"role": "user", "content": _turn(where, t, "turns", i)}
                for i, t in enumerate(listed(where, q, "turns"))
            ]
        if qid in questions:
            raise where.fail("uid" if "uid" in q else "question_id", "a unique question id", f"{qid!r} (again)")
        questions[qid] = (msgs, text(where, q, "category", optional=True))
    for loc in _folder_files(src, "model_answer"):
        for where, a in records(loc, "jsonl"):
            v2 = isinstance(a, dict) and "uid" in a
            qid = ident(where, a, "uid" if v2 else "question_id")
            if qid not in questions:
                raise where.fail("uid" if v2 else "question_id", "the id of a question in question.jsonl", repr(qid))
            msgs, category = questions[qid]
            system = fields.system_name or text(where, a, "model" if v2 else "model_id")
            replies = _v2_replies(where, a) if v2 else _v01_replies(where, a)
            yield where, _answer_row(where, qid, system, msgs, replies, category, None)


def _turn(where: Where, t: Any, field: str, i: int) -> str:
    value = t.get("content") if isinstance(t, dict) else None
    if not isinstance(value, str) or not value.strip():
        raise where.fail(f"{field}[{i}].content", "a non-empty text", _show(value))
    return value


def _v01_replies(where: Where, a: dict) -> list[str]:
    choices = listed(where, a, "choices")
    if not isinstance(choices[0], dict) or not isinstance(choices[0].get("turns"), list) or not choices[0]["turns"]:
        raise where.fail("choices[0].turns", "a non-empty list of {content}", _show(choices[0]))
    return [_turn(where, t, "choices[0].turns", i) for i, t in enumerate(choices[0]["turns"])]


def _v2_replies(where: Where, a: dict) -> list[str]:
    out = []
    for i, m in enumerate(listed(where, a, "messages")):
        if not isinstance(m, dict) or m.get("role") != "assistant":
            continue
        content = m.get("content")
        value = content.get("answer") if isinstance(content, dict) else content
        if not isinstance(value, str) or not value.strip():
            raise where.fail(f"messages[{i}].content.answer", "a non-empty text", _show(value))
        out.append(value)
    if not out:
        raise where.fail("messages", "an assistant message with content.answer", "none")
    return out


def _answer_row(where: Where, ctx: str, system: str, msgs: list[dict], replies: list[str], category, reference) -> dict:
    if len(replies) != len(msgs):
        raise where.fail("turns", f"{len(msgs)} replies (one per question turn)", f"{len(replies)}")
    return row(ctx, system, replies[-1], messages=msgs, prior=replies[:-1], category=category, reference=reference)


def mt_bench(sources: list[Location], fields: Fields) -> Iterator[tuple[Where, dict]]:
    src = _only_folder(sources, "mt-bench")
    questions: dict[str, tuple[list[str], str | None, list | None]] = {}
    for where, q in records(src.join("question.jsonl"), "jsonl"):
        qid = ident(where, q, "question_id")
        turns = [_plain(where, t, f"turns[{i}]") for i, t in enumerate(listed(where, q, "turns"))]
        ref = q.get("reference")
        if ref is not None and (not isinstance(ref, list) or len(ref) != len(turns)):
            raise where.fail("reference", f"a list of {len(turns)} reference answers (one per turn)", _show(ref))
        if qid in questions:
            raise where.fail("question_id", "a unique question id", f"{qid!r} (again)")
        questions[qid] = (turns, text(where, q, "category", optional=True), ref)
    references = _mt_references(src, questions)
    for loc in _folder_files(src, "model_answer"):
        for where, a in records(loc, "jsonl"):
            qid = ident(where, a, "question_id")
            if qid not in questions:
                raise where.fail("question_id", "the id of a question in question.jsonl", repr(qid))
            turns, category, ref = questions[qid]
            system = fields.system_name or text(where, a, "model_id")
            answers = _mt_answers(where, a, len(turns))
            for t in range(1, len(turns) + 1):
                msgs = [{"role": "user", "content": q} for q in turns[:t]]
                reference = (ref[t - 1] if ref else None) or references.get((qid, t))
                yield where, _answer_row(where, f"{qid}/turn{t}", system, msgs, answers[:t], category, reference)


def _plain(where: Where, value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise where.fail(field, "a non-empty text", _show(value))
    return value


def _mt_answers(where: Where, a: dict, n: int) -> list[str]:
    choices = listed(where, a, "choices")
    turns = choices[0].get("turns") if isinstance(choices[0], dict) else None
    if not isinstance(turns, list) or len(turns) != n:
        raise where.fail("choices[0].turns", f"a list of {n} answers (one per question turn)", _show(turns))
    return [_plain(where, t, f"choices[0].turns[{i}]") for i, t in enumerate(turns)]


def _mt_references(src: Location, questions: dict) -> dict[tuple[str, int], str]:
    files = _folder_files(src, "reference_answer", required=False)
    if len(files) > 1:
        raise ValueError(f"{src.join('reference_answer').uri}: expected one reference model's file, found {len(files)}")
    out = {}
    for where, a in records(files[0], "jsonl") if files else ():
        qid = ident(where, a, "question_id")
        if qid in questions:
            for t, answer in enumerate(_mt_answers(where, a, len(questions[qid][0])), 1):
                out[(qid, t)] = answer
    return out


def table(sources: list[Location], fields: Fields) -> Iterator[tuple[Where, dict]]:
    for loc in sources:
        for where, r in records(loc):
            value = r.get(fields.context) if isinstance(r, dict) else None
            context: str | None = None
            if isinstance(value, list):
                try:
                    msgs = check_messages(value)
                except ConversationError as exc:
                    raise where.fail(
                        fields.context, "a text or a list of messages ending with a user's", str(exc)
                    ) from None
            else:
                context = text(where, r, fields.context)
                msgs = [{"role": "user", "content": context}]  # row() keeps a lone user message as the context
            sys_prompt = text(where, r, fields.system_prompt) if fields.system_prompt else None
            if sys_prompt is not None:
                msgs = [{"role": "system", "content": sys_prompt}, *msgs]
            ctx = ident(where, r, fields.id) if fields.id else f"ctx/{text_hash(context or dump_messages(msgs))}"
            system = fields.system_name or text(where, r, fields.system or "model")
            yield (
                where,
                row(
                    ctx,
                    system,
                    text(where, r, fields.output),
                    context=context,
                    messages=msgs,
                    category=text(where, r, fields.category) if fields.category else None,
                    reference=text(where, r, fields.reference, optional=True) if fields.reference else None,
                ),
            )


READERS = {"alpaca-eval": alpaca_eval, "arena-hard": arena_hard, "mt-bench": mt_bench, "table": table}


def format_name(given: str) -> str:
    """The format called ``given``, which may spell ``-`` as ``_`` (``alpaca_eval`` is the package's name); an
    unknown one is a ValueError listing the formats.

    >>> format_name("alpaca_eval"), format_name("mt-bench")
    ('alpaca-eval', 'mt-bench')
    """
    name = given.replace("_", "-")
    if name not in READERS:
        raise ValueError(f"unknown output format {given!r}; available: {', '.join(FORMATS)} ('_' for '-' accepted)")
    return name


# --- checks and the streamed write ---------------------------------------------------------------


class _Seen:
    """What must hold across records: unique ids (a known one unchanged), one of each per-context value."""

    def __init__(self) -> None:
        self.ids: dict[str, tuple[str, str, bool]] = {}  # id -> (text hash, where, already in dst)
        self.contexts: dict[str, list] = {}  # id -> [signature, where, candidates]

    def add(self, where: str, r: dict, kept: bool, fail) -> bool:
        """Record ``r``; False when it is a candidate already in the destination with the same text."""
        h = text_hash(r["text"] + "\x00" + (r["prior_replies"] or ""))
        cid = r["candidate_id"]
        if cid in self.ids:
            first_hash, first, was_kept = self.ids[cid]
            if was_kept and not kept:
                if first_hash != h:
                    raise fail(
                        "output",
                        f"the output of candidate {cid!r} as in {first}",
                        "a different text (an output that changed needs a new id: another system name or context id)",
                    )
                return False
            raise fail("id", f"a unique candidate (context id and system); {cid!r} is also in {first}", "a duplicate")
        self.ids[cid] = (h, where, kept)
        sig = text_hash("\x00".join(str(r[c]) for c in ("context", "category", "conversation", "reference")))
        entry = self.contexts.setdefault(r["context_id"], [sig, where, 0])
        if entry[0] != sig:
            raise fail(
                "context",
                f"the context {r['context_id']!r} as in {entry[1]} (text, category, reference)",
                "a different one (a context id names one input)",
            )
        entry[2] += 1
        return True

    def check_counts(self, need: int) -> None:
        for ctx, (_, where, n) in self.contexts.items():
            if n < need:
                raise TableError(where, None, "context", f"at least {need} candidates per context", f"{ctx!r} with {n}")


class Writer:
    """Rows in row groups to a hidden file beside the target, moved into place by :meth:`commit` (or deleted by
    :meth:`abort`): nothing half-written is ever visible. A hidden file that a killed writer of the same target
    left is deleted first (:func:`~pairank.storage.fs.remove_stale_temporaries`)."""

    def __init__(self, target: Location, schema: pa.Schema = SCHEMA) -> None:
        self.target, self.schema = target, schema
        remove_stale_temporaries(target)  # those of writers of this file that were killed
        self.tmp = Location(target.fs, temporary_path(target.path), target.uri + ".tmp")
        #: The folders this writer made for the target, deepest first: :meth:`abort` removes them when empty.
        self.created: list[str] = []
        if target.is_local:
            folder = posixpath.dirname(target.path)
            while not os.path.exists(folder) and posixpath.dirname(folder) != folder:
                self.created.append(folder)
                folder = posixpath.dirname(folder)
            target.fs.create_dir(posixpath.dirname(target.path), recursive=True)
        with self._full_disk_named():
            self.stream = target.fs.open_output_stream(self.tmp.path)
            self.writer = pq.ParquetWriter(self.stream, schema, compression="zstd")
        self.rows: list[dict] = []
        self.count = 0
        self.done = False

    @contextlib.contextmanager
    def _full_disk_named(self) -> Iterator[None]:
        """A full disk met while writing is a :class:`DiskFull` naming the target and the space left there."""
        try:
            yield
        except OSError as exc:
            if is_disk_full(exc) and not isinstance(exc, DiskFull):
                raise DiskFull(self.target.uri, "write it", exc) from exc
            raise

    def add(self, r: dict) -> None:
        self.rows.append(r)
        if len(self.rows) >= ROWS_PER_GROUP:
            self.flush()

    def flush(self) -> None:
        if self.rows:
            with self._full_disk_named():
                self.writer.write_table(pa.Table.from_pylist(self.rows, schema=self.schema))
            self.count += len(self.rows)
            self.rows = []

    def commit(self) -> None:
        self.flush()
        with self._full_disk_named():
            self.writer.close()
            self.stream.close()
        self.tmp.move_to(self.target)
        self.done = True

    def abort(self) -> None:
        """Close and delete the hidden file (nothing once committed), and the folders made for it that are empty
        now: a failed import leaves the destination as it found it. Closing may fail as the write did (a full
        disk): the file is deleted all the same, and the error that ended the import is the one told."""
        if self.done:
            return
        self.done = True
        for close in (self.writer.close, self.stream.close):
            with contextlib.suppress(OSError):
                close()
        if self.tmp.exists():
            self.tmp.fs.delete_file(self.tmp.path)
        for folder in self.created:
            try:
                os.rmdir(folder)  # only an empty one
            except OSError:
                break


def _existing(target: Location) -> Iterable[tuple[str, dict]]:
    """The rows already in ``target`` (validated as a part), with where each is."""
    if not target.exists():
        return
    row_no = 0
    for batch in parquet_batches(target, ROWS_PER_GROUP):
        t = validate(pa.Table.from_batches([batch]), CANDIDATES, target.uri, part=True)
        for r in t.to_pylist():
            yield f"{target.uri} row {row_no}", {c.name: r.get(c.name) for c in SCHEMA}
            row_no += 1


def import_outputs(fmt: str, src: list[str], dst: str, fields: Fields = Fields(), part: bool = False) -> dict:
    """Read ``src`` in format ``fmt`` (:data:`FORMATS`) into ``<dst>/candidates.parquet``, keeping what is there.

    Returns the counts: contexts, candidates, systems, added, kept (already there), same (a record of a
    candidate already there, with the same text), dst.
    """
    fmt = format_name(fmt)
    sources = [Location.of(s) for s in src]
    for loc in sources:
        if not loc.exists():
            raise FileNotFoundError(f"{loc.uri}: no such file or folder")
    target = Location.of(dst).join("candidates.parquet")
    seen, systems = _Seen(), set()
    counts = {"added": 0, "kept": 0, "same": 0}
    writer = Writer(target)
    try:
        for at, r in _existing(target):
            seen.add(at, r, True, lambda f, e, x, w=at: TableError(w, None, f, e, x))
            systems.add(r["system"])
            writer.add(r)
            counts["kept"] += 1
        for where, r in READERS[fmt](sources, fields):
            if seen.add(f"{where.uri} {where.place}", r, False, where.fail):
                systems.add(r["system"])
                writer.add(r)
                counts["added"] += 1
            else:
                counts["same"] += 1
        seen.check_counts(1 if part else 2)
        if not seen.ids:
            raise TableError(", ".join(s.uri for s in sources), None, None, "at least one output", "none")
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    return {
        "format": fmt,
        "contexts": len(seen.contexts),
        "candidates": len(seen.ids),
        "systems": sorted(systems),
        **counts,
        "dst": Location.of(dst).uri,
    }
