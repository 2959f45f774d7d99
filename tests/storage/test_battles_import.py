"""``pairank import battles`` and ``pairank leaderboard --input``: a battle log becomes a judgments table that the
leaderboard, win rates and meta-evaluation read; its board is exported as AlpacaEval's and Arena-Hard's CSV."""

from __future__ import annotations

import csv
import io
import json
import sys

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main
from pairank.jobs.leaderboard_input import input_leaderboard
from pairank.judges.engines.replay_judge import read_judgments
from pairank.operators.battles import bradley_terry
from pairank.operators.board_csv import ALPACA_EVAL_COLUMNS, ARENA_HARD_COLUMNS
from pairank.storage.fs import Location
from pairank.storage.importers.battles import ASPECT, NO_TEXT, BattleFields, import_battles
from pairank.storage.inputs import read_candidates, read_labels, read_style_features
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.validation import TableError
from tests import formats as F


def test_an_lmarena_log_becomes_judgments_candidates_labels_and_style(tmp_path):
    log = F.battles(tmp_path, n=40)
    counts = import_battles([str(log)], str(tmp_path / "in"))
    raw = [json.loads(x) for x in log.read_text().splitlines()]
    assert counts["battles"] == 40 and counts["models"] == sorted(F.SYSTEMS)
    assert counts["ties"] == sum(r["winner"].startswith("tie") for r in raw)
    folder = Location.of(str(tmp_path / "in"))
    j = read_judgments(folder.join("judgments.parquet").uri)
    cands = read_candidates(folder)
    assert j.num_rows == 40 and cands.num_rows == 80 and set(j.column("aspect").to_pylist()) == {ASPECT}
    first = next(r for r in j.to_pylist() if r["context_id"] == "b0000")
    assert first["candidate_a"] == f"b0000/{raw[0]['model_a']}" and first["raw_text"] == raw[0]["winner"]
    assert first["label"] == {"model_a": "A", "model_b": "B"}.get(raw[0]["winner"], "tie")
    text = {r["candidate_id"]: r["text"] for r in cands.to_pylist()}
    assert text[first["candidate_b"]] == raw[0]["conversation_b"][-1]["content"]
    assert read_labels(folder).num_rows == 40  # human votes are human labels
    style = read_style_features(folder).to_pylist()
    assert {r["candidate_id"] for r in style} == set(text)
    row = next(r for r in style if r["candidate_id"] == first["candidate_a"])
    assert row["length"] == raw[0]["conv_metadata"]["sum_assistant_a_tokens"]


def test_mapped_columns_without_conversations(tmp_path):
    rows = [{"left": a, "right": b, "verdict": w} for a, b, w in [("x", "y", "A"), ("y", "z", "B"), ("x", "z", "tie")]]
    path = F.write_jsonl(tmp_path / "v.jsonl", rows)
    fields = BattleFields(model_a="left", model_b="right", winner="verdict", id=None, judge="gpt-judge")
    counts = import_battles([str(path)], str(tmp_path / "in"), fields, "table")
    folder = Location.of(str(tmp_path / "in"))
    assert counts["battles"] == 3 and not folder.join("pairwise_labels.parquet").exists()  # not human votes
    assert not folder.join("style_features.parquet").exists()
    assert set(read_candidates(folder).column("text").to_pylist()) == {NO_TEXT}
    assert read_judgments(folder.join("judgments.parquet").uri).column("model").to_pylist() == ["gpt-judge"] * 3


