"""Tests of operators.quantile: targets, quantile matching of rankings, and the rankings table."""

from __future__ import annotations

from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.operators.quantile import (
    Target,
    quantile_match,
    quantile_match_ranks,
    quantile_table,
    target_from_percentages,
    target_from_scores,
)
from pairank.storage.schemas import RANKINGS

FIVE = {1: 0.2, 2: 0.2, 3: 0.2, 4: 0.2, 5: 0.2}
IDS = [f"c{i:02d}" for i in range(40)]


# --- targets ------------------------------------------------------------------------------------


def test_percentages_make_a_step_cdf() -> None:
    t = target_from_percentages({3: 0.5, 1: 0.25, 2: 0.25})
    assert t.values == (1.0, 2.0, 3.0)
    assert t.cdf == pytest.approx((0.25, 0.5, 1.0))
    assert t.cdf[-1] == 1.0
    # Lower inverse: on a step the smaller value; just past it the next.
    assert [t.quantile(u) for u in (0.1, 0.25, 0.26, 0.5, 0.51, 1.0)] == [1.0, 1.0, 2.0, 2.0, 3.0, 3.0]


def test_zero_shares_never_come_back() -> None:
    t = target_from_percentages({1: 0.5, 2: 0.0, 3: 0.5})
    assert t.values == (1.0, 3.0)
    assert set(quantile_match(IDS[:10], t).values()) == {1.0, 3.0}


@pytest.mark.parametrize(
    ("percentages", "match"),
    [
        ({1: 0.5, 2: 0.6}, r"sum to 1, found \{1: 0.5, 2: 0.6\} \(sum 1.1"),
        ({1: 1.2, 2: -0.2}, r"shares >= 0 .* found \{1: 1.2, 2: -0.2\}"),
        ({}, r"expected finite numeric score values, found \{\}"),
        ({float("inf"): 1.0}, r"expected finite numeric score values"),
    ],
)
def test_bad_percentages_are_listed(percentages, match) -> None:
    with pytest.raises(ValueError, match=match):
        target_from_percentages(percentages)


def test_percentages_within_tolerance_are_accepted() -> None:
    t = target_from_percentages({1: 1 / 3, 2: 1 / 3, 3: 1 / 3 + 5e-7})
    assert t.cdf[-1] == 1.0


@pytest.mark.parametrize(
    ("values", "cdf"), [((), ()), ((2.0, 1.0), (0.5, 1.0)), ((1.0, 2.0), (0.5, 0.9)), ((1.0,), (0.5, 1.0))]
)
def test_a_bad_target_is_refused(values, cdf) -> None:
    with pytest.raises(ValueError, match="expected increasing values"):
        Target(values, cdf)


def test_scores_make_the_empirical_distribution() -> None:
    t = target_from_scores([4.0, 2.0, 4.0, 4.0, 1.0])
    assert t.values == (1.0, 2.0, 4.0)
    assert t.cdf == pytest.approx((0.2, 0.4, 1.0))


@pytest.mark.parametrize(("scores", "match"), [([], "non-empty"), ([1.0, float("nan")], r"index 1: .* found nan")])
def test_bad_scores(scores, match) -> None:
    with pytest.raises(ValueError, match=match):
        target_from_scores(scores)


# --- quantile_match -----------------------------------------------------------------------------


def test_ten_candidates_two_per_grade() -> None:
    scores = quantile_match(IDS[:10], target_from_percentages(FIVE))
    assert list(scores.values()) == [5.0, 5.0, 4.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0]
    assert list(scores) == IDS[:10]


def test_duplicate_ids_are_an_error() -> None:
    with pytest.raises(ValueError, match=r"'c01' at positions 1 and 2"):
        quantile_match(["c00", "c01", "c01"], target_from_percentages(FIVE))


def test_empty_ranking() -> None:
    assert quantile_match([], target_from_percentages(FIVE)) == {}


