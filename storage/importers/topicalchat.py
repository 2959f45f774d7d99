"""TopicalChat (as used by UniEval): 60 dialogues x 6 responses with mean human scores.

Source folder (as in ``shared/data/topicalchat``): ``topical_chat.json``, a JSON
array of 360 records ``{source, context, system_id, system_output, scores:
{understandability, naturalness, coherence, engagingness, groundedness, overall}}``.

Field meaning (checked on the data, against the data README, which calls
``source`` the knowledge): as in UniEval, ``source`` is the dialogue history
(turns separated by newlines) and ``context`` is the knowledge fact the response
should use. The candidate's context is both, clearly separated::

    Knowledge:
    <context>

    Dialogue:
    <one turn per line>

No join. The file has no dialogue ids: a dialogue is one distinct (source,
context) pair, and its id is ``D<k>``, k its rank by first appearance in the file
(deterministic for a given file). ``system`` = system_id (e.g. "Argmax Decoding");
``candidate_id`` = ``D<k>/<system_id>``.
"""

from __future__ import annotations

from pairank.storage.fs import Location

from ._records import NUMBER, TEXT, ImportedSet, Shape, read_records, scored_set

ASPECTS = ("understandability", "naturalness", "coherence", "engagingness", "groundedness", "overall")
SHAPE: Shape = {
    "source": TEXT,
    "context": TEXT,
    "system_id": TEXT,
    "system_output": TEXT,
    "scores": dict.fromkeys(ASPECTS, NUMBER),
}


def load(src: Location) -> ImportedSet:
    """Read TopicalChat from the folder ``src``; see the module docstring."""
    records = read_records(src.join("topical_chat.json"), SHAPE)
    ids: dict[tuple[str, str], str] = {}
    candidates, scores, origins = [], [], []
    for rec in records:
        d = rec.data
        context_id = ids.setdefault((d["source"], d["context"]), f"D{len(ids)}")
        candidates.append(
            {
                "context_id": context_id,
                "context": render_context(d["context"], d["source"]),
                "candidate_id": f"{context_id}/{d['system_id']}",
                "system": d["system_id"],
                "text": d["system_output"],
            }
        )
        scores.append(d["scores"])
        origins.append((rec.source, rec.row))
    return scored_set(candidates, scores, origins)


def render_context(knowledge: str, dialogue: str) -> str:
    """The judge's view of a dialogue: the knowledge fact, then one turn per line."""
    turns = [t.strip() for t in dialogue.split("\n") if t.strip()]
    return "Knowledge:\n" + knowledge.strip() + "\n\nDialogue:\n" + "\n".join(turns)
