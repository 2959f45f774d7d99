"""Judge engine specs: the ``judge:`` section of a job spec (one model per engine, chosen by ``engine``).

Part of :mod:`pairank.jobs.specs.job`, which re-exports every name here.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from pairank.jobs.specs.base import Strict


class Labels(Strict):
    a: list[str] = Field(
        ["A", " A"], description="Surface forms of the label for slot A; their probabilities are summed."
    )
    b: list[str] = Field(["B", " B"], description="Surface forms of the label for slot B.")


class VllmJudgeSpec(Strict):
    engine: Literal["vllm"] = Field("vllm", description="vLLM's offline engine in a long-lived Ray actor.")
    model: str = Field(
        "default",
        description="'default' (the embedded Gemma-3-270M, converted by `pairank model prepare`), "
        "a local Hugging Face model folder, or a model name the cluster can load.",
    )
    revision: str | None = Field(
        None, description="Model revision; for a local folder a content hash is used when unset."
    )
    dtype: str = Field("bfloat16", description="Weights and activations dtype.")
    max_model_len: int = Field(2048, ge=128, description="Longest prompt plus answer in tokens.")
    enforce_eager: bool = Field(True, description="Skip graph compilation (faster start on CPU).")
    seed: int = Field(0, description="Engine seed.")
    labels: Labels = Field(default_factory=Labels, description="Label words the judge answers with.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment set in the judge actor before vLLM is imported (e.g. VLLM_CPU_KVCACHE_SPACE); "
        "it overrides what Ray set for the actor.",
    )
    engine_kwargs: dict = Field(default_factory=dict, description="Extra keyword arguments to vllm.LLM.")
    async_engine: bool | Literal["auto"] = Field(
        "auto",
        description="true: vLLM's async engine (its core in a second process), which keeps "
        "pool.max_batches_in_flight batches of each actor in flight at once; false: the synchronous vllm.LLM, one "
        "batch at a time. auto: the async engine when the pool reserves GPUs, and on CPUs the one measured faster "
        "on the 2-core CPU build (BENCHMARKS.md §11).",
    )


class HttpJudgeSpec(Strict):
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


class ReplayJudgeSpec(Strict):
    engine: Literal["replay"] = Field("replay", description="Answers from an existing judgments table.")
    source: str = Field(..., description="Folder (or file) of judgments Parquet, local or s3://.")
    model: str | None = Field(None, description="Use only the source's judgments of this model.")
    mode: str | None = Field(
        None,
        description='Use only the source\'s judgments whose sampling JSON has this "mode" (e.g. an LLMBar '
        "prompting mode, as the llmbar importer records it: Vanilla, CoT, Swap, ...).",
    )


class SimulatedJudgeSpec(Strict):
    engine: Literal["simulated"] = Field(
        "simulated",
        description="SIMULATED judge for planning and scale tests: p_a from latent qualities, noise, position bias and "
        "intransitivity. Its judgments are labelled engine=simulated, model=simulated; never a quality claim.",
    )
    seed: int = Field(0, description="Seed of the latent qualities and the per-comparison noise.")
    quality: str | None = Field(
        None,
        description="Latent quality source: unset draws a seeded standard normal per (context, candidate); a path to "
        "a human_scores table uses each candidate's mean human score for the aspect (standardised per context).",
    )
    scale: float = Field(2.0, ge=0, description="Logit of P(A) per unit of latent quality difference.")
    noise: float = Field(0.5, ge=0, description="Standard deviation of the Gaussian noise on each comparison's logit.")
    position_bias: float = Field(0.0, description="Logit added in favour of slot A (negative favours slot B).")
    intransitivity: float = Field(
        0.0, ge=0, description="Amplitude of a cyclic (rock-paper-scissors) logit term; 0 is perfectly transitive."
    )
    length_bias: float = Field(
        0.0,
        description="Logit added per unit of log(len(text_a) / len(text_b)): a judge that prefers longer "
        "outputs (positive) or shorter ones; needs `lengths`.",
    )
    lengths: str | None = Field(
        None,
        description="length_bias: a candidates table (or the folder holding candidates.parquet) giving each "
        "candidate's text.",
    )
    seconds_per_comparison: float = Field(0.0, ge=0, description="Sleep per comparison, to mimic an engine's latency.")
    crash_on: list[tuple[str, str, str]] = Field(
        default_factory=list,
        description="Fault drill: comparisons [context_id, candidate_a, candidate_b] (a poison prompt each): the "
        "judge actor's process dies, as a killed one does, whenever a batch holds one of them, every time. Shows "
        "how a job bears a poison prompt; not part of the judge's identity.",
    )

    @model_validator(mode="after")
    def _lengths_given(self):
        if self.length_bias != 0 and not self.lengths:
            raise ValueError("judge.length_bias needs judge.lengths: the candidates table giving each text")
        return self


JudgeSpec = Annotated[
    VllmJudgeSpec | HttpJudgeSpec | ReplayJudgeSpec | SimulatedJudgeSpec, Field(discriminator="engine")
]
