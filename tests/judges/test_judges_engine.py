"""The judges on the real engine: vLLM's CPU build with the converted Gemma-3-270M,
and the http judge against vLLM's own OpenAI server on 127.0.0.1."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading

import pyarrow as pa
import pytest

from pairank.jobs.specs.job import JudgingSpec
from pairank.judges import judge_identity, make_judge
from pairank.judges.engines.http import HttpJudgeSpec
from pairank.judges.engines.replay import ReplayJudgeSpec
from pairank.judges.engines.vllm import VllmJudgeSpec, choose_dtype
from pairank.judges.engines.vllm_judge import label_token_ids, threads_bind
from pairank.judges.interface import GenerateParams, p_a_from_logprobs
from pairank.judges.modes import ModeRunner, score_options
from pairank.judges.prompts import Domain, load_mode_prompts, load_prompts
from pairank.judges.verdicts import parse_verdict
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS, PASS_REQUESTS, PASSES, REQUESTS
from pairank.storage.validation import validate
from tests.helpers import CPU_ENGINE_ENV, ROOT, THREAD_SETTINGS, stop_process, wait_for_port

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


#: The in-process judge keeps the judge's own thread binding (the test of it below), unlike the other test engines.
ENV = {k: v for k, v in CPU_ENGINE_ENV.items() if k not in THREAD_SETTINGS}


@pytest.fixture(scope="module")
def vllm_judge(default_model):
    judge = make_judge(VllmJudgeSpec(env=ENV))
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
    assert vllm_judge.identity() == judge_identity(VllmJudgeSpec(env=ENV))


def test_the_engine_runs_the_dtype_auto_chose_for_this_cpu(vllm_judge):
    """The fixture's settings leave judge.dtype to auto (issue 27, item 1): the engine runs what auto chose for
    this CPU, and its judgments say so."""
    assert VllmJudgeSpec().dtype == "auto"
    chosen, _ = choose_dtype("auto", num_gpus=0)
    assert vllm_judge.spec.dtype == chosen
    assert str(vllm_judge.llm.llm_engine.model_config.dtype) == f"torch.{chosen}"
    assert vllm_judge.identity()["sampling"]["dtype"] == chosen


def test_the_engine_threads_run_on_every_core_this_process_may_use(vllm_judge):
    """Without VLLM_CPU_OMP_THREADS_BIND in judge.env (the fixture's settings leave it out), the CPU build binds its
    threads to the process's cores (issue 27, item 1): vLLM's own default keeps one back, a fixed 0-1 idles the rest
    of a bigger machine. The engine core runs in this process (no multiprocessing), so torch's threads show it."""
    import torch

    cores = os.sched_getaffinity(0)
    assert "VLLM_CPU_OMP_THREADS_BIND" not in vllm_judge.spec.env
    assert os.environ["VLLM_CPU_OMP_THREADS_BIND"] == threads_bind(cores)
    assert torch.get_num_threads() == len(cores)


def test_the_judge_tokenizes_and_the_engine_loads_no_tokenizer(vllm_judge):
    """The engine gets token ids (``skip_tokenizer_init``): vLLM loads no tokenizer of its own, the judge's counts
    each prompt's tokens, and the engine reads exactly those (the ids vLLM makes of a text prompt)."""
    with pytest.raises(ValueError, match="skip_tokenizer_init"):
        vllm_judge.llm.get_tokenizer()
    request = requests_for(PAIRS[:1])
    out = vllm_judge.judge(request).to_pylist()[0]
    assert out["input_tokens"] == len(vllm_judge.tokenizer.encode(request.column("prompt")[0].as_py()))


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
    tokenizer = vllm_judge.tokenizer
    assert len(set(label_token_ids(tokenizer, ["A", " A"], "A"))) == 2
    with pytest.raises(ValueError, match=r"label A surface form ' Alpha Bravo' is \d+ tokens"):
        label_token_ids(tokenizer, [" Alpha Bravo"], "A")


def test_http_judge_against_vllm_openai_server(vllm_judge, default_model, tmp_path):
    """The HTTP judge against vLLM's OpenAI server, answer for answer as the offline engine, both in the dtype
    ``auto`` chose for this CPU (a bfloat16 server against the float32 engine of a CPU without native bfloat16
    differed by 0.13 in one score option's log-probability, and ran 5x slower)."""
    port = 8765
    env = {
        **os.environ,
        **CPU_ENGINE_ENV,
        "VLLM_HOST_IP": "127.0.0.1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_LOGGING_LEVEL": "WARNING",
    }
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 - a server's log, open for its life
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--model",
            str(default_model),
            "--served-model-name",
            "gemma",
            "--dtype",
            vllm_judge.spec.dtype,  # what auto chose for this CPU, as the offline judge it is compared with
            "--max-model-len",
            "2048",
            "--enforce-eager",
            "--enable-prefix-caching",
            "--seed",
            "0",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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
        # the calls the judging modes use: greedy text as the offline engine writes it, the same score options
        prompt = requests_for(PAIRS[:1]).column("prompt")[0].as_py()
        (text,) = judge.generate([prompt], GenerateParams(max_tokens=8), [0])
        (offline_text,) = vllm_judge.generate([prompt], GenerateParams(max_tokens=8), [0])
        assert text.error is None and text.output_tokens == 8 and text.texts == offline_text.texts
        (score,) = judge.option_logprobs(["Rate it from 1 to 5.\nScore:"], score_options((1, 5)))
        (offline_score,) = vllm_judge.option_logprobs(["Rate it from 1 to 5.\nScore:"], score_options((1, 5)))
        assert score.error is None and score.logprobs == pytest.approx(offline_score.logprobs, abs=0.05)
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


# -- the engine calls the judging modes are built on, and the modes themselves ------------------------------------


def test_vllm_generates_samples_also_when_prefills_are_chunked(vllm_judge):
    prompt = requests_for(PAIRS[:1]).column("prompt")[0].as_py()
    params = GenerateParams(max_tokens=12, temperature=1.0, n=3)
    (first,) = vllm_judge.generate([prompt], params, [7])
    assert first.error is None and len(first.texts) == 3 and len(set(first.texts)) > 1
    assert 3 <= first.output_tokens <= 36 and first.input_tokens > 50
    # vLLM's CPU build cannot rewind a per-request generator when a prefill is chunked; on CPU the engine's
    # own generator is used, and a batch large enough to be chunked samples without failing
    assert vllm_judge.per_request_seeds is False
    many = vllm_judge.generate([f"{i}. {prompt}" for i in range(12)], GenerateParams(4, 1.0, n=2), list(range(12)))
    assert all(g.error is None and len(g.texts) == 2 for g in many)
    (greedy,) = vllm_judge.generate([prompt], GenerateParams(max_tokens=8), [0])
    assert vllm_judge.generate([prompt], GenerateParams(max_tokens=8), [1])[0].texts == greedy.texts
    long_prompt = " ".join(["word"] * 2100)
    (too_long,) = vllm_judge.generate([long_prompt], params, [0])
    assert too_long.texts == [] and "leaves room for" in too_long.error


def test_vllm_reads_the_probability_of_every_score_option(vllm_judge):
    prompt = "Rate the summary from 1 to 5.\nScore:"
    (score,) = vllm_judge.option_logprobs([prompt], score_options((1, 5)))
    assert score.error is None and len(score.logprobs) == 5 and all(math.isfinite(lp) for lp in score.logprobs)
    # " 1" is two tokens for Gemma's tokenizer: it is skipped, "1" is kept
    with pytest.raises(ValueError, match="no surface form is a single token"):
        vllm_judge.option_logprobs([prompt], [["1"], [" ten thousand"]])


def _mode_spec(mode: str, **over) -> JudgingSpec:
    """Short answers: these tests check the mode's path (parsed or a counted error row), not what the base model
    writes, and on CPU each generated token of a batch costs a decode step."""
    return JudgingSpec(mode=mode, max_tokens=8, analysis_max_tokens=8, samples=3, **over)


def _templates(kind: str):
    domain = Domain.load(ROOT / "configs/prompts/summarization")
    return load_mode_prompts(
        ROOT / "configs/prompts", ROOT / "configs/prompts/summarization", kind, ["fluency"], ["v1"]
    )["fluency"][0], domain


def _pairwise_requests(template) -> pa.Table:
    rows = [
        {
            "key": f"{i:08x}" * 4,
            "context_id": "ctx",
            "aspect": "fluency",
            "candidate_a": a,
            "candidate_b": b,
            "prompt": template.render(ARTICLE, ta, tb),
            "prompt_hash": template.hash,
        }
        for i, (a, ta, b, tb) in enumerate(PAIRS)
    ]
    return pa.Table.from_pylist(rows, schema=REQUESTS)


def test_generate_mode_parses_a_verdict_or_makes_a_counted_error_row_never_a_guess(vllm_judge):
    template, _ = _templates("generate")
    runner = ModeRunner(vllm_judge, _mode_spec("generate", retries=2))
    out = validate(runner.run("pairwise", _pairwise_requests(template)), JUDGMENTS, "generate mode")
    for row in out.to_pylist():
        assert row["raw_text"] is not None and row["output_tokens"] >= 1
        verdict = parse_verdict(row["raw_text"])
        if row["error"] is None:
            assert row["label"] == verdict.label and row["p_a"] == verdict.p_a
        else:
            assert row["p_a"] is None and row["label"] is None and row["error"].startswith("no verdict after 3 answers")
    assert json.loads(out.column("sampling")[0].as_py())["mode"] == "generate"
    failed = sum(e is not None for e in out.column("error").to_pylist())
    assert runner.calls["pairwise"] == 2 and runner.calls["pairwise_retry"] >= 2 * failed


def test_sample_mode_p_a_is_the_fraction_of_samples_choosing_a(vllm_judge):
    template, _ = _templates("generate")
    runner = ModeRunner(vllm_judge, _mode_spec("sample"))
    out = validate(runner.run("pairwise", _pairwise_requests(template)), JUDGMENTS, "sample mode").to_pylist()
    for row in out:
        raw = json.loads(row["raw_text"])
        assert len(raw["texts"]) == 3 and sum(raw["votes"].values()) == 3
        parsed = 3 - raw["votes"].get("none", 0)
        if row["error"] is None:
            assert row["p_a"] == (raw["votes"].get("A", 0) + 0.5 * raw["votes"].get("tie", 0)) / parsed
        else:
            assert parsed == 0 and "none of the 3 samples has a verdict" in row["error"]


def test_first_passes_analyse_and_score_one_output_each(vllm_judge):
    runner = ModeRunner(vllm_judge, _mode_spec("prepair"))
    for kind, judging_pass in (("analysis", "analysis"), ("pointwise", "score")):
        template, _ = _templates(kind)
        rows = [
            {
                "key": f"{i:08x}" * 4,
                "context_id": "ctx",
                "aspect": "fluency",
                "kind": judging_pass,
                "candidate_id": cid,
                "other_id": "",
                "focus": "",
                "prompt": template.fill(context=ARTICLE, candidate=text),
                "prompt_hash": template.hash,
            }
            for i, (cid, text) in enumerate([("good", GOOD), ("bad", BAD)])
        ]
        batch = pa.Table.from_pylist(rows, schema=PASS_REQUESTS)
        out = validate(runner.run(judging_pass, batch), PASSES, judging_pass).to_pylist()
        assert [r["candidate_id"] for r in out] == ["good", "bad"] and all(r["error"] is None for r in out)
        if judging_pass == "score":
            for r in out:
                assert 1.0 <= r["score"] <= 5.0
                assert sum(json.loads(r["text"])["probabilities"].values()) == pytest.approx(1.0, abs=1e-4)
        else:
            assert all(r["text"] and r["score"] is None and r["output_tokens"] >= 1 for r in out)
    assert runner.calls == {"analysis": 2, "score": 2}


def test_the_async_and_the_synchronous_engine_give_the_same_verdicts(vllm_judge):
    """vLLM's async engine (its core in a second process) against its synchronous ``LLM`` on the same prompts:
    the same label probabilities within bfloat16 batching noise, the same labels and greedy texts; batches sent
    from three threads at once (three in flight) get the answers they get one at a time."""
    # the other engine keeps vLLM's own tokenizer (the judge's passes token ids and decodes the texts itself)
    spec = VllmJudgeSpec(
        env=ENV, async_engine=not vllm_judge.async_engine, engine_kwargs={"skip_tokenizer_init": False}
    )
    other = make_judge(spec)
    judges = {j.async_engine: j for j in (vllm_judge, other)}
    assert set(judges) == {True, False}
    summaries = [("good", GOOD), ("bad", BAD), ("terse", "Budget approved."), ("tax", "Taxes rise, says the mayor.")]
    pairs = [(a, ta, b, tb) for a, ta in summaries for b, tb in summaries if a != b]
    requests = requests_for(pairs)
    sync, asyn = (judges[k].judge(requests).to_pylist() for k in (False, True))
    assert all(r["error"] is None for r in sync + asyn)
    assert [r["label"] for r in asyn] == [r["label"] for r in sync]
    assert [r["p_a"] for r in asyn] == pytest.approx([r["p_a"] for r in sync], abs=0.02)
    prompt = requests.column("prompt")[0].as_py()
    texts = {k: j.generate([prompt], GenerateParams(max_tokens=8), [0])[0].texts for k, j in judges.items()}
    assert texts[True] == texts[False] and texts[True][0]
    # the judge's decoding is vLLM's: the texts vLLM's detokenizer wrote, on the engine that has one
    from vllm import SamplingParams

    ids = other.tokenizer.encode(prompt)
    (made,) = other.llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=8, temperature=0))
    assert made.outputs[0].text == other.tokenizer.decode(made.outputs[0].token_ids, skip_special_tokens=True)
    assert made.outputs[0].text == texts[other.async_engine][0]

    thirds = [requests.slice(i, 4) for i in (0, 4, 8)]
    alone = [judges[True].judge(t).column("p_a").to_pylist() for t in thirds]
    together: dict[int, list] = {}

    def judge_third(i: int) -> None:
        together[i] = judges[True].judge(thirds[i]).column("p_a").to_pylist()

    threads = [threading.Thread(target=judge_third, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert [together[i] for i in range(3)] == [pytest.approx(a, abs=0.02) for a in alone]
    other.close()
