"""SummEval: 100 CNN/DM articles x 16 system summaries with mean expert scores.

Source folder (as in ``shared/data/summeval``):

- ``summeval.jsonl``: 1,600 JSON lines ``{article_id, summary_id, article, summary,
  coherence, consistency, fluency, relevance}`` (scores are expert means, 1-5).
  It carries no generator ids.
- ``summeval_systems.json``: ``{doc_id: {src, refs, hypos: {M0..M23: {hypo, scores}}}}``
  with the same 100 documents; the only source of the generator ids (M20 = GPT-2).

Join (positional, as documented): the k-th article of ``summeval.jsonl`` (order of
first appearance) is the k-th document of ``summeval_systems.json``, and its j-th
summary is the j-th entry of that document's ``hypos``. The join is verified: the
counts must agree and all four scores must match at every position (the texts only
match up to tokenisation and casing, so they are not compared); otherwise the
import fails naming the first mismatch. Scores cannot be the join key themselves:
282 summaries share their four scores with another summary of the same article.

Ids: ``context_id`` = article_id, ``candidate_id`` = ``{article_id}/{system}``.
"""

from __future__ import annotations

from pairank.storage.fs import Location
from pairank.storage.validation import TableError

from ._records import (
    ANY,
    NUMBER,
    TEXT,
    ImportedSet,
    check,
    check_unique,
    close,
    grouped,
    number,
    parse_json,
    read_records,
    scored_set,
    source_name,
)

ASPECTS = ("coherence", "consistency", "fluency", "relevance")
SHAPE = {"article_id": TEXT, "summary_id": TEXT, "article": TEXT, "summary": TEXT} | dict.fromkeys(ASPECTS, NUMBER)
SYSTEM_DOC = {"src": TEXT, "refs": ANY, "hypos": ANY}


def load(src: Location) -> ImportedSet:
    """Read SummEval from the folder ``src``; see the module docstring."""
    records = read_records(src.join("summeval.jsonl"), SHAPE)
    check_unique(records, ("article_id", "summary_id"))
    articles = grouped(records, "article_id")

    sys_loc = src.join("summeval_systems.json")
    sys_source = source_name(sys_loc)
    docs = parse_json(sys_loc)
    if not isinstance(docs, dict) or len(docs) != len(articles):
        found = f"{len(docs)} documents" if isinstance(docs, dict) else type(docs).__name__
        raise TableError(sys_loc.uri, None, None, f"an object of {len(articles)} documents (one per article)", found)

    candidates, scores, origins = [], [], []
    for k, ((article_id, rows), (doc_id, doc)) in enumerate(zip(articles.items(), docs.items())):
        hypos = check(doc, SYSTEM_DOC, sys_source, k, f"{doc_id}.")["hypos"]
        if not isinstance(hypos, dict) or len(hypos) != len(rows):
            raise TableError(
                sys_source, k, f"{doc_id}.hypos", f"{len(rows)} hypos (the summaries of {article_id})", _count(hypos)
            )
        for rec, (system, hypo) in zip(rows, hypos.items()):
            for aspect in ASPECTS:
                column = f"{doc_id}.hypos.{system}.scores.{aspect}"
                try:
                    value = number(hypo["scores"][aspect], sys_source, k, column)
                except (KeyError, TypeError):
                    raise TableError(sys_source, k, column, NUMBER, "no such field") from None
                if not close(value, rec.data[aspect]):
                    raise TableError(
                        sys_source,
                        k,
                        column,
                        f"{rec.data[aspect]} (the {aspect} of summeval.jsonl row {rec.row}, "
                        f"{article_id}/{rec.data['summary_id']}): the positional join does not hold",
                        repr(value),
                    )
            candidates.append(
                {
                    "context_id": article_id,
                    "context": rec.data["article"],
                    "candidate_id": f"{article_id}/{system}",
                    "system": system,
                    "text": rec.data["summary"],
                }
            )
            scores.append({a: rec.data[a] for a in ASPECTS})
            origins.append((rec.source, rec.row))
    return scored_set(candidates, scores, origins)


def _count(value: object) -> str:
    return f"{len(value)} hypos" if isinstance(value, dict) else type(value).__name__
