"""Tests of storage.schemas validation, the judgment cache, local Location writes and judgment keys.

Local filesystem only; the S3 side of storage.fs is tested elsewhere.
"""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pairank.storage.fs import Location
from pairank.storage.keys import canonical_json, judgment_key, text_hash
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, JUDGMENTS, PAIRWISE_LABELS
from pairank.storage.store.cache import JudgmentCache, latest_per_key
from pairank.storage.validation import TableError, validate

ROOT = Path(__file__).resolve().parents[2]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SRC = "in/candidates.parquet"


def table_error(table: pa.Table, schema: pa.Schema, source: str = SRC) -> TableError:
    with pytest.raises(TableError) as info:
        validate(table, schema, source)
    return info.value


def candidates() -> pa.Table:
    rows = [
        {"context_id": "d1", "context": "doc one", "candidate_id": "x1", "system": "sx", "text": "a summary"},
        {"context_id": "d1", "context": "doc one", "candidate_id": "y1", "system": "sy", "text": "another"},
        {"context_id": "d2", "context": "doc two", "candidate_id": "x2", "system": "sx", "text": "third"},
        {"context_id": "d2", "context": "doc two", "candidate_id": "y2", "system": "sy", "text": "fourth"},
    ]
    return pa.Table.from_pylist(rows)


def with_value(table: pa.Table, row: int, column: str, value) -> pa.Table:
    rows = table.to_pylist()
    rows[row][column] = value
    return pa.Table.from_pylist(rows)


def judgment(key: str, p: float | None = 0.7, error: str | None = None, at: int = 0, **extra) -> dict:
    row = {
        "key": key,
        "engine": "replay",
        "model": "m",
        "revision": "r",
        "prompt_hash": "h",
        "sampling": "{}",
        "context_id": "d1",
        "aspect": "coherence",
        "candidate_a": "x1",
        "candidate_b": "y1",
        "p_a": p,
        "logprob_a": None,
        "logprob_b": None,
        "label": None if error or p is None else ("A" if p > 0.5 else "B" if p < 0.5 else "tie"),
        "raw_text": None,
        "input_tokens": 10,
        "output_tokens": 1,
        "seconds": 0.5,
        "error": error,
        "created_at": T0 + dt.timedelta(seconds=at),
    }
    row.update(extra)
    return row


def judgments(*rows: dict) -> pa.Table:
    return pa.Table.from_pylist(list(rows), schema=JUDGMENTS)


# --- validate ----------------------------------------------------------------------------------


def test_valid_tables_pass_and_are_conformed() -> None:
    # Columns in another order, strings where ints are expected: cast and reordered.
    t = candidates().select(["text", "candidate_id", "context_id", "system", "context"])
    out = validate(t, CANDIDATES, SRC)
    assert out.schema.equals(CANDIDATES)
    assert out.column("candidate_id").to_pylist() == ["x1", "y1", "x2", "y2"]
    scores = pa.table({"candidate_id": ["x1"], "aspect": ["coherence"], "score": ["4.5"]})
    assert validate(scores, HUMAN_SCORES, "s").column("score").to_pylist() == [4.5]
    j = pa.Table.from_pylist([judgment("k", input_tokens="12")])
    assert validate(j, JUDGMENTS, "j").column("input_tokens").to_pylist() == [12]


def test_missing_column_names_source_and_column() -> None:
    err = table_error(candidates().drop_columns(["system"]), CANDIDATES)
    assert err.source == SRC and err.column == "system"
    msg = str(err)
    assert SRC in msg and "`system`" in msg and "missing ['system']" in msg


def test_extra_column_names_source_and_column() -> None:
    err = table_error(candidates().append_column("score", pa.array([1.0] * 4)), CANDIDATES)
    assert err.column == "score"
    msg = str(err)
    assert SRC in msg and "`score`" in msg and "unexpected columns ['score']" in msg


