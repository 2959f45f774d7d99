"""Prompts rendered in the cluster (jobs/judging/render.py) on local Ray: adaptive rounds and the passes of multi-pass
modes hand the judge pool request identities, and a Ray Data stage renders them, prompt for prompt what the
driver rendered before (``RequestMaker.table``).

Judges: the SIMULATED engine, and for the multi-pass modes a scripted OpenAI-compatible endpoint whose answers
depend on the exact prompt it is sent (an analysis is a digest of its prompt; a verdict is A or B by the digest's
parity), so a verdict equal to the former path's means the prompt was too.
"""

from __future__ import annotations

import hashlib
import json
from contextlib import contextmanager
from dataclasses import replace
from http.server import BaseHTTPRequestHandler

import pyarrow as pa
import pytest

from pairank.cluster import executor
from pairank.jobs.judging.adaptive import Driver
from pairank.jobs.judging.pool_wiring import judge_pool
from pairank.jobs.judging.render import (
    PASS_IDS,
    REQUEST_IDS,
    maker_of,
    put_texts,
    render_passes,
    render_requests,
    request_ids,
)
from pairank.jobs.judging.requests import RequestMaker, Variant, prefix_order
from pairank.jobs.pipeline.inputs import read_inputs
from pairank.jobs.pipeline.setup import mode_prompts, prepare_judging
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import PASSES, REQUESTS
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import completions_endpoint, reply_json, spec_for, write_input


@pytest.fixture
def six_input(tmp_path, summeval_tables):
    """3 SummEval articles x 6 summaries, with human scores."""
    return write_input(tmp_path / "input", summeval_tables, 3, 6)


class SeeingPool:
    """judge_pool, remembering what each call of its pools' ``judge`` was handed."""

    def __init__(self):
        self.handed: list[tuple[str, object]] = []

    @contextmanager
    def __call__(self, spec):
        with judge_pool(spec) as pool:
            judge = pool.judge

            def seeing(requests, judging_pass="pairwise"):
                self.handed.append((judging_pass, requests))
                return judge(requests, judging_pass)

            pool.judge = seeing
            yield pool


def http_spec(input_folder, out, url: str, **over):
    """A spec judged by the OpenAI-compatible endpoint at ``url``."""
    data = spec_for(input_folder, out, **over)
    data["judge"] = {"engine": "http", "base_url": url, "model": "scripted", "concurrency": 2}
    return parse_spec(data, "test")


def source_tables(tasks) -> list[pa.Table]:
    """The tables the render tasks start from: what the driver handed over."""
    return list(tasks.blocks)


def rows_of(stream) -> pa.Table:
    return pa.concat_tables(stream.tables())


def test_adaptive_rounds_hand_the_pool_identities_and_judge_what_the_driver_rendered_before(
    ray_local, six_input, tmp_path
):
    spec = parse_spec(spec_for(six_input, tmp_path / "out", scheduler={"name": "pairs_beam", "symmetric": True}), "t")
    candidates = read_inputs(spec.input, spec.subset).candidates
    setup = prepare_judging(spec, candidates, RunLayout.of(spec.output, spec.name))
    pools = SeeingPool()
    result = Driver(spec, candidates, setup.judging, setup.cache, pools, lambda m: None).run()

    judged_rounds = [r for r in result.rounds if r["judged"]]
    assert result.stopped == "done" and len(judged_rounds) == len(pools.handed) > 3
    maker = setup.maker
    for (judging_pass, ds), stats in zip(pools.handed, judged_rounds):
        assert judging_pass == "pairwise" and ds.stage.fn is render_requests
        (ids,) = source_tables(ds)  # what the driver handed over: identities, no prompt text
        assert ids.schema == REQUEST_IDS and "prompt" not in ids.column_names and ids.num_rows == stats["judged"]
        assert [(r["context_id"], r["candidate_a"], r["candidate_b"]) for r in prefix_order(ids.to_pylist())] == [
            (r["context_id"], r["candidate_a"], r["candidate_b"]) for r in ids.to_pylist()
        ]  # prefix order: a context's pairs together, both orders of a pair side by side
        wanted = {r["key"]: (r["aspect"], r["context_id"], r["candidate_a"], r["candidate_b"]) for r in ids.to_pylist()}
        assert rows_of(ds).equals(maker.table(wanted))  # the render stage: the former driver's REQUESTS rows

    # the former path (every prompt rendered on the driver, the table dealt to the actors) judges the same keys
    # the same way
    new = {r["key"]: r for r in result.judgments.to_pylist()}
    wanted = {k: (r["aspect"], r["context_id"], r["candidate_a"], r["candidate_b"]) for k, r in new.items()}
    with judge_pool(spec) as pool:
        former = pa.concat_tables(pool.judge(maker.table(wanted))).to_pylist()
    assert len(former) == len(new) == result.judged > 0
    assert {r["key"]: (r["p_a"], r["label"]) for r in former} == {k: (r["p_a"], r["label"]) for k, r in new.items()}


