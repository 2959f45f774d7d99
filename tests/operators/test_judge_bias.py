"""Judge biases (operators/judge_bias.py): hand-computed length preference, self-preference and flips,
the length slope recovered from verdicts drawn with a known one, and flips of the SIMULATED judge."""

from __future__ import annotations

import datetime as dt
import itertools
import math

import numpy as np
import pyarrow as pa
import pytest
from scipy.special import expit

from pairank.judges.engines.simulated import SimulatedJudgeSpec
from pairank.judges.engines.simulated_judge import SimulatedJudge, latent_quality
from pairank.operators.judge_bias import (
    judge_bias,
    length_preference,
    logistic_fit,
    self_preference,
    slot_flips,
    wilson,
)
from pairank.operators.reports import render_markdown
from tests.operators.rows import T0, judgment


def row(
    ctx: str,
    a: str,
    b: str,
    label: str | None,
    aspect: str = "coherence",
    model: str = "m",
    prompt_hash: str = "h",
    at: int = 0,
) -> dict:
    """A judgment with ``label`` (None: an error row), made ``at`` seconds after T0."""
    p = {"A": 0.9, "B": 0.1, "tie": 0.5, None: None}[label]
    r = judgment(ctx, aspect, a, b, p, error=None if label else "timeout")
    return {
        **r,
        "model": model,
        "prompt_hash": prompt_hash,
        "label": label,
        "created_at": T0 + dt.timedelta(seconds=at),
    }


def table(rows: list[dict]) -> pa.Table:
    return pa.Table.from_pylist(rows)


def candidates(texts: dict[str, str], systems: dict[str, str] | None = None) -> pa.Table:
    ids = list(texts)
    return pa.table(
        {"candidate_id": ids, "system": [(systems or {}).get(c, c) for c in ids], "text": [texts[c] for c in ids]}
    )


# --- wilson ----------------------------------------------------------------------------------------


def test_wilson_interval_by_hand():
    # k=6, n=8, z=1.96 (z^2 = 3.8415): centre = (0.75 + 3.8415/16) / (1 + 3.8415/8) = 0.99009 / 1.48018 = 0.66890;
    # half = 1.95996 / 1.48018 * sqrt(0.75 * 0.25 / 8 + 3.8415 / 256) = 1.32414 * 0.19607 = 0.25962
    assert wilson(6, 8) == pytest.approx((0.66890 - 0.25962, 0.66890 + 0.25962), abs=1e-4)
    assert wilson(0, 0) == (None, None)
    low, high = wilson(10, 10)
    assert (low, high) == pytest.approx((10 / (10 + 3.8415), 1.0), abs=1e-4)  # k = n: low = n / (n + z^2)


# --- length preference -----------------------------------------------------------------------------


#: x and z have 10 characters, y 20: (y, x) puts the longer output in slot A (log ratio +log 2), (x, y) in slot B.
TEXTS = {"x": "a" * 10, "y": "b" * 20, "z": "c" * 10}


def length_rows() -> list[dict]:
    rows = [row(f"c{i}", "y", "x", label) for i, label in enumerate("AAAB")]  # the longer in A: A wins 3 of 4
    rows += [row(f"c{i}", "x", "y", label) for i, label in enumerate("ABBB")]  # the longer in B: A wins 1 of 4
    rows += [row("c0", "x", "z", "A"), row("c1", "x", "z", "B")]  # equal length: one each
    rows += [row("c2", "x", "z", "tie"), row("c3", "y", "x", None)]  # a tie and an error row: left out
    return rows


