"""The ``http`` judge engine: any OpenAI-compatible ``/v1/completions`` endpoint.

Its settings, identity and builder; the client is :class:`pairank.judges.engines.http_judge.HttpJudge`.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from pairank.judges.engine import JUDGING_MODES, Engine, Identity, JudgeSettings, Labels
from pairank.judges.interface import Judge


class HttpJudgeSpec(JudgeSettings):
    engine: Literal["http"] = Field("http", description="An OpenAI-compatible /v1/completions endpoint.")
    base_url: str = Field(..., description="Endpoint root, e.g. http://127.0.0.1:8000/v1.")
    model: str = Field(..., description="Model name the endpoint serves.")
    revision: str | None = Field(None, description="Model revision recorded with each judgment.")
    api_key_env: str | None = Field(
        None, description="Name of the environment variable holding the bearer token (the token is never stored)."
    )
    labels: Labels = Field(default_factory=Labels, description="Label words the judge answers with.")
    label_token_ids: dict[str, list[int]] | None = Field(
        None,
        description="Token ids of each label's surface forms, {'a': [...], 'b': [...]}; asked of /tokenize when unset.",
    )
    timeout_s: float = Field(120, gt=0, description="Seconds to wait for one request.")
    concurrency: int = Field(8, ge=1, description="Requests in flight per actor.")

    def identity(self) -> Identity:
        """The served model and revision as given, and the settings that change a verdict (not the endpoint)."""
        return {
            "engine": "http",
            "model": self.model,
            "revision": self.revision or "",
            "sampling": {
                "max_tokens": 1,
                "temperature": 0.0,
                "labels": {"a": list(self.labels.a), "b": list(self.labels.b)},
            },
        }


def build(settings: HttpJudgeSpec) -> Judge:
    """The client of ``settings``' endpoint (it asks /tokenize for the label ids when they are not given)."""
    from pairank.judges.engines.http_judge import HttpJudge

    return HttpJudge(settings)


#: ``model_folder``: a ``model`` starting with '.' or '/' is resolved against the spec file, as the spec loader
#: has always done for every engine's ``model``.
ENGINE = Engine(name="http", settings=HttpJudgeSpec, build=build, modes=JUDGING_MODES, model_folder=True)
