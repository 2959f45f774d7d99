"""The first step: what a job reads (its candidates after ``subset``, human scores, labels)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from pairank.jobs.judging.requests import subset
from pairank.jobs.specs.job import JobSpec, SubsetSpec
from pairank.storage.fs import Location
from pairank.storage.inputs import read_candidate_ids, read_candidates, read_human_scores, read_labels


@dataclass(frozen=True)
class Inputs:
    """What a job reads: the candidates (after any ``subset``), human scores, and where they came from."""

    candidates: pa.Table
    human: pa.Table
    source: Location  # the input folder, or a nightly job's prefix
    folders: tuple[str, ...] = ()  # a nightly prefix: the folders it read

    @property
    def contexts(self) -> int:
        return int(pc.count_distinct(self.candidates.column("context_id")).as_py())

    def labels(self) -> pa.Table:
        """The source's pairwise human labels (empty when it has none)."""
        return read_labels(self.source)


def read_inputs(input: str, part: SubsetSpec, texts: bool = True) -> Inputs:
    """The input folder (the spec's ``input``), validated, with the spec's ``subset`` section applied;
    ``texts=False``: the candidates' ids only, for a run whose tasks read (and validate) the texts
    (:func:`scored_in_tasks`)."""
    source = Location.of(input)
    candidates = (read_candidates if texts else read_candidate_ids)(source)
    return Inputs(subset(candidates, part.contexts, part.candidates), read_human_scores(source), source)


def scored_in_tasks(spec: JobSpec) -> bool:
    """Whether a run of ``spec`` makes its requests and its scores in Ray tasks, block by block (a static schedule
    judged in one pass, scored without a batch calibration): its driver then needs the candidates' ids only."""
    j = spec.judging
    one_pass = len(j.passes) <= 1 and j.mode != "pointwise"
    return spec.nightly is None and not spec.scheduler.adaptive and one_pass and spec.scoring.calibration != "batch"
