"""Property tests of operators.scores: win ratios, competition ranks, and the rankings table."""

from __future__ import annotations

import math

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.operators.scores import (
    comparison_counts,
    min_ranks,
    rank_table,
    verdict,
    win_ratios,
)
from pairank.storage.schemas import CANDIDATES, JUDGMENTS, RANKINGS
from tests.operators.rows import judgment

IDS = ["a", "b", "c", "d", "e", "f"]

# p_a values, with the exact tie 0.5 and the ends drawn often. Only values whose
# complement 1 - p is exact in floating point (1 - (1 - p) == p): for the others
# (e.g. 0.49999999999999994, whose 1 - p rounds to exactly 0.5) the swapped
# comparison is not the same judgment, only a rounded one.
p_st = st.one_of(
    st.sampled_from([0.0, 0.5, 1.0, 0.25, 0.75]),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
).filter(lambda p: 1.0 - (1.0 - p) == p)


@st.composite
def comparisons_st(draw, min_size: int = 1):
    n = draw(st.integers(2, len(IDS)))
    ids = IDS[:n]
    pair = st.tuples(st.sampled_from(ids), st.sampled_from(ids)).filter(lambda t: t[0] != t[1])
    return [(a, b, draw(p_st)) for a, b in draw(st.lists(pair, min_size=min_size, max_size=30))]


def close(x: dict[str, float], y: dict[str, float], tol: float) -> bool:
    return x.keys() == y.keys() and all(math.isclose(x[k], y[k], abs_tol=tol) for k in x)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(comps=comparisons_st(), data=st.data())
def test_order_of_comparisons_does_not_matter(comps, data) -> None:
    shuffled = data.draw(st.permutations(comps))
    # Hard verdicts are 0, 1/2 or 1: the sums are exact in any order.
    assert win_ratios(shuffled, "hard") == win_ratios(comps, "hard")
    assert close(win_ratios(shuffled, "soft"), win_ratios(comps, "soft"), 1e-9)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(comps=comparisons_st(), data=st.data())
def test_swapping_slots_changes_nothing(comps, data) -> None:
    # Swap any subset of the comparisons: (a, b, p) -> (b, a, 1 - p).
    flips = data.draw(st.lists(st.booleans(), min_size=len(comps), max_size=len(comps)))
    swapped = [(b, a, 1.0 - p) if f else (a, b, p) for (a, b, p), f in zip(comps, flips)]
    assert win_ratios(swapped, "hard") == win_ratios(comps, "hard")
    assert close(win_ratios(swapped, "soft"), win_ratios(comps, "soft"), 1e-9)
    assert comparison_counts(swapped) == comparison_counts(comps)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_exact_tie_counts_half_in_either_slot(mode: str) -> None:
    assert verdict(0.5, mode) == 0.5
    one = win_ratios([("x", "y", 0.5)], mode)
    assert one == win_ratios([("y", "x", 0.5)], mode)
    assert one == {"x": 0.5, "y": 0.5}


@settings(max_examples=100, deadline=None, derandomize=True)
@given(comps=comparisons_st(), mode=st.sampled_from(["hard", "soft"]))
def test_scores_in_unit_interval_for_every_candidate(comps, mode) -> None:
    scores = win_ratios(comps, mode)
    assert set(scores) == {x for a, b, _ in comps for x in (a, b)}
    assert all(0.0 <= s <= 1.0 for s in scores.values())
    # Each comparison hands out exactly one win between its two candidates.
    counts = comparison_counts(comps)
    assert math.isclose(sum(scores[k] * counts[k] for k in scores), len(comps), abs_tol=1e-6)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    order=st.permutations(IDS).flatmap(lambda p: st.integers(2, len(p)).map(lambda n: p[:n])),
    data=st.data(),
)
def test_noiseless_full_matrix_recovers_latent_order(order, data) -> None:
    # ``order`` is best first; a noiseless judge always lands on the better
    # candidate's side of 0.5, with any confidence.
    position = {c: i for i, c in enumerate(order)}
    above = st.floats(min_value=0.5, max_value=1.0, exclude_min=True)
    below = st.floats(min_value=0.0, max_value=0.5, exclude_max=True)
    comps = [(a, b, data.draw(above if position[a] < position[b] else below)) for a in order for b in order if a != b]
    scores = win_ratios(comps, "hard")
    ranks = min_ranks(scores)
    assert sorted(scores, key=lambda k: ranks[k]) == list(order)
    assert [ranks[c] for c in order] == list(range(1, len(order) + 1))


def test_constant_margin_soft_order() -> None:
    order = ["e", "a", "d", "b", "c"]
    comps = [(a, b, 0.6 if order.index(a) < order.index(b) else 0.4) for a in order for b in order if a != b]
    soft = win_ratios(comps, "soft")
    assert sorted(soft, key=lambda k: -soft[k]) == order
    assert min_ranks(soft) == {c: i + 1 for i, c in enumerate(order)}


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    scores=st.dictionaries(
        st.text(min_size=1, max_size=3),
        st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]) | st.floats(0, 1),
        min_size=1,
        max_size=12,
    )
)
def test_min_ranks_is_a_competition_ranking(scores) -> None:
    ranks = min_ranks(scores)
    assert ranks.keys() == scores.keys()
    assert min(ranks.values()) == 1
    for k, s in scores.items():
        # Rank = 1 + how many are strictly better.
        assert ranks[k] == 1 + sum(1 for t in scores.values() if t > s)
    for k in scores:
        for j in scores:
            if scores[k] == scores[j]:
                assert ranks[k] == ranks[j]
            elif scores[k] > scores[j]:
                assert ranks[k] < ranks[j]


