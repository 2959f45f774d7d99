"""The SIMULATED judge: seeded, deterministic, and faithful to its model."""

from __future__ import annotations

import itertools
import threading
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pairank.judges import judge_identity, make_judge
from pairank.judges.engines.simulated import SimulatedJudgeSpec
from pairank.judges.engines.simulated_judge import (
    SimulatedJudge,
    latent_quality,
    prompt_words,
    simulate_matrices,
    simulated_p_a,
)
from pairank.operators.scores import win_ratios
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.validation import validate
from tests.helpers import Gate

IDS = [f"x{i}" for i in range(8)]


def requests(pairs: list[tuple[str, str, str]], aspect: str = "coherence") -> pa.Table:
    """Request rows for (context, a, b) triples; the simulated judge ignores the prompt."""
    return pa.table(
        {
            "key": [f"{c}|{aspect}|{a}|{b}" for c, a, b in pairs],
            "context_id": [c for c, _, _ in pairs],
            "aspect": [aspect] * len(pairs),
            "candidate_a": [a for _, a, _ in pairs],
            "candidate_b": [b for _, _, b in pairs],
            "prompt": [""] * len(pairs),
            "prompt_hash": ["h"] * len(pairs),
        }
    )


def full(contexts: int, ids=IDS) -> list[tuple[str, str, str]]:
    return [(f"ctx{c}", a, b) for c in range(contexts) for a, b in itertools.permutations(ids, 2)]


def random_pairs(n: int, seed: int = 1) -> list[tuple[str, str, str]]:
    gen = np.random.default_rng(seed)
    out = []
    for k in range(n):
        a, b = gen.choice(len(IDS), size=2, replace=False)
        out.append((f"ctx{k % 50}", IDS[a], IDS[b]))
    return out


def p_a(spec: SimulatedJudgeSpec, reqs: pa.Table) -> np.ndarray:
    return np.array(SimulatedJudge(spec).judge(reqs).column("p_a").to_pylist())


def test_same_request_same_answer_across_calls_and_instances():
    reqs = requests(random_pairs(300))
    spec = SimulatedJudgeSpec(seed=3, noise=1.0, intransitivity=0.5)
    first = p_a(spec, reqs)
    assert np.array_equal(first, p_a(spec, reqs))
    again = SimulatedJudge(SimulatedJudgeSpec(seed=3, noise=1.0, intransitivity=0.5)).judge(reqs)
    assert np.array_equal(first, again.column("p_a").to_numpy())
    assert np.array_equal(first[:7], p_a(spec, reqs.slice(0, 7)))  # a batch's answers do not depend on the batch
    assert not np.array_equal(first, p_a(SimulatedJudgeSpec(seed=4, noise=1.0, intransitivity=0.5), reqs))
    assert latent_quality(3, "ctx0", "x1") == latent_quality(3, "ctx0", "x1") != latent_quality(4, "ctx0", "x1")


def test_position_bias_raises_mean_p_a():
    reqs = requests(random_pairs(2000))
    unbiased = p_a(SimulatedJudgeSpec(noise=0.5), reqs).mean()
    biased = p_a(SimulatedJudgeSpec(noise=0.5, position_bias=1.0), reqs).mean()
    assert abs(unbiased - 0.5) < 0.03
    assert biased > unbiased + 0.1


def test_noiseless_transitive_judge_orders_every_pair_by_latent_quality():
    model = {"scale": 2.0, "noise": 0.0, "position_bias": 0.0, "intransitivity": 0.0}
    q, p = simulate_matrices(0, [f"ctx{c}" for c in range(20)], IDS, "coherence", **model)
    better = q[:, :, None] > q[:, None, :]
    off = ~np.eye(len(IDS), dtype=bool)
    assert np.array_equal((p > 0.5)[:, off], better[:, off])
    np.testing.assert_allclose(p + p.transpose(0, 2, 1), 1.0, atol=1e-12)
    # The judge's rows agree with the matrices.
    reqs = requests([(f"ctx{c}", a, b) for c in range(3) for a, b in itertools.permutations(IDS, 2)])
    got = p_a(SimulatedJudgeSpec(**model), reqs).reshape(3, len(IDS) * (len(IDS) - 1))
    np.testing.assert_allclose(got, p[:3][:, off], rtol=1e-12)


def _cyclic_triads(p: np.ndarray) -> int:
    n, count = p.shape[0], 0
    for i, j, k in itertools.combinations(range(n), 3):
        wins = [p[i, j] > 0.5, p[j, k] > 0.5, p[k, i] > 0.5]
        count += all(wins) or not any(wins)
    return count


def test_intransitivity_makes_cyclic_triads():
    ctxs = [f"ctx{c}" for c in range(10)]
    _, transitive = simulate_matrices(0, ctxs, IDS, "a", scale=1.0, noise=0.0, position_bias=0.0, intransitivity=0.0)
    _, cyclic = simulate_matrices(0, ctxs, IDS, "a", scale=1.0, noise=0.0, position_bias=0.0, intransitivity=3.0)
    assert sum(_cyclic_triads(m) for m in transitive) == 0
    assert sum(_cyclic_triads(m) for m in cyclic) > 10


