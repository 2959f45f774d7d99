"""pairank.jobs.meta_eval, and replaying LLMBar's published verdicts per model and mode (ReplayJudgeSpec.mode).

A `pairank run` with the replay judge starts Ray; here the same requests (scheduler
`full`, keyed with the replay identity) go straight to the replay judge, which is
what each judge actor of the run does with its batches.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pairank.jobs.judging.requests import build_requests
from pairank.jobs.meta_eval import cli_parser, meta_eval
from pairank.judges import judge_identity, make_judge
from pairank.judges.engines.replay import ReplayJudgeSpec
from pairank.judges.prompts import PromptTemplate
from pairank.operators.meta_eval import meta_eval as evaluate
from pairank.storage.fs import Location
from pairank.storage.importers import llmbar, run_import
from pairank.storage.schemas import JUDGMENTS, META_EVAL, PAIRWISE_LABELS
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.validation import TableError
from tests.helpers import by_evaluator, mismatches, published

TEMPLATE = PromptTemplate("llmbar", "{context}\n\nOutput (a):\n{candidate_a}\n\nOutput (b):\n{candidate_b}\n\nBetter:")
#: (subset, model, mode): a judge with no null winner, one with CoT, one with 6 null winners (error rows)
EVALUATORS = [
    ("LLMBar/Natural", "GPT-4", "Vanilla"),
    ("LLMBar/Adversarial/GPTInst", "ChatGPT", "CoT"),
    ("LLMBar/Natural", "PaLM2", "Vanilla_NoRules"),
]


@pytest.fixture(scope="module")
def imported(shared_data: Path) -> llmbar.ImportedSet:
    return llmbar.load(Location.of(str(shared_data / "llmbar")), skip_invalid=True)


@pytest.fixture(scope="module")
def source(imported, tmp_path_factory) -> str:
    """The published verdicts of every LLM and mode, as one judgments file (the replay source)."""
    loc = Location.of(str(tmp_path_factory.mktemp("published") / "judgments.parquet"))
    loc.write_parquet(imported.judgments)
    return loc.uri


def replay(imported, source: str, subset: str, model: str | None, mode: str | None) -> pa.Table:
    """Every pair of the subset in both orders, asked of the replay judge (as a run's judge actor would)."""
    spec = ReplayJudgeSpec(source=source, model=model, mode=mode)
    cands = imported.candidates.filter(pc.starts_with(imported.candidates.column("context_id"), subset + "/"))
    requests = build_requests(cands, [llmbar.ASPECT], {llmbar.ASPECT: TEMPLATE}, "full", None, 0, judge_identity(spec))
    return make_judge(spec).judge(requests)


@pytest.mark.parametrize("evaluator", EVALUATORS, ids=["/".join(e) for e in EVALUATORS])
def test_replay_by_model_and_mode_gives_the_published_labels_and_statistics(
    imported, source: str, shared_data: Path, evaluator: tuple[str, str, str]
) -> None:
    subset, model, mode = evaluator
    out = replay(imported, source, subset, model, mode)
    sampling = json.dumps({"mode": mode}, separators=(",", ":"))
    want = {
        (r["candidate_a"], r["candidate_b"]): r["label"]
        for r in imported.judgments.filter(
            pc.and_(
                pc.equal(imported.judgments.column("model"), model),
                pc.equal(imported.judgments.column("sampling"), sampling),
            )
        ).to_pylist()
        if r["context_id"].startswith(subset + "/")
    }
    got = {(r["candidate_a"], r["candidate_b"]): r["label"] for r in out.to_pylist()}
    assert len(got) == out.num_rows == len(want) and got == want
    errors = [e for e in out.column("error").to_pylist() if e is not None]
    assert len(errors) == sum(v is None for v in want.values()) and all("has no judgment of" in e for e in errors)
    # one judge identity for answered and error rows: the source's model and revision, the mode in the sampling
    assert set(out.column("model").to_pylist()) == {model}
    assert set(out.column("revision").to_pylist()) == {llmbar.REVISION}
    assert set(out.column("sampling").to_pylist()) == {
        json.dumps({"mode": mode, "source": source}, separators=(",", ":"))
    }

    [row] = evaluate(out, imported.pairwise_labels).to_pylist()
    assert (row["subset"], row["judge"], row["engine"]) == (subset, f"{model}/{mode}", "replay")
    stats = published(shared_data / "llmbar")[evaluator]
    assert not mismatches(stats, row)


def test_replay_keys_differ_per_mode_and_an_unfiltered_mode_is_ambiguous(imported, source: str) -> None:
    keys = {
        mode: set(replay(imported, source, "LLMBar/Natural", "GPT-4", mode).column("key").to_pylist())
        for mode in ("Vanilla", "CoT")
    }
    assert len(keys["Vanilla"]) == 200 and not keys["Vanilla"] & keys["CoT"]
    assert judge_identity(ReplayJudgeSpec(source=source))["sampling"] == {"source": source}  # keys without a mode

    out = replay(imported, source, "LLMBar/Natural", "GPT-4", None).slice(0, 1).to_pylist()[0]
    assert out["label"] is None and "15 judgments of" in out["error"]
    assert "'GPT-4/CoT'" in out["error"] and "set judge.model or judge.mode" in out["error"]

    empty = replay(imported, source, "LLMBar/Natural", "GPT-4", "NoSuchMode")
    assert empty.num_rows == 200 and pc.all(pc.is_valid(empty.column("error"))).as_py()


def test_replay_spec_mode_field() -> None:
    spec = ReplayJudgeSpec(source="j", model="GPT-4", mode="CoT")
    assert spec.mode == "CoT" and ReplayJudgeSpec(source="j").mode is None
    assert "mode" in ReplayJudgeSpec.model_fields and ReplayJudgeSpec.model_fields["mode"].description


# ---- the job ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def natural(shared_data: Path, tmp_path_factory) -> Path:
    """`pairank import llmbar` of one subset: bare context ids, published verdicts in judgments.parquet."""
    dst = tmp_path_factory.mktemp("natural")
    run_import("llmbar", str(shared_data / "llmbar/LLMBar/Natural"), str(dst))
    return dst


def test_job_reads_the_input_and_writes_parquet_and_markdown(natural: Path, tmp_path: Path, shared_data) -> None:
    table = meta_eval(str(natural), out=str(tmp_path / "out"))
    assert table.schema.equals(META_EVAL) and table.num_rows == 45
    assert set(table.column("subset").to_pylist()) == {""}
    want = {k[1:]: v for k, v in published(shared_data / "llmbar").items() if k[0] == "LLMBar/Natural"}
    got = {k[1:]: v for k, v in by_evaluator(table).items()}
    assert set(got) == set(want) and not {k: d for k, v in want.items() if (d := mismatches(v, got[k]))}
    written = Location.of(str(tmp_path / "out/meta_eval.parquet")).read_parquet()
    assert written.equals(table)
    md = (tmp_path / "out/meta_eval.md").read_text()
    assert md.startswith("# Judge meta-evaluation") and "| (none) | instruction_following | GPT-4/Vanilla |" in md


def test_job_reads_a_judgment_cache_folder(natural: Path, tmp_path: Path) -> None:
    cache = JudgmentCache(Location.of(str(tmp_path / "judgments")))
    published_rows = Location.of(str(natural / "judgments.parquet")).read_parquet()
    gpt4 = published_rows.filter(pc.equal(published_rows.column("model"), "GPT-4"))
    cache.append(gpt4.slice(0, 700))
    cache.append(gpt4.slice(700))
    table = meta_eval(str(natural), str(tmp_path / "judgments"))
    assert set(table.column("model").to_pylist()) == {"GPT-4"}
    assert table.equals(meta_eval(str(natural)).filter(pc.equal(pc.field("model"), "GPT-4")))
    both = meta_eval(str(natural), [str(tmp_path / "judgments"), str(natural / "judgments.parquet")])
    assert both.num_rows == 45  # the same judges twice: the same keys, one row per pair and order each


def test_cli_subcommand(natural: Path, tmp_path: Path, capsys) -> None:
    p = argparse.ArgumentParser(prog="pairank")
    cli_parser(p.add_subparsers(dest="command", required=True))
    args = p.parse_args(["meta-eval", "--input", str(natural), "--out", str(tmp_path / "o"), "--json"])
    assert args.fn(args) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 45 and (tmp_path / "o/meta_eval.md").exists()
    args = p.parse_args(["meta-eval", "--input", str(natural)])
    assert args.fn(args) == 0
    assert "| (none) | instruction_following | GPT-4/CoT |" in capsys.readouterr().out


def test_job_errors_name_the_file(natural: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no candidates table"):
        meta_eval(str(tmp_path))
    folder = tmp_path / "input"
    folder.mkdir()
    (folder / "candidates.parquet").write_bytes((natural / "candidates.parquet").read_bytes())
    with pytest.raises(FileNotFoundError, match="no pairwise labels"):
        meta_eval(str(folder))
    bad = pa.Table.from_pylist(
        [{"context_id": "0", "candidate_a": "0/output_1", "candidate_b": "0/output_9", "preferred": "A"}],
        schema=PAIRWISE_LABELS,
    )
    Location.of(str(folder / "pairwise_labels.parquet")).write_parquet(bad)
    with pytest.raises(
        TableError,
        match=r"column `candidate_b` in .*pairwise_labels.parquet row 0: expected a "
        r"candidate_id of .*candidates.parquet, found '0/output_9'",
    ):
        meta_eval(str(folder))
    Location.of(str(folder / "pairwise_labels.parquet")).write_parquet(PAIRWISE_LABELS.empty_table())
    with pytest.raises(FileNotFoundError, match="judgments.parquet: no judgments"):
        meta_eval(str(folder))
    Location.of(str(folder / "judgments.parquet")).write_parquet(JUDGMENTS.empty_table())
    assert meta_eval(str(folder)).num_rows == 0
