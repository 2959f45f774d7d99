"""Judging a set of requests under the run's claims: asked once across the runs on one store.

Used by the adaptive driver (each round) and by static multi-pass runs (their requests are keyed on the driver);
static single-pass runs claim in their planning tasks (:mod:`pairank.jobs.judging.streamed`). See
:mod:`pairank.storage.store.claims`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.claims import Claims, by_bucket

#: Seconds between looks at the store for the comparisons that another run claimed.
WAIT_S = 2.0


@dataclass
class ClaimedJudging:
    """Judges requests ``{key: (aspect, context_id, ...)}`` with ``judge`` (which commits them to ``cache``), only
    those this run claims; what a live run of another lease claimed is waited for in ``cache`` (read every
    ``wait_s`` seconds, within ``aspects`` and ``contexts``), and claimed once that run's lease ended without a
    verdict for it. Without ``claims``, everything is judged at once.

    This run's own verdicts are committed before it waits, so two runs waiting for each other's keys both go on.
    ``found`` collects the other runs' verdicts it waited for; ``read_at`` is when the caller read the cache that
    the requests were missing from: a run whose lease ended after that may have answered some since, so what is
    claimed is looked up again then."""

    claims: Claims | None
    cache: JudgmentCache
    aspects: set[str]
    contexts: set[str]
    progress: Callable[[str], None]
    read_at: float
    wait_s: float = WAIT_S
    found: list[pa.Table] = field(default_factory=list)

    def __call__(self, todo: dict[str, Any], judge: Callable[[dict[str, Any]], pa.Table]) -> list[pa.Table]:
        """The tables ``judge`` returned for the requests of ``todo`` this run asked (none when all were
        answered by others); ``self.found`` gets the verdicts of the rest."""
        if not todo:
            return []
        if self.claims is None:
            return [judge(todo)]
        tables: list[pa.Table] = []
        left = dict(todo)
        waited = False
        while left:
            claimed = self.claims.claim(by_bucket(left), since=self.read_at)
            if claimed.recheck and claimed.mine:  # a run that ended since the last read may have answered some
                claimed.mine.difference_update(self._look(claimed.mine))
            mine = {k: left[k] for k in claimed.mine}
            if mine:
                tables.append(judge(mine))
            left = {k: left[k] for k in claimed.others}
            if not left:
                break
            if not waited:
                waited = True
                self.progress(
                    f"{len(left)} comparisons are being judged by another run on this store: waiting for its "
                    f"verdicts (looking every {self.wait_s:g} s; a run that was killed gives its claims up when "
                    "its lease expires)"
                )
            time.sleep(self.wait_s)
            answered = self._look(left)
            left = {k: req for k, req in left.items() if k not in answered}
        return tables

    def _look(self, keys: Iterable[str]) -> set[str]:
        """The keys of ``keys`` the cache holds a verdict for now (their rows go to ``found``). ``read_at`` stays:
        it is when the cache was read for every request this judging is given, not only for these."""
        got = self.cache.answered(aspects=self.aspects, contexts=self.contexts, keys=set(keys))
        if got.num_rows:
            self.found.append(got)
        return set(got.column("key").to_pylist())
