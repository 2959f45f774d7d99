"""LLMBar: instruction-following pairs with the human-preferred output, and published LLM verdicts.

Source: a folder holding ``dataset.json`` (e.g. ``llmbar/LLMBar/Natural`` or
``llmbar/Processed/MT-Bench``), a JSON array of records ``{input, output_1,
output_2, label}`` with label 1 or 2 (an int in the published files; "1"/"2" is
accepted too): the preferred output. A folder without ``dataset.json`` is searched
recursively for subsets (``evaluators/`` is not a subset).

Each pair is a context (the instruction ``input``) with two candidates, systems
"output_1" and "output_2", and one pairwise label: "A" if output_1 is preferred,
else "B"; candidate_a is always the output_1 candidate. No human scores.

Ids: ``context_id`` is the record index, prefixed with the subset path relative
to the source folder when several subsets are imported (``LLMBar/Natural/0``);
``candidate_id`` = ``{context_id}/output_1`` (or ``/output_2``).

Published verdicts (JUDGMENTS): every ``evaluators/<LLM>/<mode>/result.json`` of a
subset (a folder without one is skipped) is a JSON array aligned with
``dataset.json``: the same ``input``, ``output_1``, ``output_2`` and ``label`` at the
same index (a difference is an error naming the result.json, the row and the
field), plus ``results``, whose last item is ``{"swap = False": {"winner": ...},
"swap = True": {...}}``. The winner is "1", "2" (the ORIGINAL output numbering, in
both swaps) or null. Each record gives two judgment rows:

- swap = False: candidate_a = output_1, candidate_b = output_2;
  swap = True: candidate_a = output_2, candidate_b = output_1.
- label "A" if the winner is candidate_a's output, else "B"; p_a 1.0 or 0.0.
  A null winner is an error row (p_a and label null, error :data:`NO_WINNER`).
- engine "published", model = the LLM folder (``GPT-4``), revision :data:`REVISION`,
  sampling = canonical JSON of ``{"mode": <mode folder>}``, prompt_hash =
  ``text_hash("LLMBar/<mode>")`` (the template text is not published with the
  verdicts; the mode names it), aspect :data:`ASPECT`.
- raw_text: the first string of the side's ``completion``, else (Rating modes) the
  canonical JSON of ``score_1``/``score_2``, else null. Tokens 0, seconds 0.0,
  created_at :data:`CREATED_AT` (the commit time of the revision), so an import is
  deterministic.
- key: :func:`pairank.storage.keys.judgment_key` with the judge identity ``{"engine",
  "model", "revision", "sampling"}`` as for pairank's own judges.

In Rating modes LLMBar derives the winner from two scores: equal scores go to the
candidate in slot B in both swaps (unparsable ones to slot A); ``raw_text`` keeps
the scores.

Invalid records: the published ``Processed/LLMEval^2`` has a blank ``output_2``
(record 169), which fails the import (empty text). With ``skip_invalid=True`` a
``dataset.json`` record that fails its checks is left out with its verdicts and
reported in :attr:`ImportedSet.skipped`; a bad result.json always fails (it does
not belong to its dataset.json).
"""

from __future__ import annotations

import datetime as dt
import posixpath
from typing import Any

import pyarrow as pa

from pairank.storage.fs import Location
from pairank.storage.keys import canonical_json, judgment_key, text_hash
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, JUDGMENTS, PAIRWISE_LABELS
from pairank.storage.validation import TableError, empty

from ._records import (
    ANY,
    TEXT,
    ImportedSet,
    Record,
    check,
    raw_records,
    show,
    source_name,
    subfolders,
    table,
)

SHAPE = {"input": TEXT, "output_1": TEXT, "output_2": TEXT, "label": ANY}
RESULT_SHAPE = {**dict.fromkeys(SHAPE, ANY), "results": ANY}
PREFERRED = {1: "A", 2: "B", "1": "A", "2": "B"}

ENGINE = "published"
REVISION = "princeton-nlp/LLMBar@900616b"
ASPECT = "instruction_following"
CREATED_AT = dt.datetime(2024, 7, 8, 2, 21, 13, tzinfo=dt.UTC)
NO_WINNER = "published verdict has no winner"
#: result side -> (candidate_a, candidate_b) systems.
SLOTS = {"swap = False": ("output_1", "output_2"), "swap = True": ("output_2", "output_1")}