def test_the_optional_category_column_is_kept_where_given_and_checked() -> None:
    plain = validate(candidates(), CANDIDATES, SRC)
    assert plain.schema.equals(CANDIDATES) and "category" not in plain.column_names  # absent stays absent
    t = candidates().append_column("category", pa.array(["news", "news", None, None]))
    out = validate(t.select(["category", *CANDIDATES.names]), CANDIDATES, SRC)
    assert out.column_names == [*CANDIDATES.names, "category"]  # after the schema's own columns
    assert out.column("category").to_pylist() == ["news", "news", None, None]
    err = table_error(with_value(t, 1, "category", "sports"), CANDIDATES)
    assert (err.row, err.column) == (1, "category")
    assert "the category of context 'd1' in row 0 ('news'; one category per context)" in str(err)
    err = table_error(with_value(with_value(t, 0, "category", " "), 1, "category", " "), CANDIDATES)
    assert (err.row, err.column, err.expected) == (0, "category", "a non-empty text or null")
    err = table_error(t.append_column("score", pa.array([1.0] * 4)), CANDIDATES)
    optional = "(optional: ['category', 'conversation', 'prior_replies', 'reference'])"
    assert "unexpected columns ['score']" in str(err) and optional in str(err)


def test_null_in_non_nullable_column() -> None:
    err = table_error(with_value(candidates(), 2, "text", None), CANDIDATES)
    assert (err.row, err.column) == (2, "text")
    assert str(err) == f"column `text` in {SRC} row 2: expected a value, found null"


def test_null_allowed_in_nullable_column() -> None:
    t = judgments(judgment("k", raw_text=None, logprob_a=None))
    assert validate(t, JUDGMENTS, "j").num_rows == 1


def test_uncastable_value_names_row_and_value() -> None:
    t = pa.table({"candidate_id": ["c1", "c2", "c3"], "aspect": ["a"] * 3, "score": ["4", "high", "oops"]})
    err = table_error(t, HUMAN_SCORES, "scores.parquet")
    assert (err.source, err.row, err.column) == ("scores.parquet", 1, "score")
    msg = str(err)
    assert "scores.parquet" in msg and "row 1" in msg and "`score`" in msg and "'high'" in msg


def test_uncastable_value_in_later_chunk_counts_rows_across_chunks() -> None:
    first = pa.table({"candidate_id": ["c1", "c2"], "aspect": ["a", "a"], "score": ["1", "2"]})
    second = pa.table({"candidate_id": ["c3", "c4"], "aspect": ["a", "a"], "score": ["3", "x"]})
    err = table_error(pa.concat_tables([first, second]), HUMAN_SCORES, "s")
    assert (err.row, err.column) == (3, "score")


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_non_finite_score(bad: float) -> None:
    t = pa.table({"candidate_id": ["c1", "c2"], "aspect": ["a", "a"], "score": [3.0, bad]})
    err = table_error(t, HUMAN_SCORES, "scores.parquet")
    assert (err.row, err.column) == (1, "score")
    assert "scores.parquet" in str(err) and "row 1" in str(err) and "finite" in str(err)


def test_judgment_p_a_out_of_range() -> None:
    t = judgments(judgment("k0", 0.2), judgment("k1", 1.7))
    err = table_error(t, JUDGMENTS, "cache/part-1.parquet")
    assert (err.row, err.column) == (1, "p_a")
    msg = str(err)
    assert "cache/part-1.parquet" in msg and "row 1" in msg and "`p_a`" in msg
    assert "expected a float in [0, 1], found 1.7" in msg


@pytest.mark.parametrize("p", [None, -0.1, float("nan")])
def test_judgment_without_error_needs_a_probability(p) -> None:
    err = table_error(judgments(judgment("k", p, label="A")), JUDGMENTS, "j")
    assert (err.row, err.column) == (0, "p_a")


