"""Tests of operators.transitivity: cyclic triads of judge preferences, and seed spread."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.operators.reports import spearman_table
from pairank.operators.transitivity import (
    TRIADS,
    cyclic_triads,
    intransitive_triads,
    seed_spread,
    spearman_by_seed,
)
from pairank.storage.schemas import HUMAN_SCORES, JUDGMENTS, RANKINGS
from tests.operators.rows import judgment as row


def judgment(ctx: str, a: str, b: str, p: float | None, aspect: str = "coherence", error: str | None = None) -> dict:
    return row(ctx, aspect, a, b, p, error)


def full_matrix(ctx: str, better: dict[tuple[str, str], float], **kw) -> list[dict]:
    """Both slot orders of every pair; ``better[(a, b)]`` is the judge's P(a beats b), read without slot bias."""
    rows = []
    for (a, b), q in better.items():
        rows += [judgment(ctx, a, b, q, **kw), judgment(ctx, b, a, 1.0 - q, **kw)]
    return rows


def brute_force(prefs: np.ndarray) -> int:
    """Cycles by definition: triads where one of the two orientations goes all the way round."""
    n = len(prefs)
    count = 0
    for i, j, k in itertools.combinations(range(n), 3):
        if (prefs[i, j] > 0 and prefs[j, k] > 0 and prefs[k, i] > 0) or (
            prefs[j, i] > 0 and prefs[k, j] > 0 and prefs[i, k] > 0
        ):
            count += 1
    return count


@st.composite
def preference_matrices(draw, ties: bool):
    n = draw(st.integers(0, 9))
    signs = st.sampled_from([-1, 0, 1] if ties else [-1, 1])
    prefs = np.zeros((n, n), dtype=int)
    for i, j in itertools.combinations(range(n), 2):
        prefs[i, j] = draw(signs)
        prefs[j, i] = -prefs[i, j]
    return prefs


# --- cyclic_triads ------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, derandomize=True)
@given(prefs=preference_matrices(ties=False))
def test_win_count_formula_equals_enumeration(prefs) -> None:
    n = len(prefs)
    wins = (prefs > 0).sum(axis=1)
    formula = math.comb(n, 3) - sum(math.comb(int(w), 2) for w in wins)
    assert cyclic_triads(prefs) == formula == brute_force(prefs)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(prefs=preference_matrices(ties=True))
def test_with_ties_cycles_are_enumerated(prefs) -> None:
    assert cyclic_triads(prefs) == brute_force(prefs)
    assert 0 <= cyclic_triads(prefs) <= math.comb(len(prefs), 3)


def test_formula_would_be_wrong_with_ties() -> None:
    # a = b = c all tied: no cycle, but C(3, 3) - sum C(0, 2) would say 1.
    assert cyclic_triads(np.zeros((3, 3), dtype=int)) == 0


# --- intransitive_triads ------------------------------------------------------------------------


def test_three_cycle_is_one_of_one() -> None:
    rows = full_matrix("d1", {("a", "b"): 0.8, ("b", "c"): 0.7, ("c", "a"): 0.9})
    out = intransitive_triads(pa.Table.from_pylist(rows, schema=JUDGMENTS))
    assert out.schema.equals(TRIADS)
    assert out.to_pylist() == [
        {"context_id": "d1", "aspect": "coherence", "n_candidates": 3, "triads": 1, "intransitive": 1, "fraction": 1.0}
    ]


def test_transitive_five_gives_zero() -> None:
    order = ["e", "c", "a", "d", "b"]
    better = {(x, y): 0.6 + 0.05 * (j - i) for (i, x), (j, y) in itertools.combinations(enumerate(order), 2)}
    out = intransitive_triads(pa.Table.from_pylist(full_matrix("d1", better), schema=JUDGMENTS)).to_pylist()
    assert out == [
        {"context_id": "d1", "aspect": "coherence", "n_candidates": 5, "triads": 10, "intransitive": 0, "fraction": 0.0}
    ]


def slot_biased(truth: dict[tuple[str, str], float], bias: float = 0.3) -> pa.Table:
    """Both orders of every pair from a judge that adds ``bias`` to slot A (capped at 1)."""
    rows = []
    for (a, b), q in truth.items():
        rows += [judgment("d1", a, b, min(q + bias, 1.0)), judgment("d1", b, a, min(1.0 - q + bias, 1.0))]
    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


