"""`pairank serve` under concurrent requests, over real HTTP on a local Ray, the SIMULATED judge, the judgment
cache on the SeaweedFS S3 server: requests are judged in engine batches and committed by group commit, each key
once, and an answer given is in the store (while the server runs, and after it stopped); a failed commit answers
nothing; the cache is looked at once for requests that come together; the server's appends compact the table."""

from __future__ import annotations

import asyncio
import json
import threading
import uuid
from collections import Counter

import pyarrow as pa
import pytest

from pairank.cluster.serve.batching import GroupCommit, NotStored
from pairank.jobs.serve import CacheAppend, OnlineJudging, start_server
from pairank.jobs.specs.job import parse_spec
from pairank.storage import delta
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.store.cache_index import CacheIndex
from tests.helpers import compare_body, free_port, leaderboard_judgment, leaderboard_table, request, spec_dict

REQUESTS = 80
DISTINCT = 60  # 20 of the pairs are asked twice, at the same time as the first ask


def bodies() -> list[dict]:
    pairs = [
        compare_body(f"Article {i // 6}.", (f"s{i}-a", f"Summary A of {i}."), (f"s{i}-b", f"Summary B of {i}."))
        for i in range(DISTINCT)
    ]
    return pairs + pairs[: REQUESTS - DISTINCT]


def stored_keys(output: str) -> Counter:
    rows = JudgmentCache(RunLayout.of(output, "").judgments).rows()
    return Counter(rows.column("key").to_pylist())


def test_concurrent_requests_are_batched_committed_together_and_stored_before_answered(tmp_path, ray_local):
    from pairank.cluster.serve.deployments import judge_info, stop

    output = f"s3://pairank/serve-batching-{uuid.uuid4().hex[:8]}"
    # an engine's latency (50 ms a comparison): requests come while a batch is judged, as with a real engine
    judge = {"engine": "simulated", "seed": 3, "seconds_per_comparison": 0.05}
    spec = parse_spec(
        spec_dict(str(tmp_path / "in"), output, judge=judge, pool={"size": 1, "num_cpus": 1, "batch_size": 32}),
        "test",
    )
    answers: list[tuple[int, dict]] = []
    go = threading.Barrier(REQUESTS)

    def client(body: dict) -> None:
        go.wait()
        status, answer, _ = request(f"{url}/compare", body, token=None)
        answers.append((status, answer))

    try:
        url = start_server(spec, "127.0.0.1", free_port())
        threads = [threading.Thread(target=client, args=(b,)) for b in bodies()]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert len(answers) == REQUESTS and {s for s, _ in answers} == {200}, [a for s, a in answers if s != 200]
        assert all(a["error"] is None for _, a in answers)
        keys = {a["key"] for _, a in answers}
        assert len(keys) == DISTINCT
        # every answered judgment is in the store as soon as it is answered, once
        assert stored_keys(output) == Counter(dict.fromkeys(keys, 1))
        info = judge_info()[0]
    finally:
        stop()
    assert stored_keys(output) == Counter(dict.fromkeys(keys, 1))  # and after the server stopped
    assert info["rows"] == DISTINCT  # each key judged once, the repeats joined the first ask
    assert info["batches"] <= REQUESTS // 4, info
    assert info["commits"] <= info["batches"] and info["batches_committed"] == info["batches"], info
    assert info["rows_committed"] == DISTINCT and info.get("failed_commits", 0) == 0


