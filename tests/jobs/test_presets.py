"""The presets of configs/presets/ end to end: outputs in the benchmark's format imported, a run with the
SIMULATED judge, and a leaderboard, locally and on S3.

The SIMULATED judge answers the logprob mode only, so the presets whose protocol asks for a generated verdict
(arena-hard: five levels; mt-bench-pairwise: three) run here with ``judging.mode: logprob`` in its place; all else
(scheduler, baseline, both orders, categories, conversations) is the preset's own, and the preset itself is
validated as written.
"""

from __future__ import annotations

import pytest
import yaml

from pairank.jobs.leaderboard import build_leaderboard
from pairank.jobs.run import run
from pairank.jobs.specs.job import load_spec, parse_spec
from pairank.storage.fs import Location
from pairank.storage.importers.outputs import import_outputs
from tests import formats as F
from tests.helpers import ROOT

PRESETS = ROOT / "configs" / "presets"


def _spec(name: str, input_uri: str, output: str, baseline: str | None) -> dict:
    data = yaml.safe_load((PRESETS / f"{name}.yaml").read_text())
    data["input"], data["output"] = input_uri, output
    data["prompts"] = str(ROOT / "configs" / "prompts" / "assistant")
    data["judge"] = {"engine": "simulated", "seed": 1, "noise": 0.3}
    data["judging"] = {"mode": "logprob"}  # the SIMULATED judge answers logprob only
    data["pool"] = {"size": 1, "num_cpus": 1, "batch_size": 64}
    data["report"] = {"bootstrap": 0}
    if baseline:
        data["scheduler"]["baseline"] = baseline
    return data


def test_every_preset_is_a_valid_spec():
    for path in sorted(PRESETS.glob("*.yaml")):
        spec = load_spec(path)
        assert spec.name == path.stem and spec.aspects == ["helpfulness"]
    assert load_spec(PRESETS / "arena-hard.yaml").judging.verdict_scale == 5
    assert load_spec(PRESETS / "alpacaeval2.yaml").scheduler.name == "one_vs_n"


@pytest.mark.parametrize(
    "preset, fmt, write, where",
    [
        ("alpacaeval2", "alpaca-eval", F.alpaca_eval, "local"),
        ("arena-hard", "arena-hard", F.arena_hard_v2, "local"),
        ("mt-bench-pairwise", "mt-bench", F.mt_bench, "local"),
        ("arena-hard", "arena-hard", F.arena_hard_v01, "s3"),
        ("alpacaeval2", "alpaca-eval", F.alpaca_eval, "s3"),
        ("mt-bench-pairwise", "mt-bench", F.mt_bench, "s3"),
    ],
)
def test_import_run_and_leaderboard(tmp_path, ray_local, preset, fmt, write, where):
    made = write(tmp_path / "src", n=4)
    sources = [str(p) for p in made] if isinstance(made, list) else [str(made)]
    root = str(tmp_path / "store") if where == "local" else f"s3://pairank/presets/{preset}-{fmt}"
    input_uri = f"{root}/inputs/{preset}"
    import_outputs(fmt, sources, input_uri)
    baseline = "base" if preset != "mt-bench-pairwise" else None
    spec = parse_spec(_spec(preset, input_uri, root, baseline), f"{preset} (test)")
    result = run(spec)
    assert result.errors == 0 and result.judged > 0
    board = build_leaderboard(root, n_boot=20, baseline=baseline)
    systems = {r["system"] for r in board.table.read_parquet().to_pylist() if r["aspect"] == "overall"}
    assert systems == set(F.SYSTEMS)
    doc = board.json.read_json()
    if preset == "arena-hard" and write is F.arena_hard_v2:
        assert {c["category"] for c in doc["categories"]} == {"hard_prompt", "creative_writing"}
    if preset == "alpacaeval2":
        rows = [r for r in doc["rows"] if r["aspect"] == "overall" and r["system"] != "base"]
        assert all(r["style_status"] for r in rows)
    if preset == "mt-bench-pairwise":
        contexts = {
            r["context_id"] for r in Location.of(input_uri).join("candidates.parquet").read_parquet().to_pylist()
        }
        assert {c.split("/")[1] for c in contexts} == {"turn1", "turn2"}
        assert doc["counts"]["overall"]["contexts"] == len(contexts)


def test_the_prompts_show_conversations_turn_by_turn(tmp_path):
    """What a judge reads of an MT-Bench second turn: both questions, then each side's two replies, the second
    marked; and the reference answer after the context."""
    from pairank.jobs.judging.requests import build_requests
    from pairank.judges.prompts import load_prompts
    from pairank.storage.inputs import read_candidates

    import_outputs("mt-bench", [str(F.mt_bench(tmp_path / "mt", n=2))], str(tmp_path / "in"))
    cands = read_candidates(Location.of(str(tmp_path / "in")))
    prompts = load_prompts(ROOT / "configs" / "prompts" / "assistant", ["helpfulness"])
    reqs = build_requests(cands, ["helpfulness"], prompts, "full", None, 0, {"engine": "simulated"})
    prompt = next(r["prompt"] for r in reqs.to_pylist() if r["context_id"] == "82/turn2")
    assert prompt.index("User, turn 1:") < prompt.index("User, turn 2:") < prompt.index("Reference answer")
    assert prompt.count("Reply to turn 1:") == 2 and prompt.count("(the reply to judge)") == 2
    first = next(r["prompt"] for r in reqs.to_pylist() if r["context_id"] == "82/turn1")
    assert "Reply to turn" not in first and "User, turn" not in first  # one question: its text, as before