@pytest.mark.parametrize(
    "change, field, found",
    [
        (lambda r: r.pop("winner"), "winner", "None"),
        (lambda r: r.update(winner="model_c"), "winner", "'model_c'"),
        (lambda r: r.update(model_b=r["model_a"]), "model_b", "a model other than"),
        (lambda r: r["conversation_b"].pop(), "conversation_b", "the last the assistant's"),
        (lambda r: r["conv_metadata"].update(header_count_a={"h1": -1}), "conv_metadata.header_count_a", "-1"),
        (lambda r: r.update(question_id="b0000"), "question_id", "also in"),
    ],
)
def test_bad_battles_are_refused_with_file_line_and_field(tmp_path, change, field, found):
    log = F.battles(tmp_path, n=5)
    rows = [json.loads(x) for x in log.read_text().splitlines()]
    change(rows[3])
    F.write_jsonl(log, rows)
    with pytest.raises(TableError) as e:
        import_battles([str(log)], str(tmp_path / "in"))
    assert "battles.jsonl line 4" in str(e.value) and f"`{field}`" in str(e.value) and found in str(e.value)
    assert not (tmp_path / "in").exists()  # nothing half-written, and no folder made for it


def _csv_rows(loc: Location) -> list[dict]:
    return list(csv.DictReader(io.StringIO(loc.read_text())))


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_a_public_log_gets_a_leaderboard_and_the_peers_csv(tmp_path, where, request, capsys):
    if where == "s3":
        request.getfixturevalue("s3_server")
    dst = str(tmp_path / "in") if where == "local" else "s3://pairank/battles/in"
    log = F.battles(tmp_path, n=200, seed=3)
    assert main(["import", "battles", str(log), dst]) == 0
    assert main(["leaderboard", "--input", dst, "--baseline", "base", "--n-boot", "40"]) == 0
    err = capsys.readouterr().err
    out = Location.of(dst).join("leaderboard")
    doc = out.join("leaderboard.json").read_json()
    rows = [r for r in doc["rows"] if r["aspect"] == "overall"]
    ranked = [r["system"] for r in sorted(rows, key=lambda r: r["rank"])]
    assert ranked[0] == "strong" and ranked[-1] == "weak"  # the log's seeded strengths, best first
    assert doc["style_features"].startswith("given") and doc["intervals"]["strength"].startswith("bootstrap")
    assert (
        doc["intervals"]["style_strength"]
        == "bootstrap percentile, 95%, over contexts resampled with replacement (40 refits)"
    )
    ah = _csv_rows(out.join("arena_hard.csv"))
    assert list(ah[0]) == list(ARENA_HARD_COLUMNS) and {r["model"] for r in ah} == set(F.SYSTEMS)
    base = next(r for r in ah if r["model"] == "base")
    assert float(base["score"]) == 50.0
    strong = next(r for r in ah if r["model"] == "strong")
    assert float(strong["rating_q025"]) < float(strong["score"]) < float(strong["rating_q975"])
    ae = _csv_rows(out.join("alpaca_eval.csv"))
    assert list(ae[0]) == list(ALPACA_EVAL_COLUMNS)
    row = next(r for r in ae if r[""] == "strong")
    assert int(row["n_wins"]) + int(row["n_wins_base"]) + int(row["n_draws"]) == int(row["n_total"]) > 0
    assert "extrapolates" in err  # the strong system's answers are always longer than the baseline's


