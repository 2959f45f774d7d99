"""The ``replay`` judge engine: answers from a judgments table that already exists.

Its settings, identity and builder; the engine is :class:`pairank.judges.engines.replay_judge.ReplayJudge`.
It reads label verdicts only, so it answers the ``logprob`` mode.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from pairank.judges.engine import Engine, Identity, JudgeSettings
from pairank.judges.interface import Judge


class ReplayJudgeSpec(JudgeSettings):
    engine: Literal["replay"] = Field("replay", description="Answers from an existing judgments table.")
    source: str = Field(..., description="Folder (or file) of judgments Parquet, local or s3://.")
    model: str | None = Field(None, description="Use only the source's judgments of this model.")
    mode: str | None = Field(
        None,
        description='Use only the source\'s judgments whose sampling JSON has this "mode" (e.g. an LLMBar '
        "prompting mode, as the llmbar importer records it: Vanilla, CoT, Swap, ...).",
    )

    def identity(self) -> Identity:
        """The source and the mode picked (each mode gets its own keys); the model filter as the model."""
        sampling: dict[str, Any] = {"source": self.source}
        if self.mode is not None:
            sampling["mode"] = self.mode
        return {"engine": "replay", "model": self.model or "", "revision": "", "sampling": sampling}


def build(settings: ReplayJudgeSpec) -> Judge:
    """The source's judgments, read and indexed by comparison."""
    from pairank.judges.engines.replay_judge import ReplayJudge

    return ReplayJudge(settings)


#: ``model_folder``: a model filter starting with '.' or '/' names a local model folder as a vLLM judge records it.
ENGINE = Engine(name="replay", settings=ReplayJudgeSpec, build=build, paths=("source",), model_folder=True)