def test_length_preference_by_hand():
    [r] = length_preference(table(length_rows()), candidates(TEXTS)).to_pylist()
    # decisive: 8 between different lengths + 2 of equal length; the tie and the error row are left out
    assert (r["aspect"], r["judge"], r["n_decisive"], r["n_unequal"], r["n_fit"]) == ("coherence", "m@h", 10, 8, 10)
    # the longer (y) won: 3 times in slot A (label A) and 3 times in slot B (label B): 6 of 8
    assert (r["longer_won"], r["longer_share"]) == (6, 0.75)
    assert (r["longer_low"], r["longer_high"]) == pytest.approx((0.40928, 0.92852), abs=1e-4)  # wilson(6, 8) above
    # Fit: x = +log 2 (4 rows, share 3/4), -log 2 (4 rows, share 1/4), 0 (2 rows, share 1/2). The MLE matches each
    # share: b0 = 0, b1 log 2 = logit(3/4) = log 3, so b1 = log 3 / log 2 = 1.58496. Fisher information at the MLE:
    # w = p (1 - p) = 3/16 on the 8 rows at +-log 2, 1/4 at 0; I_01 = 0, I_11 = 8 (3/16) (log 2)^2 = 1.5 (log 2)^2,
    # so se(b1) = 1 / (log 2 sqrt 1.5) = 1.17796.
    assert r["length_coef"] == pytest.approx(math.log(3) / math.log(2), rel=1e-9)
    assert r["length_se"] == pytest.approx(1 / (math.log(2) * math.sqrt(1.5)), rel=1e-9)
    assert r["slot_intercept"] == pytest.approx(0.0, abs=1e-9)


def test_length_preference_leaves_an_empty_text_out_of_the_fit_only():
    rows = length_rows() + [row("c0", "w", "x", "B")]  # w is empty: x (longer) wins, so one more for the share
    [r] = length_preference(table(rows), candidates({**TEXTS, "w": ""})).to_pylist()
    assert (r["n_decisive"], r["n_unequal"], r["longer_won"], r["n_fit"]) == (11, 9, 7, 10)


def test_length_preference_without_a_finite_fit_has_a_null_slope():
    # the longer output always wins: separated by length, no finite slope; the share is still given
    rows = [row("c0", "y", "x", "A"), row("c1", "x", "y", "B"), row("c2", "y", "x", "A")]
    [r] = length_preference(table(rows), candidates(TEXTS)).to_pylist()
    assert (r["longer_share"], r["length_coef"], r["length_se"], r["slot_intercept"]) == (1.0, None, None, None)
    assert logistic_fit([0.0, 0.0, 0.0], [0, 1, 1]) is None  # one value of x only


def test_length_preference_per_aspect_and_judge_and_a_missing_candidate_is_named():
    rows = length_rows() + [row("c0", "y", "x", "A", aspect="fluency"), row("c0", "y", "x", "B", prompt_hash="h2")]
    out = length_preference(table(rows), candidates(TEXTS)).to_pylist()
    assert [(r["aspect"], r["judge"], r["n_decisive"]) for r in out] == [
        ("coherence", "m@h", 10),
        ("coherence", "m@h2", 1),
        ("fluency", "m@h", 1),
    ]
    with pytest.raises(ValueError, match="candidate_a 'q' is not in the candidates table"):
        length_preference(table([row("c0", "q", "x", "A")]), candidates(TEXTS))


def test_the_length_slope_is_recovered_from_verdicts_drawn_with_a_known_one():
    # No SIMULATED knob for length (its requests carry candidate ids, not texts): verdicts are drawn from
    # logit P(slot A wins) = 0.4 + 1.0 log(len_a / len_b), the model the fit assumes.
    gen = np.random.default_rng(7)
    n = 3000
    lengths = gen.integers(20, 400, size=2 * n)
    texts = {f"t{i}": "x" * int(k) for i, k in enumerate(lengths)}
    won = gen.random(n) < expit(0.4 + 1.0 * np.log(lengths[:n] / lengths[n:]))
    rows = [row(f"c{i}", f"t{i}", f"t{n + i}", "A" if w else "B") for i, w in enumerate(won)]
    [r] = length_preference(table(rows), candidates(texts)).to_pylist()
    assert r["length_se"] < 0.1
    assert abs(r["length_coef"] - 1.0) < 3 * r["length_se"]
    assert r["slot_intercept"] == pytest.approx(0.4, abs=0.15)
    assert r["longer_share"] > 0.6  # the longer output wins most


# --- self-preference -------------------------------------------------------------------------------