def test_symmetric_mode_removes_a_slot_bias() -> None:
    # Truth c > b > a. Read from slot order a < b only, the bias makes a > b and
    # b > c while c > a survives: a cycle. Both orders together recover the truth.
    table = slot_biased({("a", "b"): 0.4, ("b", "c"): 0.4, ("a", "c"): 0.1})
    assert intransitive_triads(table).column("intransitive").to_pylist() == [0]
    assert intransitive_triads(table, mode="a_first").column("intransitive").to_pylist() == [1]


def test_a_first_needs_only_the_lexicographic_order() -> None:
    rows = [judgment("d1", "a", "b", 0.8), judgment("d1", "b", "c", 0.7), judgment("d1", "a", "c", 0.3)]
    table = pa.Table.from_pylist(rows, schema=JUDGMENTS)
    assert intransitive_triads(table).num_rows == 0  # symmetric mode needs both orders
    assert intransitive_triads(table, mode="a_first").column("intransitive").to_pylist() == [1]
    # (c, a) instead of (a, c): the order a_first reads is missing.
    swapped = pa.Table.from_pylist(rows[:2] + [judgment("d1", "c", "a", 0.7)], schema=JUDGMENTS)
    assert intransitive_triads(swapped, mode="a_first").num_rows == 0


def test_a_tie_is_counted_among_triads_but_not_as_a_cycle() -> None:
    rows = full_matrix("d1", {("a", "b"): 0.8, ("b", "c"): 0.7, ("c", "a"): 0.5})
    out = intransitive_triads(pa.Table.from_pylist(rows, schema=JUDGMENTS)).to_pylist()
    assert (out[0]["triads"], out[0]["intransitive"]) == (1, 0)


def test_incomplete_contexts_and_error_rows_are_skipped() -> None:
    cycle = {("a", "b"): 0.8, ("b", "c"): 0.7, ("c", "a"): 0.9}
    rows = full_matrix("full", cycle)
    rows += full_matrix("missing_order", cycle)[:-1]  # (c, a) judged, (a, c) not
    rows += full_matrix("errored", cycle)
    rows[-1] = {**rows[-1], "p_a": None, "label": None, "error": "timeout"}  # (a, c) failed
    rows += full_matrix("fluency_only", cycle, aspect="fluency")
    # d appears only in failed judgments: the matrix of a, b, c, d is incomplete.
    rows += full_matrix("failed_candidate", cycle)
    rows += [judgment("failed_candidate", x, y, None, error="timeout") for c in "abc" for x, y in ((c, "d"), ("d", c))]
    out = intransitive_triads(pa.Table.from_pylist(rows, schema=JUDGMENTS))
    assert [(r["context_id"], r["aspect"]) for r in out.to_pylist()] == [
        ("fluency_only", "fluency"),
        ("full", "coherence"),
    ]


def test_repeated_judgments_of_a_pair_are_averaged() -> None:
    rows = full_matrix("d1", {("a", "b"): 0.8, ("b", "c"): 0.7, ("c", "a"): 0.9})  # a 3-cycle
    # Two more judgments of (a, b) and one of (b, a): mean p(a, b) = 0.8 / 3 < mean p(b, a) = 0.6,
    # so b > a and the cycle is gone (the first judgment alone would keep it).
    rows += [judgment("d1", "a", "b", 0.0), judgment("d1", "a", "b", 0.0), judgment("d1", "b", "a", 1.0)]
    out = intransitive_triads(pa.Table.from_pylist(rows, schema=JUDGMENTS)).to_pylist()
    assert (out[0]["triads"], out[0]["intransitive"]) == (1, 0)


def test_fewer_than_three_candidates_have_no_fraction() -> None:
    out = intransitive_triads(pa.Table.from_pylist(full_matrix("d1", {("a", "b"): 0.8}), schema=JUDGMENTS))
    assert out.to_pylist() == [
        {"context_id": "d1", "aspect": "coherence", "n_candidates": 2, "triads": 0, "intransitive": 0, "fraction": None}
    ]


