"""`pairank winrate` on the published LLMBar verdicts: many judges, real labels, no engine.

As in Gao et al. (2024), the human-preferred output of 80% of the pairs is
attributed to a simulated generator A and the rest to B, so A's true win rate
against B is 0.8; each published (LLM, prompting mode) is one judge.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq

from pairank.jobs.cli.main import main
from pairank.storage.fs import Location
from pairank.storage.importers.llmbar import attribute_generators
from pairank.storage.schemas import WINRATES
from pairank.storage.validation import validate


def test_winrate_cli_corrects_the_published_judges_toward_the_true_rate(tmp_path, shared_data, capsys):
    data = tmp_path / "natural"
    assert main(["import", "llmbar", str(shared_data / "llmbar/LLMBar/Natural"), str(data)]) == 0
    folder = Location.of(str(data))
    cands = attribute_generators(
        folder.join("candidates.parquet").read_parquet(), folder.join("pairwise_labels.parquet").read_parquet(), 0.8, 0
    )
    folder.join("candidates.parquet").write_parquet(cands)
    capsys.readouterr()

    out = tmp_path / "out"
    argv = [
        "winrate",
        "--input",
        str(data),
        "--baseline",
        "B",
        "--prior",
        "in_dist",
        "--gold-fraction",
        "1.0",
        "--methods",
        "human",
        "observed",
        "bwrs",
        "dawid_skene_em",
        "--out",
        str(out),
        "--json",
    ]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    rows = validate(pq.read_table(out / "winrates.parquet"), WINRATES, "winrates").to_pylist()
    assert printed["winrates"] == json.loads(json.dumps(rows, default=str))

    human = next(r for r in rows if r["method"] == "human")
    assert human["system"] == "A" and human["n_gold"] == 100
    assert abs(human["estimate"] - 81 / 102) < 1e-12  # Beta(1 + 80, 1 + 20)
    observed = [r for r in rows if r["method"] == "observed" and r["judge"] != "*"]
    assert len(observed) == len(printed["judges"]) > 20  # one row per published (LLM, mode)
    assert {"GPT-4/Vanilla", "ChatGPT/CoT"} <= {r["judge"] for r in observed}
    observed_error = np.mean([abs(r["estimate"] - 0.8) for r in observed])
    bwrs = next(r for r in rows if r["method"] == "bwrs")
    assert bwrs["status"].startswith("ok") and bwrs["n_gold"] == 100
    # With every label known, BWRS lands much closer to the truth than the judges' raw rates.
    assert abs(bwrs["estimate"] - 0.8) < 0.5 * observed_error
    assert bwrs["ci_low"] <= 0.8 <= bwrs["ci_high"]
    em = next(r for r in rows if r["method"] == "dawid_skene_em")
    assert 0 < em["estimate"] < 1


def test_winrate_cli_names_an_unknown_baseline(tmp_path, shared_data, capsys):
    data = tmp_path / "mt"
    assert main(["import", "llmbar", str(shared_data / "llmbar/Processed/MT-Bench"), str(data)]) == 0
    capsys.readouterr()
    assert main(["winrate", "--input", str(data), "--baseline", "nobody", "--methods", "observed"]) == 2
    assert "winrate.baseline 'nobody' is not a system of the input; systems: output_1, output_2" in (
        capsys.readouterr().err
    )


def test_winrate_cli_takes_ood_accuracies_from_another_labelled_set(tmp_path, shared_data, capsys):
    natural, mt = tmp_path / "natural", tmp_path / "mt"
    assert main(["import", "llmbar", str(shared_data / "llmbar/LLMBar/Natural"), str(natural)]) == 0
    assert main(["import", "llmbar", str(shared_data / "llmbar/Processed/MT-Bench"), str(mt)]) == 0
    capsys.readouterr()
    argv = [
        "winrate",
        "--input",
        str(natural),
        "--baseline",
        "output_2",
        "--prior",
        "ood",
        "--ood",
        str(mt),
        "--methods",
        "human",
        "bwrs",
        "--json",
    ]
    assert main(argv) == 0
    rows = json.loads(capsys.readouterr().out)["winrates"]
    bwrs = next(r for r in rows if r["method"] == "bwrs")
    # MT-Bench has 4 LLMs x 2 modes; those 8 judges also judged Natural, the others have no ood accuracies.
    assert bwrs["prior"] == "ood" and bwrs["n_judges"] == 8 and bwrs["n_gold"] == 200
    assert "judge(s) without ood accuracies left out" in bwrs["status"]
    assert bwrs["estimate"] is not None and bwrs["ci_low"] < bwrs["ci_high"]