def load(src: Location, skip_invalid: bool = False) -> ImportedSet:
    """Read one LLMBar subset, or every subset under ``src``; see the module docstring."""
    subsets = find_subsets(src)
    if not subsets:
        raise TableError(src.uri, None, None, "a folder with dataset.json, or subfolders with one", "none")
    candidates, pairs, judgments = [], [], []
    skipped: list[str] = []
    cand_origins, pair_origins, judgment_origins = [], [], []
    for folder in subsets:
        rel = posixpath.relpath(folder.path, src.path)
        prefix = "" if rel == "." else rel + "/"
        records, n_records = read_pairs(folder.join("dataset.json"), skip_invalid, skipped)
        for rec in records.values():
            context_id = f"{prefix}{rec.row}"
            for system in ("output_1", "output_2"):
                candidates.append(
                    {
                        "context_id": context_id,
                        "context": rec.data["input"],
                        "candidate_id": f"{context_id}/{system}",
                        "system": system,
                        "text": rec.data[system],
                    }
                )
                cand_origins.append((rec.source, rec.row))
            pairs.append(
                {
                    "context_id": context_id,
                    "candidate_a": f"{context_id}/output_1",
                    "candidate_b": f"{context_id}/output_2",
                    "preferred": PREFERRED[rec.data["label"]],
                }
            )
            pair_origins.append((rec.source, rec.row))
        for model, mode, result in find_results(folder):
            for verdicts in read_verdicts(result, records, n_records):
                for row in judgment_rows(verdicts, records[verdicts.row], prefix, model, mode):
                    judgments.append(row)
                    judgment_origins.append((verdicts.source, verdicts.row))
    return ImportedSet(
        candidates=table(candidates, CANDIDATES, cand_origins),
        human_scores=empty(HUMAN_SCORES),
        pairwise_labels=table(pairs, PAIRWISE_LABELS, pair_origins),
        judgments=table(judgments, JUDGMENTS, judgment_origins),
        skipped=tuple(skipped),
    )


def read_pairs(loc: Location, skip_invalid: bool, skipped: list[str]) -> tuple[dict[int, Record], int]:
    """The checked records of a dataset.json by row, and how many records it has.

    A bad record raises, or with ``skip_invalid`` is left out and its message added to ``skipped``.
    """
    source = source_name(loc)
    raw = raw_records(loc)
    records = {}
    for row, value in raw:
        try:
            rec = Record(source, row, check(value, SHAPE, source, row))
            label = rec.data["label"]
            if isinstance(label, bool) or not isinstance(label, (int, str)) or label not in PREFERRED:
                raise rec.fail("label", "1 or 2 (the preferred output)", repr(label))
        except TableError as e:
            if not skip_invalid:
                raise
            skipped.append(str(e))
            continue
        records[row] = rec
    return records, len(raw)


def find_results(subset: Location) -> list[tuple[str, str, Location]]:
    """(model, mode, result.json) of each evaluators/<model>/<mode> folder that has one, sorted."""
    evaluators = subset.join("evaluators")
    if not evaluators.is_dir():
        return []
    return [
        (posixpath.basename(model.path), posixpath.basename(mode.path), mode.join("result.json"))
        for model in subfolders(evaluators)
        for mode in subfolders(model)
        if mode.join("result.json").exists()
    ]


def read_verdicts(loc: Location, pairs: dict[int, Record], n_records: int) -> list[Record]:
    """The result.json records of the kept ``pairs``, each checked against its dataset record.

    ``data`` of each is the verdict: the last item of ``results``.
    """
    source = source_name(loc)
    raw = raw_records(loc)
    if len(raw) != n_records:
        raise TableError(source, None, None, f"{n_records} records (as in dataset.json)", f"{len(raw)} records")
    out = []
    for row, value in raw:
        if row not in pairs:
            continue
        rec = Record(source, row, check(value, RESULT_SHAPE, source, row))
        for name in SHAPE:
            if value[name] != pairs[row].data[name]:
                raise rec.fail(name, f"the dataset.json value {show(pairs[row].data[name])}", show(value[name]))
        results = value["results"]
        if not isinstance(results, list) or not results or not isinstance(results[-1], dict):
            raise rec.fail("results", "a list ending with the verdict object", show(results))
        for side in SLOTS:
            verdict = results[-1].get(side)
            if not isinstance(verdict, dict) or verdict.get("winner", "?") not in ("1", "2", None):
                raise rec.fail(f"results[-1].{side}", '{"winner": "1", "2" or null, ...}', show(verdict))
        out.append(Record(source, row, results[-1]))
    return out