@settings(max_examples=100, deadline=None, derandomize=True)
@given(n=st.integers(3, 7), data=st.data())
def test_table_matches_enumeration_on_random_judges(n, data) -> None:
    ids = [f"c{i}" for i in range(n)]
    p = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(0.0, 1.0)
    rows = [judgment("d", a, b, data.draw(p)) for a in ids for b in ids if a != b]
    out = intransitive_triads(pa.Table.from_pylist(rows, schema=JUDGMENTS)).to_pylist()
    pab = {(r["candidate_a"], r["candidate_b"]): r["p_a"] for r in rows}
    prefs = np.array([[0 if a == b else np.sign(pab[(a, b)] - pab[(b, a)]) for b in ids] for a in ids])
    assert out[0]["n_candidates"] == n and out[0]["triads"] == math.comb(n, 3)
    assert out[0]["intransitive"] == brute_force(prefs)


def test_unknown_mode_and_missing_columns() -> None:
    table = pa.Table.from_pylist(full_matrix("d1", {("a", "b"): 0.8}), schema=JUDGMENTS)
    with pytest.raises(ValueError, match=r"unknown mode 'both'; expected one of \['symmetric', 'a_first'\]"):
        intransitive_triads(table, mode="both")
    with pytest.raises(ValueError, match=r"missing \['error'\]"):
        intransitive_triads(table.drop_columns(["error"]))


# --- seed_spread and spearman_by_seed -----------------------------------------------------------


def test_seed_spread() -> None:
    out = seed_spread([0.2, 0.4, 0.9])
    assert out["n"] == 3
    assert out["mean"] == pytest.approx(0.5)
    assert out["se"] == pytest.approx(np.std([0.2, 0.4, 0.9], ddof=1) / math.sqrt(3))
    assert seed_spread([0.3]) == {"mean": 0.3, "se": None, "n": 1}
    with pytest.raises(ValueError, match="non-empty"):
        seed_spread([])
    with pytest.raises(ValueError, match=r"index 1: expected a finite number, found nan"):
        seed_spread([0.1, float("nan")])


def rankings(scores: dict[str, list[float]]) -> pa.Table:
    """One method, one aspect; ``scores[ctx]`` lists the scores of candidates ctx-0, ctx-1, ..."""
    rows = [
        {
            "context_id": ctx,
            "aspect": "coherence",
            "candidate_id": f"{ctx}-{i}",
            "system": f"s{i}",
            "method": "win_ratio_hard",
            "score": s,
            "rank": 1,
            "n_comparisons": 2,
        }
        for ctx, values in scores.items()
        for i, s in enumerate(values)
    ]
    return pa.Table.from_pylist(rows, schema=RANKINGS)


def test_spearman_by_seed_summarises_reports_spearman() -> None:
    human = pa.Table.from_pylist(
        [
            {"candidate_id": f"{c}-{i}", "aspect": "coherence", "score": float(i)}
            for c in ("d1", "d2")
            for i in range(3)
        ],
        schema=HUMAN_SCORES,
    )
    by_seed = {
        0: rankings({"d1": [0.0, 1.0, 2.0], "d2": [0.0, 1.0, 2.0]}),  # rho 1 on both
        1: rankings({"d1": [0.0, 2.0, 1.0], "d2": [2.0, 1.0, 0.0]}),  # rho 0.5 and -1
        2: rankings({"d1": [1.0, 1.0, 1.0], "d2": [0.0, 1.0, 2.0]}),  # d1 undefined
    }
    out = {r["level"]: r for r in spearman_by_seed(by_seed, human).to_pylist()}
    per_seed = {
        seed: {r["level"]: r["rho"] for r in spearman_table(t, human, n_boot=0).to_pylist()}
        for seed, t in by_seed.items()
    }
    for level in ("sample", "dataset"):
        values = [v[level] for v in per_seed.values() if v[level] is not None]
        assert out[level]["n"] == len(values)
        assert out[level]["mean"] == pytest.approx(np.mean(values))
        assert out[level]["se"] == pytest.approx(np.std(values, ddof=1) / math.sqrt(len(values)))
    assert out["sample"]["mean"] == pytest.approx((1.0 + (0.5 - 1.0) / 2 + 1.0) / 3)
