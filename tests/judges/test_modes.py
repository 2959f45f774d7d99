"""Judging modes without an engine: identities, keys, scores, and what the spec refuses."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.jobs.specs.job import JudgingSpec, SpecError, parse_spec
from pairank.judges.interface import Generated, GeneratingJudge
from pairank.judges.modes import (
    ModeRunner,
    expected_score,
    judging_identity,
    pair_scores_verdict,
    pass_identity,
    request_seed,
    score_options,
)
from pairank.storage.schemas import JUDGMENTS

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
    used = {
        "generate": {"retries": 3},
        "sample": {"samples": 9},
        "prepair": {"verdict": "generate"},
        "prepair_pairwise": {"analysis_max_tokens": 7},
        "pointwise": {"tie_margin": 0.25},
    }[mode]
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
    data = {
        "name": "x",
        "input": "/in",
        "output": "/out",
        "aspects": ["coherence"],
        "prompts": "/p",
        "judge": {"engine": "vllm"},
    }
    data.update(over)
    return data


@pytest.mark.parametrize(
    "over, message",
    [
        (
            {"judge": {"engine": "replay", "source": "/x"}, "judging": {"mode": "generate"}},
            "needs an engine that generates",
        ),
        ({"judge": {"engine": "simulated"}, "judging": {"mode": "prepair"}}, "needs an engine that generates"),
        ({"judging": {"mode": "generate"}, "scoring": {"calibration": "batch"}}, "use calibration none"),
        ({"judging": {"mode": "pointwise"}, "scoring": {"calibration": "batch"}}, "use calibration none"),
        ({"judging": {"mode": "pointwise", "scale": [1, 10]}}, "two digits"),
        ({"judging": {"variants": ["v1", "v1"]}}, "must be unique"),
        ({"judging": {"mode": "prepare"}}, "judging.mode"),
        ({"judging": {"samples": 0}}, "judging.samples"),
        ({"judging": {"sampels": 3}}, "allowed keys here: allow_ties, analysis_max_tokens"),
        ({"judging": {"mode": "sample", "verdict_scale": 5}}, "judging.verdict_scale 5: only mode generate"),
        ({"judging": {"mode": "prepair", "verdict": "generate", "verdict_scale": 5}}, "judging.verdict_scale 5"),
        ({"judging": {"verdict_scale": 5}}, "only mode generate has five-level verdicts, not 'logprob'"),
        ({"judging": {"mode": "generate", "verdict_scale": 4}}, r"judging.verdict_scale: Input should be 3 or 5"),
        ({"judging": {"mode": "generate", "decisive_weight": 2}}, "judging.decisive_weight weighs five-level"),
        ({"judging": {"mode": "pointwise", "decisive_weight": 4}}, "judging.decisive_weight weighs five-level"),
        ({"judging": {"mode": "generate", "verdict_scale": 5, "decisive_weight": 0.5}}, "judging.decisive_weight"),
        ({"judging": {"mode": "generate", "scale": 5}}, r"judging.scale: .*generate are judging.verdict_scale"),
    ],
)
def test_the_spec_refuses_modes_it_cannot_run(over, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(_spec(**over), "spec.yaml")


@pytest.mark.parametrize("judging", [{}, {"mode": "generate", "verdict_scale": 5, "decisive_weight": 2}])
def test_a_dumped_spec_parses_again_to_itself(judging):
    spec = parse_spec(_spec(judging=judging), "spec.yaml")
    assert parse_spec(spec.model_dump(mode="json"), "dumped") == spec


def test_prepair_with_label_probabilities_may_be_batch_calibrated():
    spec = parse_spec(_spec(judging={"mode": "prepair"}, scoring={"calibration": "batch"}), "spec.yaml")
    assert spec.judging.verdict_kind == "logprob" and spec.judging.passes == ("analysis", "pairwise")


def test_five_levels_are_in_the_generate_identity_and_the_weight_is_not():
    three = judging_identity(ENGINE, JudgingSpec(mode="generate"))
    assert "verdict_scale" not in three["sampling"]["judging"]  # judgments made before scales keep their keys
    assert judging_identity(ENGINE, JudgingSpec(mode="generate", verdict_scale=3)) == three
    five = judging_identity(ENGINE, JudgingSpec(mode="generate", verdict_scale=5))
    assert five != three and five["sampling"]["judging"] == {**three["sampling"]["judging"], "verdict_scale": 5}
    # the weight is read at scoring time: the same judgments serve any weight
    assert judging_identity(ENGINE, JudgingSpec(mode="generate", verdict_scale=5, decisive_weight=1.5)) == five
    spec = parse_spec(_spec(judging={"mode": "generate", "verdict_scale": 5}), "spec.yaml")
    assert spec.judging.decisive_weight == 3.0 and spec.judging.verdict_kind == "generate"


class Scripted(GeneratingJudge):
    """Answers each prompt with the next of its scripted texts (one per attempt)."""

    engine = "scripted"

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = {k: list(v) for k, v in answers.items()}
        self.asked: list[str] = []

    def identity(self) -> dict:
        return {"engine": "scripted", "model": "m", "revision": "r", "sampling": {}}

    def score(self, prompts):
        raise AssertionError("generate mode reads no label probabilities")

    def option_logprobs(self, prompts, options):
        raise AssertionError("generate mode reads no options")

    def generate(self, prompts, params, seeds):
        self.asked += prompts
        return [Generated([self.answers[p].pop(0)], 10, 5, 0.01) for p in prompts]


def test_generate_mode_stores_the_five_levels_as_labels_and_probabilities():
    answers = {
        "p1": ["A covers both points. [[A>>B]]"],
        "p2": ["Slightly better. [[A>B]]"],
        "p3": ["Same. [[A=B]]"],
        "p4": ["[[B>A]]"],
        "p5": ["B is far better.\n[[B>>A]]"],
        "p6": ["[[A]]", "On reflection: [[ b > a ]]"],  # a three-level marker is no verdict here: asked again
        "p7": ["[[A>B]] or [[A>>B]]", "[[B]]"],  # conflicting, then no verdict: an error row, never a guess
    }
    prompts = list(answers)
    requests = pa.table(
        {
            "key": [f"{i:08x}" for i in range(len(prompts))],
            "context_id": ["c"] * len(prompts),
            "aspect": ["a"] * len(prompts),
            "candidate_a": ["x"] * len(prompts),
            "candidate_b": ["y"] * len(prompts),
            "prompt": prompts,
            "prompt_hash": ["h"] * len(prompts),
        }
    )
    judge = Scripted(answers)
    runner = ModeRunner(judge, JudgingSpec(mode="generate", verdict_scale=5, retries=1))
    rows = runner.run("pairwise", requests)
    assert rows.schema.equals(JUDGMENTS)
    got = [(r["label"], r["p_a"]) for r in rows.to_pylist()]
    assert got == [("A", 1.0), ("A", 0.75), ("tie", 0.5), ("B", 0.25), ("B", 0.0), ("B", 0.25), (None, None)]
    last = rows.to_pylist()[-1]
    assert last["error"].startswith("no verdict after 2 answers: no verdict marker [[A>>B]], [[A>B]], [[A=B]]")
    assert runner.calls == {"pairwise": 7, "pairwise_retry": 2} and judge.asked.count("p6") == 2
    assert json.loads(rows.column("sampling")[0].as_py())["judging"]["verdict_scale"] == 5
    # three levels read the same answers as before five existed
    three = ModeRunner(Scripted({"p": ["[[A>>B]]", "[[A]]"]}), JudgingSpec(mode="generate"))
    row = three.run("pairwise", requests.slice(0, 1).set_column(5, "prompt", pa.array(["p"]))).to_pylist()[0]
    assert (row["label"], row["p_a"]) == ("A", 1.0) and "verdict_scale" not in row["sampling"]
