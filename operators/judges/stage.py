"""The judge stage: a Ray Data UDF that holds one judge engine for its actor's life.

``JudgeStage`` is constructed once per actor (the engine starts once per job, not
per batch) and maps a batch of request rows to judgment rows. It needs the
columns in :data:`operators.judges.base.REQUEST_COLUMNS`.
"""

from __future__ import annotations

import pyarrow as pa

from operators.judges import make_judge
from operators.judges.base import REQUEST_COLUMNS

COLUMNS = REQUEST_COLUMNS


class JudgeStage:
    def __init__(self, judge_spec):
        self.judge = make_judge(judge_spec)

    def __call__(self, batch: pa.Table) -> pa.Table:
        return self.judge.judge(batch)