@settings(max_examples=50, deadline=None)
@given(st.floats(-3, 3), st.floats(-3, 3), st.floats(0, 6.3), st.floats(0, 6.3), st.floats(0, 5))
def test_swapping_slots_maps_p_to_one_minus_p_without_bias_or_noise(q_a, q_b, ph_a, ph_b, cyc):
    kw = {"scale": 2.0, "noise": 0.0, "position_bias": 0.0, "intransitivity": cyc, "eps": 0.0}
    p_ab = simulated_p_a(q_a, q_b, phase_a=ph_a, phase_b=ph_b, **kw)
    p_ba = simulated_p_a(q_b, q_a, phase_a=ph_b, phase_b=ph_a, **kw)
    assert abs(p_ab + p_ba - 1.0) < 1e-12


def test_judge_rows_are_valid_judgments_labelled_simulated():
    slept = []
    spec = SimulatedJudgeSpec(noise=0.7, position_bias=0.2, seconds_per_comparison=0.01)
    reqs = requests(random_pairs(40))
    out = SimulatedJudge(spec, sleep=slept.append).judge(reqs)
    validate(out, JUDGMENTS, "simulated judge output")
    assert out.column("key").to_pylist() == reqs.column("key").to_pylist()
    rows = out.to_pylist()
    assert {(r["engine"], r["model"]) for r in rows} == {("simulated", "simulated")}
    for r in rows:
        assert r["error"] is None and r["raw_text"] is None and (r["input_tokens"], r["output_tokens"]) == (0, 1)
        assert r["logprob_a"] == pytest.approx(np.log(r["p_a"]))
        assert r["logprob_b"] == pytest.approx(np.log1p(-r["p_a"]))
        assert r["label"] == ("A" if r["p_a"] > 0.5 else "B") and r["seconds"] == 0.01
    assert slept == [pytest.approx(0.4)]
    assert SimulatedJudge(SimulatedJudgeSpec(), sleep=slept.append).judge(reqs).num_rows == 40 and len(slept) == 1


def test_the_hold_gate_judges_hold_from_batches_then_holds_each_until_released(tmp_path):
    """The gate tests hold runs with: batches number themselves across judges, the first ``hold_from`` pass, the
    rest wait for ``release`` (checked by state: the held threads have not returned until it exists)."""
    gate = Gate(tmp_path / "gate")
    spec = SimulatedJudgeSpec(**gate.judge(hold_from=2))
    judges = [SimulatedJudge(spec), SimulatedJudge(spec)]
    assert judge_identity(spec) == judge_identity(SimulatedJudgeSpec())
    for n in range(2):
        assert judges[n].judge(requests(random_pairs(3, seed=n))).num_rows == 3
    done: list[int] = []
    held = [
        threading.Thread(target=lambda j=j: done.append(j.judge(requests(random_pairs(2, seed=9))).num_rows))
        for j in judges
    ]
    for t in held:
        t.start()
    gate.wait_for(4)
    assert done == [] and all(t.is_alive() for t in held)
    assert len(gate.keys()) == 3 + 3 + 2 + 2
    gate.release()
    for t in held:
        t.join(60)
    assert done == [2, 2]


def until(state, bound_s: float = 60) -> None:
    """Wait for ``state()``; ``bound_s`` only bounds a hang."""
    deadline = time.monotonic() + bound_s
    while not state():
        assert time.monotonic() < deadline, "the state never came"
        time.sleep(0.01)  # a poll of the state waited for, not a window