def two_variants(spec, mode: str) -> tuple[Variant, dict]:
    """The spec's coherence variant in ``mode``, and prompts of two aspects, coherence with a second variant."""
    (v,) = mode_prompts(spec.judging.model_copy(update={"mode": mode}), spec.prompts, spec.aspects)["coherence"]
    other = Variant(replace(v.verdict, text=v.verdict.text + "\nAnswer with care."), v.first)
    return v, {"coherence": [v, other], "fluency": [v]}  # fluency's prompts: coherence's first variant's


def test_the_render_tasks_make_the_former_requests_and_first_passes(ray_local, six_input, tmp_path):

    spec = http_spec(six_input, tmp_path / "out", "http://127.0.0.1:9/v1")  # an endpoint never asked
    candidates = read_inputs(spec.input, spec.subset).candidates
    ids = candidates.column("candidate_id").to_pylist()
    ctx = dict(zip(ids, candidates.column("context_id").to_pylist()))
    pairs = [(a, b) for a in ids for b in ids if a != b and ctx[a] == ctx[b]][:40]
    for mode in ("logprob", "prepair_pairwise"):
        v, prompts = two_variants(spec, mode)
        maker = RequestMaker(candidates, prompts, {"model": "m"})  # a judging identity
        wanted = {
            key: (aspect, ctx[a], a, b, variant)
            for aspect in prompts
            for a, b in pairs
            for variant, key in enumerate(maker.keys(aspect, ctx[a], a, b))
        }
        assert len(wanted) == 3 * len(pairs)
        texts = put_texts(maker)
        assert maker_of(texts) is maker_of(texts)  # built once per worker process
        if mode == "logprob":
            plain = render_requests(request_ids(wanted), texts)
            assert plain.equals(maker.table(wanted)) and plain.schema == REQUESTS
            prompt = dict(zip(plain.column("key").to_pylist(), plain.column("prompt").to_pylist()))
            by_request = {req: prompt[k] for k, req in wanted.items()}
            for a, b in pairs:  # each variant its own template; fluency's is coherence's first
                c0, c1 = (by_request["coherence", ctx[a], a, b, i] for i in (0, 1))
                assert c1 == c0 + "\nAnswer with care." and by_request["fluency", ctx[a], a, b, 0] == c0
            continue
        notes = {k: (f"note on {r[2]} in {k[:6]}", f"note on {r[3]} in {k[:6]}") for k, r in wanted.items()}
        by_key = {f"{k}/{slot}": text for k, pair in notes.items() for slot, text in zip("ab", pair)}
        with_notes = render_requests(
            request_ids(wanted, {k: (f"{k}/a", f"{k}/b") for k in wanted}), texts, analyses=executor.put(by_key)
        )
        assert with_notes.equals(maker.table(wanted, notes))
        for key, prompt in zip(with_notes.column("key").to_pylist(), with_notes.column("prompt").to_pylist()):
            assert notes[key][0] in prompt and notes[key][1] in prompt

        (a, b) = pairs[0]
        rows = [
            dict(
                key=f"k{f}",
                context_id=ctx[a],
                aspect="coherence",
                kind="analysis_pairwise",
                candidate_id=cid,
                other_id=other,
                focus=f,
                variant=1,
            )
            for f, cid, other in (("A", a, b), ("B", b, a))
        ]
        passes = render_passes(pa.Table.from_pylist(rows, schema=PASS_IDS), texts).to_pylist()
        for row, focus in zip(passes, "AB"):  # both passes show the pair in its order, the focus names the slot
            assert row["prompt"] == v.first.fill(
                context=maker.context[ctx[a]], candidate_a=maker.text[a], candidate_b=maker.text[b], focus=focus
            )
            assert row["prompt_hash"] == v.first.hash and row["focus"] == focus
        assert passes[0]["prompt"] != passes[1]["prompt"]


