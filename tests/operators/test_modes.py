"""Judging modes without an engine: identities, keys, scores, and what the spec refuses."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.jobs.spec import JudgingSpec, SpecError, parse_spec
from pairank.operators.judges.modes import (
    expected_score,
    judging_identity,
    pair_scores_verdict,
    pass_identity,
    request_seed,
    score_options,
)

ENGINE = {"engine": "vllm", "model": "m", "revision": "r", "sampling": {"max_tokens": 1, "temperature": 0.0}}


def test_logprob_mode_keeps_the_engine_identity_so_existing_caches_stay_valid():
    assert judging_identity(ENGINE, JudgingSpec()) is ENGINE
    assert judging_identity(ENGINE, None) is ENGINE


@pytest.mark.parametrize("mode", ["generate", "sample", "prepair", "prepair_pairwise", "pointwise"])
def test_every_other_mode_and_its_settings_are_in_the_identity(mode):
    ident = judging_identity(ENGINE, JudgingSpec(mode=mode))
    assert ident["sampling"]["mode"] == mode and ident["model"] == "m"
    assert ident != ENGINE
    # a setting the mode uses changes the identity; one it ignores does not
    used = {"generate": {"retries": 3}, "sample": {"samples": 9}, "prepair": {"verdict": "generate"},
            "prepair_pairwise": {"analysis_max_tokens": 7}, "pointwise": {"tie_margin": 0.25}}[mode]  # fmt: skip
    assert judging_identity(ENGINE, JudgingSpec(mode=mode, **used)) != ident
    unused = {"scale": (1, 9)} if mode != "pointwise" else {"samples": 2}
    assert judging_identity(ENGINE, JudgingSpec(mode=mode, **unused)) == ident


def test_a_first_pass_does_not_change_with_the_verdict_settings():
    """Analyses are reused when only the verdict reading changes (logprob -> generate)."""
    a = pass_identity(ENGINE, JudgingSpec(mode="prepair"), "analysis")
    b = pass_identity(ENGINE, JudgingSpec(mode="prepair", verdict="generate", max_tokens=9), "analysis")
    assert a == b and a["sampling"]["pass"] == "analysis"
    assert pass_identity(ENGINE, JudgingSpec(mode="prepair", analysis_max_tokens=5), "analysis") != a
    assert pass_identity(ENGINE, JudgingSpec(mode="pointwise", scale=(0, 9)), "score")["sampling"]["scale"] == [0, 9]


def test_expected_score_is_the_probability_weighted_mean_of_the_score_tokens():
    lp = [math.log(p) for p in (0.1, 0.2, 0.3, 0.2, 0.2)]
    value, dist = expected_score(lp, (1, 5))
    assert value == pytest.approx(1 * 0.1 + 2 * 0.2 + 3 * 0.3 + 4 * 0.2 + 5 * 0.2)
    assert sum(dist.values()) == pytest.approx(1.0) and list(dist) == ["1", "2", "3", "4", "5"]
    # the mass outside the score tokens does not matter: only their ratios do
    shifted, _ = expected_score([x - 3.0 for x in lp], (1, 5))
    assert shifted == pytest.approx(value)
    assert score_options((0, 2)) == [["0", " 0"], ["1", " 1"], ["2", " 2"]]


@settings(max_examples=200, deadline=None)
@given(st.floats(1, 5), st.floats(1, 5), st.floats(0, 1))
def test_score_verdicts_swap_to_one_minus_p_and_ties_are_exactly_half(sa, sb, margin):
    p, label = pair_scores_verdict(sa, sb, (1, 5), margin)
    q, swapped = pair_scores_verdict(sb, sa, (1, 5), margin)
    assert 0.0 <= p <= 1.0 and p + q == pytest.approx(1.0)
    assert {label, swapped} in ({"A", "B"}, {"tie"})
    assert (label == "tie") == (abs(sa - sb) <= margin or p == 0.5)  # 0.5 + 1e-16 / 8 is 0.5: a tie
    assert label != "tie" or p == 0.5
    if label != "tie":
        assert (label == "A") == (sa > sb)


def test_request_seeds_differ_per_key_and_attempt():
    seeds = {request_seed(f"{i:08x}", 0, a) for i in range(50) for a in range(3)}
    assert len(seeds) == 150 and all(0 <= s < 2**31 for s in seeds)


def _spec(**over):
    data = {"name": "x", "input": "/in", "output": "/out", "aspects": ["coherence"], "prompts": "/p",
            "judge": {"engine": "vllm"}}  # fmt: skip
    data.update(over)
    return data


@pytest.mark.parametrize(
    "over, message",
    [
        ({"judge": {"engine": "replay", "source": "/x"}, "judging": {"mode": "generate"}}, "needs an engine that generates"),
        ({"judge": {"engine": "simulated"}, "judging": {"mode": "prepair"}}, "needs an engine that generates"),
        ({"judging": {"mode": "generate"}, "scoring": {"calibration": "batch"}}, "use calibration none"),
        ({"judging": {"mode": "pointwise"}, "scoring": {"calibration": "batch"}}, "use calibration none"),
        ({"judging": {"mode": "pointwise", "scale": [1, 10]}}, "two digits"),
        ({"judging": {"variants": ["v1", "v1"]}}, "must be unique"),
        ({"judging": {"mode": "prepare"}}, "judging.mode"),
        ({"judging": {"samples": 0}}, "judging.samples"),
        ({"judging": {"sampels": 3}}, "allowed keys here: allow_ties, analysis_max_tokens"),
    ],
)
def test_the_spec_refuses_modes_it_cannot_run(over, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(_spec(**over), "spec.yaml")


def test_prepair_with_label_probabilities_may_be_batch_calibrated():
    spec = parse_spec(_spec(judging={"mode": "prepair"}, scoring={"calibration": "batch"}), "spec.yaml")
    assert spec.judging.verdict_kind == "logprob" and spec.judging.passes == ("analysis", "pairwise")