def test_a_batch_whose_commit_fails_is_not_answered(tmp_path):
    """A store that refuses the commit (a fault drill: the commit raises): every request of the group gets a 503
    saying nothing was stored, none an answer; the next group commits."""
    attempts = []

    def commit(tables):
        attempts.append(len(tables))
        if len(attempts) == 1:
            raise OSError("the store refused the write")
        return {"rows_committed": sum(tables)}

    async def drill():
        group = GroupCommit(commit)
        failed = [group.submit(n) for n in (1, 2)]
        results = await asyncio.gather(*failed, return_exceptions=True)
        await group.submit(3)
        return results, dict(group.stats), group.store

    results, stats, store = asyncio.run(drill())
    assert all(isinstance(r, NotStored) and "the store refused the write" in str(r) for r in results)
    assert stats == {"failed_commits": 1, "commits": 1, "batches_committed": 1} and store == {"rows_committed": 3}

    spec = parse_spec(spec_dict(str(tmp_path / "in"), str(tmp_path / "store")), "test")
    service = OnlineJudging(spec)

    async def judge(row):
        raise results[0]

    body = json.dumps(compare_body("x", ("a", "ta"), ("b", "tb"))).encode()
    reply = asyncio.run(service.handle("POST", "/compare", {}, body, judge))
    assert reply.status == 503
    assert "could not be stored" in json.loads(reply.body)["error"] and "ask again" in json.loads(reply.body)["error"]


@pytest.mark.parametrize("concurrent", [1, 40])
def test_the_cache_is_looked_at_once_for_requests_that_come_together(tmp_path, concurrent):
    """Requests that are not in the cache look at it before they are judged; one look serves all the requests
    that came while the last look ran, not one look per request (the SIMULATED judge in this process)."""
    from pairank.jobs.judging.pool_wiring import judge_factory
    from pairank.storage.schemas import REQUESTS as REQUEST_SCHEMA

    spec = parse_spec(spec_dict(str(tmp_path / "in"), str(tmp_path / "store")), "test")
    service = OnlineJudging(spec)
    runner = judge_factory(spec)()

    async def judge(row):
        return runner.run("pairwise", pa.Table.from_pylist([row], schema=REQUEST_SCHEMA)).to_pylist()[0]

    async def wave():
        bodies = [json.dumps(compare_body("x", (f"a{i}", "ta"), ("b", "tb"))).encode() for i in range(concurrent)]
        return await asyncio.gather(*(service.handle("POST", "/compare", {}, b, judge) for b in bodies))

    replies = asyncio.run(wave())
    assert [r.status for r in replies] == [200] * concurrent
    assert runner.info()["calls"]["pairwise"] == concurrent
    assert 1 <= service.index.refreshes <= 2


def judged_row(i: int, ctx: str = "ctx") -> pa.Table:
    return leaderboard_table([leaderboard_judgment(ctx, "coherence", f"a{i}", f"b{i}", "A")])


def test_the_servers_appends_compact_the_table_as_small_files_pile_up(tmp_path):
    cache = JudgmentCache(Location.of(str(tmp_path / "root")).join("tables", "judgments"))
    append = CacheAppend(cache.folder.uri, compact_after_files=8)
    index = CacheIndex(cache)
    counters = {}
    for i in range(0, 20, 2):  # ten commits of two rows, two files each (two context buckets)
        counters = append([judged_row(i, ctx="ctx-x"), judged_row(i + 1, ctx="ctx-y")])
        append.wait_for_compaction()
        index.refresh()
    counters = append([judged_row(20, ctx="ctx-x")])
    assert counters["commits"] == 11 and counters["rows_committed"] == 21 and counters["files_written"] == 21
    assert counters["compactions"] == 2 and counters.get("failed_compactions", 0) == 0
    history = [h["operation"] for h in delta.open_table(cache.folder).history()]
    assert history.count("OPTIMIZE") == 2 and history.count("WRITE") == 11
    assert len(cache.files()) < 21 and cache.read().num_rows == 21
    index.refresh()
    assert len(index) == 21 and index.files_read == 21  # the compacted files were not read again


def test_cache_append_is_one_commit_for_many_batches(tmp_path):
    cache = JudgmentCache(Location.of(str(tmp_path / "root")).join("tables", "judgments"))
    append = CacheAppend(cache.folder.uri)
    counters = append([judged_row(i) for i in range(5)])
    assert counters["commits"] == 1 and cache.version() == 1 and cache.read().num_rows == 5
