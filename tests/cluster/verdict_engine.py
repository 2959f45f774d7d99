"""A judge engine that generates (tests only): label probabilities of one P(A), and generated verdicts ``[[A]]``.

Every answer names the process that built the engine (``raw_text``), so a test can tell which engine, a first one
or a restarted one, judged a row. Registered by the test that uses it, like ``tests/judges/toy_engine.py``.
"""

from __future__ import annotations

import math
import os
from typing import Literal

from pydantic import Field

from pairank.judges.engine import Engine, Identity, JudgeSettings
from pairank.judges.interface import Generated, GenerateParams, GeneratingJudge, Judge, LabelScore, OptionScore


class VerdictSettings(JudgeSettings):
    engine: Literal["verdicts"] = Field("verdicts", description="A generating test judge: one P(A), verdict [[A]].")
    p_a: float = Field(0.7, gt=0, lt=1, description="The probability of slot A it reads from the labels.")

    def identity(self) -> Identity:
        return {"engine": "verdicts", "model": "verdicts", "revision": "", "sampling": {"p_a": self.p_a}}


class VerdictJudge(GeneratingJudge):
    engine = "verdicts"

    def __init__(self, settings: VerdictSettings) -> None:
        self.settings = settings
        self.built_in = os.getpid()

    def identity(self) -> Identity:
        return self.settings.identity()

    def score(self, prompts: list[str]) -> list[LabelScore]:
        p = self.settings.p_a
        said = f"built in {self.built_in}"
        return [LabelScore(math.log(p), math.log(1 - p), 10, 1, 0.0, said) for _ in prompts]

    def generate(self, prompts: list[str], params: GenerateParams, seeds: list[int]) -> list[Generated]:
        text = f"built in {self.built_in}: [[A]]"
        return [Generated([text] * params.n, 10, 3, 0.0) for _ in prompts]

    def option_logprobs(self, prompts: list[str], options: list[list[str]]) -> list[OptionScore]:
        return [OptionScore([math.log(1 / len(options))] * len(options), 10) for _ in prompts]


def build(settings: VerdictSettings) -> Judge:
    return VerdictJudge(settings)


VERDICTS = Engine(name="verdicts", settings=VerdictSettings, build=build, modes=("logprob", "generate", "sample"))
