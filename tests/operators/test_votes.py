"""Swap-and-sum votes per judge and the human truth of (system, baseline) pairs."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest

from pairank.operators.votes import (
    human_truth,
    judge_names,
    labelled_pairs,
    pair_votes,
    system_pairs,
)
from pairank.operators.winrate import BASELINE, NO_VOTE, SYSTEM
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, PAIRWISE_LABELS
from tests.operators.rows import judgment

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def verdict(ctx, a, b, label, model="m", at=0, error=None):
    p = {"A": 1.0, "B": 0.0, "tie": 0.5}.get(label)
    row = judgment(ctx, "coherence", a, b, p, error=error)
    return {**row, "model": model, "created_at": T0 + dt.timedelta(seconds=at)}


def table(rows):
    from pairank.storage.schemas import JUDGMENTS

    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


PAIRS = [("c1", "s1", "b1"), ("c2", "s2", "b2"), ("c3", "s3", "b3")]


def test_swap_and_sum_agreeing_orders_and_single_orders():
    rows = [
        verdict("c1", "s1", "b1", "A"),
        verdict("c1", "b1", "s1", "B"),  # system wins in both orders
        verdict("c2", "s2", "b2", "B"),
        verdict("c2", "b2", "s2", "A"),  # baseline wins in both orders
        verdict("c3", "b3", "s3", "B"),  # one order only: system in slot B wins
        verdict("c9", "x", "y", "A"),  # not one of the pairs
    ]
    v = pair_votes(table(rows), PAIRS)
    assert v.judges == ["m@h"]
    assert v.votes[:, 0].tolist() == [SYSTEM, BASELINE, SYSTEM]
    assert v.orders[:, 0].tolist() == [2, 2, 1]
    assert v.ties.tolist() == [0]
    assert v.truth.tolist() == [NO_VOTE] * 3


def test_position_bias_makes_a_tie_broken_by_a_seeded_coin_and_counted():
    rows = [verdict(c, a, b, "A") for c, s, bl in PAIRS for a, b in [(s, bl), (bl, s)]]  # always slot A
    coins = {seed: pair_votes(table(rows), PAIRS, seed=seed).votes[:, 0].tolist() for seed in range(8)}
    v = pair_votes(table(rows), PAIRS, seed=0)
    assert v.ties.tolist() == [3]
    assert coins[0] == pair_votes(table(rows), PAIRS, seed=0).votes[:, 0].tolist()  # seeded: reproducible
    assert len({tuple(c) for c in coins.values()}) > 1  # and really a coin
    assert all(x in (SYSTEM, BASELINE) for c in coins.values() for x in c)


def test_tie_verdicts_count_half_errors_are_not_votes_and_the_latest_row_wins():
    rows = [
        verdict("c1", "s1", "b1", "tie"),
        verdict("c1", "b1", "s1", "B"),  # 0.5 + 1 of 2: system
        verdict("c2", "s2", "b2", None, error="timeout"),  # no vote
        verdict("c3", "s3", "b3", "A", at=0),
        verdict("c3", "s3", "b3", "B", at=5),  # re-judged: latest counts
    ]
    v = pair_votes(table(rows), PAIRS)
    assert v.votes[:, 0].tolist() == [SYSTEM, NO_VOTE, BASELINE]
    assert v.orders[:, 0].tolist() == [2, 0, 1]


def test_each_judge_identity_is_a_judge():
    rows = [verdict("c1", "s1", "b1", "A", model="big"), verdict("c1", "s1", "b1", "B", model="small")]
    v = pair_votes(table(rows), PAIRS)
    assert len(v.judges) == 2
    assert sorted(zip(v.judges, v.votes[0].tolist())) == [("big@h", SYSTEM), ("small@h", BASELINE)]


def test_judge_names_are_unique_even_when_short_names_collide():
    a = ("vllm", "/x/gemma", "r1", "hash", "{}")
    b = ("vllm", "/y/gemma", "r2", "hash", "{}")
    names = judge_names([a, b])
    assert len(set(names)) == 2 and all(n.startswith("gemma@hash") for n in names)


def test_human_truth_from_labels_then_scores():
    labels = pa.Table.from_pylist(
        [
            {"context_id": "c1", "candidate_a": "b1", "candidate_b": "s1", "preferred": "A"},
            {"context_id": "c3", "candidate_a": "s3", "candidate_b": "b3", "preferred": "tie"},
        ],
        schema=PAIRWISE_LABELS,
    )
    scores = pa.Table.from_pylist(
        [
            {"candidate_id": c, "aspect": "coherence", "score": s}
            for c, s in [("s2", 4.0), ("b2", 3.0), ("s3", 2.0), ("b3", 2.0), ("s1", 5.0), ("b1", 1.0)]
        ],
        schema=HUMAN_SCORES,
    )
    truth = human_truth(PAIRS, "coherence", scores, labels)
    assert truth.tolist() == [BASELINE, SYSTEM, NO_VOTE]  # the label beats the scores for c1; equal scores: unknown
    assert human_truth(PAIRS, "fluency", scores).tolist() == [NO_VOTE] * 3


def test_labelled_pairs_orient_class_zero_on_the_first_candidate():
    labels = pa.Table.from_pylist(
        [{"context_id": "c", "candidate_a": "x", "candidate_b": "y", "preferred": p} for p in ("A", "B", "tie")],
        schema=PAIRWISE_LABELS,
    )
    pairs, truth = labelled_pairs(labels)
    assert pairs == [("c", "x", "y")] * 2 and truth.tolist() == [SYSTEM, BASELINE]


def test_system_pairs_need_one_candidate_per_system_and_context():
    rows = [
        {"context_id": ctx, "context": "doc", "candidate_id": f"{ctx}/{s}", "system": s, "text": "t"}
        for ctx, systems in [("c1", ["s", "b"]), ("c2", ["s", "x"])]
        for s in systems
    ]
    cands = pa.Table.from_pylist(rows, schema=CANDIDATES)
    assert system_pairs(cands, "s", "b") == [("c1", "c1/s", "c1/b")]
    dup = pa.concat_tables([cands, pa.Table.from_pylist([{**rows[0], "candidate_id": "c1/s2"}], schema=CANDIDATES)])
    with pytest.raises(ValueError, match="context 'c1': system 's' has 2 candidates"):
        system_pairs(dup, "s", "b")


def test_pair_votes_needs_the_verdict_columns():
    with pytest.raises(ValueError, match="lacks columns"):
        pair_votes(pa.table({"context_id": ["c"]}), PAIRS)
    assert np.array_equal(pair_votes(table([]), PAIRS).votes, np.empty((3, 0), dtype=np.int8))