def test_error_row_may_lack_p_a_but_label_must_be_known() -> None:
    assert validate(judgments(judgment("k", None, error="timeout")), JUDGMENTS, "j").num_rows == 1
    err = table_error(judgments(judgment("k0"), judgment("k1", label="C")), JUDGMENTS, "j")
    assert (err.row, err.column) == (1, "label")


def test_pairwise_label_must_be_known() -> None:
    t = pa.table({"context_id": ["d"] * 2, "candidate_a": ["x"] * 2, "candidate_b": ["y"] * 2, "preferred": ["A", "a"]})
    err = table_error(t, PAIRWISE_LABELS, "labels.parquet")
    assert (err.row, err.column) == (1, "preferred")


def test_duplicate_candidate_id() -> None:
    err = table_error(with_value(candidates(), 3, "candidate_id", "x1"), CANDIDATES)
    assert (err.row, err.column) == (3, "candidate_id")
    msg = str(err)
    assert SRC in msg and "row 3" in msg and "'x1'" in msg and "row 0" in msg


@pytest.mark.parametrize("column", ["text", "context", "candidate_id", "context_id"])
@pytest.mark.parametrize("value", ["", "  \n\t"])
def test_empty_text(column: str, value: str) -> None:
    t = candidates()
    if column == "context_id":  # keep every context with two candidates
        t = with_value(with_value(t, 2, column, value), 3, column, value)
    else:
        t = with_value(t, 2, column, value)
    err = table_error(t, CANDIDATES)
    assert (err.row, err.column) == (2, column)
    msg = str(err)
    assert SRC in msg and "row 2" in msg and f"`{column}`" in msg and "non-empty" in msg


def test_context_with_one_candidate() -> None:
    t = with_value(candidates(), 3, "context_id", "d3")
    err = table_error(t, CANDIDATES)
    assert err.column == "context_id"
    assert err.row == 2  # d2 is left with only row 2
    msg = str(err)
    assert SRC in msg and "'d2'" in msg and "at least 2 candidates" in msg


# --- the judgment cache ------------------------------------------------------------------------


def test_cache_read_merges_parts_one_row_per_key(tmp_path: Path) -> None:
    cache = JudgmentCache(Location.of(str(tmp_path / "cache")))
    assert cache.read().num_rows == 0 and cache.read().schema.equals(JUDGMENTS)
    first = cache.append(
        judgments(
            judgment("verdict-then-error", 0.8, at=0),
            judgment("old-then-new", 0.2, at=0),
            judgment("error-then-error", None, error="first", at=0),
            judgment("only-first", 0.4, at=0),
            judgment("error-then-verdict", None, error="timeout", at=0),
        )
    )
    second = cache.append(
        judgments(
            judgment("verdict-then-error", None, error="later failure", at=10),
            judgment("old-then-new", 0.9, at=10),
            judgment("error-then-error", None, error="second", at=10),
            judgment("error-then-verdict", 0.6, at=10),
        )
    )
    assert first is not None and second == first + 1  # one Delta commit per append
    assert cache.append(JUDGMENTS.empty_table()) is None
    assert cache.version() == second and cache.rows().num_rows == 9  # every row kept, merged on read

    got = {r["key"]: r for r in cache.read().to_pylist()}
    assert set(got) == {"verdict-then-error", "old-then-new", "error-then-error", "only-first", "error-then-verdict"}
    assert (got["verdict-then-error"]["p_a"], got["verdict-then-error"]["error"]) == (0.8, None)
    assert got["old-then-new"]["p_a"] == 0.9
    assert got["error-then-error"]["error"] == "second"
    assert got["only-first"]["p_a"] == 0.4
    assert got["error-then-verdict"]["p_a"] == 0.6
    assert set(cache.answered().column("key").to_pylist()) == set(got) - {"error-then-error"}


def test_newer_verdict_wins_even_when_written_first(tmp_path: Path) -> None:
    # created_at decides, not the order the parts were written in.
    cache = JudgmentCache(Location.of(str(tmp_path)))
    cache.append(judgments(judgment("k", 0.9, at=50)))
    cache.append(judgments(judgment("k", 0.1, at=5)))
    assert cache.read().column("p_a").to_pylist() == [0.9]


