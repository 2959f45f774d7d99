"""The judges on the real engine: vLLM's CPU build with the converted Gemma-3-270M,
and the http judge against vLLM's own OpenAI server on 127.0.0.1."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pyarrow as pa
import pytest

from jobs.spec import HttpJudgeSpec, ReplayJudgeSpec, VllmJudgeSpec
from operators.judges import judge_identity, make_judge
from operators.judges.base import p_a_from_logprobs
from operators.judges.vllm_judge import label_token_ids
from operators.prompts import load_prompts
from storage.fs import Location
from storage.schemas import JUDGMENTS, REQUESTS, validate
from tests.conftest import CPU_ENGINE_ENV, ROOT, stop_process, wait_for_port

pytestmark = pytest.mark.engine

ARTICLE = (
    "The city council approved a new budget on Tuesday. It raises spending on public transport by ten percent "
    "and funds two new libraries. The mayor said the plan would be paid for without raising taxes."
)
GOOD = "The council approved a budget that raises transport spending by 10% and funds two libraries, without new taxes."
BAD = "Tuesday libraries mayor taxes. Budget the council percent ten new."


def requests_for(pairs: list[tuple[str, str, str, str]]) -> pa.Table:
    template = load_prompts(ROOT / "configs/prompts/summarization", ["fluency"])["fluency"]
    rows = [
        {
            "key": f"k{i}",
            "context_id": "ctx",
            "aspect": "fluency",
            "candidate_a": a,
            "candidate_b": b,
            "prompt": template.render(ARTICLE, ta, tb),
            "prompt_hash": template.hash,
        }
        for i, (a, ta, b, tb) in enumerate(pairs)
    ]
    return pa.Table.from_pylist(rows, schema=REQUESTS)


PAIRS = [("good", GOOD, "bad", BAD), ("bad", BAD, "good", GOOD)]


@pytest.fixture(scope="module")
def vllm_judge(default_model):
    judge = make_judge(VllmJudgeSpec(env=CPU_ENGINE_ENV))
    yield judge


def test_vllm_judgments_carry_label_probabilities(vllm_judge):
    out = validate(vllm_judge.judge(requests_for(PAIRS)), JUDGMENTS, "vllm judge output")
    assert out.column("key").to_pylist() == ["k0", "k1"]
    for row in out.to_pylist():
        assert row["error"] is None
        assert math.isfinite(row["logprob_a"]) and math.isfinite(row["logprob_b"])
        assert row["logprob_a"] < 0 and row["logprob_b"] < 0
        assert row["p_a"] == pytest.approx(p_a_from_logprobs(row["logprob_a"], row["logprob_b"]))
        assert row["input_tokens"] > 50 and row["output_tokens"] == 1
        assert row["engine"] == "vllm" and row["revision"]
    # the identity the driver computes without an engine is the one the engine records
    assert vllm_judge.identity() == judge_identity(VllmJudgeSpec(env=CPU_ENGINE_ENV))


def test_vllm_judge_is_repeatable(vllm_judge):
    first = vllm_judge.judge(requests_for(PAIRS)).column("p_a").to_pylist()
    again = vllm_judge.judge(requests_for(PAIRS)).column("p_a").to_pylist()
    assert first == pytest.approx(again, abs=1e-6)


def test_a_prompt_too_long_is_an_error_row_and_the_rest_of_the_batch_is_judged(vllm_judge):
    long_text = " ".join(["word"] * 3000)
    out = vllm_judge.judge(requests_for([PAIRS[0], ("long", long_text, "good", GOOD), PAIRS[1]])).to_pylist()
    assert [r["error"] is None for r in out] == [True, False, True]
    assert "judge.max_model_len 2048" in out[1]["error"] and out[1]["input_tokens"] > 2048


def test_every_label_surface_form_is_one_token(vllm_judge):
    tokenizer = vllm_judge.llm.get_tokenizer()
    assert len(set(label_token_ids(tokenizer, ["A", " A"], "A"))) == 2
    with pytest.raises(ValueError, match=r"label A surface form ' Alpha Bravo' is \d+ tokens"):
        label_token_ids(tokenizer, [" Alpha Bravo"], "A")


def test_http_judge_against_vllm_openai_server(vllm_judge, default_model, tmp_path):
    port = 8765
    env = {**os.environ, **CPU_ENGINE_ENV, "VLLM_HOST_IP": "127.0.0.1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "VLLM_LOGGING_LEVEL": "WARNING"}  # fmt: skip
    log = open(tmp_path / "server.log", "wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--host", "127.0.0.1", "--port", str(port),
         "--model", str(default_model), "--served-model-name", "gemma", "--dtype", "bfloat16",
         "--max-model-len", "2048", "--enforce-eager", "--enable-prefix-caching", "--seed", "0"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        try:
            wait_for_port(port, 240, server)
        except (TimeoutError, RuntimeError) as exc:
            pytest.fail(f"vLLM server did not start: {exc}\n{(tmp_path / 'server.log').read_text()[-3000:]}")
        judge = make_judge(HttpJudgeSpec(base_url=f"http://127.0.0.1:{port}/v1", model="gemma"))
        assert judge.ids_a and judge.ids_b  # label ids came from the server's /tokenize
        assert judge.ids_a + judge.ids_b == vllm_judge.ids_a + vllm_judge.ids_b
        over_http = validate(judge.judge(requests_for(PAIRS)), JUDGMENTS, "http judge output")
        offline = vllm_judge.judge(requests_for(PAIRS))
        assert over_http.column("error").to_pylist() == [None, None]
        assert over_http.column("p_a").to_pylist() == pytest.approx(offline.column("p_a").to_pylist(), abs=0.05)
        assert all(t > 50 for t in over_http.column("input_tokens").to_pylist())
        # an unknown model is an error row that says what the server answered, not a crash
        wrong = make_judge(
            HttpJudgeSpec(base_url=f"http://127.0.0.1:{port}/v1", model="nope", label_token_ids={"a": [1], "b": [2]})
        )
        bad = wrong.judge(requests_for(PAIRS[:1])).to_pylist()[0]
        assert bad["p_a"] is None and bad["error"].startswith("HTTP 404")
    finally:
        stop_process(server)
        log.close()


def test_replay_answers_known_requests_and_refuses_unknown_ones(vllm_judge, tmp_path):
    made = vllm_judge.judge(requests_for(PAIRS[:1]))
    source = Location.of(str(tmp_path / "made.parquet"))
    source.write_parquet(made)
    replay = make_judge(ReplayJudgeSpec(source=source.uri))
    out = replay.judge(requests_for(PAIRS)).to_pylist()
    assert out[0]["p_a"] == made.column("p_a")[0].as_py() and out[0]["model"] == made.column("model")[0].as_py()
    assert out[1]["p_a"] is None and "has no judgment of (ctx, fluency, bad, good)" in out[1]["error"]
