"""HANNA: 96 writing prompts x 11 writers (10 story generators + Human), mean human scores.

Source folder (as in ``shared/data/hanna``):

- ``hanna.jsonl``: 1,056 JSON lines ``{prompt_id, story_id, prompt, story,
  relevance, coherence, empathy, surprise, engagement, complexity}`` (means of
  three annotators, 1-5). It has no writer names, and the order of the stories
  within a prompt differs from prompt to prompt.
- ``hanna_metric_scores.csv``: one row per writer (``Model``), each cell a list of
  96 per-prompt values, among them the mean human scores (``Relevance`` ..
  ``Complexity``) and the automatic metric ``Text length``.

Join: the k-th prompt of ``hanna.jsonl`` (order of first appearance) is index k
of the CSV lists. A story's writer is a writer whose six mean scores at index k
all equal the story's; each writer wrote one story per prompt, so a writer
matched with certainty is eliminated for the prompt's other stories. On the
published files 1,054 stories match exactly one writer. Unlike the data README
says, elimination does not settle the other two: P76's S0 and S3 have identical
scores, both matching GPT and RoBERTa. Such a leftover tie is broken by the
``Text length`` metric, choosing the assignment whose lengths are closest to the
stories' token counts (P76: S0 has 179 tokens vs GPT 162 / RoBERTa 114, S3 113;
so S0 = GPT, S3 = RoBERTa, also consistent with GPT-1's lower-cased output).
A story no writer matches, or a tie that cannot be broken, fails the import.

Ids: ``context_id`` = prompt_id, ``candidate_id`` = ``{prompt_id}/{writer}``,
``system`` = the writer name as in the CSV (e.g. "GPT-2 (tag)", "Human").
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import math
import re
from collections.abc import Iterator

from pairank.storage.fs import Location
from pairank.storage.validation import TableError

from ._records import (
    NUMBER,
    TEXT,
    ImportedSet,
    Record,
    check_unique,
    close,
    grouped,
    read_records,
    scored_set,
)

ASPECTS = ("relevance", "coherence", "empathy", "surprise", "engagement", "complexity")
SHAPE = {"prompt_id": TEXT, "story_id": TEXT, "prompt": TEXT, "story": TEXT} | dict.fromkeys(ASPECTS, NUMBER)
LENGTH_COLUMN = "Text length"  # the CSV header carries a mis-encoded suffix: matched by prefix


def load(src: Location) -> ImportedSet:
    """Read HANNA from the folder ``src``; see the module docstring."""
    records = read_records(src.join("hanna.jsonl"), SHAPE)
    check_unique(records, ("prompt_id", "story_id"))
    prompts = grouped(records, "prompt_id")
    writers = read_writers(src.join("hanna_metric_scores.csv"), len(prompts))

    candidates, scores, origins = [], [], []
    for k, (prompt_id, stories) in enumerate(prompts.items()):
        for rec, writer in zip(stories, assign(stories, writers, k)):
            candidates.append(
                {
                    "context_id": prompt_id,
                    "context": rec.data["prompt"],
                    "candidate_id": f"{prompt_id}/{writer}",
                    "system": writer,
                    "text": rec.data["story"],
                }
            )
            scores.append({a: rec.data[a] for a in ASPECTS})
            origins.append((rec.source, rec.row))
    return scored_set(candidates, scores, origins)


def read_writers(loc: Location, n_prompts: int) -> dict[str, dict[str, list[float]]]:
    """writer -> column -> its per-prompt values, for the six aspects and the text length."""
    csv.field_size_limit(1 << 30)
    reader = csv.DictReader(io.StringIO(loc.read_text()))
    header = reader.fieldnames or []
    length = next((c for c in header if c.startswith(LENGTH_COLUMN)), None)
    wanted = {a: a.capitalize() for a in ASPECTS} | ({"length": length} if length else {})
    missing = [c for c in ["Model", *wanted.values()] if c not in header]
    if missing:
        raise TableError(loc.uri, None, missing[0], f"columns Model, {', '.join(wanted.values())}", "no such column")
    source = f"{loc.uri} (row = 0-based data row, after the header)"
    writers: dict[str, dict[str, list[float]]] = {}
    for row, line in enumerate(reader):
        writers[line["Model"]] = {key: _values(line[col], n_prompts, source, row, col) for key, col in wanted.items()}
    return writers


def assign(stories: list[Record], writers: dict[str, dict[str, list[float]]], k: int) -> list[str]:
    """The writer of each story of the k-th prompt (see the module docstring)."""
    options = [{w for w, v in writers.items() if all(close(v[a][k], rec.data[a]) for a in ASPECTS)} for rec in stories]
    for rec, opts in zip(stories, options):
        if not opts:
            raise rec.fail("story_id", f"a story whose scores match a writer's for prompt index {k}", "no writer")
    fixed: dict[int, str] = {}
    while True:  # elimination: a writer certain for one story is not a candidate for the others
        taken = set(fixed.values())
        news = {i: min(o - taken) for i, o in enumerate(options) if i not in fixed and len(o - taken) == 1}
        if not news:
            break
        fixed.update(news)
    taken = set(fixed.values())
    if len(taken) != len(fixed):
        raise stories[0].fail("prompt_id", "each writer once per prompt", "two stories that need the same writer")
    rest = [i for i in range(len(stories)) if i not in fixed]
    if rest:
        free = sorted(set().union(*(options[i] for i in rest)) - taken)
        perms: Iterator[tuple[str, ...]] = itertools.permutations(free, len(rest)) if len(rest) <= 6 else iter(())
        fits = [p for p in perms if all(w in options[i] for i, w in zip(rest, p))]
        if not fits or (len(fits) > 1 and "length" not in writers[free[0]]):
            raise stories[rest[0]].fail("story_id", "scores that identify one writer", f"one of {free}")

        def cost(p: tuple[str, ...]) -> float:  # how far the writers' text lengths are from the stories'
            ratios = ((1 + writers[w]["length"][k]) / (1 + _tokens(stories[i].data["story"])) for i, w in zip(rest, p))
            return sum(abs(math.log(r)) for r in ratios)

        best = fits[0] if len(fits) == 1 else min(fits, key=cost)
        fixed.update(zip(rest, best))
    return [fixed[i] for i in range(len(stories))]


def _tokens(text: str) -> int:
    return len(re.findall(r"\w+|[^\w\s]", text))


def _values(cell: str, n: int, source: str, row: int, column: str) -> list[float]:
    try:
        values = json.loads(cell)
    except json.JSONDecodeError:
        values = None
    if not isinstance(values, list) or len(values) != n:
        raise TableError(source, row, column, f"a list of {n} per-prompt numbers", repr(cell[:80]))
    return [float(v) if isinstance(v, (int, float)) else math.nan for v in values]