def test_latest_per_key_within_one_table() -> None:
    t = judgments(
        judgment("b", 0.1, at=1),
        judgment("a", None, error="e", at=9),
        judgment("b", 0.3, at=3),
        judgment("a", 0.5, at=0),
    )
    out = latest_per_key(t)
    assert out.column("key").to_pylist() == ["a", "b"]
    assert out.column("p_a").to_pylist() == [0.5, 0.3]


def test_cache_reads_only_files_its_log_names(tmp_path: Path) -> None:
    folder = tmp_path / "cache"
    cache = JudgmentCache(Location.of(str(folder)))
    cache.append(judgments(judgment("k", 0.7)))
    committed = cache.files()
    # The data file of a writer killed before its commit, and files that are not judgments at all.
    (folder / "part-00000-uncommitted-c000.zstd.parquet").write_bytes(b"PAR1 half written")
    pq.write_table(judgments(judgment("orphan", 0.1)), str(folder / "part-00001-orphan-c000.zstd.parquet"))
    (folder / "_SUCCESS").write_bytes(b"")
    (folder / "README.txt").write_text("notes")
    assert cache.files() == committed and len(committed) == 1 and committed[0].startswith("aspect=")
    assert cache.read().column("key").to_pylist() == ["k"]


def test_bad_rows_name_their_file(tmp_path: Path) -> None:
    from deltalake import write_deltalake

    from pairank.storage.store.cache import with_buckets

    folder = tmp_path / "cache"
    cache = JudgmentCache(Location.of(str(folder)))
    cache.append(judgments(judgment("good", 0.7)))
    before = set(cache.files())
    # committed by another tool that skipped pairank's validation
    write_deltalake(str(folder), with_buckets(judgments(judgment("ok", 0.3), judgment("bad", 1.7))), mode="append")
    (bad,) = set(cache.files()) - before
    with pytest.raises(TableError) as info:
        cache.read()
    msg = str(info.value)
    assert str(folder / bad) in msg
    assert "row 1" in msg and "expected a float in [0, 1], found 1.7" in msg


def test_append_validates(tmp_path: Path) -> None:
    cache = JudgmentCache(Location.of(str(tmp_path / "cache")))
    with pytest.raises(TableError, match="found 1.7"):
        cache.append(judgments(judgment("k", 1.7)))
    assert cache.files() == [] and not cache.exists()


# --- Location (local) --------------------------------------------------------------------------


def test_write_bytes_leaves_no_temporary_files(tmp_path: Path) -> None:
    loc = Location.of(str(tmp_path / "a" / "b" / "file.bin"))
    loc.write_bytes(b"one")
    assert loc.read_bytes() == b"one"
    loc.write_bytes(b"two, longer")
    assert loc.read_bytes() == b"two, longer"
    loc.write_text("three")
    assert loc.read_text() == "three"
    assert os.listdir(tmp_path / "a" / "b") == ["file.bin"]


def test_failed_write_keeps_old_file_and_cleans_up(tmp_path: Path) -> None:
    loc = Location.of(str(tmp_path / "f.json"))
    loc.write_json({"v": 1})

    class Unwritable:
        """Not bytes: the stream write fails after the temporary file was opened."""

    with pytest.raises(TypeError):
        loc.write_bytes(Unwritable())  # type: ignore[arg-type]
    assert loc.read_json() == {"v": 1}
    assert os.listdir(tmp_path) == ["f.json"]


