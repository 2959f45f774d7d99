"""Tests of operators.calibration: Batch Calibration of p_a, on arrays and on judgments tables."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.operators.calibration import batch_calibrate, calibrate_table
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.validation import validate
from tests.operators.rows import judgment


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def biased_judge(n: int, bias: float, seed: int = 0, spread: float = 1.0) -> np.ndarray:
    """p_a of a judge that sees a symmetric quality gap (sd ``spread`` in logits) plus ``bias`` logits towards A."""
    gap = np.random.default_rng(seed).normal(0.0, spread, n)
    return sigmoid(gap + bias)


p_st = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


# --- batch_calibrate ----------------------------------------------------------------------------


@pytest.mark.parametrize("bias", [1.0, 2.0, 3.0])
def test_an_a_biased_judge_moves_most_of_the_way_to_a_half(bias: float) -> None:
    p = biased_judge(2000, bias)
    assert p.mean() > 0.65
    calibrated, prior = batch_calibrate(p)
    assert prior == pytest.approx(p.mean())
    # One pass divides out the mean, not the log-odds shift: the batch mean lands
    # near 1/2, closer the less the verdicts saturate at 0 and 1.
    assert abs(calibrated.mean() - 0.5) < 0.25 * abs(p.mean() - 0.5)


@pytest.mark.parametrize("bias", [1.0, 2.0, 3.0])
def test_an_a_biased_judge_with_unsaturated_verdicts_is_centred(bias: float) -> None:
    p = biased_judge(2000, bias, spread=0.5)
    calibrated, _ = batch_calibrate(p)
    assert abs(calibrated.mean() - 0.5) < 0.03


def test_symmetric_judge_is_nearly_unchanged() -> None:
    half = biased_judge(500, 0.0)
    p = np.concatenate([half, 1.0 - half])  # mean 0.5 up to rounding
    calibrated, prior = batch_calibrate(p)
    assert prior == pytest.approx(0.5, abs=1e-12)
    np.testing.assert_allclose(calibrated, p, atol=1e-9)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(p=st.lists(p_st, min_size=1, max_size=40))
def test_order_within_the_batch_is_kept(p) -> None:
    calibrated, _ = batch_calibrate(p)
    x = np.asarray(p)
    assert calibrated.shape == x.shape
    assert ((calibrated >= 0.0) & (calibrated <= 1.0)).all()
    less = x[:, None] < x[None, :]
    # Calibration scales every verdict's odds by one constant: p_i < p_j keeps
    # cal_i <= cal_j (up to rounding), and the ends stay where they are.
    assert (calibrated[:, None] <= calibrated[None, :] + 1e-12)[less].all()
    assert (calibrated[x == 0.0] == 0.0).all() and (calibrated[x == 1.0] == 1.0).all()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(p=st.lists(p_st.filter(lambda v: 1.0 - (1.0 - v) == v), min_size=1, max_size=40))
def test_swapping_slots_commutes_with_calibration(p) -> None:
    # Swapping every comparison maps p to 1 - p; the calibrated values follow.
    calibrated, prior = batch_calibrate(p)
    swapped, swapped_prior = batch_calibrate([1.0 - v for v in p])
    assert swapped_prior == pytest.approx(1.0 - prior, abs=1e-12)
    np.testing.assert_allclose(swapped, 1.0 - calibrated, atol=1e-9)


def test_empty_batch() -> None:
    calibrated, prior = batch_calibrate([])
    assert calibrated.shape == (0,) and prior == 0.5


@pytest.mark.parametrize("value", [0.0, 1.0])
def test_all_same_extreme_is_returned_unchanged(value: float) -> None:
    calibrated, prior = batch_calibrate([value] * 4)
    assert prior == value
    assert calibrated.tolist() == [value] * 4


@pytest.mark.parametrize(("values", "index", "found"), [([0.2, float("nan")], 1, "nan"), ([1.5, 0.2], 0, "1.5")])
def test_bad_values_are_named(values, index, found) -> None:
    with pytest.raises(ValueError, match=rf"index {index}: expected a float in \[0, 1\], found {found}"):
        batch_calibrate(values)


# --- calibrate_table ----------------------------------------------------------------------------


def judgments_table() -> pa.Table:
    coherence = biased_judge(40, 2.0, seed=1, spread=2.0)  # strongly A-biased
    fluency = biased_judge(40, -1.0, seed=2, spread=2.0)  # B-biased
    rows = [judgment(f"d{i % 4}", "coherence", f"x{i}", f"y{i}", float(p)) for i, p in enumerate(coherence)]
    rows += [judgment(f"d{i % 4}", "fluency", f"x{i}", f"y{i}", float(p)) for i, p in enumerate(fluency)]
    rows.insert(3, {**judgment("d0", "coherence", "x", "y", None, error="timeout"), "label": None})
    rows.insert(50, {**judgment("d1", "fluency", "x", "y", None, error="bad answer"), "p_a": 1.0})
    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


def test_table_keeps_columns_and_appends_prior() -> None:
    table = judgments_table()
    out = calibrate_table(table)
    assert out.column_names == [*JUDGMENTS.names, "prior_a"]
    assert out.schema.remove(out.schema.get_field_index("prior_a")).equals(JUDGMENTS, check_metadata=True)
    validate(out.drop_columns(["prior_a"]), JUDGMENTS, "calibrated")
    untouched = [c for c in JUDGMENTS.names if c not in ("p_a", "label")]
    assert out.select(untouched).equals(table.select(untouched))


def test_table_calibrates_each_aspect_on_its_own() -> None:
    table = judgments_table()
    out = calibrate_table(table).to_pylist()
    for aspect in ("coherence", "fluency"):
        before = [r["p_a"] for r in table.to_pylist() if r["aspect"] == aspect and r["error"] is None]
        rows = [r for r in out if r["aspect"] == aspect and r["error"] is None]
        expected, prior = batch_calibrate(before)
        assert [r["p_a"] for r in rows] == pytest.approx(expected.tolist())
        assert {r["prior_a"] for r in rows} == {prior}
        assert [r["label"] for r in rows] == ["A" if p > 0.5 else "B" if p < 0.5 else "tie" for p in expected]
    priors = {r["aspect"]: r["prior_a"] for r in out if r["error"] is None}
    assert priors["coherence"] > 0.6 and priors["fluency"] < 0.4


def test_error_rows_are_untouched() -> None:
    table = judgments_table()
    out = calibrate_table(table).to_pylist()
    errors = [(i, r) for i, r in enumerate(table.to_pylist()) if r["error"] is not None]
    assert len(errors) == 2
    for i, row in errors:
        assert out[i]["p_a"] == row["p_a"] and out[i]["label"] == row["label"]
        assert out[i]["prior_a"] is None


def test_groups_by_several_columns() -> None:
    table = judgments_table()
    out = calibrate_table(table, by=("context_id", "aspect")).to_pylist()
    priors = {(r["context_id"], r["aspect"], r["prior_a"]) for r in out if r["error"] is None}
    assert len(priors) == 8  # 4 contexts x 2 aspects, one prior each


def test_calibrating_twice_replaces_the_prior_column() -> None:
    once = calibrate_table(judgments_table())
    twice = calibrate_table(once)
    assert twice.column_names == once.column_names
    for aspect in ("coherence", "fluency"):
        rows = [r for r in once.to_pylist() if r["aspect"] == aspect and r["error"] is None]
        second = {r["prior_a"] for r in twice.to_pylist() if r["aspect"] == aspect and r["error"] is None}
        assert len(second) == 1
        prior = second.pop()
        assert prior == pytest.approx(np.mean([r["p_a"] for r in rows]))
        # The second pass starts nearer 1/2 than the first.
        assert abs(prior - 0.5) < abs(rows[0]["prior_a"] - 0.5)


def test_table_errors_name_the_row_and_the_columns() -> None:
    table = judgments_table()
    bad = table.set_column(
        table.schema.get_field_index("p_a"),
        table.schema.field("p_a"),
        pa.array([1.7 if i == 5 else p for i, p in enumerate(table.column("p_a").to_pylist())], pa.float64()),
    )
    with pytest.raises(ValueError, match=r"p_a at row 5: expected a float in \[0, 1\], found 1.7"):
        calibrate_table(bad)
    with pytest.raises(ValueError, match=r"missing \['error'\]"):
        calibrate_table(table.drop_columns(["error"]))


def test_empty_table() -> None:
    out = calibrate_table(JUDGMENTS.empty_table())
    assert out.num_rows == 0 and out.column_names == [*JUDGMENTS.names, "prior_a"]