# --- rank_table on a judgments table ------------------------------------------------------------


def candidates_table() -> pa.Table:
    rows = [
        ("d1", "x1", "sysX"),
        ("d1", "y1", "sysY"),
        ("d1", "z1", "sysZ"),
        ("d2", "x2", "sysX"),
        ("d2", "y2", "sysY"),
    ]
    return pa.Table.from_pylist(
        [
            {"context_id": c, "context": f"doc {c}", "candidate_id": i, "system": s, "text": f"text {i}"}
            for c, i, s in rows
        ],
        schema=CANDIDATES,
    )


def judgments_table() -> pa.Table:
    rows = [
        judgment("d1", "coherence", "x1", "y1", 0.9),
        judgment("d1", "coherence", "y1", "x1", 0.3),
        judgment("d1", "coherence", "x1", "z1", 0.8),
        judgment("d1", "coherence", "z1", "y1", 0.5),
        # An error row (with a stray p_a): if counted, y1 would win one against x1.
        {**judgment("d1", "coherence", "y1", "x1", None, error="timeout"), "p_a": 1.0},
        judgment("d1", "fluency", "y1", "x1", 0.7),
        judgment("d2", "coherence", "x2", "y2", 0.1),
        # A context/aspect with only an error: no ranking rows for it.
        judgment("d2", "fluency", "x2", "y2", None, error="bad answer"),
    ]
    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


@pytest.mark.parametrize("mode", ["hard", "soft"])
def test_rank_table_one_row_per_candidate_with_system(mode: str) -> None:
    table = rank_table(judgments_table(), candidates_table(), mode)
    assert table.schema.equals(RANKINGS)
    rows = table.to_pylist()
    keys = [(r["context_id"], r["aspect"], r["candidate_id"]) for r in rows]
    assert len(keys) == len(set(keys))
    assert set(keys) == {
        ("d1", "coherence", "x1"),
        ("d1", "coherence", "y1"),
        ("d1", "coherence", "z1"),
        ("d1", "fluency", "x1"),
        ("d1", "fluency", "y1"),
        ("d2", "coherence", "x2"),
        ("d2", "coherence", "y2"),
    }
    by_key = {(r["context_id"], r["aspect"], r["candidate_id"]): r for r in rows}
    system = dict(
        zip(candidates_table().column("candidate_id").to_pylist(), candidates_table().column("system").to_pylist())
    )
    for (_ctx, _aspect, cid), r in by_key.items():
        assert r["system"] == system[cid]
        assert r["method"] == f"win_ratio_{mode}"

    # The table agrees with win_ratios over the verdict rows of each group
    # (error rows ignored), with counts of the verdict rows only.
    ok = [j for j in judgments_table().to_pylist() if j["error"] is None]
    for ctx, aspect in {(k[0], k[1]) for k in keys}:
        comps = [
            (j["candidate_a"], j["candidate_b"], j["p_a"])
            for j in ok
            if (j["context_id"], j["aspect"]) == (ctx, aspect)
        ]
        scores = win_ratios(comps, mode)
        ranks = min_ranks(scores)
        counts = comparison_counts(comps)
        for cid in scores:
            r = by_key[(ctx, aspect, cid)]
            assert r["score"] == scores[cid]
            assert r["rank"] == ranks[cid]
            assert r["n_comparisons"] == counts[cid]
    # Error rows are not counted: x1 took part in 3 verdicts in d1/coherence, not 4.
    assert by_key[("d1", "coherence", "x1")]["n_comparisons"] == 3
    # By hand: x1 wins all 3 (score 1); z1 ties y1 and loses to x1; y1 loses 2, ties 1.
    assert [by_key[("d1", "coherence", c)]["rank"] for c in ("x1", "z1", "y1")] == [1, 2, 3]
    if mode == "hard":
        assert by_key[("d1", "coherence", "x1")]["score"] == 1.0
        assert by_key[("d1", "coherence", "z1")]["score"] == 0.25
    assert by_key[("d2", "coherence", "y2")]["rank"] == 1


def test_rank_table_unknown_candidate_gets_empty_system_and_empty_input_gives_empty_table() -> None:
    table = rank_table(
        pa.Table.from_pylist([judgment("d9", "coherence", "p", "q", 0.6)], schema=JUDGMENTS), candidates_table()
    )
    assert table.column("system").to_pylist() == ["", ""]
    assert table.column("candidate_id").to_pylist() == ["p", "q"]
    empty = rank_table(JUDGMENTS.empty_table(), candidates_table())
    assert empty.num_rows == 0 and empty.schema.equals(RANKINGS)
    only_errors = pa.Table.from_pylist([judgment("d1", "coherence", "x1", "y1", None, "boom")], schema=JUDGMENTS)
    assert rank_table(only_errors, candidates_table()).num_rows == 0


def test_unknown_verdict_mode() -> None:
    with pytest.raises(ValueError, match="'median'.*'hard' or 'soft'"):
        win_ratios([("x", "y", 0.5)], "median")
