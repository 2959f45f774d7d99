"""Property tests of jobs.schedulers: which ordered pairs each static scheduler asks for."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.jobs.schedulers import rng
from pairank.jobs.schedulers.static import SCHEDULERS, get_scheduler, schedule

NAMES = sorted(SCHEDULERS)
PARTIAL = [n for n in NAMES if n != "full"]

ids_st = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=6),
    min_size=2,
    max_size=12,
    unique=True,
)
r_st = st.integers(min_value=1, max_value=150)
seed_st = st.integers(min_value=0, max_value=2**32)


def expected_count(name: str, n: int, r: int) -> int:
    ordered, unordered = n * (n - 1), n * (n - 1) // 2
    return {
        "full": ordered,
        "random": min(r, ordered),
        "no_repeat": min(r, unordered),
        "symmetric": 2 * min(r // 2, unordered),
    }[name]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(name=st.sampled_from(NAMES), ids=ids_st, r=r_st, seed=seed_st, ctx=st.text(max_size=8))
def test_pairs_are_valid_distinct_and_counted(name: str, ids: list[str], r: int, seed: int, ctx: str) -> None:
    pairs = get_scheduler(name)(sorted(ids), r, rng(seed, ctx))
    given_ids = set(ids)
    for a, b in pairs:
        assert a in given_ids and b in given_ids
        assert a != b
    assert len(set(pairs)) == len(pairs), f"duplicate ordered pair from {name}"
    assert len(pairs) == expected_count(name, len(ids), r)

    ordered = set(pairs)
    if name == "full":
        assert ordered == {(a, b) for a in ids for b in ids if a != b}
    if name == "no_repeat":
        assert not any((b, a) in ordered for a, b in pairs), "no_repeat asked for both orders of a pair"
    if name == "symmetric":
        assert all((b, a) in ordered for a, b in pairs), "symmetric left out an order"


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    name=st.sampled_from(NAMES),
    contexts=st.dictionaries(st.text(min_size=1, max_size=5), ids_st, min_size=1, max_size=5),
    r=r_st,
    seed=seed_st,
    data=st.data(),
)
def test_same_seed_same_pairs_independent_of_other_contexts(name, contexts, r, seed, data) -> None:
    whole = schedule(name, contexts, r, seed)
    assert set(whole) == set(contexts)
    # Again, with the same inputs: the same output.
    assert schedule(name, contexts, r, seed) == whole
    # Each context alone, in a different candidate order, or among a different
    # subset of contexts, gets exactly the pairs it got in the whole job.
    keep = data.draw(st.lists(st.sampled_from(sorted(contexts)), min_size=1, unique=True))
    shuffled = {ctx: data.draw(st.permutations(contexts[ctx])) for ctx in reversed(keep)}
    part = schedule(name, shuffled, r, seed)
    assert set(part) == set(keep)
    for ctx in keep:
        assert part[ctx] == whole[ctx]
        assert schedule(name, {ctx: contexts[ctx]}, r, seed)[ctx] == whole[ctx]


@pytest.mark.parametrize("name", PARTIAL)
def test_different_seeds_usually_differ(name: str) -> None:
    ids = [f"c{i:02d}" for i in range(12)]
    outputs = [tuple(schedule(name, {"ctx": ids}, 20, seed)["ctx"]) for seed in range(10)]
    # 10 draws of 20 pairs (10 for symmetric) out of 66 or 132: a repeat would mean the seed is ignored.
    assert len(set(outputs)) == 10
    # The seed also changes which pairs, not only their order.
    assert len({frozenset(o) for o in outputs}) == 10


def test_different_contexts_get_different_draws() -> None:
    ids = [f"c{i:02d}" for i in range(12)]
    out = schedule("random", {f"ctx{i}": ids for i in range(5)}, 20, 0)
    assert len({tuple(v) for v in out.values()}) == 5


def test_full_ignores_seed_and_r() -> None:
    ids = ["z", "x", "y"]
    assert schedule("full", {"c": ids}, None, 0) == schedule("full", {"c": ids}, 5, 99)
    assert len(schedule("full", {"c": ids}, None, 0)["c"]) == 6


def test_unknown_scheduler_lists_available() -> None:
    with pytest.raises(ValueError) as info:
        get_scheduler("round_robin")
    msg = str(info.value)
    assert "'round_robin'" in msg
    for name in NAMES:
        assert name in msg
    with pytest.raises(ValueError, match="round_robin"):
        schedule("round_robin", {"c": ["a", "b"]}, 2, 0)


@pytest.mark.parametrize("name", PARTIAL)
def test_partial_scheduler_without_r(name: str) -> None:
    with pytest.raises(ValueError, match=r"comparisons.*\(R\)"):
        schedule(name, {"c": ["a", "b", "c"]}, None, 0)
    with pytest.raises(ValueError, match=r"comparisons.*\(R\)"):
        get_scheduler(name)(["a", "b", "c"], None, rng(0, "c"))
    # Even with no contexts to schedule, a missing R is an error, not an empty result.
    with pytest.raises(ValueError, match=r"comparisons"):
        schedule(name, {}, None, 0)


def test_symmetric_rounds_r_down_to_even() -> None:
    ids = [f"c{i}" for i in range(6)]
    for r in (1, 2, 3, 7):
        pairs = schedule("symmetric", {"c": ids}, r, 3)["c"]
        assert len(pairs) == 2 * (r // 2)
        assert Counter(frozenset(p) for p in pairs) == Counter({frozenset(p): 2 for p in pairs})