def test_the_hold_gate_opens_in_steps(tmp_path):
    """``open_to(n)`` lets the batches numbered below n through and keeps the later ones held: a run held twice."""
    gate = Gate(tmp_path / "gate")
    judge = SimulatedJudge(SimulatedJudgeSpec(**gate.judge(hold_from=1)))
    done: list[int] = []
    threads = [
        threading.Thread(target=lambda: done.append(judge.judge(requests(random_pairs(2, seed=7))).num_rows))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    gate.wait_for(3)  # batch 0 judged, 1 and 2 held
    until(lambda: len(done) >= 1)  # batch 0 back
    assert done == [2] and sum(t.is_alive() for t in threads) == 2
    gate.open_to(2)  # batch 1 through, batch 2 still held
    until(lambda: len(done) >= 2)
    assert sum(t.is_alive() for t in threads) == 1
    gate.release()
    for t in threads:
        t.join(60)
    assert done == [2, 2, 2]


def test_identity_hashes_the_outcome_settings_only():
    ident = judge_identity(SimulatedJudgeSpec(noise=0.3))
    assert ident["engine"] == ident["model"] == "simulated"
    assert ident["sampling"]["noise"] == 0.3 and len(ident["revision"]) == 12
    assert judge_identity(SimulatedJudgeSpec(noise=0.3, seconds_per_comparison=1.0)) == ident
    assert judge_identity(SimulatedJudgeSpec(noise=0.4))["revision"] != ident["revision"]
    assert isinstance(make_judge(SimulatedJudgeSpec()), SimulatedJudge)


def _write_human_set(folder: Location) -> dict[str, dict[str, float]]:
    """Two contexts of five candidates, two annotators each; returns the human means."""
    gen = np.random.default_rng(7)
    cands, scores, means = [], [], {}
    for c in ("d1", "d2"):
        means[c] = {}
        for i in range(5):
            cid = f"{c}-s{i}"
            cands.append({"context_id": c, "context": "doc", "candidate_id": cid, "system": f"s{i}", "text": "t"})
            two = gen.uniform(1, 5, size=2)
            scores += [{"candidate_id": cid, "aspect": "coherence", "score": float(v)} for v in two]
            means[c][cid] = float(two.mean())
    folder.join("candidates.parquet").write_parquet(pa.Table.from_pylist(cands))
    folder.join("human_scores.parquet").write_parquet(pa.Table.from_pylist(scores))
    return means


def test_human_score_quality_ranks_like_human_means(tmp_path):
    folder = Location.of(str(tmp_path / "set"))
    means = _write_human_set(folder)
    pairs = [(c, a, b) for c, ms in means.items() for a, b in itertools.permutations(sorted(ms), 2)]
    for quality in (folder.uri, folder.join("human_scores.parquet").uri):
        judge = SimulatedJudge(SimulatedJudgeSpec(quality=quality, noise=0.0, position_bias=0.0))
        out = judge.judge(requests(pairs)).to_pylist()
        for c, ms in means.items():
            scores = win_ratios([(r["candidate_a"], r["candidate_b"], r["p_a"]) for r in out if r["context_id"] == c])
            assert sorted(ms, key=ms.get) == sorted(scores, key=scores.get)


def test_human_score_quality_missing_candidate_is_an_error_row_naming_it(tmp_path):
    folder = Location.of(str(tmp_path / "set"))
    _write_human_set(folder)
    judge = SimulatedJudge(SimulatedJudgeSpec(quality=folder.uri))
    out = judge.judge(requests([("d1", "d1-s0", "d1-s1"), ("d1", "d1-s0", "ghost")]))
    validate(out, JUDGMENTS, "simulated judge output")
    ok, bad = out.to_pylist()
    assert ok["error"] is None and bad["p_a"] is None and bad["label"] is None
    assert "'ghost'" in bad["error"] and "coherence" in bad["error"]


def test_human_score_quality_without_candidates_table_fails_at_construction(tmp_path):
    Location.of(str(tmp_path / "hs.parquet")).write_parquet(
        pa.table({"candidate_id": ["a"], "aspect": ["coherence"], "score": [1.0]})
    )
    with pytest.raises(FileNotFoundError, match="candidates.parquet"):
        SimulatedJudge(SimulatedJudgeSpec(quality=str(tmp_path / "hs.parquet")))


def test_length_bias_prefers_the_longer_text_by_the_log_length_ratio(tmp_path):
    texts = {"short": "a" * 100, "long": "b" * 300, "other": "c" * 100}
    folder = Location.of(str(tmp_path))
    folder.join("candidates.parquet").write_parquet(
        pa.table(
            {
                "context_id": ["d1"] * 3,
                "context": ["article"] * 3,
                "candidate_id": list(texts),
                "system": ["S1", "S2", "S3"],
                "text": list(texts.values()),
            }
        )
    )
    spec = SimulatedJudgeSpec(scale=0.0, noise=0.0, length_bias=1.0, lengths=folder.uri)
    out = SimulatedJudge(spec).judge(
        requests([("d1", "long", "short"), ("d1", "short", "long"), ("d1", "short", "other")])
    )
    # logit = 1.0 * log(300 / 100), so p_a = 300 / (300 + 100); equal lengths: 0.5
    assert np.allclose(out.column("p_a").to_pylist(), [0.75, 0.25, 0.5])
    # the length settings are part of the identity only when used: judges without them keep their keys
    assert "length_bias" in judge_identity(spec)["sampling"]
    assert "length_bias" not in judge_identity(SimulatedJudgeSpec())["sampling"]
    with pytest.raises(ValueError, match="length_bias needs judge.lengths"):
        SimulatedJudgeSpec(length_bias=1.0)
    with pytest.raises(ValueError, match="'ghost' is not in"):
        SimulatedJudge(spec).judge(requests([("d1", "ghost", "short")]))


TEXT = st.text(alphabet=st.sampled_from(list("ab é漢\t\n\r\x0b\x0c\xa0\u2003\x85")), max_size=40)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.none(), TEXT), max_size=12), st.integers(0, 3), st.integers(0, 3))
def test_prompt_words_count_what_a_regex_for_non_spaces_counts(texts, cut_front, cut_back):
    # a slice of a chunked column, with nulls: the counts are the regex's on the same strings (null: 0)
    column = pa.chunked_array(
        [pa.array(texts[: len(texts) // 2], pa.string()), pa.array(texts[len(texts) // 2 :], pa.string())]
    )
    column = column.slice(cut_front, max(0, len(texts) - cut_front - cut_back))
    expected = pc.count_substring_regex(column, r"\S+").fill_null(0).to_pylist()
    assert prompt_words(pa.table({"prompt": column})) == expected