def test_the_leaderboard_computes_as_the_peers_when_asked(tmp_path):
    """``--compat lmarena``: the strengths (Elo) and style-controlled columns are the peer's fits (the battles
    API's on the same log), the intervals say whose; an unknown name is refused by the parser."""
    log = F.battles(tmp_path, n=200, seed=3)
    dst = str(tmp_path / "in")
    assert main(["import", "battles", str(log), dst]) == 0
    docs = {}
    for name, extra in (("own", []), ("compat", ["--compat", "lmarena"])):
        out = str(tmp_path / name)
        assert main(["leaderboard", "--input", dst, "--baseline", "base", "--n-boot", "0", "--out", out, *extra]) == 0
        docs[name] = Location.of(out).join("leaderboard.json").read_json()
    rows = {k: {r["system"]: r for r in d["rows"] if r["aspect"] == "overall"} for k, d in docs.items()}
    assert docs["compat"]["intervals"]["style_strength"].startswith("sandwich")
    assert docs["own"]["intervals"]["style_strength"].startswith("Wald")
    # this log's style is separated for pairank's own fit; LMArena's penalised fit stays finite and ordered
    assert all(r["style_status"] == "ok" for r in rows["compat"].values())
    styled = sorted(rows["compat"], key=lambda s: -rows["compat"][s]["style_strength"])
    assert styled[0] == "strong" and styled[-1] == "weak"
    assert [r["style_strength"] for r in rows["own"].values()] != [r["style_strength"] for r in rows["compat"].values()]
    # (compat alpaca-eval needs contexts that battles share: test_lc_as_alpaca_eval_is_refused_where_...)
    # the Elo column is arena-rank's Bradley-Terry (no prior, sandwich intervals): the battles API's lmarena fit
    battles = [json.loads(line) for line in log.read_text().splitlines()]
    api = bradley_terry(
        {k: [b[k] for b in battles] for k in ("model_a", "model_b", "winner")}, compat="lmarena", n_boot=0
    )
    for r in api.table.to_pylist():
        got = rows["compat"][r["system"]]
        assert max(abs(got[k] - r[k]) for k in ("elo", "elo_low", "elo_high")) < 1e-6
    assert docs["compat"]["intervals"]["elo"].startswith("sandwich") and docs["compat"]["prior_ties"] == 0
    assert max(abs(rows["own"][s]["elo"] - rows["compat"][s]["elo"]) for s in rows["own"]) > 0.1
    assert "compat lmarena" in Location.of(str(tmp_path / "compat")).join("index.html").read_text()
    with pytest.raises(SystemExit):
        main(["leaderboard", "--input", dst, "--compat", "arena"])


def test_win_rates_and_meta_eval_read_imported_verdicts(tmp_path, capsys):
    log = F.battles(tmp_path, n=80)
    import_battles([str(log)], str(tmp_path / "in"))
    assert (
        main(["winrate", "--input", str(tmp_path / "in"), "--baseline", "base", "--methods", "observed", "--json"]) == 0
    )
    doc = json.loads(capsys.readouterr().out)
    assert {r["system"] for r in doc["winrates"]} == {"strong", "wordy", "weak"}
    assert main(["meta-eval", "--input", str(tmp_path / "in"), "--out", str(tmp_path / "me")]) == 0
    table = pq.read_table(tmp_path / "me" / "meta_eval.parquet").to_pylist()
    assert table and all(r["correct_False"].startswith(f"{r['n_correct_False']} /") for r in table)


def test_leaderboard_input_names_a_judgment_outside_the_candidates(tmp_path):
    log = F.battles(tmp_path, n=10)
    import_battles([str(log)], str(tmp_path / "in"))
    rows = pq.read_table(tmp_path / "in" / "judgments.parquet").to_pylist()
    rows[4]["candidate_b"] = "nowhere/ghost"
    pq.write_table(pa.Table.from_pylist(rows, schema=JUDGMENTS), tmp_path / "j.parquet")
    with pytest.raises(ValueError, match="context 'b0004'.*'nowhere/ghost' are not both in"):
        input_leaderboard(str(tmp_path / "in"), [str(tmp_path / "j.parquet")])


def test_style_counts_nested_too_deep_are_exit_2_naming_file_line_and_field(tmp_path, capsys):
    """A RecursionError (exit 1) before."""
    log = tmp_path / "deep.jsonl"
    deep = "[" * 100_000 + "]" * 100_000
    battle = '{"model_a": "x", "model_b": "y", "winner": "tie"'
    log.write_text(f'{battle}}}\n{battle}, "conv_metadata": {{"sum_assistant_a_tokens": {deep}}}}}\n')
    assert main(["import", "battles", str(log), str(tmp_path / "in")]) == 2
    err = capsys.readouterr().err
    assert f"column `conv_metadata.sum_assistant_a_tokens` in {log} line 2" in err, err
    # the parser's limit is this process's recursion limit (1,000 by default; a library may raise it: PyMC does)
    limit = f"{sys.getrecursionlimit():,}"
    assert f"expected JSON nested fewer than about {limit} levels deep, found 100,002 levels" in err


