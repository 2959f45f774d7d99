"""Five-level verdicts in scoring: a decisive verdict counts `decisive_weight` times in win ratios and in the
leaderboard's Bradley-Terry fit, read from the stored rows (their sampling JSON and p_a), never from a new column."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from pairank.judges.verdicts import LEVELS, parse_verdict
from pairank.operators.leaderboard import LeaderboardOptions, leaderboard
from pairank.operators.scores import DECISIVE_WEIGHT, rank_table, verdict_scale, verdict_weights
from pairank.storage.schemas import JUDGMENTS

FIVE = json.dumps({"judging": {"verdict_scale": 5}, "mode": "generate"}, sort_keys=True, separators=(",", ":"))
THREE = json.dumps({"judging": {}, "mode": "generate"}, sort_keys=True, separators=(",", ":"))
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

# One context, three candidates of three systems, both slot orders of each pair (as the full scheduler asks):
# x is much better than y, y slightly better than z, z slightly better than x. Counted once each, the hard
# verdicts are a cycle (every win ratio 1/2); counted Arena-Hard's way, x's decisive wins put it first.
VERDICTS = {
    ("x", "y"): "A>>B",
    ("y", "x"): "B>>A",
    ("y", "z"): "A>B",
    ("z", "y"): "B>A",
    ("z", "x"): "A>B",
    ("x", "z"): "B>A",
}
CANDIDATES = pa.table(
    {
        "context_id": ["c"] * 3,
        "context": ["doc"] * 3,
        "candidate_id": ["x", "y", "z"],
        "system": ["sx", "sy", "sz"],
        "text": ["tx", "ty", "tz"],
    }
)


def row(a: str, b: str, level: str | None, sampling: str = FIVE, error: str | None = None, i: int = 0) -> dict:
    label, p = LEVELS[level] if level else (None, None)
    return {
        "key": f"{a}{b}{i}{sampling}",
        "engine": "http",
        "model": "m",
        "revision": "r",
        "prompt_hash": "h",
        "sampling": sampling,
        "context_id": "c",
        "aspect": "coherence",
        "candidate_a": a,
        "candidate_b": b,
        "p_a": p,
        "logprob_a": None,
        "logprob_b": None,
        "label": label,
        "raw_text": f"[[{level}]]",
        "input_tokens": 1,
        "output_tokens": 1,
        "seconds": 0.0,
        "error": error,
        "created_at": T0,
    }


def judgments(sampling: str = FIVE) -> pa.Table:
    return pa.Table.from_pylist([row(a, b, level, sampling) for (a, b), level in VERDICTS.items()], schema=JUDGMENTS)


def scores(table: pa.Table, mode: str, weight: float) -> dict[str, float]:
    return {r["candidate_id"]: r["score"] for r in rank_table(table, CANDIDATES, mode, weight).to_pylist()}


def test_the_weight_is_read_from_the_stored_row():
    assert verdict_scale(FIVE) == 5 and verdict_scale(THREE) == 3 and verdict_scale("not json") == 3
    table = judgments()
    weights = verdict_weights(table.column("sampling").to_pylist(), table.column("p_a").to_pylist(), 3.0)
    assert weights == [3.0, 3.0, 1.0, 1.0, 1.0, 1.0]  # the two decisive verdicts (p_a 1 and 0)
    # a three-level [[A]] has p_a 1 too, but it is no decisive verdict
    assert verdict_weights([THREE, "{}", None], [1.0, 0.0, None], 3.0) == [1.0, 1.0, 1.0]
    with pytest.raises(ValueError, match="decisive_weight: expected a finite number >= 1, found 0.5"):
        verdict_weights([FIVE], [1.0], 0.5)


def test_decisive_verdicts_count_three_times_in_win_ratios():
    table = judgments()
    # hand-computed: each candidate is in 4 comparisons; x's 2 decisive wins over y weigh 3 each
    assert scores(table, "hard", 1.0) == {"x": 0.5, "y": 0.5, "z": 0.5}
    assert scores(table, "hard", 3.0) == {"x": 6 / 8, "y": 2 / 8, "z": 0.5}
    # soft: A>B is 0.75 of a win; x: (3 + 3 + 0.25 + 0.25) / 8, y: (0 + 0 + 0.75 + 0.75) / 8, z: (0.25 + 0.25 + 0.75
    # + 0.75) / 4
    assert scores(table, "soft", 3.0) == pytest.approx({"x": 6.5 / 8, "y": 1.5 / 8, "z": 0.5})
    assert scores(table, "soft", 1.0) == pytest.approx({"x": 2.5 / 4, "y": 1.5 / 4, "z": 0.5})
    ranked = rank_table(table, CANDIDATES, "hard", 3.0).to_pylist()
    assert [r["candidate_id"] for r in ranked] == ["x", "z", "y"]
    assert {r["n_comparisons"] for r in ranked} == {4}  # each judgment is one comparison, whatever its weight
    assert DECISIVE_WEIGHT == 3.0 and scores(table, "hard", DECISIVE_WEIGHT) == scores(table, "hard", 3.0)


def test_three_level_judgments_are_scored_as_before():
    three = judgments(THREE)
    assert scores(three, "hard", 3.0) == scores(three, "hard", 1.0) == {"x": 0.5, "y": 0.5, "z": 0.5}
    assert rank_table(three.drop_columns(["sampling"]), CANDIDATES, "soft", 3.0).equals(
        rank_table(three, CANDIDATES, "soft", 1.0)
    )


def test_decisive_verdicts_count_three_times_in_the_leaderboard_fit():
    options = {"n_boot": 0}
    plain = leaderboard(judgments(), CANDIDATES, options=LeaderboardOptions(**options, decisive_weight=1.0))
    weighted = leaderboard(judgments(), CANDIDATES, options=LeaderboardOptions(**options))  # default: 3
    by = {r["system"]: r for r in weighted.table.to_pylist() if r["aspect"] == "coherence"}
    flat = {r["system"]: r for r in plain.table.to_pylist() if r["aspect"] == "coherence"}
    assert {s: r["strength"] for s, r in flat.items()} == pytest.approx({"sx": 0.0, "sy": 0.0, "sz": 0.0}, abs=1e-6)
    assert by["sx"]["strength"] > by["sz"]["strength"] > by["sy"]["strength"]
    assert [by[s]["rank"] for s in ("sx", "sz", "sy")] == [1, 2, 3]
    # the counts and the win ratio count each judgment once
    for s in by:
        assert {k: by[s][k] for k in ("n_judgments", "n_wins", "n_losses", "win_ratio")} == {
            k: flat[s][k] for k in ("n_judgments", "n_wins", "n_losses", "win_ratio")
        }
    # the same verdicts from a three-level judge are not weighted
    three = leaderboard(judgments(THREE), CANDIDATES, options=LeaderboardOptions(**options))
    assert [r["strength"] for r in three.table.to_pylist()] == pytest.approx([0.0] * 6, abs=1e-6)  # and overall
    with pytest.raises(ValueError, match="decisive_weight"):
        LeaderboardOptions(decisive_weight=0.0)


def test_the_bootstrap_keeps_the_weights():
    table = pa.Table.from_pylist(
        [row(a, b, level, i=i) | {"context_id": f"c{i}"} for i in range(4) for (a, b), level in VERDICTS.items()],
        schema=JUDGMENTS,
    )
    board = leaderboard(table, CANDIDATES, options=LeaderboardOptions(n_boot=20, seed=1))
    sx = next(r for r in board.table.to_pylist() if r["aspect"] == "coherence" and r["system"] == "sx")
    assert sx["rank"] == 1 and sx["n_boot"] == 20 and sx["strength_low"] > 0  # every resample weighs the same rows


@pytest.mark.parametrize("level", list(LEVELS))
def test_swapping_the_slots_mirrors_a_level(level):
    """The marker of the same judgment with the slots swapped: its p_a is 1 - p_a, its weight the same."""
    mirrored = level.translate(str.maketrans("AB", "BA"))
    mirrored = "A=B" if mirrored == "B=A" else mirrored
    a, b = parse_verdict(f"[[{level}]]", scale=5), parse_verdict(f"[[{mirrored}]]", scale=5)
    assert b.p_a == 1.0 - a.p_a and a.decisive == b.decisive
    assert {a.label, b.label} in ({"A", "B"}, {"tie"})
