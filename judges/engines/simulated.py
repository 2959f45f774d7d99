"""The ``simulated`` judge engine: verdicts drawn from a model of a judge, never from a language model.

Its settings, identity and builder; the model and the judge are
:mod:`pairank.judges.engines.simulated_judge`. It answers the ``logprob`` mode, and a run
report on its judgments opens with a notice that they are simulated.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from pydantic import Field, model_validator

from pairank.judges.engine import Engine, Identity, JudgeSettings
from pairank.judges.interface import Judge
from pairank.storage.keys import canonical_json

#: The settings that determine an outcome (``seconds_per_comparison``, ``start_seconds``, ``crash_on``, ``calls_log``,
#: ``hold``, ``hold_from`` and the parallel sizes do not).
SETTINGS = ("seed", "quality", "scale", "noise", "position_bias", "intransitivity", "length_bias", "lengths")


class SimulatedJudgeSpec(JudgeSettings):
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
    start_seconds: float = Field(
        0.0, ge=0, description="Sleep when the engine starts (in each judge actor), to mimic a slow engine start."
    )
    crash_on: list[tuple[str, str, str]] = Field(
        default_factory=list,
        description="Fault drill: comparisons [context_id, candidate_a, candidate_b] (a poison prompt each): the "
        "judge actor's process dies, as a killed one does, whenever a batch holds one of them, every time. Shows "
        "how a job bears a poison prompt; not part of the judge's identity.",
    )

    hold: str | None = Field(
        None,
        description="Test drill, a gate: a folder (local or s3://) through which every batch that reaches a simulated "
        "engine passes. A batch takes the next number n (0, 1, 2, ... across all engines) by creating "
        "`<hold>/batch-<n>.json` (its keys inside); from batch `hold_from` on it waits, before judging, until "
        "`<hold>/release` exists, or an `<hold>/open-<m>` with m > n (batches below m let through, the later ones "
        "held still). A test holds a run at a known point, acts on it (a kill, a second run), then releases it, "
        "at once or in steps: no window of time to race. Not part of the judge's identity.",
    )
    hold_from: int = Field(
        0, ge=0, description="With `hold`: the number of batches judged before the gate closes (0: it holds the first)."
    )

    tensor_parallel_size: int = Field(
        1,
        ge=1,
        description="Placement drill: each judge actor is placed as a vllm judge of this tensor_parallel_size "
        "would be (with pool.num_gpus 1, a placement group of tensor_parallel_size x pipeline_parallel_size "
        "one-GPU bundles on one node, the actor in it); the simulation runs in the actor alone. Shows where "
        "engines would go on a cluster, without vLLM. Not part of the judge's identity.",
    )
    pipeline_parallel_size: int = Field(
        1, ge=1, description="Placement drill, as the vllm judge's pipeline_parallel_size (see tensor_parallel_size)."
    )
    calls_log: str | None = Field(
        None,
        description="Audit of the engine's calls: a folder (local or s3://) where every batch that reaches a simulated "
        "engine is recorded as it arrives, one JSON file per batch (the time, the actor's process id, the batch's "
        "keys). Shows which comparisons were sent to an engine and when, also across engines and nodes that were "
        "lost (an actor's own counters die with it). Not part of the judge's identity.",
    )

    @model_validator(mode="after")
    def _lengths_given(self) -> SimulatedJudgeSpec:
        if self.length_bias != 0 and not self.lengths:
            raise ValueError("judge.length_bias needs judge.lengths: the candidates table giving each text")
        return self

    def identity(self) -> Identity:
        """engine and model "simulated"; revision a short hash of the settings that determine outcomes."""
        # the length settings join the identity only when used, so judgments of judges without them keep their keys
        used = [k for k in SETTINGS if self.length_bias or k not in ("length_bias", "lengths")]
        sampling = {k: getattr(self, k) for k in used}
        revision = hashlib.sha256(canonical_json(sampling).encode("utf-8")).hexdigest()[:12]
        return {"engine": "simulated", "model": "simulated", "revision": revision, "sampling": sampling}


def ranks(settings: SimulatedJudgeSpec) -> int:
    """The engine's ``ranks`` hook: placed as a vllm judge of these parallel sizes would be."""
    return settings.tensor_parallel_size * settings.pipeline_parallel_size


def build(settings: SimulatedJudgeSpec) -> Judge:
    """The simulated judge of ``settings`` (it reads the quality and lengths tables they name)."""
    from pairank.judges.engines.simulated_judge import SimulatedJudge

    return SimulatedJudge(settings)


ENGINE = Engine(
    name="simulated",
    settings=SimulatedJudgeSpec,
    build=build,
    paths=("quality", "lengths", "calls_log", "hold"),
    ranks=ranks,
    notice="**SIMULATED judge**: these judgments come from a simulation (latent qualities plus noise), not from a "
    "model. Use them for planning only.",
)
