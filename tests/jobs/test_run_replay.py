"""The whole job on local Ray with the replay engine: requests, cache, rankings, Spearman, report.

The replay source is a judgments table made from the human coherence scores
(p_a = sigmoid(h_a - h_b)), so a correct pipeline must rank every context in
exactly the human order: sample-level Spearman 1 for coherence.
"""

from __future__ import annotations

import datetime as dt
import math

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import S3_ENV

PROMPTS = "configs/prompts/summarization"


def oracle_judgments(candidates: pa.Table, human: pa.Table, aspect: str, drop: int = 0) -> pa.Table:
    """A full matrix of judgments that agree with the human scores (minus the first `drop` pairs)."""
    score = {
        c: s
        for c, a, s in zip(*(human.column(k).to_pylist() for k in ("candidate_id", "aspect", "score")))
        if a == aspect
    }
    by_ctx: dict[str, list[str]] = {}
    for ctx, cid in zip(candidates.column("context_id").to_pylist(), candidates.column("candidate_id").to_pylist()):
        by_ctx.setdefault(ctx, []).append(cid)
    now = dt.datetime.now(dt.UTC)
    rows = []
    for ctx, ids in sorted(by_ctx.items()):
        for a in ids:
            for b in ids:
                if a == b:
                    continue
                p = 1 / (1 + math.exp(-(score[a] - score[b])))
                rows.append(
                    dict(
                        key=f"src-{ctx}-{a}-{b}",
                        engine="oracle",
                        model="human-oracle",
                        revision="",
                        prompt_hash="",
                        sampling="{}",
                        context_id=ctx,
                        aspect=aspect,
                        candidate_a=a,
                        candidate_b=b,
                        p_a=p,
                        logprob_a=math.log(p),
                        logprob_b=math.log(1 - p),
                        label="A" if p > 0.5 else "B" if p < 0.5 else "tie",
                        raw_text=None,
                        input_tokens=0,
                        output_tokens=0,
                        seconds=0.0,
                        error=None,
                        created_at=now,
                    )
                )
    return pa.Table.from_pylist(rows[drop:], schema=JUDGMENTS)


def replay_spec(input_uri: str, output_uri: str, source_uri: str, **extra) -> object:
    data = {
        "name": "replay",
        "input": input_uri,
        "output": output_uri,
        "aspects": ["coherence"],
        "prompts": PROMPTS,
        "judge": {"engine": "replay", "source": source_uri},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 4},
        "flush_rows": 4,
        **extra,
    }
    return parse_spec(data, "test spec")


def _tables(loc: Location):
    return loc.join("candidates.parquet").read_parquet(), loc.join("human_scores.parquet").read_parquet()


@pytest.mark.usefixtures("ray_local")
def test_replay_run_ranks_in_human_order_and_rerun_asks_nothing(tiny_input, tmp_path):
    candidates, human = _tables(tiny_input)
    source = Location.of(str(tmp_path / "source" / "judgments.parquet"))
    source.write_parquet(oracle_judgments(candidates, human, "coherence"))
    spec = replay_spec(tiny_input.uri, str(tmp_path / "out"), source.uri)

    first = run_job(spec, progress=lambda m: None)
    assert (first.requests, first.cached, first.judged, first.errors) == (12, 0, 12, 0)
    sample = [r for r in first.report["spearman"] if r["level"] == "sample" and r["method"] == "win_ratio_hard"]
    # SummEval scores can tie inside a context; the oracle ranks ties by the same score, so rho is exactly 1
    assert sample and sample[0]["rho"] == pytest.approx(1.0)
    layout = first.layout
    for loc in (layout.rankings, layout.spearman, layout.position_bias, layout.report_md, layout.report_json):
        assert loc.exists(), loc
    rankings = layout.rankings.read_parquet()
    assert set(rankings.column("method").to_pylist()) == {"win_ratio_hard", "win_ratio_soft"}
    assert "Spearman with human scores" in layout.report_md.read_text()
    assert layout.manifest.read_json()["state"] == "done"
    version = JudgmentCache(layout.judgments).version()

    second = run_job(spec, progress=lambda m: None)
    assert (second.cached, second.judged) == (12, 0)
    assert JudgmentCache(layout.judgments).version() == version  # nothing new written


@pytest.mark.usefixtures("ray_local")
def test_replay_cannot_answer_is_an_error_row_counted_in_the_report(tiny_input, tmp_path):
    candidates, human = _tables(tiny_input)
    source = Location.of(str(tmp_path / "source.parquet"))
    source.write_parquet(oracle_judgments(candidates, human, "coherence", drop=2))
    spec = replay_spec(tiny_input.uri, str(tmp_path / "out"), source.uri)
    result = run_job(spec, progress=lambda m: None)
    assert result.errors == 2
    failures = result.report["failures"]
    assert sum(f["count"] for f in failures) == 2
    assert all("has no judgment of" in f["error"] for f in failures)
    # error rows are kept in the cache but asked again on the next run
    table = JudgmentCache(result.layout.judgments).read()
    assert table.filter(pc.is_valid(table.column("error"))).num_rows == 2
    again = run_job(spec, progress=lambda m: None)
    assert (again.cached, again.judged, again.errors) == (10, 2, 2)


@pytest.mark.s3
@pytest.mark.usefixtures("ray_local")
def test_replay_run_reads_and_writes_s3(s3_server, tiny_input, tmp_path):
    candidates, human = _tables(tiny_input)
    s3_in = Location.of("s3://pairank/inputs/tiny")
    s3_in.join("candidates.parquet").write_parquet(candidates)
    s3_in.join("human_scores.parquet").write_parquet(human)
    source = Location.of("s3://pairank/sources/oracle.parquet")
    source.write_parquet(oracle_judgments(candidates, human, "coherence"))
    spec = replay_spec(s3_in.uri, "s3://pairank/store", source.uri)
    result = run_job(spec, progress=lambda m: None)
    assert (result.judged, result.errors) == (12, 0)
    keys = {o["Key"] for o in s3_server.list_objects_v2(Bucket="pairank", Prefix="store/")["Contents"]}
    assert "store/runs/replay/report.md" in keys and "store/runs/replay/rankings.parquet" in keys
    assert any(k.startswith("store/tables/judgments/_delta_log/") for k in keys)
    report = Location.of("s3://pairank/store/runs/replay/report.json").read_json()
    # credentials and the endpoint never reach an output
    text = Location.of("s3://pairank/store/runs/replay/report.md").read_text() + str(report)
    assert "pairank-test-secret" not in text and S3_ENV["AWS_ENDPOINT_URL"] not in text
    assert run_job(spec, progress=lambda m: None).judged == 0