@pytest.mark.parametrize(
    "tstamp, found",
    [("Infinity", "inf"), ("1e300", "1e+300"), ("NaN", "nan"), ("-1e12", "-1000000000000.0"), ('"noon"', "'noon'")],
)
def test_a_tstamp_that_is_no_time_is_exit_2_naming_file_line_and_field(tmp_path, capsys, tstamp, found):
    """Before: an OverflowError (exit 1) for Infinity and 1e300, a bare "Invalid value NaN" or "year -29719 is out
    of range" for the others."""
    log = tmp_path / "times.jsonl"
    battle = '{"model_a": "x", "model_b": "y", "winner": "tie", "tstamp": '
    log.write_text(f"{battle}1700000000.5}}\n{battle}{tstamp}}}\n")
    assert main(["import", "battles", str(log), str(tmp_path / "in")]) == 2
    err = capsys.readouterr().err
    assert (
        f"column `tstamp` in {log} line 2: expected a finite Unix time in seconds (a number from -62135596800 to "
        f"253402300799: the years 1 to 9999), found {found}"
    ) in err, err


def test_a_tstamp_is_the_judgment_time(tmp_path):
    log = tmp_path / "times.jsonl"
    log.write_text('{"model_a": "x", "model_b": "y", "winner": "tie", "tstamp": 1700000000.5}\n')
    import_battles([str(log)], str(tmp_path / "in"))
    created = pq.read_table(tmp_path / "in" / "judgments.parquet").column("created_at")[0].as_py()
    assert created.isoformat() == "2023-11-14T22:13:20.500000+00:00"


@pytest.mark.parametrize("broken", [b"PAR1 not a Parquet file", None])
def test_a_battle_log_in_parquet_that_does_not_decode_is_named(tmp_path, capsys, broken):
    """Before: pyarrow's "Parquet magic bytes not found in footer ..." alone, naming no file."""
    log = tmp_path / "battles.parquet"
    rows = [{"model_a": "x", "model_b": "y", "winner": "tie", "question_id": f"q{i}"} for i in range(100)]
    pq.write_table(pa.Table.from_pylist(rows), log)
    data = log.read_bytes()
    log.write_bytes(broken if broken is not None else data[: len(data) - 9])  # garbage, or cut before its footer
    assert main(["import", "battles", str(log), str(tmp_path / "in")]) == 2
    err = capsys.readouterr().err
    assert f"{log}: not a readable Parquet file ({log.stat().st_size} bytes, Parquet magic bytes" in err, err


def arena_hard_log(folder, questions: int = 6, repeat: int = 2):
    """Battles in the lmarena layout whose question_id is the prompt (as in Arena-Hard's judgments): on each
    question every other system meets the baseline (SYSTEMS[0]), each with one reply per question, and each
    (question, pair) is voted ``repeat`` times (different winners: repeated votes)."""
    rows = []
    for q in range(questions):
        for other in F.SYSTEMS[1:]:
            for vote in range(repeat):
                conv = {
                    s: [
                        {"role": "user", "content": f"question {q}"},
                        {"role": "assistant", "content": f"{s} answers {q}" + " at length" * ((q + k) % 4)},
                    ]
                    for k, s in enumerate(F.SYSTEMS)
                }
                a, b = (F.SYSTEMS[0], other) if q % 2 == 0 else (other, F.SYSTEMS[0])  # the baseline in both slots
                rows.append(
                    {
                        "question_id": f"q{q}",
                        "model_a": a,
                        "model_b": b,
                        "winner": ["model_a", "model_b", "tie"][(q + vote) % 3],
                        "conversation_a": conv[a],
                        "conversation_b": conv[b],
                    }
                )
    return F.write_jsonl(folder / "arena_hard.jsonl", rows), rows