def judgment_rows(verdicts: Record, pair: Record, prefix: str, model: str, mode: str) -> list[dict[str, Any]]:
    """The two JUDGMENTS rows (swap = False, swap = True) of one published verdict."""
    judge = {"engine": ENGINE, "model": model, "revision": REVISION, "sampling": {"mode": mode}}
    prompt_hash = text_hash(f"LLMBar/{mode}")
    context_id = f"{prefix}{pair.row}"
    rows = []
    for side, (a, b) in SLOTS.items():
        verdict = verdicts.data[side]
        winner = verdict["winner"]
        label = None if winner is None else "A" if f"output_{winner}" == a else "B"
        completion = verdict.get("completion")
        if isinstance(completion, list) and completion and isinstance(completion[0], str):
            raw_text = completion[0]
        elif "score_1" in verdicts.data:
            raw_text = canonical_json({k: verdicts.data.get(k) for k in ("score_1", "score_2")})
        else:
            raw_text = None
        id_a, id_b = f"{context_id}/{a}", f"{context_id}/{b}"
        rows.append(
            {
                "key": judgment_key(
                    judge, prompt_hash, ASPECT, context_id, pair.data["input"], id_a, pair.data[a], id_b, pair.data[b]
                ),
                "engine": ENGINE,
                "model": model,
                "revision": REVISION,
                "prompt_hash": prompt_hash,
                "sampling": canonical_json(judge["sampling"]),
                "context_id": context_id,
                "aspect": ASPECT,
                "candidate_a": id_a,
                "candidate_b": id_b,
                "p_a": None if label is None else float(label == "A"),
                "logprob_a": None,
                "logprob_b": None,
                "label": label,
                "raw_text": raw_text,
                "input_tokens": 0,
                "output_tokens": 0,
                "seconds": 0.0,
                "error": NO_WINNER if label is None else None,
                "created_at": CREATED_AT,
            }
        )
    return rows


def find_subsets(src: Location) -> list[Location]:
    """``src`` if it holds dataset.json, else the subsets below it, sorted by path."""
    if src.join("dataset.json").exists():
        return [src]
    return [s for sub in subfolders(src) if posixpath.basename(sub.path) != "evaluators" for s in find_subsets(sub)]


def attribute_generators(
    candidates: pa.Table, labels: pa.Table, share: float = 0.8, seed: int = 0, names: tuple[str, str] = ("A", "B")
) -> pa.Table:
    """``candidates`` with ``system`` set to two simulated generators, as in Gao et al. (2024).

    LLMBar names no generators. The win-rate experiments attribute the
    human-preferred output of ``round(share * n)`` pairs (chosen with ``seed``) to
    generator ``names[0]`` and the other output to ``names[1]``, and the reverse for
    the remaining pairs, so the true win rate of ``names[0]`` is ``round(share * n) / n``.
    Contexts without an A/B label keep their systems.
    """
    import numpy as np

    preferred = {}
    for ctx, a, b, pref in zip(
        *(labels.column(c).to_pylist() for c in ("context_id", "candidate_a", "candidate_b", "preferred"))
    ):
        if pref in ("A", "B"):
            preferred[ctx] = (a, b) if pref == "A" else (b, a)
    contexts = sorted(preferred)
    wins = set(np.random.default_rng(seed).permutation(len(contexts))[: round(share * len(contexts))].tolist())
    system = {}
    for i, ctx in enumerate(contexts):
        better, worse = preferred[ctx]
        first, second = names if i in wins else names[::-1]
        system[better], system[worse] = first, second
    ids = candidates.column("candidate_id").to_pylist()
    new = [system.get(cid, old) for cid, old in zip(ids, candidates.column("system").to_pylist())]
    return candidates.set_column(
        candidates.schema.get_field_index("system"), candidates.schema.field("system"), pa.array(new, pa.string())
    )