SELF_TEXTS = {"j1": "a", "o1": "b", "t1": "c", "j2": "d", "o2": "e"}
SELF_SYSTEMS = {"j1": "Judge-X", "j2": "Judge-X", "o1": "other", "o2": "other", "t1": "third"}


def test_self_preference_by_hand():
    own = {"model": "org/judge-x"}  # the judge model names system Judge-X (org prefix and case ignored)
    rows = [
        row("c1", "j1", "o1", "A", **own),
        row("c2", "o2", "j2", "B", **own),
        row("c3", "j1", "t1", "A", **own),
        row("c4", "t1", "j1", "B", **own),
        row("c5", "j2", "o2", "B", **own),  # Judge-X wins 4 of 5
        row("c6", "j1", "o1", "tie", **own),
        row("c7", "j1", "o1", None, **own),  # a tie, an error: left out
        row("c8", "o1", "t1", "A", **own),  # Judge-X not in it
        row("c9", "j1", "j2", "A", **own),  # Judge-X against itself: not a comparison with another system
    ]
    other = {"model": "/m/another"}
    rows += [
        row("c1", "j1", "o1", "A", **other),
        row("c2", "o1", "j1", "A", **other),
        row("c3", "o1", "j1", "A", **other),
        row("c4", "j2", "o2", "B", **other),
    ]  # Judge-X wins 1 of 4 under the other judge
    [r] = self_preference(table(rows), candidates(SELF_TEXTS, SELF_SYSTEMS)).to_pylist()
    assert (r["aspect"], r["system"], r["judge_model"], r["n"], r["wins"]) == (
        "coherence",
        "Judge-X",
        "org/judge-x",
        5,
        4,
    )
    assert r["share"] == 0.8
    # wilson(4, 5): centre (0.8 + 0.38415) / 1.76830 = 0.66966, half 1.10838 * sqrt(0.032 + 0.038415) = 0.29412
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((0.37553, 0.96378), abs=1e-4)
    assert (r["others_n"], r["others_share"]) == (4, 0.25)


def test_self_preference_is_not_applicable_when_no_judge_model_is_a_system():
    rows = [row("c1", "j1", "o1", "A"), row("c2", "o1", "j1", "B")]
    section = judge_bias(table(rows), candidates(SELF_TEXTS, SELF_SYSTEMS))
    assert section["self_preference"] == [] and section["judge_models"] == ["m"]


# --- flips when the slots swap ---------------------------------------------------------------------


def flip_rows() -> list[dict]:
    return [
        row("c", "p", "q", "A"),
        row("c", "q", "p", "B"),  # p wins both: consistent
        row("c", "p", "r", "A"),
        row("c", "r", "p", "A"),  # slot A wins both: a flip
        row("c", "q", "r", "B"),
        row("c", "r", "q", "tie"),  # both orders, not decisive in both
        row("c", "p", "s", "A"),  # one order only
        row("c", "q", "s", "A", at=1),
        row("c", "q", "s", "B", at=2),
        row("c", "s", "q", "A"),  # newest (q, s): B,
        # so s wins both: consistent (the older A would have been a flip)
        row("c", "r", "s", None),
        row("c", "s", "r", "A"),  # an error row is no verdict: one order only
        row("c", "s", "p", "A", prompt_hash="h2"),  # another judge: never paired with m@h's (p, s)
        row("c", "p", "q", "A", aspect="fluency"),
        row("c", "q", "p", "A", aspect="fluency"),  # a flip in fluency
    ]


def test_flips_by_hand():
    out = {(r["aspect"], r["judge"]): r for r in slot_flips(table(flip_rows())).to_pylist()}
    assert set(out) == {("coherence", "m@h"), ("fluency", "m@h")}  # m@h2 has no pair in both orders
    r = out[("coherence", "m@h")]
    # pairs in both orders: {p,q}, {p,r}, {q,r}, {q,s}; decisive in both: {p,q}, {p,r}, {q,s}; flips: {p,r}
    assert (r["n_pairs"], r["n_decisive"], r["flips"]) == (4, 3, 1)
    assert r["flip_rate"] == pytest.approx(1 / 3)
    # wilson(1, 3): centre (1/3 + 0.64025) / 2.28049 = 0.42692, half 0.85945 * sqrt(0.07407 + 0.10671) = 0.36543
    assert (r["ci_low"], r["ci_high"]) == pytest.approx((0.06149, 0.79234), abs=1e-4)
    assert (out[("fluency", "m@h")]["flips"], out[("fluency", "m@h")]["flip_rate"]) == (1, 1.0)