def test_a_log_whose_question_id_is_the_prompt_imports_with_a_context_field(tmp_path, capsys):
    """Issue 49, item 1: the battles of one question share its context, each model's reply there is one candidate,
    and repeated votes on one (question, a, b) are judgments of their own. Without the field, the log is refused
    with a hint naming it."""
    log, rows = arena_hard_log(tmp_path)
    assert main(["import", "battles", str(log), str(tmp_path / "refused")]) == 2
    assert "give --context-field question_id" in capsys.readouterr().err

    assert main(["import", "battles", str(log), str(tmp_path / "in"), "--context-field", "question_id"]) == 0
    folder = Location.of(str(tmp_path / "in"))
    cands = read_candidates(folder)
    assert sorted(set(cands.column("context_id").to_pylist())) == [f"q{q}" for q in range(6)]
    assert cands.num_rows == 6 * len(F.SYSTEMS)  # one candidate per (question, model)
    judged = read_judgments(folder.join("judgments.parquet").uri)  # one row per key: nothing collapsed
    assert judged.num_rows == len(rows) == 6 * (len(F.SYSTEMS) - 1) * 2
    pair = [r for r in judged.to_pylist() if r["context_id"] == "q0" and r["candidate_b"] == f"q0/{F.SYSTEMS[1]}"]
    assert sorted(r["label"] for r in pair) == ["A", "B"]  # the two votes on one pair, both kept
    assert read_labels(folder).num_rows == len(rows)


def test_battles_of_one_context_that_disagree_on_its_prompt_or_a_reply_are_refused(tmp_path):
    log, rows = arena_hard_log(tmp_path, questions=2)
    rows[3]["conversation_b"][-1]["content"] = "another reply"
    F.write_jsonl(log, rows)
    with pytest.raises(TableError) as e:
        import_battles([str(log)], str(tmp_path / "in"), BattleFields(context="question_id"))
    assert (
        "line 4" in str(e.value) and "`conversation_b`" in str(e.value) and "'s reply in context 'q0'" in str(e.value)
    )
    rows[3]["conversation_b"][-1]["content"] = rows[2]["conversation_b"][-1]["content"]
    rows[5]["conversation_a"][0]["content"] = rows[5]["conversation_b"][0]["content"] = "another question"
    F.write_jsonl(log, rows)
    with pytest.raises(TableError) as e:
        import_battles([str(log)], str(tmp_path / "in"), BattleFields(context="question_id"))
    assert (
        "line 6" in str(e.value)
        and "`question_id`" in str(e.value)
        and "the same prompt as context 'q0'" in str(e.value)
    )


def test_lc_as_alpaca_eval_is_refused_where_each_battle_is_a_context_of_its_own(tmp_path, capsys):
    """Issue 49, item 2: imported without a context field, every battle is its own context, each instruction's
    difficulty would be that battle's own result, and AlpacaEval's LC win rate came out as the raw win rate with no
    word. It is refused, naming why and the way out; with the prompts shared the board is built."""
    log, _ = arena_hard_log(tmp_path, questions=12, repeat=1)
    baseline = F.SYSTEMS[0]
    assert main(["import", "battles", str(log), str(tmp_path / "apart"), "--id-field", "none"]) == 0
    capsys.readouterr()
    board = ["leaderboard", "--n-boot", "0", "--baseline", baseline, "--compat", "alpaca-eval", "--input"]
    assert main([*board, str(tmp_path / "apart")]) == 2
    err = capsys.readouterr().err
    assert f"36 of the 36 comparisons with {baseline} are the only one of their context" in err
    assert "--context-field FIELD" in err

    assert main(["import", "battles", str(log), str(tmp_path / "shared"), "--context-field", "question_id"]) == 0
    assert main([*board, str(tmp_path / "shared")]) == 0
    doc = Location.of(str(tmp_path / "shared")).join("leaderboard", "leaderboard.json").read_json()
    assert "AlpacaEval" in doc["intervals"]["lc_win_rate"]
    lc = {r["system"]: r for r in doc["rows"] if r["aspect"] == "overall" and r["system"] != baseline}
    assert lc and all(r["lc_win_rate"] is not None and 0 <= r["lc_win_rate"] <= 1 for r in lc.values())
