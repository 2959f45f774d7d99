"""Win rates against a baseline in a real run: one_vs_n requests on local Ray, then every estimator.

The judge is the SIMULATED engine with its latent quality taken from the SummEval
human scores, a position bias and noise, so the judge is imperfect in a known way
and the human truth is the input's own scores.
"""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from pairank.jobs.run import run_job
from pairank.jobs.specs.job import SpecError, parse_spec
from pairank.storage.schemas import WINRATE_JUDGES, WINRATES
from pairank.storage.validation import validate
from tests.helpers import ROOT, write_input

PROMPTS = str(ROOT / "configs/prompts/summarization")


def spec_for(input_folder, output, **over) -> dict:
    spec = {
        "name": "winrate",
        "input": input_folder.uri,
        "output": str(output),
        "aspects": ["coherence"],
        "prompts": PROMPTS,
        "judge": {
            "engine": "simulated",
            "seed": 2,
            "quality": input_folder.join("human_scores.parquet").uri,
            "scale": 2.0,
            "noise": 0.5,
            "position_bias": 0.8,
        },
        "scheduler": {"name": "one_vs_n", "baseline": "M11"},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 64},
        "report": {"bootstrap": 0},
        "winrate": {
            "systems": ["M23", "M8"],
            "prior": "in_dist",
            "gold_fraction": 0.5,
            "draws": 2000,
            "dawid_skene": {"draws": 1000, "tune": 1000, "ess_min": 400},
        },
        "flush_rows": 256,
    }
    for key, value in over.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


def test_one_vs_n_run_writes_win_rates_for_every_method(tmp_path, summeval_tables, ray_local):
    folder = write_input(tmp_path / "input", summeval_tables, 24, None)
    systems = sorted(set(pq.read_table(folder.join("candidates.parquet").path).column("system").to_pylist()))
    assert "M11" in systems and {"M23", "M8"} <= set(systems)
    spec = parse_spec(spec_for(folder, tmp_path / "out"), "test")
    result = run_job(spec)
    # one_vs_n: every other system against the baseline, both orders, in every context that has both.
    assert result.requests == result.judged == 24 * (len(systems) - 1) * 2

    run = tmp_path / "out/runs/winrate"
    rates = validate(pq.read_table(run / "winrates.parquet"), WINRATES, "winrates").to_pylist()
    judges = validate(pq.read_table(run / "winrate_judges.parquet"), WINRATE_JUDGES, "judges").to_pylist()
    assert {r["system"] for r in rates} == {"M23", "M8"} and {r["baseline"] for r in rates} == {"M11"}
    for system in ("M23", "M8"):
        mine = {(r["method"], r["judge"]): r for r in rates if r["system"] == system}
        judge = judges[0]["judge"]
        assert judge.startswith("simulated@")
        assert set(mine) == {("human", ""), ("observed", judge), ("observed", "*"), ("bwrs", "*"), ("dawid_skene", "*")}
        human = mine[("human", "")]
        assert human["n_gold"] > 12 and human["status"] == "ok"
        bw = mine[("bwrs", "*")]
        assert bw["prior"] == "in_dist" and bw["status"].startswith("ok") and 0 < bw["n_gold"] < human["n_gold"]
        assert bw["ci_low"] <= bw["estimate"] <= bw["ci_high"] and bw["draws_kept"] > 0
        ds = mine[("dawid_skene", "*")]
        assert ds["rhat"] is not None and ds["ess_bulk"] is not None
        if ds["status"].startswith("ok"):
            assert ds["ci_low"] <= ds["estimate"] <= ds["ci_high"]
        else:
            assert ds["estimate"] is None and "refused" in ds["status"]
    assert {j["system"] for j in judges} == {"M23", "M8"}
    assert all(j["n_votes"] == 24 and j["n_q0"] + j["n_q1"] > 0 for j in judges)

    report = (run / "report.md").read_text()
    assert "## Win rates against the baseline" in report and "| coherence | M23 | M11 | bwrs | in_dist |" in report

    # A second run is answered from the cache and gives the same votes.
    again = run_job(spec)
    assert again.judged == 0 and again.cached == result.requests
    rates2 = pq.read_table(run / "winrates.parquet").to_pylist()
    assert [r["estimate"] for r in rates2 if r["method"] == "observed"] == [
        r["estimate"] for r in rates if r["method"] == "observed"
    ]


def test_winrate_spec_errors_name_the_missing_baseline(tmp_path):
    folder = tmp_path / "in"
    base = {
        "name": "x",
        "input": str(folder),
        "output": str(tmp_path),
        "aspects": ["coherence"],
        "prompts": PROMPTS,
        "judge": {"engine": "simulated"},
    }
    with pytest.raises(SpecError, match="one_vs_n needs `baseline`"):
        parse_spec({**base, "scheduler": {"name": "one_vs_n"}}, "spec.yaml")
    with pytest.raises(SpecError, match="winrate needs a baseline"):
        parse_spec({**base, "winrate": {}}, "spec.yaml")
    with pytest.raises(SpecError, match="prior ood needs `ood`"):
        parse_spec({**base, "winrate": {"baseline": "M0", "prior": "ood"}}, "spec.yaml")


def test_an_unknown_baseline_lists_the_systems(tmp_path, summeval_tables, ray_local):
    folder = write_input(tmp_path / "input", summeval_tables, 2, 3)
    spec = parse_spec(spec_for(folder, tmp_path / "out", scheduler={"baseline": "nobody"}), "test")
    with pytest.raises(ValueError, match="no candidate of baseline system 'nobody'; systems: M"):
        run_job(spec)
