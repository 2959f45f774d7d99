"""LLMBar: instruction-following pairs with the human-preferred output.

Source: a folder holding ``dataset.json`` (e.g. ``llmbar/LLMBar/Natural`` or
``llmbar/Processed/MT-Bench``), a JSON array of records ``{input, output_1,
output_2, label}`` with label 1 or 2 (an int in the published files; "1"/"2" is
accepted too): the preferred output. A folder without ``dataset.json`` is searched
recursively for subsets (``evaluators/``, the published LLM verdicts, is skipped).

Each pair is a context (the instruction ``input``) with two candidates, systems
"output_1" and "output_2", and one pairwise label: "A" if output_1 is preferred,
else "B"; candidate_a is always the output_1 candidate. No human scores.

Ids: ``context_id`` is the record index, prefixed with the subset path relative
to the source folder when several subsets are imported (``LLMBar/Natural/0``);
``candidate_id`` = ``{context_id}/output_1`` (or ``/output_2``).

Note: the published ``Processed/LLMEval^2`` has a blank ``output_2`` (record 169),
which fails the import (empty text), so it must be imported after a fix.
"""

from __future__ import annotations

import posixpath

from storage.fs import Location
from storage.schemas import CANDIDATES, HUMAN_SCORES, PAIRWISE_LABELS, TableError, empty

from ._records import ANY, TEXT, ImportedSet, read_records, subfolders, table

SHAPE = {"input": TEXT, "output_1": TEXT, "output_2": TEXT, "label": ANY}
PREFERRED = {1: "A", 2: "B", "1": "A", "2": "B"}


def load(src: Location) -> ImportedSet:
    """Read one LLMBar subset, or every subset under ``src``; see the module docstring."""
    subsets = find_subsets(src)
    if not subsets:
        raise TableError(src.uri, None, None, "a folder with dataset.json, or subfolders with one", "none")
    candidates, pairs, cand_origins, pair_origins = [], [], [], []
    for folder in subsets:
        rel = posixpath.relpath(folder.path, src.path)
        prefix = "" if rel == "." else rel + "/"
        for rec in read_records(folder.join("dataset.json"), SHAPE):
            label = rec.data["label"]
            preferred = PREFERRED.get(label) if isinstance(label, (int, str)) and not isinstance(label, bool) else None
            if preferred is None:
                raise rec.fail("label", "1 or 2 (the preferred output)", repr(label))
            context_id = f"{prefix}{rec.row}"
            for system in ("output_1", "output_2"):
                candidates.append({
                    "context_id": context_id,
                    "context": rec.data["input"],
                    "candidate_id": f"{context_id}/{system}",
                    "system": system,
                    "text": rec.data[system],
                })
                cand_origins.append((rec.source, rec.row))
            pairs.append({
                "context_id": context_id,
                "candidate_a": f"{context_id}/output_1",
                "candidate_b": f"{context_id}/output_2",
                "preferred": preferred,
            })
            pair_origins.append((rec.source, rec.row))
    return ImportedSet(
        candidates=table(candidates, CANDIDATES, cand_origins),
        human_scores=empty(HUMAN_SCORES),
        pairwise_labels=table(pairs, PAIRWISE_LABELS, pair_origins),
    )


def find_subsets(src: Location) -> list[Location]:
    """``src`` if it holds dataset.json, else the subsets below it, sorted by path."""
    if src.join("dataset.json").exists():
        return [src]
    return [s for sub in subfolders(src) if posixpath.basename(sub.path) != "evaluators" for s in find_subsets(sub)]

