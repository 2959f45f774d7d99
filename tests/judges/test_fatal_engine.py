"""An engine that died inside a live process is not answered with error rows: the failure propagates, so the judge
actor ends its process and Ray restarts it with a fresh engine (pairank.cluster.pools.judge_pool). Other engine
failures stay error rows. The dead engine is a stand-in: vLLM's EngineDeadError cannot be caused on demand here."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pairank.judges.interface import LabelProbabilityJudge, LabelScore
from pairank.judges.modes import ModeRunner


class EngineDeadError(RuntimeError):
    """Named as vLLM's."""


class Flaky(LabelProbabilityJudge):
    engine = "flaky"

    def __init__(self, error: Exception):
        self.error = error

    def identity(self) -> dict:
        return {"engine": "flaky", "model": "m", "revision": "r", "sampling": {}}

    def score(self, prompts: list[str]) -> list[LabelScore]:
        raise self.error

    def is_fatal(self, exc: BaseException) -> bool:
        return type(exc).__name__ == "EngineDeadError"


def requests() -> pa.Table:
    return pa.table(
        {
            "key": ["k"],
            "context_id": ["c"],
            "aspect": ["a"],
            "candidate_a": ["x"],
            "candidate_b": ["y"],
            "prompt": ["p"],
            "prompt_hash": ["h"],
        }
    )


def test_a_dead_engine_propagates_in_the_default_mode_and_other_failures_are_error_rows():
    with pytest.raises(EngineDeadError):
        ModeRunner(Flaky(EngineDeadError("core died"))).run("pairwise", requests())
    rows = ModeRunner(Flaky(ValueError("bad prompt"))).run("pairwise", requests()).to_pylist()
    assert rows[0]["p_a"] is None and rows[0]["error"] == "ValueError: bad prompt"
