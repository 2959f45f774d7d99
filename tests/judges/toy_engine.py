"""A judge engine declared outside pairank, as a user would: one module, registered by the test that uses it.

The toy answers every comparison with the same P(A) (``p_a``) and writes the id of the
process that built it into each row's ``raw_text``, so a test can see that its builder
ran in a judge actor.
"""

from __future__ import annotations

import math
import os
from typing import Literal

from pydantic import Field

from pairank.judges.engine import Engine, Identity, JudgeSettings
from pairank.judges.interface import Judge, LabelProbabilityJudge, LabelScore


class ToySettings(JudgeSettings):
    engine: Literal["toy"] = Field("toy", description="A toy judge (tests only): one P(A) for every comparison.")
    p_a: float = Field(0.7, gt=0, lt=1, description="The probability of slot A it answers, every time.")

    def identity(self) -> Identity:
        return {"engine": "toy", "model": "toy", "revision": "", "sampling": {"p_a": self.p_a}}


class ToyJudge(LabelProbabilityJudge):
    engine = "toy"

    def __init__(self, settings: ToySettings) -> None:
        self.settings = settings
        self.built_in = os.getpid()

    def identity(self) -> Identity:
        return self.settings.identity()

    def score(self, prompts: list[str]) -> list[LabelScore]:
        p = self.settings.p_a
        return [
            LabelScore(logprob_a=math.log(p), logprob_b=math.log(1 - p), raw_text=f"toy built in {self.built_in}")
            for _ in prompts
        ]


def build(settings: ToySettings) -> Judge:
    return ToyJudge(settings)


TOY = Engine(
    name="toy",
    settings=ToySettings,
    build=build,
    notice="**TOY judge**: every verdict is the same P(A); a test of engine registration.",
)
