"""The vLLM engine's settings decided per machine (issue 27, item 1): ``judge.dtype: auto`` is bfloat16 where the
CPU computes it natively and float32 elsewhere; an explicit dtype wins; the console and the report say which.

Only the reader of /proc/cpuinfo's flags is stubbed, to stand for the two CPU classes.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest

from pairank.jobs.specs.job import load_spec
from pairank.judges import judge_identity
from pairank.judges.engines import vllm as vllm_engine
from pairank.judges.engines.vllm import VllmJudgeSpec, choose_dtype, cpu_flags, placed

DEMO = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
#: A 2-core AMD EPYC with AVX2 and no AVX-512 (where bfloat16 judged 5x slower), and an AVX-512 BF16 / AMX Xeon.
AVX2 = frozenset({"fpu", "sse2", "avx", "avx2", "fma"})
AVX512_BF16 = AVX2 | {"avx512f", "avx512_bf16"}
AMX = AVX2 | {"avx512f", "amx_bf16", "amx_tile"}


@pytest.fixture
def cpu(monkeypatch):
    def use(flags: frozenset[str]) -> None:
        monkeypatch.setattr(vllm_engine, "cpu_flags", lambda: flags)

    return use


def test_auto_is_bfloat16_only_on_a_cpu_with_native_bfloat16(cpu):
    cpu(AVX2)
    dtype, why = choose_dtype("auto", num_gpus=0)
    assert dtype == "float32" and "no native bfloat16" in why
    for flags, native in [(AVX512_BF16, "avx512_bf16"), (AMX, "amx_bf16")]:
        cpu(flags)
        dtype, why = choose_dtype("auto", num_gpus=0)
        assert dtype == "bfloat16" and native in why
    cpu(AVX2)
    assert choose_dtype("auto", num_gpus=1)[0] == "bfloat16"  # GPUs: as before


def test_an_explicit_dtype_wins(cpu):
    for flags in (AVX2, AMX):
        cpu(flags)
        for asked in ("bfloat16", "float32", "float16"):
            assert choose_dtype(asked, num_gpus=0) == (asked, "as judge.dtype says")
            assert placed(VllmJudgeSpec(dtype=asked), num_gpus=0).dtype == asked


def test_the_spec_keys_judgments_by_the_dtype_chosen_and_says_why(cpu):
    """The demo leaves dtype to auto: its judgments are keyed by the dtype the actors run."""
    assert "dtype" not in load_spec(DEMO).judge.model_fields_set
    for flags, dtype in [(AVX2, "float32"), (AVX512_BF16, "bfloat16")]:
        cpu(flags)
        spec = load_spec(DEMO)
        assert spec.judge.dtype == "auto" and spec.placed_judge.dtype == dtype
        assert judge_identity(spec.placed_judge)["sampling"]["dtype"] == dtype
        (line,) = spec.judge_choices
        assert line.startswith(f"dtype {dtype} (judge.dtype auto: ")
    cpu(AVX2)
    spec = load_spec(DEMO, ["judge.dtype=bfloat16"])
    assert spec.placed_judge.dtype == "bfloat16" and spec.judge_choices == ["dtype bfloat16 (as judge.dtype says)"]


@pytest.mark.skipif(platform.system() != "Linux" or platform.machine() != "x86_64", reason="reads x86 /proc/cpuinfo")
def test_the_flag_reader_reads_this_machines_cpu():
    flags = cpu_flags()
    assert {"fpu", "sse2"} <= flags
    expected = any(f" {f}" in Path("/proc/cpuinfo").read_text() for f in vllm_engine.NATIVE_BF16_FLAGS)
    assert (choose_dtype("auto", num_gpus=0)[0] == "bfloat16") == expected
