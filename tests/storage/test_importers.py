"""Tests of storage.importers: the real sets under shared/data, and crafted bad inputs."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pairank.storage.fs import Location
from pairank.storage.importers import IMPORTERS, ImportedSet, get_importer, run_import
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES, PAIRWISE_LABELS
from pairank.storage.validation import TableError
from tests.helpers import topicalchat_rows, write_json

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
needs_data = pytest.mark.skipif(
    not (DATA / "README.md").is_file(), reason=f"the real evaluation data is not at {DATA} (shared/data by the repo)"
)

_cache: dict[tuple[str, str], ImportedSet] = {}


def load(name: str, folder: str) -> ImportedSet:
    """The real set ``name`` from shared/data/``folder`` (loaded once per session)."""
    if (name, folder) not in _cache:
        _cache[(name, folder)] = get_importer(name)(Location.of(str(DATA / folder)))
    return _cache[(name, folder)]


def systems_by_context(s: ImportedSet) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for ctx, system in zip(s.candidates.column("context_id").to_pylist(), s.candidates.column("system").to_pylist()):
        out[ctx].append(system)
    return out


def check_shape(s: ImportedSet, contexts: int, per_context: int, aspects: int) -> dict[str, list[str]]:
    assert s.candidates.schema.equals(CANDIDATES)
    assert s.human_scores.schema.equals(HUMAN_SCORES)
    assert s.pairwise_labels.schema.equals(PAIRWISE_LABELS)
    by_ctx = systems_by_context(s)
    assert len(by_ctx) == contexts
    assert {len(v) for v in by_ctx.values()} == {per_context}
    assert all(len(set(v)) == per_context for v in by_ctx.values())  # each system once per context
    assert s.candidates.num_rows == contexts * per_context
    assert s.human_scores.num_rows == contexts * per_context * aspects
    candidate_ids = set(s.candidates.column("candidate_id").to_pylist())
    assert set(s.human_scores.column("candidate_id").to_pylist()) == candidate_ids
    return by_ctx


# --- the real data -----------------------------------------------------------------------------


@needs_data
def test_summeval_real() -> None:
    s = load("summeval", "summeval")
    by_ctx = check_shape(s, contexts=100, per_context=16, aspects=4)
    assert s.human_scores.num_rows == 6400
    assert all("M20" in systems for systems in by_ctx.values())  # GPT-2
    assert set(s.human_scores.column("aspect").to_pylist()) == {"coherence", "consistency", "fluency", "relevance"}
    assert s.candidates.column("candidate_id")[0].as_py() == f"A0/{by_ctx['A0'][0]}"
    assert s.pairwise_labels.num_rows == 0


@needs_data
def test_newsroom_real() -> None:
    s = load("newsroom", "newsroom")
    by_ctx = check_shape(s, contexts=60, per_context=7, aspects=4)
    expected = {"lede3", "fragments", "textrank", "abstractive", "pointer_c", "pointer_n", "pointer_s"}
    assert all(set(v) == expected for v in by_ctx.values())


@needs_data
def test_topicalchat_real() -> None:
    s = load("topicalchat", "topicalchat")
    check_shape(s, contexts=60, per_context=6, aspects=6)
    context = s.candidates.column("context")[0].as_py()
    assert context.startswith("Knowledge:\n") and "\n\nDialogue:\n" in context
    assert "New Human Generated" in s.candidates.column("system").to_pylist()


@needs_data
def test_hanna_real() -> None:
    s = load("hanna", "hanna")
    by_ctx = check_shape(s, contexts=96, per_context=11, aspects=6)
    writers = set(s.candidates.column("system").to_pylist())
    assert len(writers) == 11 and {"Human", "GPT-2", "GPT-2 (tag)"} <= writers
    assert all(set(v) == writers for v in by_ctx.values())  # each writer once per prompt
    # P76's S0 and S3 have equal scores (both match GPT and RoBERTa): settled by text length.
    texts = dict(zip(s.candidates.column("candidate_id").to_pylist(), s.candidates.column("text").to_pylist()))
    assert texts["P76/GPT"].startswith(".. my next question came during dinner")
    assert texts["P76/RoBERTa"].startswith("Her planet seemed to have no impact")


@needs_data
def test_llmbar_natural_real() -> None:
    records = json.loads((DATA / "llmbar/LLMBar/Natural/dataset.json").read_text())
    s = load("llmbar", "llmbar/LLMBar/Natural")
    assert s.pairwise_labels.num_rows == len(records)
    assert s.candidates.num_rows == 2 * len(records)
    assert s.human_scores.num_rows == 0
    pairs = s.pairwise_labels.to_pylist()
    assert pairs[0] == {
        "context_id": "0",
        "candidate_a": "0/output_1",
        "candidate_b": "0/output_2",
        "preferred": "A" if int(records[0]["label"]) == 1 else "B",
    }
    assert Counter(p["preferred"] for p in pairs) == Counter("A" if int(r["label"]) == 1 else "B" for r in records)
    texts = dict(zip(s.candidates.column("candidate_id").to_pylist(), s.candidates.column("text").to_pylist()))
    assert texts["3/output_2"] == records[3]["output_2"]


@needs_data
def test_llmbar_recurses_over_subsets() -> None:
    s = load("llmbar", "llmbar/LLMBar")
    subsets = sorted(p.parent for p in (DATA / "llmbar/LLMBar").rglob("dataset.json") if "evaluators" not in p.parts)
    total = sum(len(json.loads((p / "dataset.json").read_text())) for p in subsets)
    assert s.pairwise_labels.num_rows == total
    prefixes = {c.rsplit("/", 1)[0] for c in s.pairwise_labels.column("context_id").to_pylist()}
    assert prefixes == {str(p.relative_to(DATA / "llmbar/LLMBar")) for p in subsets}
    assert "Natural/0" in s.pairwise_labels.column("context_id").to_pylist()


@needs_data
def test_run_import_writes_parquet(tmp_path: Path) -> None:
    counts = run_import("summeval", str(DATA / "summeval"), str(tmp_path / "summeval"))
    assert counts == {
        "contexts": 100,
        "candidates": 1600,
        "human_scores": 6400,
        "pairwise_labels": 0,
        "judgments": 0,
        "skipped": [],
        "dst": str(tmp_path / "summeval"),
    }
    assert pq.read_table(tmp_path / "summeval/candidates.parquet").schema.equals(CANDIDATES)
    assert pq.read_table(tmp_path / "summeval/human_scores.parquet").num_rows == 6400
    assert not (tmp_path / "summeval/pairwise_labels.parquet").exists()
    assert not (tmp_path / "summeval/judgments.parquet").exists()

    # A file path is taken as its folder.
    counts = run_import("llmbar", str(DATA / "llmbar/LLMBar/Natural/dataset.json"), str(tmp_path / "natural"))
    assert counts["contexts"] == counts["pairwise_labels"] == 100 and counts["candidates"] == 200
    labels = pq.read_table(tmp_path / "natural/pairwise_labels.parquet")
    assert labels.num_rows == 100 and labels.schema.equals(PAIRWISE_LABELS)
    assert pq.read_table(tmp_path / "natural/human_scores.parquet").num_rows == 0


# --- registry ----------------------------------------------------------------------------------


def test_registry_and_unknown_name(tmp_path: Path) -> None:
    assert set(IMPORTERS) == {"summeval", "newsroom", "topicalchat", "hanna", "llmbar"}
    with pytest.raises(ValueError) as e:
        get_importer("summeval2")
    for name in IMPORTERS:
        assert name in str(e.value)
    with pytest.raises(ValueError, match="available: hanna, llmbar, newsroom, summeval, topicalchat"):
        run_import("nope", str(tmp_path), str(tmp_path / "out"))


# --- crafted bad inputs ------------------------------------------------------------------------


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def summeval_rows() -> list[dict]:
    return [
        {
            "article_id": f"A{a}",
            "summary_id": f"S{s}",
            "article": f"article {a}",
            "summary": f"summary {a}.{s}",
            "coherence": 1.0 + s,
            "fluency": 2.0,
            "consistency": 3.0,
            "relevance": 4.0 + a,
        }
        for a in range(2)
        for s in range(2)
    ]


def summeval_systems(rows: list[dict]) -> dict:
    docs: dict = {}
    for r in rows:
        doc = docs.setdefault(f"doc-{r['article_id']}", {"src": r["article"], "refs": [], "hypos": {}})
        scores = {k: str(r[k]) for k in ("coherence", "consistency", "fluency", "relevance")}
        doc["hypos"][f"M{len(doc['hypos']) * 7}"] = {"hypo": r["summary"], "scores": scores}
    return docs


def newsroom_rows() -> list[dict]:
    scores = {"coherence": 1.0, "fluency": 2.0, "informativeness": 3.0, "relevance": 4.0}
    return [{"doc_id": "7", "source": "doc", "system_output": f"summary {k}", "scores": dict(scores)} for k in range(2)]


def hanna_rows() -> list[dict]:
    aspects = dict.fromkeys(("relevance", "coherence", "empathy", "surprise", "engagement", "complexity"), 3.0)
    return [{"prompt_id": "P0", "story_id": f"S{k}", "prompt": "p", "story": f"story {k}", **aspects} for k in range(2)]


def expect_error(load_name: str, folder: Path, file: str, row: int, column: str) -> str:
    with pytest.raises(TableError) as e:
        get_importer(load_name)(Location.of(str(folder)))
    msg = str(e.value)
    assert file in msg and f"row {row}:" in msg and f"`{column}`" in msg, msg
    assert "0-based record index" in msg
    return msg


def test_crafted_sets_load(tmp_path: Path) -> None:
    rows = summeval_rows()
    write_jsonl(tmp_path / "se/summeval.jsonl", rows)
    write_json(tmp_path / "se/summeval_systems.json", summeval_systems(rows))
    s = get_importer("summeval")(Location.of(str(tmp_path / "se")))
    assert s.candidates.column("candidate_id").to_pylist() == ["A0/M0", "A0/M7", "A1/M0", "A1/M7"]
    write_json(tmp_path / "tc/topical_chat.json", topicalchat_rows())
    s = get_importer("topicalchat")(Location.of(str(tmp_path / "tc")))
    assert s.candidates.column("candidate_id").to_pylist() == ["D0/sys0", "D0/sys1", "D1/sys0", "D1/sys1"]
    assert s.candidates.column("context")[0].as_py() == "Knowledge:\nfact 0\n\nDialogue:\nhi\nhello dialogue 0"


def test_missing_field(tmp_path: Path) -> None:
    rows = summeval_rows()
    del rows[1]["fluency"]
    write_jsonl(tmp_path / "summeval.jsonl", rows)
    expect_error("summeval", tmp_path, "summeval.jsonl", 1, "fluency")


def test_missing_nested_field(tmp_path: Path) -> None:
    rows = newsroom_rows()
    del rows[1]["scores"]["relevance"]
    write_json(tmp_path / "newsroom.json", rows)
    expect_error("newsroom", tmp_path, "newsroom.json", 1, "scores.relevance")


def test_extra_field(tmp_path: Path) -> None:
    records = [{"input": "q", "output_1": "a", "output_2": "b", "label": 1}] * 3
    records = [dict(r) for r in records]
    records[2]["annotator"] = "x"
    write_json(tmp_path / "dataset.json", records)
    expect_error("llmbar", tmp_path, "dataset.json", 2, "annotator")


def test_duplicate_source_id(tmp_path: Path) -> None:
    rows = hanna_rows() + [hanna_rows()[0]]
    write_jsonl(tmp_path / "hanna.jsonl", rows)
    msg = expect_error("hanna", tmp_path, "hanna.jsonl", 2, "story_id")
    assert "also in row 0" in msg


def test_duplicate_candidate_id(tmp_path: Path) -> None:
    rows = topicalchat_rows()
    rows[3]["system_id"] = rows[2]["system_id"]  # the same system twice in a dialogue
    write_json(tmp_path / "topical_chat.json", rows)
    msg = expect_error("topicalchat", tmp_path, "topical_chat.json", 3, "candidate_id")
    assert "unique" in msg and "D1/sys0" in msg


def test_empty_text(tmp_path: Path) -> None:
    rows = newsroom_rows()
    rows[1]["system_output"] = "  \n"
    write_json(tmp_path / "newsroom.json", rows)
    msg = expect_error("newsroom", tmp_path, "newsroom.json", 1, "system_output")
    assert "non-empty text" in msg


def test_context_with_one_candidate(tmp_path: Path) -> None:
    rows = topicalchat_rows()[:3]  # the second dialogue keeps one response
    write_json(tmp_path / "topical_chat.json", rows)
    msg = expect_error("topicalchat", tmp_path, "topical_chat.json", 2, "context_id")
    assert "at least 2 candidates" in msg


@pytest.mark.parametrize("bad", ["good", None, True, float("nan")])
def test_non_numeric_score(tmp_path: Path, bad) -> None:
    rows = newsroom_rows()
    rows[0]["scores"]["fluency"] = bad
    write_json(tmp_path / "newsroom.json", rows)
    msg = expect_error("newsroom", tmp_path, "newsroom.json", 0, "scores.fluency")
    assert "finite number" in msg


def test_non_numeric_score_jsonl(tmp_path: Path) -> None:
    rows = hanna_rows()
    rows[1]["empathy"] = "n/a"
    write_jsonl(tmp_path / "hanna.jsonl", rows)
    expect_error("hanna", tmp_path, "hanna.jsonl", 1, "empathy")


def test_bad_llmbar_label(tmp_path: Path) -> None:
    write_json(tmp_path / "dataset.json", [{"input": "q", "output_1": "a", "output_2": "b", "label": 3}])
    expect_error("llmbar", tmp_path, "dataset.json", 0, "label")


def test_summeval_join_is_verified(tmp_path: Path) -> None:
    rows = summeval_rows()
    systems = summeval_systems(rows)
    hypos = systems["doc-A1"]["hypos"]
    hypos["M0"], hypos["M7"] = hypos["M7"], hypos["M0"]  # scores no longer match by position
    write_jsonl(tmp_path / "summeval.jsonl", rows)
    write_json(tmp_path / "summeval_systems.json", systems)
    with pytest.raises(TableError) as e:
        get_importer("summeval")(Location.of(str(tmp_path)))
    msg = str(e.value)
    assert "summeval_systems.json" in msg and "row 1:" in msg and "positional join does not hold" in msg
    assert "summeval.jsonl row 2" in msg


def test_newsroom_join_is_verified(tmp_path: Path) -> None:
    rows = newsroom_rows()
    write_json(tmp_path / "newsroom.json", rows)
    summs = {f"sys{k}": {"sys_summ": r["system_output"], "scores": r["scores"]} for k, r in enumerate(rows)}
    write_jsonl(tmp_path / "newsroom_systems.jsonl", [{"src": "doc", "ref_summ": "ref", "sys_summs": summs}])
    s = get_importer("newsroom")(Location.of(str(tmp_path)))
    assert s.candidates.column("candidate_id").to_pylist() == ["7/sys0", "7/sys1"]
    summs["sys1"]["sys_summ"] = "another summary"
    write_jsonl(tmp_path / "newsroom_systems.jsonl", [{"src": "doc", "ref_summ": "ref", "sys_summs": summs}])
    with pytest.raises(TableError, match=r"newsroom_systems\.jsonl.* row 0: .*positional join does not hold"):
        get_importer("newsroom")(Location.of(str(tmp_path)))