def test_overwrite_is_atomic_for_readers(tmp_path: Path) -> None:
    loc = Location.of(str(tmp_path / "big.bin"))
    size = 1 << 20
    contents = [bytes([65 + i]) * size for i in range(4)]
    loc.write_bytes(contents[0])
    seen: list[bytes] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            with open(loc.path, "rb") as f:
                data = f.read()
            seen.append(data[:1] if data in contents else b"torn:" + data[:1] + bytes([len(data) % 251]))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for i in range(40):
            loc.write_bytes(contents[i % 4])
    finally:
        stop.set()
        thread.join()
    assert seen, "the reader never ran"
    assert all(not s.startswith(b"torn:") for s in seen), "a reader saw a partly written file"
    assert loc.read_bytes() == contents[39 % 4]
    assert os.listdir(tmp_path) == ["big.bin"]


def test_parquet_and_listing_round_trip(tmp_path: Path) -> None:
    folder = Location.of(str(tmp_path))
    t = candidates()
    folder.join("x.parquet").write_parquet(t)
    folder.join("y.txt").write_text("y")
    folder.join("sub", "z.parquet").write_parquet(t)
    assert folder.join("x.parquet").read_parquet().equals(t)
    assert [Path(p.path).name for p in folder.files(".parquet")] == ["x.parquet"]
    assert [Path(p.path).name for p in folder.files()] == ["x.parquet", "y.txt"]
    assert folder.join("sub").is_dir() and not folder.join("nope").exists()
    assert folder.join("nope").files() == []
    assert Location.of(f"file://{tmp_path}").path == str(tmp_path)
    with pytest.raises(ValueError, match="gs"):
        Location.of("gs://bucket/x")


# --- judgment keys -----------------------------------------------------------------------------

BASE = dict(
    judge={"engine": "vllm", "model": "m", "revision": "r1", "sampling": {"temperature": 0}},
    prompt_hash="p1",
    aspect="coherence",
    context_id="d1",
    context="the document",
    candidate_a="x1",
    text_a="text of x",
    candidate_b="y1",
    text_b="text of y",
)

CHANGES = {
    "model": {"judge": {**BASE["judge"], "model": "m2"}},
    "revision": {"judge": {**BASE["judge"], "revision": "r2"}},
    "sampling": {"judge": {**BASE["judge"], "sampling": {"temperature": 0.7}}},
    "prompt hash": {"prompt_hash": "p2"},
    "aspect": {"aspect": "fluency"},
    "context id": {"context_id": "d2"},
    "context text": {"context": "the document."},
    "candidate a id": {"candidate_a": "x9"},
    "text a": {"text_a": "text of x "},
    "candidate b id": {"candidate_b": "y9"},
    "text b": {"text_b": "Text of y"},
    "slot order": {"candidate_a": "y1", "text_a": "text of y", "candidate_b": "x1", "text_b": "text of x"},
    "texts swapped between ids": {"text_a": "text of y", "text_b": "text of x"},
}


def test_judgment_key_is_stable_and_hex() -> None:
    k = judgment_key(**BASE)
    assert k == judgment_key(**{**BASE})
    assert len(k) == 32 and all(c in "0123456789abcdef" for c in k)
    # The judge settings' key order does not matter.
    reordered = dict(reversed(list(BASE["judge"].items())))
    assert judgment_key(**{**BASE, "judge": reordered}) == k


def test_judgment_key_changes_with_every_input() -> None:
    base = judgment_key(**BASE)
    keys = {name: judgment_key(**{**BASE, **change}) for name, change in CHANGES.items()}
    for name, k in keys.items():
        assert k != base, f"the key ignores the {name}"
    assert len(set(keys.values())) == len(keys)


def test_judgment_key_stable_across_processes() -> None:
    code = "import json, sys; from storage.keys import judgment_key; print(judgment_key(**json.loads(sys.argv[1])))"
    out = subprocess.run(
        [sys.executable, "-c", code, canonical_json(BASE)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "12345"},
    )
    assert out.stdout.strip() == judgment_key(**BASE)


def test_text_hash_and_canonical_json() -> None:
    assert text_hash("a") != text_hash("a ") and len(text_hash("a")) == 16
    assert canonical_json({"b": 1, "a": [1, 2]}) == canonical_json({"a": [1, 2], "b": 1}) == '{"a":[1,2],"b":1}'
