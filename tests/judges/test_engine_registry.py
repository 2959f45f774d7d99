"""The judge engine registry (judges/__init__.py, engine.py): an engine declared and registered outside
pairank runs a whole job; unknown engines and keys are errors naming what is allowed; declarations are checked."""

from __future__ import annotations

import os
from typing import Literal

import pyarrow.compute as pc
import pytest
from pydantic import Field

import pairank
from pairank.jobs.specs.job import SpecError, parse_spec
from pairank.judges import BUILT_IN, ENGINES, get_engine, register, unregister
from pairank.judges.engine import Engine, JudgeSettings
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import PROMPTS
from tests.judges.toy_engine import TOY, ToySettings


@pytest.fixture
def toy():
    """The toy engine, registered for one test."""
    register(TOY)
    try:
        yield TOY
    finally:
        unregister("toy")


def spec_data(input_uri: str, output: str, judge: dict) -> dict:
    return {
        "name": "toy",
        "input": input_uri,
        "output": output,
        "aspects": ["coherence"],
        "prompts": PROMPTS,
        "judge": judge,
        "scheduler": {"name": "full"},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 4},
        "report": {"bootstrap": 0},
    }


@pytest.mark.usefixtures("ray_local")
def test_a_job_runs_on_an_engine_registered_outside_pairank(toy, tiny_input, tmp_path):
    spec = pairank.parse_spec(spec_data(tiny_input.uri, str(tmp_path / "out"), {"engine": "toy", "p_a": 0.8}), "toy")
    assert isinstance(spec.judge, ToySettings) and spec.judge.p_a == 0.8
    result = pairank.run(spec, progress=lambda message: None)
    assert (result.requests, result.judged, result.errors) == (12, 12, 0)  # 2 contexts x 3 x 2 ordered pairs
    rows = JudgmentCache(result.layout.judgments).read()
    assert set(rows.column("engine").to_pylist()) == {"toy"} and set(rows.column("model").to_pylist()) == {"toy"}
    assert pc.max(rows.column("p_a")).as_py() == pytest.approx(0.8) == pc.min(rows.column("p_a")).as_py()
    (built_in,) = set(rows.column("raw_text").to_pylist())
    assert built_in.startswith("toy built in ") and built_in != f"toy built in {os.getpid()}"  # in a judge actor
    assert "**TOY judge**" in result.layout.report_md.read_text()  # the engine's notice opens the report
    again = pairank.run(spec, progress=lambda message: None)  # its identity keys the cache
    assert (again.cached, again.judged) == (12, 0)


def test_an_unknown_engine_lists_the_registered_ones(toy):
    with pytest.raises(SpecError) as info:
        parse_spec(spec_data("in", "out", {"engine": "toys"}), "job.yaml")
    line = next(line for line in str(info.value).splitlines() if "judge.engine" in line)
    assert line.strip() == "judge.engine: unknown judge 'toys'; available: vllm, http, replay, simulated, toy"
    with pytest.raises(ValueError, match="unknown judge engine 'toys'; available: http, replay, simulated, toy, vllm"):
        get_engine("toys")


def test_the_toys_unknown_key_lists_its_allowed_keys(toy):
    with pytest.raises(SpecError) as info:
        parse_spec(spec_data("in", "out", {"engine": "toy", "p_b": 0.2}), "job.yaml")
    assert "  judge.p_b: unknown key for judge 'toy'; allowed keys here: engine, p_a" in str(info.value).splitlines()
    with pytest.raises(SpecError, match=r"judge\.p_a: Input should be less than 1"):
        parse_spec(spec_data("in", "out", {"engine": "toy", "p_a": 1.5}), "job.yaml")


def test_an_engine_is_unknown_before_it_is_registered_and_after_it_is_unregistered():
    assert "toy" not in ENGINES
    with pytest.raises(SpecError, match="unknown judge 'toy'"):
        parse_spec(spec_data("in", "out", {"engine": "toy"}), "job.yaml")
    register(TOY)
    assert register(TOY) is TOY and ENGINES["toy"] is TOY  # registering it again changes nothing
    assert unregister("toy") is TOY and "toy" not in ENGINES
    with pytest.raises(ValueError, match="unknown judge engine 'toy'"):
        unregister("toy")


def test_the_toy_asks_for_a_mode_it_does_not_answer(toy):
    data = {**spec_data("in", "out", {"engine": "toy"}), "judging": {"mode": "generate"}}
    with pytest.raises(
        SpecError, match=r"needs an engine that generates \(judge.engine: vllm or http\); the toy engine"
    ):
        parse_spec(data, "job.yaml")


def test_a_name_taken_and_a_built_in_engine_are_refused(toy):
    other = Engine(name="toy", settings=ToySettings, build=TOY.build, modes=("logprob", "generate"))
    with pytest.raises(ValueError, match="judge engine 'toy' is registered already"):
        register(other)
    with pytest.raises(ValueError, match="'vllm' is built in"):
        unregister("vllm")
    with pytest.raises(TypeError, match="expected an Engine declaration"):
        register(ToySettings)
    assert tuple(ENGINES)[: len(BUILT_IN)] == ("vllm", "http", "replay", "simulated")


class Untagged(JudgeSettings):
    engine: str = Field("toy2", description="Not a Literal.")


class Undescribed(JudgeSettings):
    engine: Literal["toy2"] = Field("toy2", description="A toy.")
    p_a: float = 0.5


class Toy2(JudgeSettings):
    engine: Literal["toy2"] = Field("toy2", description="A toy.")


@pytest.mark.parametrize(
    ("declaration", "message"),
    [
        ({"settings": Untagged}, 'must declare engine: Literal\\["toy2"\\]'),
        ({"settings": Undescribed}, r"every setting needs a description; \['p_a'\] have none"),
        ({"settings": Toy2, "modes": ("logprob", "debate")}, r"unknown judging modes \['debate'\]"),
        ({"settings": Toy2, "paths": ("source",)}, r"paths \['source'\] are not settings of Toy2"),
        ({"settings": Toy2, "name": "Toy 2"}, "a name is lower-case letters"),
        ({"settings": dict}, "settings must be a JudgeSettings model"),
    ],
)
def test_a_bad_declaration_is_an_error_when_it_is_made(declaration, message):
    with pytest.raises((ValueError, TypeError), match=message):
        Engine(**{"name": "toy2", "build": TOY.build, **declaration})
