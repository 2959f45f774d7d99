"""NewsRoom (as used by PairS): 60 news articles x 7 system summaries with mean human scores.

Source folder (as in ``shared/data/newsroom``):

- ``newsroom.json``: a JSON array of 420 records ``{doc_id, source, system_output,
  scores: {coherence, fluency, informativeness, relevance}}``, 7 per document, no
  system names. Texts are kept verbatim: ``source`` still holds HTML (``</p><p>``,
  ``&quot;``) and many summaries HTML entities (``&#x27;``).
- ``newsroom_systems.jsonl``: 60 JSON lines ``{src, ref_summ, sys_summs: {name:
  {sys_summ, scores}}}`` over the same documents, with the generator names
  (lede3, fragments, textrank, abstractive, pointer_c, pointer_n, pointer_s).

Join (positional, verified): the k-th document of ``newsroom.json`` (order of
first appearance of ``doc_id``) is the k-th line of ``newsroom_systems.jsonl``,
and its j-th summary is the j-th entry of that line's ``sys_summs`` (the entry
order varies between lines, so names cannot be assigned by a fixed order). Every
position must match on all four scores and on the summary text compared after
HTML unescaping, lower-casing and dropping everything but letters and digits
(the two files differ in tokenisation and escaping only). On the published files
all 420 positions match, and the four scores alone are also distinct within every
document, so the names are unambiguous; any mismatch fails the import.

Ids: ``context_id`` = doc_id, ``candidate_id`` = ``{doc_id}/{system}``.
"""

from __future__ import annotations

import html
import re

from pairank.storage.fs import Location
from pairank.storage.validation import TableError

from ._records import (
    ANY,
    NUMBER,
    TEXT,
    ImportedSet,
    Shape,
    check,
    close,
    grouped,
    read_records,
    scored_set,
)

ASPECTS = ("coherence", "fluency", "informativeness", "relevance")
SCORES: Shape = dict.fromkeys(ASPECTS, NUMBER)
SHAPE: Shape = {"doc_id": TEXT, "source": TEXT, "system_output": TEXT, "scores": SCORES}
SYSTEMS_SHAPE: Shape = {"src": TEXT, "ref_summ": ANY, "sys_summs": ANY}
SYSTEM_SUMMARY: Shape = {"sys_summ": TEXT, "scores": SCORES}


def load(src: Location) -> ImportedSet:
    """Read NewsRoom from the folder ``src``; see the module docstring."""
    docs = grouped(read_records(src.join("newsroom.json"), SHAPE), "doc_id")
    lines = read_records(src.join("newsroom_systems.jsonl"), SYSTEMS_SHAPE)
    if len(lines) != len(docs):
        raise TableError(
            src.join("newsroom_systems.jsonl").uri, None, None, f"{len(docs)} lines (one per doc_id)", f"{len(lines)}"
        )

    candidates, scores, origins = [], [], []
    for (doc_id, rows), line in zip(docs.items(), lines):
        summs = line.data["sys_summs"]
        if not isinstance(summs, dict) or len(summs) != len(rows):
            found = f"{len(summs)} entries" if isinstance(summs, dict) else type(summs).__name__
            raise line.fail("sys_summs", f"{len(rows)} entries (the summaries of doc {doc_id})", found)
        for rec, (system, entry) in zip(rows, summs.items()):
            prefix = f"sys_summs.{system}."
            entry = check(entry, SYSTEM_SUMMARY, line.source, line.row, prefix)
            where = f"newsroom.json row {rec.row} (doc {doc_id})"
            for aspect in ASPECTS:
                if not close(entry["scores"][aspect], rec.data["scores"][aspect]):
                    raise line.fail(
                        f"{prefix}scores.{aspect}",
                        f"{rec.data['scores'][aspect]} as in {where}: the positional join does not hold",
                        repr(entry["scores"][aspect]),
                    )
            if _norm(entry["sys_summ"]) != _norm(rec.data["system_output"]):
                raise line.fail(
                    f"{prefix}sys_summ",
                    f"the summary of {where} (up to tokenisation): the positional join does not hold",
                    repr(entry["sys_summ"][:80]),
                )
            candidates.append(
                {
                    "context_id": doc_id,
                    "context": rec.data["source"],
                    "candidate_id": f"{doc_id}/{system}",
                    "system": system,
                    "text": rec.data["system_output"],
                }
            )
            scores.append(rec.data["scores"])
            origins.append((rec.source, rec.row))
    return scored_set(candidates, scores, origins)


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", html.unescape(text).lower())
