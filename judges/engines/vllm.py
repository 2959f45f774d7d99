"""The ``vllm`` judge engine: vLLM in a long-lived Ray actor, the same code on CPUs and GPUs.

Its settings, identity, builder and the rules of its pool: ``async_engine: auto`` is
decided by the GPUs an actor reserves, and vLLM's async engine holds several batches of
an actor at once. The engine itself is :class:`pairank.judges.engines.vllm_judge.VllmJudge`,
imported by :func:`build` in the actor (it imports vLLM).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator

from pairank.judges.engine import JUDGING_MODES, Engine, Identity, JudgeSettings, Labels
from pairank.judges.interface import Judge
from pairank.judges.models import folder_revision, resolve_model

#: What ``judge.async_engine: auto`` picks for an engine without GPUs: the synchronous engine. On the 2-core CPU
#: build the async one judged 2-5% faster in a bare loop on an idle machine but started 11-15 s later (its core
#: is a second process), which a job earns back only after about 1,500-2,000 comparisons, and it was no faster
#: with another job on the cores (BENCHMARKS.md §11). With GPUs ``auto`` picks the async engine.
CPU_ASYNC_ENGINE = False
#: Batches in flight per actor on vLLM's async engine when pool.max_batches_in_flight is unset.
ASYNC_BATCHES_IN_FLIGHT = 4
#: Flags (of /proc/cpuinfo) of an x86 CPU that computes in bfloat16 natively: AVX-512 BF16, AMX. Without them
#: vLLM's CPU build falls back from oneDNN to torch's linear layers in bfloat16 and judged 5x slower than in
#: float32 (2-core AMD EPYC with AVX2, issue 27; BENCHMARKS.md).
NATIVE_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
#: vLLM's keywords that :func:`parallel_kwargs` sets from the spec's parallel sizes (judge.engine_kwargs may not).
PARALLEL_KWARGS = ("tensor_parallel_size", "pipeline_parallel_size", "distributed_executor_backend")


def cpu_flags() -> frozenset[str]:
    """The flags of this machine's CPU as /proc/cpuinfo lists them (none where there is no such file)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "flags":
            return frozenset(value.split())
    return frozenset()


def choose_dtype(asked: str, num_gpus: float) -> tuple[str, str]:
    """The dtype an actor reserving ``num_gpus`` runs for ``judge.dtype`` ``asked``, and why.

    ``auto``: bfloat16 on GPUs and on a CPU with :data:`NATIVE_BF16_FLAGS`, float32 on other CPUs; any other value
    as written. The CPU is this machine's (:func:`cpu_flags`):

    >>> choose_dtype("float16", num_gpus=0)
    ('float16', 'as judge.dtype says')
    >>> choose_dtype("auto", num_gpus=1)
    ('bfloat16', 'judge.dtype auto on GPUs')
    """
    if asked != "auto":
        return asked, "as judge.dtype says"
    if num_gpus > 0:
        return "bfloat16", "judge.dtype auto on GPUs"
    native = [flag for flag in NATIVE_BF16_FLAGS if flag in cpu_flags()]
    if native:
        return "bfloat16", f"judge.dtype auto: this CPU computes bfloat16 natively ({', '.join(native)})"
    return "float32", (
        "judge.dtype auto: this CPU has no native bfloat16 (no avx512_bf16 or amx_bf16 flag), where bfloat16 "
        "judges about 5x slower"
    )


