"""The real vLLM CPU engine killed during a run: Ray restarts its actor, the batches it held are judged again
on the new engine, and the run ends as if nothing happened (exit 0, one verdict per key, one lost engine)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from pairank.storage.cache import JudgmentCache
from pairank.storage.fs import Location
from tests.helpers import CPU_ENGINE_ENV, ROOT, judge_actor_pids, write_input

pytestmark = pytest.mark.engine
TOTAL = 2 * (4 * 3) * 2  # contexts x ordered pairs of 4 candidates x aspects


def test_a_sigkilled_cpu_engine_is_restarted_and_the_run_exits_0_with_each_key_once(
    default_model, summeval_tables, tmp_path
):
    data = write_input(tmp_path / "input", summeval_tables, 2, 4)
    out = tmp_path / "out"
    spec = {
        "name": "engine-lost",
        "input": data.uri,
        "output": str(out),
        "aspects": ["coherence", "fluency"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": {"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV},
        "pool": {"size": 1, "num_cpus": 2, "batch_size": 4},
        "report": {"bootstrap": 0},
        "flush_rows": 4,
    }
    path = tmp_path / "engine-lost.yaml"
    path.write_text(yaml.safe_dump(spec))
    log = open(tmp_path / "run.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "pairank.jobs.cli", "run", str(path)], cwd=ROOT, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
    parts = out / "tables" / "judgments"
    try:
        deadline = time.monotonic() + 400
        while not (parts.is_dir() and list(parts.glob("**/*.parquet"))):
            assert proc.poll() is None, (tmp_path / "run.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no judgment part written in time"
            time.sleep(0.1)
        (victim,) = judge_actor_pids()
        os.kill(victim, signal.SIGKILL)
        assert proc.wait(timeout=600) == 0, (tmp_path / "run.log").read_text()[-4000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    cache = JudgmentCache(Location.of(str(out)).join("tables", "judgments"))
    keys = Counter(k for k in cache.rows().column("key").to_pylist())
    assert len(keys) == TOTAL and set(keys.values()) == {1}, keys.most_common(3)
    assert cache.read().column("error").null_count == TOTAL
    report = json.loads((out / "runs" / "engine-lost" / "report.json").read_text())
    assert report["engines"]["lost"] == 1 and report["engines"]["restarted"] == 1
    assert report["counts"]["judged_now"] == TOTAL and report["counts"]["errors_now"] == 0
    assert victim not in judge_actor_pids()
    assert "engines lost: 1 (1 restarted, 0 dead)" in Path(out / "runs" / "engine-lost" / "report.md").read_text()
