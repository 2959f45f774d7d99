"""Static requests made in Ray Data tasks (issue 13 item 4): the stream asks exactly what the former driver-side
path asked, the store gets one row per key, a re-run starts no engine, and a run reads back only its own keys.
Real local Ray, the SIMULATED judge, a local Delta store."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import pairank.jobs.judging.streamed as rs
from pairank.jobs.judging.requests import scheduled_requests
from pairank.jobs.pipeline.inputs import read_inputs
from pairank.jobs.pipeline.setup import prepare_judging
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.layout import RunLayout
from pairank.storage.store.cache import JudgmentCache, context_bucket
from pairank.storage.validation import TableError
from tests.helpers import spec_for, write_input

pytestmark = pytest.mark.usefixtures("ray_local")


def quiet(message: str) -> None:
    pass


def driver_keys(spec) -> set[str]:
    """The keys the former path made on the driver for ``spec`` (every context at once)."""
    inputs = read_inputs(spec.input, spec.subset)
    setup = prepare_judging(spec, inputs.candidates, RunLayout.of(spec.output, spec.name))
    return set(scheduled_requests(setup.maker, inputs.candidates, spec.aspects, spec.scheduler))


def store_rows(output: str) -> pa.Table:
    return JudgmentCache(RunLayout.of(output, "").judgments).rows()


def test_the_stream_asks_what_the_driver_would_once_each_and_a_rerun_starts_no_engine(
    tmp_path, summeval_tables, monkeypatch
):
    monkeypatch.setattr(rs, "CONTEXTS_PER_TASK", 1)  # several blocks in a bucket, many planning tasks
    folder = write_input(tmp_path / "input", summeval_tables, 9, 4)
    spec = parse_spec(
        spec_for(
            folder,
            tmp_path / "store",
            name="full",
            scheduler={"name": "full"},
            aspects=["coherence", "fluency"],
            pool={"num_cpus": 2},
        ),
        "test",
    )
    blocks = rs.plan_blocks(read_inputs(spec.input, spec.subset, texts=False).candidates)
    assert len(blocks) > len({context_bucket(b[0]) for b in blocks}) > 1
    first = run_job(spec, progress=quiet)
    want = driver_keys(spec)
    assert (
        (first.requests, first.cached, first.judged, first.errors) == (len(want), 0, len(want), 0) == (216, 0, 216, 0)
    )  # 9 contexts x 12 ordered pairs x 2 aspects
    keys = store_rows(spec.output).column("key").to_pylist()
    assert sorted(keys) == sorted(want)  # each key once: nothing asked twice, nothing left out
    lines = []
    again = run_job(spec, progress=lines.append)
    assert (again.requests, again.cached, again.judged) == (216, 216, 0)
    assert "216 comparisons (216 cached, 0 to judge)" in lines
    assert again.report["pool"] == []  # no engine started
    assert store_rows(spec.output).num_rows == 216


def test_a_run_reads_back_its_own_comparisons_only_and_judges_the_missing_ones(tmp_path, summeval_tables):
    folder = write_input(tmp_path / "input", summeval_tables, 4, 5)
    base = spec_for(folder, tmp_path / "store", name="partial", scheduler={"name": "random", "comparisons": 6})
    one = parse_spec(base, "test")
    run_job(one, progress=quiet)
    two = parse_spec({**base, "scheduler": {"name": "random", "comparisons": 6, "seed": 7}}, "test")
    mine, theirs = driver_keys(two), driver_keys(one)
    overlap = mine & theirs
    assert mine - theirs and overlap  # the two seeds share some pairs, not all
    lines = []
    result = run_job(two, progress=lines.append)
    assert (result.requests, result.cached, result.judged) == (len(mine), len(overlap), len(mine - overlap))
    assert f"{len(mine)} comparisons ({len(overlap)} cached, {len(mine - overlap)} to judge)" in lines
    layout = RunLayout.of(two.output, two.name)
    rankings = layout.rankings.read_parquet()
    counted = pc.sum(
        rankings.filter(pc.equal(rankings.column("method"), "win_ratio_hard")).column("n_comparisons")
    ).as_py()
    assert counted == 2 * len(mine)  # the run scored its own comparisons, not the other seed's
    assert sorted(store_rows(two.output).column("key").to_pylist()) == sorted(mine | theirs)


def test_planning_blocks_hold_whole_contexts_fewer_when_they_have_many_candidates(monkeypatch):
    monkeypatch.setattr(rs, "PAIRS_PER_TASK", 100)
    sizes = {"big": 12, "mid": 6, "s1": 3, "s2": 3, "s3": 2}  # 132, 30, 6, 6 and 2 ordered pairs
    table = pa.table(
        {
            "context_id": [c for c, n in sizes.items() for _ in range(n)],
            "candidate_id": [f"{c}/{i}" for c, n in sizes.items() for i in range(n)],
        }
    )
    blocks = rs.cut_blocks(table, rs.plan_blocks(table))
    held = [sorted(set(b.column("context_id").to_pylist())) for b in blocks]
    assert sorted(c for h in held for c in h) == sorted(sizes)  # every context in exactly one block
    assert ["big"] in held  # alone: it has more pairs than a block may
    for h in held:
        rows = [b for b in blocks if sorted(set(b.column("context_id").to_pylist())) == h][0]
        assert rows.num_rows == sum(sizes[c] for c in h)  # whole contexts
        assert len(h) == 1 or sum(sizes[c] * (sizes[c] - 1) for c in h) <= 100
    spans = [(min(map(context_bucket, h)), max(map(context_bucket, h))) for h in held]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # bucket by bucket


def test_the_driver_reads_ids_only_and_a_bad_text_is_named_by_file_row_and_column(tmp_path, summeval_tables):
    """The run's driver reads the candidates' id columns; the task that reads the texts validates the whole table,
    and its error reaches the user as a driver-side read would raise it, before any engine starts."""
    folder = write_input(tmp_path / "input", summeval_tables, 3, 3)
    spec = parse_spec(spec_for(folder, tmp_path / "store", name="bad", scheduler={"name": "full"}), "test")
    assert read_inputs(spec.input, spec.subset, texts=False).candidates.column_names == [
        "context_id",
        "candidate_id",
        "system",
    ]
    table = folder.join("candidates.parquet").read_parquet()
    texts = table.column("text").to_pylist()
    texts[4] = "   "
    folder.join("candidates.parquet").write_parquet(table.set_column(4, "text", pa.array(texts)))
    with pytest.raises(TableError) as err:
        run_job(spec, progress=quiet)
    assert str(err.value) == (
        f"column `text` in {folder.join('candidates.parquet').uri} row 4: expected a non-empty text, found '   '"
    )
    assert not JudgmentCache(RunLayout.of(spec.output, "").judgments).folder.exists()  # nothing judged
