"""`judging.verdict_scale: 5` end to end: the real `http` judge in a Ray actor pool asks a scripted
OpenAI-compatible /v1/completions endpoint (in this process, on 127.0.0.1) with the generate5 template;
the five-level answers are parsed, stored in the judgment cache as labels and p_a, and scored with the
decisive weight (win ratios of the run, Bradley-Terry of the leaderboard). The weight is read at scoring
time, so another weight reuses every judgment; three levels are other judgments with other keys."""

from __future__ import annotations

import json
import re
from http.server import BaseHTTPRequestHandler

import pyarrow as pa
import pytest

from pairank.jobs.leaderboard import build_leaderboard
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.judges.verdicts import LEVELS
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import PROMPTS, completions_endpoint, reply_json

# x is much better than y, y slightly better than z, z slightly better than x (see tests/operators/
# test_verdict_scales.py): counted once, the hard verdicts are a cycle; x's decisive wins weigh 3.
TEXTS = {"x": "The summary of x.", "y": "The summary of y.", "z": "The summary of z."}
BETTER = {("x", "y"): "A>>B", ("y", "z"): "A>B", ("z", "x"): "A>B"}
LETTER = {"A": "A", "B": "B", "tie": "C"}


def level(a: str, b: str) -> str:
    """The five-level verdict on ``a`` in slot A and ``b`` in slot B."""
    if (a, b) in BETTER:
        return BETTER[(a, b)]
    return BETTER[(b, a)].translate(str.maketrans("AB", "BA"))


def slot(prompt: str, name: str) -> str:
    text = re.search(rf"<<<CANDIDATE {name}\n(.*?)\nCANDIDATE {name}>>>", prompt, re.S).group(1)
    return next(k for k, v in TEXTS.items() if v == text)


class Completions(BaseHTTPRequestHandler):
    prompts: list[str] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if not self.path.endswith("/v1/completions"):
            self.send_error(404)
            return
        prompt = body["prompt"]
        Completions.prompts.append(prompt)
        verdict = level(slot(prompt, "A"), slot(prompt, "B"))
        if "[[A>>B]] if" not in prompt:  # a three-level prompt: the same verdict, without its strength
            verdict = LETTER[LEVELS[verdict][0]]
        text = f"Both follow the article; one is clearer.\n[[{verdict}]]"
        answer = {"choices": [{"index": 0, "text": text}], "usage": {"prompt_tokens": 50, "completion_tokens": 9}}
        reply_json(self, answer)

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def endpoint():
    with completions_endpoint(Completions) as url:
        yield url


@pytest.fixture
def three_candidates(tmp_path):
    folder = Location.of(str(tmp_path / "input"))
    folder.join("candidates.parquet").write_parquet(
        pa.table(
            {
                "context_id": ["doc"] * 3,
                "context": ["An article about the weather."] * 3,
                "candidate_id": list(TEXTS),
                "system": [f"s{c}" for c in TEXTS],
                "text": list(TEXTS.values()),
            }
        )
    )
    return folder.uri


def spec(input_uri: str, output: str, name: str, endpoint: str, **judging):
    return parse_spec(
        {
            "name": name,
            "input": input_uri,
            "output": output,
            "aspects": ["coherence"],
            "prompts": PROMPTS,
            "judge": {"engine": "http", "base_url": endpoint, "model": "scripted", "concurrency": 2},
            "judging": {"mode": "generate", "max_tokens": 64, **judging},
            "scheduler": {"name": "full"},
            "pool": {"size": 1, "num_cpus": 1, "batch_size": 4},
            "report": {"bootstrap": 0},
        },
        f"{name}.yaml",
    )


def win_ratios(result, method: str) -> dict[str, float]:
    table = Location.of(result.layout.rankings.uri).read_parquet().to_pylist()
    return {r["candidate_id"]: r["score"] for r in table if r["method"] == method}


def test_a_five_level_run_is_judged_stored_and_scored_with_the_decisive_weight(
    tmp_path, ray_local, endpoint, three_candidates
):
    store = str(tmp_path / "store")
    asked = len(Completions.prompts)
    five = run_job(spec(three_candidates, store, "five", endpoint, verdict_scale=5))
    assert (five.requests, five.judged, five.cached, five.errors) == (6, 6, 0, 0)
    prompts = Completions.prompts[asked:]
    assert len(prompts) == 6 and all(p.count("[[A>>B]] if") == 1 and "[[C]]" not in p for p in prompts)

    # stored: the level's label and p_a, the scale in the judge identity
    rows = JudgmentCache(Location.of(store).join("tables", "judgments")).read().to_pylist()
    assert len(rows) == 6
    for r in rows:
        expected = level(r["candidate_a"], r["candidate_b"])
        assert (r["label"], r["p_a"]) == LEVELS[expected] and r["raw_text"].endswith(f"[[{expected}]]")
        assert json.loads(r["sampling"])["judging"]["verdict_scale"] == 5 and r["error"] is None

    # scored: x's two decisive wins over y count 3 times each
    assert win_ratios(five, "win_ratio_hard") == {"x": 0.75, "y": 0.25, "z": 0.5}
    assert win_ratios(five, "win_ratio_soft") == pytest.approx({"x": 6.5 / 8, "y": 1.5 / 8, "z": 0.5})

    # another weight is scoring only: the same judgments, from the cache, nothing asked
    asked = len(Completions.prompts)
    once = run_job(spec(three_candidates, store, "five-once", endpoint, verdict_scale=5, decisive_weight=1))
    assert (once.judged, once.cached) == (0, 6) and len(Completions.prompts) == asked
    assert win_ratios(once, "win_ratio_hard") == {"x": 0.5, "y": 0.5, "z": 0.5}

    # the leaderboard's Bradley-Terry fit weighs the decisive verdicts too (Arena-Hard's 3 by default)
    board = build_leaderboard(store, runs=["five"], n_boot=0)
    ranks = {r["system"]: r["rank"] for r in board.board.table.to_pylist() if r["aspect"] == "coherence"}
    assert ranks == {"sx": 1, "sz": 2, "sy": 3}

    # three levels are another judge: new keys, asked again, never mixed with the five-level judgments
    three = run_job(spec(three_candidates, store, "three", endpoint))
    assert (three.judged, three.cached) == (6, 0)
    assert all("[[C]] for a tie" in p and "[[A>>B]]" not in p for p in Completions.prompts[-6:])
    rows = JudgmentCache(Location.of(store).join("tables", "judgments")).read().to_pylist()
    assert len(rows) == 12 and len({r["key"] for r in rows}) == 12
    assert sorted((r["label"], r["p_a"]) for r in rows if "verdict_scale" not in r["sampling"]) == [
        ("A", 1.0),
        ("A", 1.0),
        ("A", 1.0),
        ("B", 0.0),
        ("B", 0.0),
        ("B", 0.0),
    ]
    assert win_ratios(three, "win_ratio_hard") == {"x": 0.5, "y": 0.5, "z": 0.5}