ANALYSIS_TOKENS, VERDICT_TOKENS = 17, 32


def answer(prompt: str, max_tokens: int) -> str:
    """The scripted endpoint's answer: a note naming the prompt's digest (analyses), or A or B by its parity."""
    digest = hashlib.sha256(prompt.encode("utf-8")).hexdigest()
    if max_tokens == ANALYSIS_TOKENS:
        return f"A note, number {digest[:12]}."
    return "[[A]]" if int(digest, 16) % 2 else "[[B]]"


class Scripted(BaseHTTPRequestHandler):
    asked: list[tuple[int, str]] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/v1/completions"):
            self.send_error(404)
            return
        Scripted.asked.append((body["max_tokens"], body["prompt"]))
        reply_json(
            self,
            {
                "choices": [{"index": 0, "text": answer(body["prompt"], body["max_tokens"])}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            },
        )

    def log_message(self, *args):
        pass


@pytest.mark.parametrize(
    "mode, scheduler", [("prepair", {"name": "pairs_greedy"}), ("prepair_pairwise", {"name": "full"})]
)
def test_multi_pass_modes_render_first_passes_and_verdicts_in_the_cluster(
    ray_local, six_input, tmp_path, mode, scheduler
):
    Scripted.asked = []
    with completions_endpoint(Scripted) as url:
        spec = http_spec(
            six_input,
            tmp_path / "out",
            url,
            scheduler=scheduler,
            judging={
                "mode": mode,
                "verdict": "generate",
                "max_tokens": VERDICT_TOKENS,
                "analysis_max_tokens": ANALYSIS_TOKENS,
            },
        )
        result = run_job(spec, progress=lambda m: None)
    kind = "analysis" if mode == "prepair" else "analysis_pairwise"
    judgments = JudgmentCache(result.layout.root.join("tables", "judgments")).read().to_pylist()
    passes = JudgmentCache(result.layout.root.join("tables", "passes"), PASSES).read().to_pylist()
    assert result.errors == 0 and len(judgments) == result.judged > 0
    first = result.report["first_passes"]
    assert (first["kind"], first["run"], first["errors"]) == (kind, len(passes), 0)
    assert len(passes) == (6 * 3 if mode == "prepair" else 2 * len(judgments))

    # the first passes' prompts and the verdicts' are the ones the driver rendered before
    candidates = read_inputs(spec.input, spec.subset).candidates
    maker = RequestMaker(
        candidates, mode_prompts(spec.judging, spec.prompts, spec.aspects), {}
    )  # keys given: no judge identity needed
    first_prompts = []
    for p in passes:
        template, context = maker.variants[p["aspect"]][0].first, maker.context[p["context_id"]]
        if mode == "prepair":
            prompt = template.fill(context=context, candidate=maker.text[p["candidate_id"]])
        else:
            a, b = (p["candidate_id"], p["other_id"])[:: 1 if p["focus"] == "A" else -1]
            prompt = template.fill(
                context=context, candidate_a=maker.text[a], candidate_b=maker.text[b], focus=p["focus"]
            )
        assert p["text"] == answer(prompt, ANALYSIS_TOKENS)
        first_prompts.append(prompt)
    assert sorted(p for t, p in Scripted.asked if t == ANALYSIS_TOKENS) == sorted(first_prompts)  # each once
    note = {(p["aspect"], p["context_id"], p["candidate_id"], p["other_id"], p["focus"]): p["text"] for p in passes}
    wanted, notes = {}, {}
    for r in judgments:
        a, b = r["candidate_a"], r["candidate_b"]
        wanted[r["key"]] = (r["aspect"], r["context_id"], a, b)
        seen = (("", ""), ("", "")) if mode == "prepair" else ((b, "A"), (a, "B"))  # the other output, the focus
        notes[r["key"]] = (
            note[(r["aspect"], r["context_id"], a, *seen[0])],
            note[(r["aspect"], r["context_id"], b, *seen[1])],
        )
    former = maker.table(wanted, notes).to_pylist()
    asked = [p for t, p in Scripted.asked if t == VERDICT_TOKENS]
    assert sorted(asked) == sorted(r["prompt"] for r in former)
    label = {r["key"]: r["label"] for r in judgments}
    assert all(label[r["key"]] == answer(r["prompt"], VERDICT_TOKENS)[2] for r in former)