def simulated_full_matrix(spec: SimulatedJudgeSpec, ids: list[str], contexts: int) -> pa.Table:
    pairs = [(f"ctx{c}", a, b) for c in range(contexts) for a, b in itertools.permutations(ids, 2)]
    requests = pa.table(
        {
            "key": [f"{c}|{a}|{b}" for c, a, b in pairs],
            "context_id": [c for c, _, _ in pairs],
            "aspect": ["coherence"] * len(pairs),
            "candidate_a": [a for _, a, _ in pairs],
            "candidate_b": [b for _, _, b in pairs],
            "prompt": [""] * len(pairs),
            "prompt_hash": ["h"] * len(pairs),
        }
    )
    return SimulatedJudge(spec).judge(requests)


def test_flips_of_the_simulated_judge_follow_its_position_bias():
    ids, contexts = [f"x{i}" for i in range(6)], 20
    unbiased = SimulatedJudgeSpec(seed=3, scale=2.0, noise=0.0, position_bias=0.0)
    [r] = slot_flips(simulated_full_matrix(unbiased, ids, contexts)).to_pylist()
    assert (r["n_pairs"], r["n_decisive"], r["flips"]) == (15 * contexts, 15 * contexts, 0)  # p(b, a) = 1 - p(a, b)
    # Without noise, logit(a, b) = 2 (q_a - q_b) + 1 and logit(b, a) = -2 (q_a - q_b) + 1: slot A wins both orders
    # exactly when |2 (q_a - q_b)| < 1.
    biased = SimulatedJudgeSpec(seed=3, scale=2.0, noise=0.0, position_bias=1.0)
    [r] = slot_flips(simulated_full_matrix(biased, ids, contexts)).to_pylist()
    q = {(c, i): latent_quality(3, f"ctx{c}", i) for c in range(contexts) for i in ids}
    want = sum(abs(2 * (q[c, a] - q[c, b])) < 1 for c in range(contexts) for a, b in itertools.combinations(ids, 2))
    assert 0 < r["flips"] == want < r["n_decisive"]


# --- the report ------------------------------------------------------------------------------------


def test_the_report_renders_the_judge_bias_section():
    section = {
        **judge_bias(table(length_rows()), candidates(TEXTS)),
        "flips": slot_flips(table(flip_rows())).to_pylist(),
    }
    report = {
        "name": "bias",
        "settings": {
            "judge": {"engine": "replay", "model": "m"},
            "aspects": ["coherence"],
            "scheduler": {"name": "full"},
            "scoring": {"verdicts": ["hard"]},
            "input": "in",
        },
        "counts": {
            "contexts": 1,
            "candidates": 7,
            "requests": 1,
            "cached": 0,
            "judged_now": 1,
            "judgments": 1,
            "with_verdict": 1,
        },
        "cost": {"input_tokens": 0, "output_tokens": 0, "engine_seconds": 0.0, "wall_seconds": 0.0},
        "spearman": [],
        "position_bias": [],
        "failures": [],
        "judge_bias": section,
    }
    text = render_markdown(report)
    assert "## Judge bias" in text and "### Length preference" in text and "### Flips when the slots swap" in text
    assert "| m@h | coherence | 10 | 8 | 6 | 0.750 [0.409, 0.929] | +1.585 ± 1.178 | +0.000 |" in text
    assert "Not applicable: no judge model (m) is a system of the candidates." in text
    assert "| m@h | coherence | 4 | 3 | 1 | 0.333 [0.061, 0.792] |" in text
    assert text.index("## Position bias") < text.index("## Judge bias") < text.index("## Failures")