class VllmJudgeSpec(JudgeSettings):
    engine: Literal["vllm"] = Field("vllm", description="vLLM's offline engine in a long-lived Ray actor.")
    model: str = Field(
        "default",
        description="'default' (the embedded Gemma-3-270M, converted by `pairank model prepare`), "
        "a local Hugging Face model folder, or a model name the cluster can load.",
    )
    revision: str | None = Field(
        None, description="Model revision; for a local folder a content hash is used when unset."
    )
    dtype: str = Field(
        "auto",
        description="Weights and activations dtype: auto is bfloat16 on GPUs and on CPUs that compute it natively "
        "(avx512_bf16 or amx_bf16 among the flags of /proc/cpuinfo), float32 on other CPUs, where bfloat16 judged "
        "5x slower; decided on the driver's machine for the whole pool (set it where the judge nodes' CPUs differ "
        "from the driver's). Any other value (bfloat16, float16, float32) is used as written.",
    )
    max_model_len: int = Field(2048, ge=128, description="Longest prompt plus answer in tokens.")
    enforce_eager: bool = Field(True, description="Skip graph compilation (faster start on CPU).")
    seed: int = Field(0, description="Engine seed.")
    labels: Labels = Field(default_factory=Labels, description="Label words the judge answers with.")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="Environment set in the judge actor before vLLM is imported (e.g. VLLM_CPU_KVCACHE_SPACE); "
        "it overrides what Ray set for the actor.",
    )
    engine_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="Extra keyword arguments to vllm.LLM (not the parallel sizes and executor, which "
        "tensor_parallel_size and pipeline_parallel_size set).",
    )
    tensor_parallel_size: int = Field(
        1,
        ge=1,
        description="GPUs one engine splits each layer over (vLLM's tensor_parallel_size). Above 1 (or with "
        "pipeline_parallel_size above 1) and pool.num_gpus 1, each judge actor gets a Ray placement group of "
        "tensor_parallel_size x pipeline_parallel_size one-GPU bundles on one node (STRICT_PACK), is placed in it, "
        "and vLLM runs the engine's ranks there with its Ray executor (distributed_executor_backend ray); a size no "
        "node of the cluster holds is an error before judging. With pool.num_gpus 0 (the CPU build) the ranks are "
        "processes of the actor (vLLM's default executor).",
    )
    pipeline_parallel_size: int = Field(
        1,
        ge=1,
        description="Stages one engine splits its layers into (vLLM's pipeline_parallel_size), each on GPUs of its "
        "own; placed with tensor_parallel_size, all on one node.",
    )
    async_engine: bool | Literal["auto"] = Field(
        "auto",
        description="true: vLLM's async engine (its core in a second process), which keeps "
        "pool.max_batches_in_flight batches of each actor in flight at once; false: the synchronous vllm.LLM, one "
        "batch at a time. auto: the async engine when the pool reserves GPUs, and on CPUs the one measured faster "
        "on the 2-core CPU build (BENCHMARKS.md §11).",
    )

    @field_validator("engine_kwargs")
    @classmethod
    def _not_parallel(cls, v: dict[str, Any]) -> dict[str, Any]:
        set_here = [k for k in PARALLEL_KWARGS if k in v]
        if set_here:
            raise ValueError(
                f"judge.engine_kwargs.{set_here[0]}: set judge.tensor_parallel_size and judge.pipeline_parallel_size "
                "instead: the pool places an engine's GPUs from them and pairank sets vLLM's parallel sizes and "
                "executor to match"
            )
        return v

    @property
    def ranks(self) -> int:
        """The processes (GPUs, with pool.num_gpus 1) one engine spans: tensor x pipeline parallel size."""
        return self.tensor_parallel_size * self.pipeline_parallel_size

    def identity(self) -> Identity:
        """The model as named (the embedded one by its name), its revision (a local folder's content hash when
        unset), and the settings that change a verdict."""
        model = resolve_model(self.model)
        revision = self.revision
        if revision is None and not isinstance(model, str):
            revision = folder_revision(model)
        name = "gemma-3-270m (embedded default)" if self.model == "default" else self.model
        return {
            "engine": "vllm",
            "model": name,
            "revision": revision or "",
            "sampling": {
                "max_tokens": 1,
                "temperature": 0.0,
                "dtype": choose_dtype(self.dtype, num_gpus=0)[0],  # auto: as on this CPU (a pool places it)
                "labels": {"a": list(self.labels.a), "b": list(self.labels.b)},
            },
        }

    def uses_async_engine(self, num_gpus: float) -> bool:
        """Whether these settings run vLLM's async engine on an actor that reserves ``num_gpus``.

        >>> VllmJudgeSpec().uses_async_engine(num_gpus=1), VllmJudgeSpec(async_engine=False).uses_async_engine(1)
        (True, False)
        """
        if self.async_engine == "auto":
            return num_gpus > 0 or CPU_ASYNC_ENGINE
        return bool(self.async_engine)


