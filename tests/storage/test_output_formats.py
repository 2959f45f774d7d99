"""``pairank import outputs``: every format from fixtures written here, locally and on S3, streamed; every bad
record refused with its file, line and field; a grown set re-imported keeps its ids."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main
from pairank.operators.conversations import candidate_texts, context_texts
from pairank.storage.fs import Location
from pairank.storage.importers import sources
from pairank.storage.importers.outputs import Fields, import_outputs
from pairank.storage.inputs import read_candidates
from pairank.storage.validation import TableError
from tests import formats as F


def read(dst) -> pa.Table:
    return read_candidates(Location.of(str(dst)))


def test_alpaca_eval_outputs_one_file_per_model(tmp_path):
    files = F.alpaca_eval(tmp_path / "src", n=5)
    counts = import_outputs("alpaca-eval", [str(p) for p in files], str(tmp_path / "out"))
    t = read(tmp_path / "out")
    assert counts["candidates"] == 20 and counts["contexts"] == 5 and counts["systems"] == sorted(F.SYSTEMS)
    rows = t.to_pylist()
    assert {r["context"] for r in rows} == {F.question(i) for i in range(5)}
    assert all(r["candidate_id"] == f"{r['context_id']}/{r['system']}" for r in rows)
    assert {r["category"] for r in rows} == {"helpful", "koala"}
    assert all(r["conversation"] is None and r["prior_replies"] is None for r in rows)


@pytest.mark.parametrize("layout", [F.arena_hard_v01, F.arena_hard_v2])
def test_arena_hard_both_layouts(tmp_path, layout):
    layout(tmp_path / "ah", n=4)
    import_outputs("arena-hard", [str(tmp_path / "ah")], str(tmp_path / "out"))
    t = read(tmp_path / "out")
    by_id = {r["candidate_id"]: r for r in t.to_pylist()}
    qid = "q001" if layout is F.arena_hard_v01 else "u001"
    r = by_id[f"{qid}/wordy"]
    assert r["text"] == F.answer("wordy", 1) and r["context"] == F.question(1)
    cats = {r["category"] for r in by_id.values()}
    assert cats == ({"arena-hard-v0.1"} if layout is F.arena_hard_v01 else {"hard_prompt", "creative_writing"})


def test_mt_bench_turns_are_contexts_and_turn_two_is_a_conversation(tmp_path):
    F.mt_bench(tmp_path / "mt", n=4)
    counts = import_outputs("mt-bench", [str(tmp_path / "mt")], str(tmp_path / "out"))
    assert counts["contexts"] == 8 and counts["candidates"] == 32
    t = read(tmp_path / "out")
    rows = {r["candidate_id"]: r for r in t.to_pylist()}
    one, two = rows["82/turn1/strong"], rows["82/turn2/strong"]
    assert one["conversation"] is None and one["prior_replies"] is None and one["reference"] == "Reference for 1."
    assert json.loads(two["conversation"]) == [
        {"role": "user", "content": F.question(1)},
        {"role": "user", "content": "Now say it in one line (question 1)."},
    ]
    assert json.loads(two["prior_replies"]) == [F.answer("strong", 1, 1)] and two["text"] == F.answer("strong", 1, 2)
    assert rows["81/turn2/base"]["reference"] is None  # a writing question has none
    # what the judge sees: the conversation turn by turn, the reference, each candidate's replies by turn
    seen_ctx, seen_text = context_texts(t), candidate_texts(t)
    assert seen_ctx["82/turn2"].index("User, turn 1:") < seen_ctx["82/turn2"].index("User, turn 2:")
    assert "Reference answer" in seen_ctx["82/turn2"] and "Short reference 1." in seen_ctx["82/turn2"]
    assert seen_text["82/turn2/strong"].startswith("Reply to turn 1:\n" + F.answer("strong", 1, 1))
    assert seen_text["82/turn2/strong"].endswith("(the reply to judge):\n" + F.answer("strong", 1, 2))
    assert seen_text["82/turn1/strong"] == F.answer("strong", 1, 1)


@pytest.mark.parametrize("kind", ["jsonl", "csv", "parquet"])
def test_mapped_tables(tmp_path, kind):
    files = F.table_files(tmp_path / "tab", n=3)
    fields = Fields(context="prompt", output="response", system="model", id="id", category="topic")
    import_outputs("table", [str(files[kind])], str(tmp_path / "out"), fields)
    rows = {r["candidate_id"]: r for r in read(tmp_path / "out").to_pylist()}
    assert set(rows) == {f"p{i}/{s}" for i in range(3) for s in F.SYSTEMS}
    assert rows["p2/weak"]["text"] == F.answer("weak", 2) and rows["p2/weak"]["category"] == F.TOPICS[2]


def test_table_with_messages_and_a_system_prompt(tmp_path):
    rows = [
        {
            "conv": [
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "Bye?"},
            ],
            "sys": "Be brief.",
            "out": f"Bye from {s}.",
            "who": s,
        }
        for s in ("x", "y")
    ]
    F.write_jsonl(tmp_path / "c.jsonl", rows)
    fields = Fields(context="conv", output="out", system="who", system_prompt="sys")
    import_outputs("table", [str(tmp_path / "c.jsonl")], str(tmp_path / "out"), fields)
    t = read(tmp_path / "out")
    conv = json.loads(t.column("conversation")[0].as_py())
    assert [m["role"] for m in conv] == ["system", "user", "assistant", "user"]
    assert context_texts(t)[t.column("context_id")[0].as_py()].startswith("System:\nBe brief.\n\nUser, turn 1:\nHi")


def test_a_grown_set_keeps_ids_and_adds_new_systems(tmp_path):
    files = dict(zip(F.SYSTEMS, F.alpaca_eval(tmp_path / "src", n=4)))
    out = str(tmp_path / "out")
    import_outputs("alpaca-eval", [str(files["base"]), str(files["strong"])], out)
    before = {r["candidate_id"]: r for r in read(out).to_pylist()}
    counts = import_outputs("alpaca-eval", [str(files["base"]), str(files["weak"])], out)
    after = {r["candidate_id"]: r for r in read(out).to_pylist()}
    assert counts["kept"] == 8 and counts["added"] == 4 and counts["same"] == 4
    assert {k: after[k] for k in before} == before
    assert {r["system"] for r in after.values()} == {"base", "strong", "weak"}
    # an output that changed under a known id is refused, and the table stays as it was
    doc = json.loads(files["weak"].read_text())
    doc[2]["output"] = "changed"
    files["weak"].write_text(json.dumps(doc, indent=2))
    with pytest.raises(TableError) as e:
        import_outputs("alpaca-eval", [str(files["weak"])], out)
    assert "model_outputs.json line" in str(e.value) and "`output`" in str(e.value) and "changed" in str(e.value)
    assert {r["candidate_id"]: r for r in read(out).to_pylist()} == after
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["candidates.parquet"]  # no temp file left


def test_json_arrays_stream_across_buffer_boundaries(tmp_path, monkeypatch):
    records = [{"instruction": f"q{i} {'x' * (i % 7)}", "n": i * 1.5, "nested": {"k": [i, "a\nb"]}} for i in range(50)]
    path = tmp_path / "a.json"
    path.write_text(json.dumps(records, indent=1))
    monkeypatch.setattr(sources, "CHUNK", 7)
    got = list(sources.records(Location.of(str(path))))
    assert [r for _, r in got] == records
    lines = path.read_text().splitlines()
    for where, r in got:  # each record's line is where its object starts
        assert lines[where.line - 1].strip() == "{" and f'"q{r["n"] / 1.5:.0f} ' in lines[where.line]


def _refused(tmp_path, fmt, src, *where, fields: Fields | None = None) -> str:
    out = tmp_path / "refused"
    with pytest.raises(TableError) as e:
        import_outputs(fmt, [str(s) for s in src], str(out), fields or Fields())
    message = str(e.value)
    for part in where:
        assert part in message, message
    assert not out.exists()  # nothing half-written, and no folder made for it
    return message


def test_bad_records_are_refused_with_file_line_and_field(tmp_path):
    good = [{"instruction": F.question(i), "output": F.answer(s, i), "generator": s} for i in range(2) for s in "xy"]

    def alpaca(name, rows):
        path = tmp_path / name
        path.write_text(json.dumps(rows, indent=2))
        return [path]

    missing = [dict(good[0]), *good[1:]]
    del missing[0]["output"]
    _refused(tmp_path, "alpaca-eval", alpaca("missing.json", missing), "missing.json line 2", "`output`", "none")
    wrong = [*good[:2], {**good[2], "output": 7}, good[3]]
    _refused(tmp_path, "alpaca-eval", alpaca("wrong.json", wrong), "wrong.json line 12", "`output`", "int 7")
    empty = [*good[:3], {**good[3], "output": "  "}]
    _refused(tmp_path, "alpaca-eval", alpaca("empty.json", empty), "empty.json line 17", "`output`", "non-empty")
    dup = [*good, good[1]]
    _refused(tmp_path, "alpaca-eval", alpaca("dup.json", dup), "dup.json line 22", "`id`", "dup.json line 7")
    alone = good[:3]
    _refused(tmp_path, "alpaca-eval", alpaca("alone.json", alone), "alone.json line 12", "at least 2 candidates")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([json.dumps(good[0]), "{not json", json.dumps(good[1])]) + "\n")
    _refused(tmp_path, "alpaca-eval", [bad], "bad.jsonl line 2", "a JSON object", "column 2")


def test_bad_answers_in_folders_and_tables(tmp_path):
    F.arena_hard_v2(tmp_path / "ah", n=3)
    answers = tmp_path / "ah" / "model_answer" / "weak.jsonl"
    rows = [json.loads(x) for x in answers.read_text().splitlines()]
    rows[1]["uid"] = "nope"
    F.write_jsonl(answers, rows)
    _refused(tmp_path, "arena-hard", [tmp_path / "ah"], "weak.jsonl line 2", "`uid`", "'nope'")
    F.mt_bench(tmp_path / "mt", n=2)
    answers = tmp_path / "mt" / "model_answer" / "base.jsonl"
    rows = [json.loads(x) for x in answers.read_text().splitlines()]
    rows[0]["choices"][0]["turns"] = ["only one"]
    F.write_jsonl(answers, rows)
    _refused(tmp_path, "mt-bench", [tmp_path / "mt"], "base.jsonl line 1", "`choices[0].turns`", "2 answers")
    files = F.table_files(tmp_path / "tab", n=2)
    text = files["csv"].read_text()  # records span lines (quoted answers with line breaks)
    files["csv"].write_text(text + "p9,a prompt,a response,m,t,extra\n")
    fields = Fields(context="prompt", output="response", id="id")
    line = text.count("\n") + 1
    _refused(tmp_path, "table", [files["csv"]], f"outputs.csv line {line}", "5 fields", fields=fields)
    t = pq.read_table(files["parquet"]).to_pylist()
    t[5]["response"] = ""
    pq.write_table(pa.Table.from_pylist(t), files["parquet"])
    _refused(tmp_path, "table", [files["parquet"]], "outputs.parquet row 5", "`response`", fields=fields)


def test_the_command_on_s3_and_its_exit_code(tmp_path, s3_server, capsys):
    F.arena_hard_v01(tmp_path / "ah", n=3)
    dst = "s3://pairank/formats/arena-hard"
    assert main(["import", "outputs", str(tmp_path / "ah"), dst, "--format", "arena-hard"]) == 0
    assert json.loads(capsys.readouterr().out)["candidates"] == 12
    assert read(dst).num_rows == 12
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "p", "output": "o", "model": "m"}\n{"prompt": 3}\n')
    assert main(["import", "outputs", str(bad), "s3://pairank/formats/bad", "--format", "table"]) == 2
    assert "bad.jsonl line 2" in capsys.readouterr().err
    assert not Location.of("s3://pairank/formats/bad/candidates.parquet").exists()


def test_unknown_format_lists_the_known(tmp_path):
    with pytest.raises(ValueError, match="alpaca-eval, arena-hard, mt-bench, table"):
        import_outputs("lmsys", [str(tmp_path)], str(tmp_path / "o"))


def test_nothing_visible_when_a_run_reads_an_outputs_folder(tmp_path):
    """The written table is an input a run reads: the optional columns conform (CANDIDATES + optional)."""
    F.mt_bench(tmp_path / "mt", n=2)
    import_outputs("mt-bench", [str(tmp_path / "mt")], str(tmp_path / "out"))
    names = read(tmp_path / "out").schema.names
    assert names[:5] == ["context_id", "context", "candidate_id", "system", "text"]
    assert set(names[5:]) == {"category", "conversation", "prior_replies", "reference"}


#: A value nested 100,000 lists deep: too deep for Python's JSON parser (a RecursionError, exit 1, before).
DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("suffix", ["jsonl", "json"])
def test_json_nested_too_deep_is_exit_2_naming_file_line_and_field(tmp_path, capsys, suffix):
    good = json.dumps({"instruction": "q", "output": "o", "generator": "x"})
    bad = '{"instruction": "q", "generator": "y", "output": "o", "dataset": ' + DEEP + "}"
    path = tmp_path / f"deep.{suffix}"
    path.write_text(f"{good}\n{bad}\n" if suffix == "jsonl" else f"[{good},\n{bad}]\n")
    assert main(["import", "outputs", str(path), str(tmp_path / "out"), "--format", "alpaca-eval"]) == 2
    err = capsys.readouterr().err
    assert f"column `dataset` in {path} line 2" in err, err
    # the parser's limit is this process's recursion limit (1,000 by default; a library may raise it: PyMC does)
    limit = f"{sys.getrecursionlimit():,}"
    assert f"expected JSON nested fewer than about {limit} levels deep, found 100,001 levels" in err


def _broken_parquets(folder) -> dict[str, tuple]:
    """A truncated, a garbage and a corrupt-page Parquet file of a table import's layout, with what names them."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = pa.table({"prompt": [f"p{i // 2}" for i in range(20_000)], "output": [f"o{i}" * 9 for i in range(20_000)]})
    good = folder / "good.parquet"
    pq.write_table(rows.append_column("model", pa.array(["m", "n"] * 10_000)), good, row_group_size=5000)
    data = good.read_bytes()
    made = {
        "truncated": (data[: len(data) // 2], "Parquet magic bytes not found"),
        "garbage": (b"PAR1 not a Parquet file", "Parquet magic bytes not found"),
        "corrupt": (data[: len(data) // 2] + b"\0" * 4000 + data[len(data) // 2 + 4000 :], "reading from row "),
    }
    out = {}
    for name, (blob, says) in made.items():
        (folder / f"{name}.parquet").write_bytes(blob)
        out[name] = (folder / f"{name}.parquet", f"{len(blob)} bytes, ", says)
    return out


@pytest.mark.parametrize("broken", ["truncated", "garbage", "corrupt"])
def test_a_parquet_file_that_does_not_decode_is_named(tmp_path, capsys, broken):
    """Before: pyarrow's "Parquet magic bytes not found in footer ..." alone, naming no file."""
    path, size, says = _broken_parquets(tmp_path / "src")[broken]
    assert main(["import", "outputs", str(path), str(tmp_path / "out"), "--format", "table"]) == 2
    err = capsys.readouterr().err
    assert f"{path}: not a readable Parquet file ({size}" in err and says in err, err


@pytest.mark.parametrize("chunk", [sources.CHUNK, 5])
def test_bytes_that_are_not_utf8_are_named_by_line_and_byte(tmp_path, monkeypatch, chunk):
    """Before: "<file>: expected UTF-8 text, found invalid bytes (invalid start byte)", naming no line."""
    monkeypatch.setattr(sources, "CHUNK", chunk)  # the line found across the reader's buffers too
    good = json.dumps({"instruction": "café", "output": "o", "generator": "x"}, ensure_ascii=False).encode()
    before = b'{"instruction": "na'  # then a Latin-1 "ï": 0xef, not followed by UTF-8's continuation bytes
    path = tmp_path / "outputs.jsonl"
    path.write_bytes(good + b"\n\n" + before + b'\xefve", "output": "o", "generator": "y"}\n')
    message = _refused(tmp_path, "alpaca-eval", [path])
    assert message == (
        f"{path} line 3: expected UTF-8 text, found 0xef (invalid continuation byte) at byte {len(before) + 1} of the "
        f"line (file offset {len(good) + 2 + len(before)})"
    )


def test_a_failed_import_removes_the_folders_it_made_and_only_those(tmp_path):
    """Before: the destination was left behind, an empty folder."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "q", "output": "o", "generator": "x"}\n{"instruction": 3}\n')
    with pytest.raises(TableError):
        import_outputs("alpaca-eval", [str(bad)], str(tmp_path / "new" / "deeper" / "out"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.jsonl"]
    (tmp_path / "mine").mkdir()  # a destination that was there before stays, empty as it was
    with pytest.raises(TableError):
        import_outputs("alpaca-eval", [str(bad)], str(tmp_path / "mine"))
    assert (tmp_path / "mine").is_dir() and list((tmp_path / "mine").iterdir()) == []


def test_the_next_import_removes_what_a_killed_one_left(tmp_path):
    """A writer killed mid-import (SIGKILL: no clean-up runs) leaves its hidden file; the next import of the same
    destination deletes it. Before, nothing did (the chaos run found a 7.6 MB one)."""
    files = F.alpaca_eval(tmp_path / "src", n=3)
    out = tmp_path / "out"
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from pairank.storage.fs import Location\n"
            "from pairank.storage.importers.outputs import Writer\n"
            f"w = Writer(Location.of({str(out / 'candidates.parquet')!r}))\n"
            "print(w.tmp.path, flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        said = held.stdout.readline().strip()  # the writer's hidden file exists: it is mid-import
        assert said, "the writer did not start"
        left = Path(said)
        assert left.exists()
        other = out / f".candidates.parquet.elsewhere-1.{'0' * 32}.tmp"  # another host's, being written
        other.write_bytes(b"partial")
        held.kill()
        held.wait()
        assert left.exists()  # nothing removed it
        import_outputs("alpaca-eval", [str(p) for p in files], str(out))
        assert not left.exists() and other.exists()  # the dead writer's file is gone; a live one's kept
        hour_ago = time.time() - 3601
        os.utime(other, (hour_ago, hour_ago))  # not written for an hour: its writer is gone too
        import_outputs("alpaca-eval", [str(p) for p in files], str(out))
        assert sorted(p.name for p in out.iterdir()) == ["candidates.parquet"]
    finally:
        held.kill()
        held.wait()


def test_a_record_of_a_json_array_on_one_line_is_named_by_its_index(tmp_path):
    """Before: "line 1" alone for the 8th record of a compact array."""
    rows = [{"instruction": F.question(i), "output": F.answer(s, i), "generator": s} for i in range(4) for s in "xy"]
    rows[7]["output"] = 7
    path = tmp_path / "model_outputs.json"
    path.write_text(json.dumps(rows))
    message = _refused(tmp_path, "alpaca-eval", [path])
    assert message == f"column `output` in {path} line 1, array index 7: expected a text, found int 7"


def test_a_format_may_be_spelt_with_underscores(tmp_path, capsys):
    """``alpaca_eval`` (the peer's package name) as well as ``alpaca-eval``; before, it was refused."""
    files = F.alpaca_eval(tmp_path / "src", n=2)
    out = str(tmp_path / "out")
    assert main(["import", "outputs", *map(str, files), out, "--format", "alpaca_eval"]) == 0
    assert json.loads(capsys.readouterr().out)["format"] == "alpaca-eval" and read(out).num_rows == 8
    assert main(["import", "outputs", *map(str, files), out, "--format", "alpaca.eval"]) == 2
    assert "unknown output format 'alpaca.eval'; available: alpaca-eval, arena-hard" in capsys.readouterr().err
