"""The replay judge: answers from a judgments table that already exists.

A request is answered by the source row with the same context, aspect and
candidates in the same slots (optionally only rows of one model, and only rows
whose sampling JSON has one ``mode``, e.g. an LLMBar prompting mode). A request
the source cannot answer, or answers ambiguously (several models or modes, no
filter), is an error row: replay never guesses. The mode is part of the replay
identity, so each mode gets its own judgment keys.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from pairank.judges.interface import REQUEST_COLUMNS, Judge, check_columns
from pairank.storage.delta import is_table
from pairank.storage.fs import Location
from pairank.storage.keys import canonical_json, sampling_mode
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import JudgmentCache, latest_per_key
from pairank.storage.store.legacy import PartFolder
from pairank.storage.validation import validate


def read_judgments(source: str) -> pa.Table:
    """One row per key of a judgment store: a Delta table, an output root holding one, a former part folder,
    or one Parquet file."""
    loc = Location.of(source)
    for table in (loc, loc.join("tables", "judgments")):
        if is_table(table):
            return JudgmentCache(table).read()
    if loc.is_dir():
        return PartFolder(loc).read()
    return latest_per_key(validate(loc.read_parquet(), JUDGMENTS, loc.uri))


class ReplayJudge(Judge):
    engine = "replay"

    def __init__(self, spec: Any) -> None:
        """``spec``: a :class:`pairank.judges.engines.replay.ReplayJudgeSpec`."""
        self.spec = spec
        table = read_judgments(spec.source)
        table = table.filter(pc.is_null(table.column("error")))
        if spec.model is not None:
            table = table.filter(pc.equal(table.column("model"), spec.model))
        if spec.mode is not None:
            keep = [sampling_mode(s) == spec.mode for s in table.column("sampling").to_pylist()]
            table = table.filter(pa.array(keep, pa.bool_()))
        # error rows carry the source's model and revision where it has one of each, so that they keep the
        # judge identity of the answered rows (operators.votes, operators.meta_eval group by it)
        models, revisions = (set(table.column(c).to_pylist()) for c in ("model", "revision"))
        self.model = spec.model or (models.pop() if len(models) == 1 else "")
        self.revision = revisions.pop() if len(revisions) == 1 else ""
        self.index: dict[tuple, list[dict]] = {}
        for row in table.to_pylist():
            k = (row["context_id"], row["aspect"], row["candidate_a"], row["candidate_b"])
            self.index.setdefault(k, []).append(row)

    def identity(self) -> dict:
        return self.spec.identity()

    def judge(self, requests: pa.Table) -> pa.Table:
        check_columns(requests, REQUEST_COLUMNS, "ReplayJudge")
        now = dt.datetime.now(dt.UTC)
        sampling = canonical_json(self.identity()["sampling"])
        rows = []
        for req in requests.to_pylist():
            k = (req["context_id"], req["aspect"], req["candidate_a"], req["candidate_b"])
            found = self.index.get(k, [])
            judges = sorted({r["model"] + (f"/{m}" if (m := sampling_mode(r["sampling"])) else "") for r in found})
            base = {
                "key": req["key"],
                "engine": "replay",
                "prompt_hash": req["prompt_hash"],
                "sampling": sampling,
                "context_id": req["context_id"],
                "aspect": req["aspect"],
                "candidate_a": req["candidate_a"],
                "candidate_b": req["candidate_b"],
                "created_at": now,
                "input_tokens": 0,
                "output_tokens": 0,
                "seconds": 0.0,
            }
            if len(found) == 1:
                src = found[0]
                rows.append(
                    {
                        **base,
                        "model": src["model"],
                        "revision": src["revision"],
                        "p_a": src["p_a"],
                        "logprob_a": src["logprob_a"],
                        "logprob_b": src["logprob_b"],
                        "label": src["label"],
                        "raw_text": src["raw_text"],
                        "error": None,
                    }
                )
                continue
            if not found:
                why = f"replay: {self.spec.source} has no judgment of ({', '.join(k)})"
            else:
                why = f"replay: {len(found)} judgments of ({', '.join(k)}) from {judges}; set judge.model or judge.mode"
            rows.append({**base, "model": self.model, "revision": self.revision, "error": why})
        return pa.Table.from_pylist(rows, schema=JUDGMENTS)