def parallel_kwargs(settings: VllmJudgeSpec, on_gpus: bool) -> dict[str, Any]:
    """vLLM's keywords for the engine's parallel sizes: none for one rank. For several on GPUs, the sizes and vLLM's
    Ray executor: the pool has placed the actor in a placement group of one GPU bundle per rank, and the executor
    starts a worker in each (as ``ray.data.llm``'s vLLM stage does). On CPUs, the sizes only: vLLM's default
    executor runs the ranks as processes of the actor.

    >>> parallel_kwargs(VllmJudgeSpec(), on_gpus=True)
    {}
    >>> parallel_kwargs(VllmJudgeSpec(tensor_parallel_size=2), on_gpus=True)
    {'tensor_parallel_size': 2, 'pipeline_parallel_size': 1, 'distributed_executor_backend': 'ray'}
    """
    if settings.ranks == 1:
        return {}
    sizes = {
        "tensor_parallel_size": settings.tensor_parallel_size,
        "pipeline_parallel_size": settings.pipeline_parallel_size,
    }
    return {**sizes, "distributed_executor_backend": "ray"} if on_gpus else sizes


def ranks(settings: VllmJudgeSpec) -> int:
    """The engine's ``ranks`` hook: tensor x pipeline parallel size."""
    return settings.ranks


def build(settings: VllmJudgeSpec) -> Judge:
    """The vLLM judge of ``settings`` (in the judge actor: this imports vLLM)."""
    from pairank.judges.engines.vllm_judge import VllmJudge

    return VllmJudge(settings, choose_dtype, parallel_kwargs)


def placed(settings: VllmJudgeSpec, num_gpus: float) -> VllmJudgeSpec:
    """The settings as an actor reserving ``num_gpus`` runs them: ``async_engine: auto`` and ``dtype: auto``
    decided (:func:`choose_dtype`).

    >>> placed(VllmJudgeSpec(), num_gpus=1).async_engine, placed(VllmJudgeSpec(async_engine=False), 1).async_engine
    (True, False)
    >>> placed(VllmJudgeSpec(), num_gpus=1).dtype, placed(VllmJudgeSpec(dtype="float32"), num_gpus=1).dtype
    ('bfloat16', 'float32')
    """
    dtype = choose_dtype(settings.dtype, num_gpus)[0]
    return settings.model_copy(update={"async_engine": settings.uses_async_engine(num_gpus), "dtype": dtype})


def choices(settings: VllmJudgeSpec, num_gpus: float) -> list[str]:
    """What :func:`placed` decided that the spec left to it, and why (the console and the report say it).

    >>> choices(VllmJudgeSpec(dtype="float32"), num_gpus=0)
    ['dtype float32 (as judge.dtype says)']
    """
    return ["dtype {} ({})".format(*choose_dtype(settings.dtype, num_gpus))]


def batches_in_flight(settings: VllmJudgeSpec, asked: int | None) -> int:
    """Calls one actor runs at once: ``asked`` (4 when unset) on the async engine, 1 on the synchronous one.

    >>> on_async, on_sync = VllmJudgeSpec(async_engine=True), VllmJudgeSpec(async_engine=False)
    >>> batches_in_flight(on_async, None), batches_in_flight(on_async, 2), batches_in_flight(on_sync, 3)
    (4, 2, 1)
    """
    if settings.async_engine is not True:
        return 1
    return asked or ASYNC_BATCHES_IN_FLIGHT


def check_batches_in_flight(settings: VllmJudgeSpec, asked: int) -> None:
    """The synchronous engine takes one batch at a time: more, asked of it, is an error naming both keys."""
    if asked > 1 and settings.async_engine is False:
        raise ValueError(
            f"pool.max_batches_in_flight {asked}: vLLM's synchronous engine (judge.async_engine false) takes one "
            "batch at a time; set judge.async_engine true (or auto) or leave it unset"
        )


ENGINE = Engine(
    name="vllm",
    settings=VllmJudgeSpec,
    build=build,
    modes=JUDGING_MODES,
    model_folder=True,
    placed=placed,
    choices=choices,
    batches_in_flight=batches_in_flight,
    check_batches_in_flight=check_batches_in_flight,
    ranks=ranks,
)
