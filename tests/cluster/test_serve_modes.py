"""`pairank serve` in the generating modes (generate, sample) over real HTTP.

The judge is the real `http` engine code talking to a scripted OpenAI-compatible
/v1/completions endpoint in this process (it answers fixed verdict texts, so
p_a is known exactly); Ray Serve runs on the local Ray (127.0.0.1).
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler

import pyarrow as pa
import pytest

from pairank.cluster.serve.deployments import stop
from pairank.jobs.judging.requests import RequestMaker
from pairank.jobs.pipeline.setup import mode_prompts
from pairank.jobs.serve import start_server
from pairank.jobs.specs.job import parse_spec
from pairank.judges import judge_identity
from pairank.judges.modes import judging_identity
from tests.helpers import (
    CPU_ENGINE_ENV,
    compare_body,
    completions_endpoint,
    free_port,
    reply_json,
    request,
    rows_with_key,
    spec_dict,
)

#: What the scripted endpoint answers: one text per choice (n of them).
SAMPLES = ["Both are fine; A is clearer. [[A]]", "[[B]]", "[[A]]", "A wins.\n[[A]]", "A tie. [[C]]"]
GENERATED = "The second summary is more coherent.\n[[B]]"


class Completions(BaseHTTPRequestHandler):
    calls: list[dict] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/v1/completions"):
            self.send_error(404)  # no /tokenize: the judge reads labels by string
            return
        Completions.calls.append(body)
        n = body.get("n", 1)
        texts = [GENERATED] if n == 1 else [SAMPLES[i % len(SAMPLES)] for i in range(n)]
        answer = {
            "choices": [{"index": i, "text": t} for i, t in enumerate(texts)],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5 * n},
        }
        reply_json(self, answer)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def endpoint():
    with completions_endpoint(Completions) as url:
        yield url


@pytest.mark.parametrize(
    "judging, p_a, label",
    [
        ({"mode": "generate", "max_tokens": 32}, 0.0, "B"),
        ({"mode": "sample", "samples": 5, "max_tokens": 32}, (3 + 0.5) / 5, "A"),  # 3 A, 1 B, 1 tie
    ],
)
def test_generating_modes_online(tmp_path, ray_local, endpoint, judging, p_a, label):
    output = str(tmp_path / "store")
    spec = parse_spec(
        spec_dict(
            str(tmp_path / "in"),
            output,
            judging=judging,
            judge={"engine": "http", "base_url": endpoint, "model": "scripted", "concurrency": 2},
        ),
        "test",
    )
    try:
        url = start_server(spec, "127.0.0.1", free_port())
        body = compare_body("An article.", ("x", "A clear summary."), ("y", "Another summary."), context_id="doc-1")
        before = len(Completions.calls)
        status, first, _ = request(f"{url}/compare", body, token=None)
        assert status == 200 and first["error"] is None, first
        assert (first["p_a"], first["label"], first["cached"], first["variant"]) == (p_a, label, False, "v1")
        assert json.loads(first["sampling"])["mode"] == judging["mode"]
        assert len(Completions.calls) == before + 1 and Completions.calls[-1].get("n", 1) == judging.get("samples", 1)

        status, again, _ = request(f"{url}/compare", body, token=None)
        assert status == 200 and again["cached"] is True and again["key"] == first["key"]
        assert len(Completions.calls) == before + 1  # answered from the cache
        assert rows_with_key(output, first["key"]) == 1

        candidates = pa.table(
            {
                "context_id": ["doc-1"] * 2,
                "context": ["An article."] * 2,
                "candidate_id": ["x", "y"],
                "text": ["A clear summary.", "Another summary."],
            }
        )
        identity = judging_identity(judge_identity(spec.judge), spec.judging)
        assert first["key"] == RequestMaker(
            candidates, mode_prompts(spec.judging, spec.prompts, spec.aspects), identity
        ).key("coherence", "doc-1", "x", "y")
    finally:
        stop()


@pytest.mark.engine
def test_the_cpu_vllm_judge_online(tmp_path, ray_local, default_model):
    """The real engine in a Serve replica: started on the replica's judge thread, no PyMC/llvmlite loaded."""
    from pairank.cluster.serve.deployments import judge_info

    output = str(tmp_path / "store")
    spec = parse_spec(
        spec_dict(
            str(tmp_path / "in"),
            output,
            pool={"size": 1, "num_cpus": 2, "batch_size": 4},
            judge={"engine": "vllm", "model": "default", "env": CPU_ENGINE_ENV},
        ),
        "test",
    )
    try:
        url = start_server(spec, "127.0.0.1", free_port())
        body = compare_body("The cat sat on the mat all day.", ("s1", "A cat sat on a mat."), ("s2", "Dogs bark."))
        status, first, _ = request(f"{url}/compare", body, token=None)
        assert status == 200 and first["error"] is None, first
        assert first["engine"] == "vllm" and 0 <= first["p_a"] <= 1 and first["cached"] is False
        status, again, _ = request(f"{url}/compare", body, token=None)
        assert status == 200 and again["cached"] is True and again["p_a"] == first["p_a"]
        assert rows_with_key(output, first["key"]) == 1
        info = judge_info()[0]
        assert info["rows"] == 1 and info["forbidden_modules"] == []
    finally:
        stop()