targets = st.one_of(
    st.lists(st.integers(1, 10), min_size=1, max_size=30).map(target_from_scores),
    st.dictionaries(st.integers(0, 20), st.integers(1, 5), min_size=1, max_size=6).map(
        lambda w: target_from_percentages({v: c / sum(w.values()) for v, c in w.items()})
    ),
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(n=st.integers(1, len(IDS)), target=targets)
def test_better_rank_never_scores_lower(n, target) -> None:
    scores = quantile_match(IDS[:n], target)
    values = [scores[c] for c in IDS[:n]]
    assert values == sorted(values, reverse=True)
    assert set(values) <= set(target.values)
    assert values[0] == target.quantile(1.0 - 0.5 / n)


@settings(max_examples=100, deadline=None, derandomize=True)
@given(weights=st.lists(st.integers(1, 4), min_size=1, max_size=5), copies=st.integers(1, 3))
def test_shares_match_the_percentages_when_n_is_a_multiple(weights, copies) -> None:
    # Shares k/d for grades 1..len(weights): any N that is a multiple of d hands
    # out exactly share * N of each grade.
    d = sum(weights)
    target = target_from_percentages({g + 1: w / d for g, w in enumerate(weights)})
    n = d * copies
    counts = Counter(quantile_match([f"x{i}" for i in range(n)], target).values())
    assert counts == {float(g + 1): w * copies for g, w in enumerate(weights)}


# --- ties ---------------------------------------------------------------------------------------


def test_tied_group_gets_the_quantile_at_its_middle() -> None:
    target = target_from_percentages(FIVE)
    # 10 candidates; positions 0-2 tied (middle 1 -> u = 0.85 -> 5), 3-4 tied
    # (middle 3.5 -> u = 0.6 -> 3), then single positions 5..9.
    ranks = {"a": 1, "b": 1, "c": 1, "d": 4, "e": 4, "f": 6, "g": 7, "h": 8, "i": 9, "j": 10}
    scores = quantile_match_ranks(ranks, target)
    assert scores == {
        "a": 5.0,
        "b": 5.0,
        "c": 5.0,
        "d": 3.0,
        "e": 3.0,
        "f": 3.0,
        "g": 2.0,
        "h": 2.0,
        "i": 1.0,
        "j": 1.0,
    }
    # Dense ranks give the same groups.
    dense = {"a": 1, "b": 1, "c": 1, "d": 2, "e": 2, "f": 3, "g": 4, "h": 5, "i": 6, "j": 7}
    assert quantile_match_ranks(dense, target) == scores


@settings(max_examples=200, deadline=None, derandomize=True)
@given(ranks=st.lists(st.integers(1, 8), min_size=1, max_size=len(IDS)), target=targets)
def test_ties_share_a_score_and_order_is_kept(ranks, target) -> None:
    by_id = dict(zip(IDS, ranks))
    scores = quantile_match_ranks(by_id, target)
    assert scores.keys() == by_id.keys()
    for a, rank_a in by_id.items():
        for b, rank_b in by_id.items():
            if rank_a == rank_b:
                assert scores[a] == scores[b]
            elif rank_a < rank_b:
                assert scores[a] >= scores[b]


def test_no_ties_is_quantile_match() -> None:
    target = target_from_scores([1, 1, 2, 3, 5, 5, 5])
    ranking = IDS[:13]
    assert quantile_match_ranks({c: i + 1 for i, c in enumerate(ranking)}, target) == quantile_match(ranking, target)


# --- quantile_table -----------------------------------------------------------------------------


def rankings_table() -> pa.Table:
    rows = []
    for ctx in ("d1", "d2"):
        for method in ("win_ratio_hard", "win_ratio_soft"):
            for i in range(10):
                rank = 1 + i if method == "win_ratio_soft" else 1 + 2 * (i // 2)  # hard: pairs tied
                rows.append(
                    {
                        "context_id": ctx,
                        "aspect": "coherence",
                        "candidate_id": f"{ctx}-{i}",
                        "system": f"sys{i}",
                        "method": method,
                        "score": 1.0 - i / 10,
                        "rank": rank,
                        "n_comparisons": 18,
                    }
                )
    return pa.Table.from_pylist(rows, schema=RANKINGS)


def test_table_keeps_rows_and_renames_the_method() -> None:
    table = rankings_table()
    out = quantile_table(table, target_from_percentages(FIVE))
    assert out.schema.equals(RANKINGS)
    assert out.num_rows == table.num_rows
    keep = ["context_id", "aspect", "candidate_id", "system", "rank", "n_comparisons"]
    assert out.select(keep).equals(table.select(keep))
    assert set(out.column("method").to_pylist()) == {"win_ratio_hard_quantile", "win_ratio_soft_quantile"}
    assert quantile_table(table, Target((1.0,), (1.0,)), method_suffix="q").column("method")[0].as_py() == (
        "win_ratio_hard_q"
    )


def test_table_scores_per_group() -> None:
    out = quantile_table(rankings_table(), target_from_percentages(FIVE)).to_pylist()
    for ctx in ("d1", "d2"):
        soft = [r["score"] for r in out if r["context_id"] == ctx and r["method"] == "win_ratio_soft_quantile"]
        assert soft == [5.0, 5.0, 4.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0]
        hard = [r["score"] for r in out if r["context_id"] == ctx and r["method"] == "win_ratio_hard_quantile"]
        # Tied pairs at positions (2m, 2m+1): middle 2m + 0.5 -> u = 0.9 - 0.2 m, inside grade 5 - m.
        assert hard == [5.0, 5.0, 4.0, 4.0, 3.0, 3.0, 2.0, 2.0, 1.0, 1.0]


def test_table_errors() -> None:
    table = rankings_table()
    with pytest.raises(ValueError, match=r"missing \['rank'\]"):
        quantile_table(table.drop_columns(["rank"]), target_from_percentages(FIVE))
    doubled = pa.concat_tables([table, table.slice(0, 1)])
    with pytest.raises(ValueError, match=r"row 40: .* 'd1-0' twice"):
        quantile_table(doubled, target_from_percentages(FIVE))
    assert quantile_table(RANKINGS.empty_table(), target_from_percentages(FIVE)).num_rows == 0
