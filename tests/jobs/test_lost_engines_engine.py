"""The real vLLM CPU engine killed during a run: Ray restarts its actor, the batches it held are judged again
on the new engine, and the run ends as if nothing happened (exit 0, one verdict per key, one lost engine).

Here the async engine, whose engine core (a process of its own) dies; the synchronous engine's actor SIGKILLed is
``tests/jobs/test_run_engine.py``'s rerun, which saves a run, a Ray and an engine start of their own."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import Location
from tests.helpers import (
    CPU_ENGINE_ENV,
    ROOT,
    SHORT_TEXT_WORDS,
    process_titles,
    run_and_kill,
    titled_pids,
    write_input,
)

pytestmark = [pytest.mark.engine, pytest.mark.ray]  # each run starts a Ray of its own
#: The async engine, two batches in flight, judged the 72 comparisons of 3 articles before its first part was seen
#: in a CI run (nothing left to lose when the test looked for its engine core): it gets twice as many.
CONTEXTS = 6


def total(contexts: int) -> int:
    return contexts * (4 * 3) * 2  # contexts x ordered pairs of 4 candidates x aspects


def run_engine_and_kill(
    tmp_path,
    summeval_tables,
    victim,
    judge: dict | None = None,
    pool: dict | None = None,
    contexts: int = CONTEXTS,
    words: int | None = SHORT_TEXT_WORDS,
):
    """`pairank run` of the CPU vLLM judge on ``contexts`` articles x 4 summaries (its own local Ray), cut to
    ``words`` words each; once the first judgment part is stored, ``victim(run pid)`` names the process to SIGKILL.
    Returns (killed pid, the judgments cache, the report)."""
    data = write_input(tmp_path / "input", summeval_tables, contexts, 4, words=words)
    out = tmp_path / "out"
    spec = {
        "name": "engine-lost",
        "input": data.uri,
        "output": str(out),
        "aspects": ["coherence", "fluency"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": {"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV, **(judge or {})},
        "pool": {"size": 1, "num_cpus": 2, "batch_size": 4, **(pool or {})},
        "report": {"bootstrap": 0},
        "flush_rows": 4,
    }
    killed = run_and_kill(spec, tmp_path, victim)
    cache = JudgmentCache(Location.of(str(out)).join("tables", "judgments"))
    report = json.loads((out / "runs" / "engine-lost" / "report.json").read_text())
    assert "engines lost: 1 (1 restarted, 0 dead)" in Path(out / "runs" / "engine-lost" / "report.md").read_text()
    return killed, cache, report


def one_pid(find, run: int, timeout: float = 15) -> int:
    """The one pid ``find()`` lists, waiting up to ``timeout`` s (a restarting actor has none for a moment); a
    failure lists the processes of the run."""
    deadline = time.monotonic() + timeout
    while len(pids := find()) != 1:
        assert time.monotonic() < deadline, f"expected one process to kill, found {pids} in {process_titles(run)}"
        time.sleep(0.1)
    return pids[0]


def assert_each_key_judged_once(cache, report, contexts: int = CONTEXTS) -> None:
    keys = Counter(k for k in cache.rows().column("key").to_pylist())
    assert len(keys) == total(contexts) and set(keys.values()) == {1}, keys.most_common(3)
    assert cache.read().column("error").null_count == total(contexts)
    assert report["engines"]["lost"] == 1 and report["engines"]["restarted"] == 1
    assert report["counts"]["judged_now"] == total(contexts) and report["counts"]["errors_now"] == 0


def test_an_async_engine_whose_core_died_ends_its_actor_and_the_run_exits_0_with_each_key_once(
    default_model, summeval_tables, tmp_path
):
    """vLLM's async engine, 2 batches in flight: its engine core process (a child of the actor) is SIGKILLed.
    The actor sees EngineDeadError and ends its process; Ray restarts it; every batch it held is judged again.
    No engine core outlives its actor (the replacement's is ended with it when the run stops the pool)."""
    seen: set[int] = set()
    done = threading.Event()
    polls: Counter = Counter()  # what the watcher did: a failure's message says (it once saw no replacement)

    def watch(run: int) -> None:
        while not done.is_set():
            try:
                found = titled_pids(b"VLLM::EngineCore", under=run)
                seen.update(found)
                polls[len(found)] += 1
            except Exception as exc:  # a daemon thread's error would go unseen
                polls[f"{type(exc).__name__}: {exc}"] += 1
            time.sleep(0.2)

    def core(run: int) -> int:
        threading.Thread(target=watch, args=(run,), daemon=True).start()
        pid = one_pid(lambda: titled_pids(b"VLLM::EngineCore", under=run), run)
        seen.add(pid)
        return pid

    try:
        killed, cache, report = run_engine_and_kill(
            tmp_path,
            summeval_tables,
            core,
            judge={"async_engine": True},
            pool={"max_batches_in_flight": 2},
        )
    finally:
        done.set()
    assert_each_key_judged_once(cache, report)
    (actor,) = report["pool"]
    assert actor["most_in_flight"] == 2
    assert killed in seen and len(seen) >= 2, f"cores seen {seen}, polls by cores found {dict(polls)}"
    deadline = time.monotonic() + 20
    while [p for p in seen if Path(f"/proc/{p}").exists()] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [p for p in seen if Path(f"/proc/{p}").exists()], "an engine core outlived its actor"
