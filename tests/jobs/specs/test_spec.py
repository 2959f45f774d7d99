"""Tests of jobs.spec: loading, validating, overriding and resolving job specs."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pairank.jobs.schedulers import FullSettings, RandomSettings
from pairank.jobs.specs.job import JobSpec, SpecError, load_spec
from pairank.jobs.specs.overrides import apply_overrides
from pairank.judges.engines.http import HttpJudgeSpec
from pairank.judges.engines.replay import ReplayJudgeSpec
from pairank.judges.engines.vllm import VllmJudgeSpec

ROOT = Path(__file__).resolve().parents[3]
DEMO = ROOT / "configs" / "demo.yaml"


def demo_data() -> dict:
    return yaml.safe_load(DEMO.read_text(encoding="utf-8"))


def write_spec(folder: Path, data: dict | str, name: str = "job.yaml") -> Path:
    path = folder / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data), encoding="utf-8")
    return path


def minimal(**extra) -> dict:
    data = {
        "name": "t",
        "input": "data/in",
        "output": "store",
        "aspects": ["coherence"],
        "prompts": "prompts/summarization",
        "judge": {"engine": "vllm"},
    }
    data.update(extra)
    return data


def spec_error(path: Path, overrides: list[str] = ()) -> str:
    with pytest.raises(SpecError) as info:
        load_spec(path, overrides)
    return str(info.value)


def test_demo_spec_validates() -> None:
    spec = load_spec(DEMO)
    assert isinstance(spec, JobSpec)
    assert isinstance(spec.judge, VllmJudgeSpec)
    data = demo_data()
    assert spec.name == data["name"]
    assert spec.aspects == data["aspects"]
    assert spec.scheduler.name == data["scheduler"]["name"]
    # Relative paths in the demo are relative to configs/, whatever the working directory.
    assert spec.prompts == str((DEMO.parent / data["prompts"]).resolve())
    assert Path(spec.prompts).is_dir()
    assert spec.input == str((DEMO.parent / data["input"]).resolve())
    assert spec.output == str((DEMO.parent / data["output"]).resolve())
    for aspect in spec.aspects:
        assert (Path(spec.prompts) / f"{aspect}.txt").is_file()


def test_demo_spec_loads_from_another_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = load_spec(DEMO)
    monkeypatch.chdir(tmp_path)
    assert load_spec(DEMO) == expected


def test_unknown_top_level_key(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal(colour="blue"))
    msg = spec_error(path)
    assert str(path) in msg
    assert "colour" in msg
    assert "unknown key" in msg
    allowed = msg.split("allowed keys here:", 1)[1].split("\n", 1)[0]
    assert [k.strip() for k in allowed.split(",")] == sorted(JobSpec.model_fields)


@pytest.mark.parametrize(
    "judge, model",
    [
        ({"engine": "vllm", "temprature": 0}, VllmJudgeSpec),
        ({"engine": "http", "base_url": "http://h/v1", "model": "m", "temprature": 0}, HttpJudgeSpec),
        ({"engine": "replay", "source": "j", "temprature": 0}, ReplayJudgeSpec),
    ],
)
def test_unknown_judge_key_lists_that_engines_keys(tmp_path: Path, judge: dict, model) -> None:
    path = write_spec(tmp_path, minimal(judge=judge))
    msg = spec_error(path)
    assert str(path) in msg
    assert "temprature" in msg
    line = next(line for line in msg.splitlines() if "temprature" in line)
    allowed = [k.strip() for k in line.split("allowed keys here:", 1)[1].split(",")]
    assert allowed == sorted(model.model_fields)


def test_unknown_scheduler_key(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal(scheduler={"name": "random", "comparisons": 4, "rounds": 2}))
    msg = spec_error(path)
    assert str(path) in msg
    line = next(line for line in msg.splitlines() if "rounds" in line)
    assert "scheduler.rounds" in line
    allowed = [k.strip() for k in line.split("allowed keys here:", 1)[1].split(",")]
    assert allowed == sorted(RandomSettings.model_fields)


def test_unknown_nested_key_lists_keys_of_its_own_level(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal(judge={"engine": "vllm", "labels": {"a": ["A"], "c": ["C"]}}))
    msg = spec_error(path)
    line = next(line for line in msg.splitlines() if "unknown key" in line)
    assert "labels.c" in line
    assert line.split("allowed keys here:", 1)[1].strip() == "a, b"


def test_unknown_key_via_override_names_spec_file() -> None:
    msg = spec_error(DEMO, ["scheduler.colour=red"])
    assert str(DEMO) in msg and "scheduler.colour" in msg
    assert ", ".join(sorted(FullSettings.model_fields)) in msg


def test_overrides_take_effect() -> None:
    spec = load_spec(DEMO, ["output=s3://b/x", "scheduler.name=random", "scheduler.comparisons=4"])
    assert spec.output == "s3://b/x"
    assert spec.scheduler.name == "random"
    assert spec.scheduler.comparisons == 4
    assert isinstance(spec.scheduler.comparisons, int)
    # Untouched settings stay as the file has them.
    base = load_spec(DEMO)
    assert spec.aspects == base.aspects and spec.judge == base.judge and spec.pool == base.pool


SIMULATED = ROOT / "configs" / "simulated.yaml"  # scheduler pairs_anchors with `anchors: {size: 6}`


def test_switching_the_scheduler_drops_the_files_keys_of_the_former_one_with_one_note() -> None:
    notes: list[str] = []
    spec = load_spec(SIMULATED, ["scheduler.name=full"], note=notes.append)
    assert spec.scheduler == FullSettings()
    assert len(notes) == 1 and "anchors" in notes[0] and "'pairs_anchors'" in notes[0] and "'full'" in notes[0]
    # Keys both schedulers have stay; keys the user typed for the new one are taken.
    kept: list[str] = []
    beam = load_spec(SIMULATED, ["scheduler.name=pairs_beam", "scheduler.beam.size=3"], note=kept.append)
    assert beam.scheduler.beam.size == 3 and len(kept) == 1 and "anchors" in kept[0]


def test_a_switch_with_nothing_to_drop_says_nothing(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal(scheduler={"name": "pairs_beam", "symmetric": False, "budget": 9}))
    notes: list[str] = []
    spec = load_spec(path, ["scheduler.name=pairs_greedy"], note=notes.append)
    assert (spec.scheduler.name, spec.scheduler.symmetric, spec.scheduler.budget, notes) == (
        "pairs_greedy",
        False,
        9,
        [],
    )


def test_a_key_the_user_typed_that_does_not_fit_is_still_an_error() -> None:
    msg = spec_error(DEMO, ["scheduler.anchors.size=4"])  # demo.yaml: scheduler full
    assert "scheduler.anchors: unknown key for scheduler 'full'" in msg
    msg = spec_error(SIMULATED, ["scheduler.name=full", "scheduler.anchors.size=4"])
    assert "scheduler.anchors: unknown key for scheduler 'full'" in msg


def test_switching_the_engine_drops_the_files_keys_of_the_former_one(tmp_path: Path) -> None:
    notes: list[str] = []
    spec = load_spec(DEMO, ["judge.engine=simulated"], note=notes.append)
    assert spec.judge.engine == "simulated"
    (line,) = notes
    dropped = line.split("keys ", 1)[1].split(" (", 1)[0].split(", ")
    assert sorted(dropped) == sorted(set(demo_data()["judge"]) - {"engine"})
    assert spec_error(DEMO, ["judge.engine=simulated", "judge.dtype=float32"]).count("judge.dtype") == 1


def test_overrides_do_not_modify_their_input() -> None:
    data = {"scheduler": {"name": "full"}, "name": "x"}
    out = apply_overrides(data, ["scheduler.name=random", "pool.size=2"])
    assert data == {"scheduler": {"name": "full"}, "name": "x"}
    assert out == {"scheduler": {"name": "random"}, "name": "x", "pool": {"size": 2}}


def test_override_values_are_yaml_scalars_and_paths_resolve(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal())
    spec = load_spec(path, ["input=elsewhere/data", "aspects=[fluency, coherence]", "flush_rows=8"])
    assert spec.input == str((tmp_path / "elsewhere" / "data").resolve())
    assert spec.aspects == ["fluency", "coherence"]
    assert spec.flush_rows == 8


def test_override_without_equals_is_an_error() -> None:
    msg = spec_error(DEMO, ["scheduler.name"])
    assert "scheduler.name" in msg and "key=value" in msg


def test_invalid_override_value_names_key() -> None:
    msg = spec_error(DEMO, ["scheduler.comparisons=0"])
    assert str(DEMO) in msg and "scheduler.comparisons" in msg


def test_relative_paths_resolve_against_spec_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "configs"
    folder.mkdir()
    path = write_spec(folder, minimal(input="../data/in", output="store", prompts="p/set"))
    monkeypatch.chdir(tmp_path.parent)
    spec = load_spec(path)
    assert spec.input == str(tmp_path / "data" / "in")
    assert spec.output == str(folder / "store")
    assert spec.prompts == str(folder / "p" / "set")


def test_absolute_and_remote_paths_are_kept(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal(input="/abs/in", output="s3://bucket/store", prompts="file:///x/p"))
    spec = load_spec(path)
    assert (spec.input, spec.output, spec.prompts) == ("/abs/in", "s3://bucket/store", "file:///x/p")


def test_replay_source_and_local_model_resolve(tmp_path: Path) -> None:
    replay = load_spec(write_spec(tmp_path, minimal(judge={"engine": "replay", "source": "judgments"}), "r.yaml"))
    assert replay.judge.source == str(tmp_path / "judgments")
    vllm = load_spec(write_spec(tmp_path, minimal(judge={"engine": "vllm", "model": "./models/m"}), "v.yaml"))
    assert vllm.judge.model == str(tmp_path / "models" / "m")
    named = load_spec(write_spec(tmp_path, minimal(judge={"engine": "vllm", "model": "org/model"}), "n.yaml"))
    assert named.judge.model == "org/model"


def test_bad_yaml(tmp_path: Path) -> None:
    path = write_spec(tmp_path, "name: demo\naspects: [coherence\n")
    msg = spec_error(path)
    assert str(path) in msg
    assert "not valid YAML" in msg


@pytest.mark.parametrize("text, kind", [("- a\n- b\n", "list"), ("just a string\n", "str"), ("42\n", "int")])
def test_non_mapping_top_level(tmp_path: Path, text: str, kind: str) -> None:
    path = write_spec(tmp_path, text)
    msg = spec_error(path)
    assert str(path) in msg
    assert "mapping" in msg and kind in msg


def test_missing_file(tmp_path: Path) -> None:
    msg = spec_error(tmp_path / "nope.yaml")
    assert str(tmp_path / "nope.yaml") in msg


def test_missing_required_keys_are_named(tmp_path: Path) -> None:
    data = minimal()
    del data["aspects"], data["judge"]
    msg = spec_error(write_spec(tmp_path, data))
    assert "aspects" in msg and "judge" in msg


def test_unknown_engine_names_allowed_engines(tmp_path: Path) -> None:
    path = write_spec(tmp_path, minimal(judge={"engine": "openai", "model": "m"}))
    msg = spec_error(path)
    assert str(path) in msg
    assert "openai" in msg
    for engine in ("vllm", "http", "replay"):
        assert engine in msg


def test_unknown_scheduler_name_names_allowed(tmp_path: Path) -> None:
    msg = spec_error(write_spec(tmp_path, minimal(scheduler={"name": "swiss"})))
    assert "scheduler.name" in msg
    for name in ("full", "random", "no_repeat", "symmetric"):
        assert name in msg


def test_duplicate_aspects(tmp_path: Path) -> None:
    msg = spec_error(write_spec(tmp_path, minimal(aspects=["coherence", "coherence"])))
    assert "aspects" in msg and "unique" in msg


@pytest.mark.parametrize(
    ("scheduler", "key"),
    [
        ({"name": "full", "comparisons": 4}, "comparisons"),
        ({"name": "pairs_greedy", "beam": {"size": 4}}, "beam"),
        ({"name": "adaptive_symmetric", "symmetric": False}, "symmetric"),
        ({"name": "random", "comparisons": 4, "anchors": {"size": 3}}, "anchors"),
    ],
)
def test_a_setting_of_another_scheduler_is_an_error_naming_it_and_the_scheduler(tmp_path, scheduler, key):
    from pairank.jobs.schedulers import REGISTRY

    msg = spec_error(write_spec(tmp_path, minimal(scheduler=scheduler)))
    line = next(line for line in msg.splitlines() if f"scheduler.{key}" in line)
    assert f"unknown key for scheduler {scheduler['name']!r}" in line
    allowed = [k.strip() for k in line.split("allowed keys here:", 1)[1].split(",")]
    assert allowed == sorted(REGISTRY[scheduler["name"]].model_fields)


def test_each_scheduler_builds_its_own_settings_and_an_unset_name_is_full(tmp_path):
    from pairank.jobs.schedulers import REGISTRY

    for name, settings in REGISTRY.items():
        extra = {"comparisons": 2} if "comparisons" in settings.model_fields else {}
        extra |= {"baseline": "M0"} if name == "one_vs_n" else {}
        spec = load_spec(write_spec(tmp_path, minimal(scheduler={"name": name, **extra})))
        assert type(spec.scheduler) is settings and spec.scheduler.adaptive == ("machine" in vars(settings))
    assert load_spec(write_spec(tmp_path, minimal(scheduler={"seed": 3}))).scheduler == FullSettings(seed=3)


def test_a_partial_scheduler_without_comparisons_is_an_error_at_load(tmp_path):
    msg = spec_error(write_spec(tmp_path, minimal(scheduler={"name": "symmetric"})))
    assert "scheduler.comparisons: Field required" in msg


def test_batches_in_flight_and_the_engine_they_run_on(tmp_path):
    from pairank.jobs.judging.pool_wiring import batches_in_flight, engine_spec, pool_resources
    from pairank.judges.engines.vllm import CPU_ASYNC_ENGINE

    def spec(judge: dict, pool: dict):
        return load_spec(write_spec(tmp_path, minimal(judge={"engine": "vllm", **judge}, pool=pool)))

    gpu = spec({}, {"num_gpus": 1})  # auto: the async engine wherever the pool reserves GPUs
    assert engine_spec(gpu).async_engine is True and pool_resources(gpu).batches_in_flight == 4
    cpu = spec({}, {})  # auto on CPUs: the measured winner
    assert engine_spec(cpu).async_engine is CPU_ASYNC_ENGINE
    assert batches_in_flight(cpu) == (4 if CPU_ASYNC_ENGINE else 1)
    assert batches_in_flight(spec({"async_engine": True}, {"max_batches_in_flight": 2})) == 2
    assert engine_spec(spec({"async_engine": False}, {"num_gpus": 1})).async_engine is False
    assert batches_in_flight(spec({"async_engine": False}, {"num_gpus": 1})) == 1
    assert spec({}, {}).judge.async_engine == "auto"  # the spec keeps what was written; the pool decides
    simulated = minimal(judge={"engine": "simulated"}, pool={"max_batches_in_flight": 3})
    assert pool_resources(load_spec(write_spec(tmp_path, simulated))).batches_in_flight == 3


@pytest.mark.parametrize(
    ("judge", "pool", "message"),
    [
        ({}, {"max_batches_in_flight": 0}, "pool.max_batches_in_flight: Input should be greater than or equal to 1"),
        ({"async_engine": False}, {"max_batches_in_flight": 4}, "takes one batch at a time"),
        ({"async_engine": "sometimes"}, {}, "judge.async_engine"),
    ],
)
def test_bad_batches_in_flight_settings_are_errors_naming_the_key(tmp_path, judge, pool, message):
    msg = spec_error(write_spec(tmp_path, minimal(judge={"engine": "vllm", **judge}, pool=pool)))
    assert message in msg, msg


def test_a_pool_size_is_a_number_or_a_range_and_the_pool_gets_both_ends(tmp_path):
    from pairank.jobs.judging.pool_wiring import pool_resources

    def resources(text: str):
        path = tmp_path / "sized.yaml"
        path.write_text(yaml.safe_dump(minimal(judge={"engine": "simulated"})) + f"pool:\n  size: {text}\n")
        return pool_resources(load_spec(path))

    fixed, ranged = resources("3"), resources("1..4")  # YAML reads 1..4 as a string
    assert (fixed.min_size, fixed.max_size, fixed.fixed) == (3, 3, True)
    assert (ranged.min_size, ranged.max_size, ranged.fixed) == (1, 4, False)
    assert ranged.idle_seconds == 60


@pytest.mark.parametrize("size", ["3..1", "0..2", "a..b", "1..", 0, "1...2"])
def test_a_bad_pool_size_is_an_error_naming_the_key_and_what_is_expected(tmp_path, size):
    msg = spec_error(write_spec(tmp_path, minimal(pool={"size": size})))
    assert (
        f"pool.size: Value error, expected a number of actors (1 or more) or a range 'min..max' with 1 <= min <= "
        f"max, found {size!r}" in msg
    ), msg


def test_parallel_sizes_place_an_engine_over_as_many_gpus_and_the_pool_knows_it(tmp_path):
    from pairank.jobs.judging.pool_wiring import pool_resources

    for engine in ("vllm", "simulated"):
        judge = {"engine": engine, "tensor_parallel_size": 2, "pipeline_parallel_size": 2}
        spec = load_spec(write_spec(tmp_path, minimal(judge=judge, pool={"num_gpus": 1})))
        r = pool_resources(spec)
        assert (spec.engine_ranks, r.ranks, r.num_gpus, r.on_head) == (4, 4, 1, False)
    on_head = load_spec(write_spec(tmp_path, minimal(pool={"on_head": True})))
    assert pool_resources(on_head).on_head is True and pool_resources(on_head).ranks == 1
    # the parallel sizes place the engine; they do not key its judgments
    plain = load_spec(write_spec(tmp_path, minimal(judge={"engine": "simulated"})))
    wide = load_spec(write_spec(tmp_path, minimal(judge={"engine": "simulated", "tensor_parallel_size": 2})))
    assert plain.judge.identity() == wide.judge.identity()


@pytest.mark.parametrize(
    ("judge", "pool", "message"),
    [
        (
            {"tensor_parallel_size": 2},
            {"num_gpus": 0.5},
            "pool.num_gpus 0.5 with an engine of 2 ranks (judge.tensor_parallel_size x pipeline_parallel_size): "
            "each rank holds one whole GPU",
        ),
        ({"pipeline_parallel_size": 2}, {"num_gpus": 2}, "pool.num_gpus 2 with an engine of 2 ranks"),
        ({"tensor_parallel_size": 0}, {}, "judge.tensor_parallel_size: Input should be greater than or equal to 1"),
        (
            {"engine_kwargs": {"tensor_parallel_size": 2}},
            {},
            "judge.engine_kwargs.tensor_parallel_size: set judge.tensor_parallel_size and "
            "judge.pipeline_parallel_size instead",
        ),
        ({"engine_kwargs": {"distributed_executor_backend": "mp"}}, {}, "judge.engine_kwargs.distributed_executor"),
    ],
)
def test_bad_parallel_settings_are_errors_naming_the_keys(tmp_path, judge, pool, message):
    msg = spec_error(write_spec(tmp_path, minimal(judge={"engine": "vllm", **judge}, pool=pool)))
    assert message in msg, msg


def test_the_vllm_engine_gets_its_parallel_sizes_and_rays_executor_on_gpus():
    from pairank.judges.engines.vllm import parallel_kwargs

    assert parallel_kwargs(VllmJudgeSpec(), on_gpus=True) == {}
    wide = VllmJudgeSpec(tensor_parallel_size=2, pipeline_parallel_size=3)
    assert parallel_kwargs(wide, on_gpus=True) == {
        "tensor_parallel_size": 2,
        "pipeline_parallel_size": 3,
        "distributed_executor_backend": "ray",
    }
    assert parallel_kwargs(wide, on_gpus=False) == {"tensor_parallel_size": 2, "pipeline_parallel_size": 3}
