"""Length-controlled win rates and style-controlled Bradley-Terry (issue 18 item 1) on judgments drawn from a
known model: a judge that prefers longer outputs, with verbose systems that are not the better ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from pairank.operators.style_control import length_controlled_winrates, style_controlled_bt
from tests.operators.style_world import QUALITY, rho, world


def test_length_controlled_win_rates_see_through_a_length_biased_judge():
    cands, judged = world(length_bias=1.5, seed=1)
    table = length_controlled_winrates(judged, cands, baseline="S2").to_pylist()
    by = {r["system"]: r for r in table}
    assert set(by) == set(QUALITY) - {"S2"} and all(r["n"] == 2 * 150 for r in table)
    raw = {s: r["win_rate"] for s, r in by.items()} | {"S2": 0.5}
    lc = {s: r["lc_win_rate"] for s, r in by.items()} | {"S2": 0.5}
    assert rho(raw) < 0 < 0.8 <= rho(lc)  # the verbose weak systems lead the raw win rates, not the controlled
    assert all(r["length_coef"] > 0 for r in table)  # the longer output wins more
    assert len({(r["length_coef"], r["length_se"]) for r in table}) == 1  # the judge's, one for every system
    assert all(r["lc_low"] < r["lc_win_rate"] < r["lc_high"] for r in table)
    # adding or removing another system moves a system's numbers only through the judge's shared length term
    fewer = judged.filter(pa.compute.invert(pa.compute.match_substring(judged.column("candidate_a"), "/S5")))
    fewer = fewer.filter(pa.compute.invert(pa.compute.match_substring(fewer.column("candidate_b"), "/S5")))
    again = {r["system"]: r for r in length_controlled_winrates(fewer, cands, baseline="S2").to_pylist()}
    assert again["S1"]["win_rate"] == by["S1"]["win_rate"]
    assert again["S1"]["lc_win_rate"] == pytest.approx(by["S1"]["lc_win_rate"], abs=0.05)  # its coefficient and scale
    assert again["S1"]["n"] == by["S1"]["n"] and "S5" not in again


def test_without_a_length_bias_the_control_changes_little():
    cands, judged = world(length_bias=0.0, seed=2)
    for r in length_controlled_winrates(judged, cands, baseline="S0").to_pylist():
        assert abs(r["length_coef"]) < 3 * r["length_se"] + 0.2


def test_systems_each_judged_in_one_slot_order_have_no_slot_term_to_confound():
    """x is always slot A against the baseline, y always slot B: a slot term would be x's strength minus y's, so
    it is left out (kept, its ridge alone would bound it and the strengths' intervals would be unbounded)."""
    from pairank.operators.battles import length_controlled

    rng = np.random.default_rng(0)
    n = 200
    winner = [["model_a", "model_b", "tie"][k] for k in rng.choice(3, size=2 * n, p=[0.45, 0.45, 0.1])]
    t = {
        "model_a": ["x"] * n + ["base"] * n,
        "model_b": ["base"] * n + ["y"] * n,
        "winner": winner,
        "length_a": rng.integers(100, 900, 2 * n).tolist(),
        "length_b": rng.integers(100, 900, 2 * n).tolist(),
    }
    rows = {r["system"]: r for r in length_controlled(t, "base").to_pylist()}
    for r in rows.values():
        assert r["lc_win_rate"] is not None and r["lc_high"] - r["lc_low"] < 0.2


def test_style_controlled_bt_recovers_quality_and_the_length_coefficient():
    cands, judged = world(length_bias=1.5, seed=3, markdown=True)
    strengths, coefs = style_controlled_bt(judged, cands)
    by = {r["system"]: r["strength"] for r in strengths.to_pylist()}
    raw = dict(zip(*win_ratios_by_system(judged, cands)))
    assert rho(raw) < 0 and rho(by) == pytest.approx(1.0)
    assert strengths.column("rank").to_pylist() == [1, 2, 3, 4, 5, 6]
    assert sum(by.values()) == pytest.approx(0.0, abs=1e-9)
    c = {r["feature"]: r for r in coefs.to_pylist()}
    assert set(c) == {"length", "headers", "bold", "lists", "slot_a"}
    # the bias put in: 1.5 per unit of log length ratio (the bold spans add a little length); 0.8 on bold
    assert abs(c["length"]["coef"] - 1.5) < 0.25 and c["length"]["coef"] > 10 * c["length"]["se"]
    assert abs(c["bold"]["coef"] - 0.8) < 3 * c["bold"]["se"] and c["bold"]["coef"] > 3 * c["bold"]["se"]
    assert c["headers"]["coef"] == pytest.approx(0.0, abs=1e-3)  # no output has one: nothing to fit


def win_ratios_by_system(judged: pa.Table, cands: pa.Table):
    system = dict(zip(cands.column("candidate_id").to_pylist(), cands.column("system").to_pylist()))
    wins: dict[str, list[float]] = {}
    for a, b, label in zip(*(judged.column(c).to_pylist() for c in ("candidate_a", "candidate_b", "label"))):
        wins.setdefault(system[a], []).append(label == "A")
        wins.setdefault(system[b], []).append(label == "B")
    return list(wins), [float(np.mean(v)) for v in wins.values()]


def test_errors_and_unknown_baselines():
    cands, judged = world(length_bias=0.0, seed=4, contexts=3)
    with pytest.raises(ValueError, match="baseline 'nobody' is not a system"):
        length_controlled_winrates(judged, cands, baseline="nobody")
    failed = judged.set_column(judged.schema.get_field_index("error"), "error", pa.array(["boom"] * judged.num_rows))
    with pytest.raises(ValueError, match="at least two systems"):
        style_controlled_bt(failed, cands)
    assert length_controlled_winrates(failed, cands, baseline="S0").num_rows == 0


def test_the_report_section_per_aspect():
    from pairank.operators.reports import style_control_lines
    from pairank.operators.style_control import style_control_section

    cands, judged = world(length_bias=1.5, seed=5, contexts=40)
    sections = style_control_section(judged, cands, baseline="S2")
    (s,) = sections
    assert s["aspect"] == "overall" and [r["rank"] for r in s["strengths"]] == [1, 2, 3, 4, 5, 6]
    assert {r["system"] for r in s["length_controlled"]} == set(QUALITY) - {"S2"}
    text = "\n".join(style_control_lines(sections))
    assert "## Style control" in text and "length-controlled" in text and "length +" in text
    assert "length_controlled" not in style_control_section(judged, cands, baseline=None)[0]
    assert style_control_section(judged.slice(0, 0), cands) == [] and style_control_lines([]) == []


def test_pairank_winrate_prints_and_writes_the_style_control(tmp_path, capsys):
    import json

    from pairank.jobs.cli.main import main
    from pairank.storage.fs import Location
    from pairank.storage.schemas import CANDIDATES, JUDGMENTS

    cands, judged = world(length_bias=1.5, seed=6, contexts=20)
    folder = Location.of(str(tmp_path / "in"))
    folder.join("candidates.parquet").write_parquet(cands.select(CANDIDATES.names).cast(CANDIDATES))
    n = judged.num_rows
    full = {name: judged.column(name) if name in judged.column_names else None for name in JUDGMENTS.names}
    rows = pa.table(
        {
            **{k: v for k, v in full.items() if v is not None},
            "key": [f"k{i}" for i in range(n)],
            "engine": ["replay"] * n,
            "model": ["m"] * n,
            "revision": [""] * n,
            "prompt_hash": ["h"] * n,
            "sampling": ["{}"] * n,
            "logprob_a": pa.nulls(n, pa.float64()),
            "logprob_b": pa.nulls(n, pa.float64()),
            "raw_text": pa.nulls(n, pa.string()),
            "input_tokens": [0] * n,
            "output_tokens": [0] * n,
            "seconds": [0.0] * n,
            "error": pa.nulls(n, pa.string()),
            "created_at": pa.array([0] * n, pa.timestamp("us", tz="UTC")),
        }
    )
    folder.join("judgments.parquet").write_parquet(rows.select(JUDGMENTS.names).cast(JUDGMENTS))
    assert (
        main(
            [
                "winrate",
                "--input",
                folder.uri,
                "--baseline",
                "S2",
                "--methods",
                "observed",
                "--out",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "## Style control" in printed and "length-controlled" in printed
    written = json.loads((tmp_path / "out" / "style_control.json").read_text())
    assert [s["aspect"] for s in written] == ["overall"] and len(written[0]["length_controlled"]) == 5


def test_a_judge_that_always_picks_slot_a_is_not_identified():
    from pairank.operators.reports import style_control_lines
    from pairank.operators.style_control import style_control_section

    cands, judged = world(length_bias=0.0, seed=7, contexts=10)
    always_a = judged.set_column(judged.schema.get_field_index("label"), "label", pa.array(["A"] * judged.num_rows))
    (s,) = style_control_section(always_a, cands, baseline="S2")
    assert "separated" in s["not_identified"] and "strengths" not in s
    assert "not identified (the outcomes are separated" in "\n".join(style_control_lines([s]))
    lc = length_controlled_winrates(always_a, cands, baseline="S2").to_pylist()
    assert all(r["lc_win_rate"] is None and r["win_rate"] == 0.5 for r in lc)  # each system in slot A half the time
