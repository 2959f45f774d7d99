"""Judging modes: what one judge actor does with each pass's batch.

A mode is a sequence of passes (see ``JudgingSpec.passes``); each pass is its
own Ray Data stream through the same warm pool (:mod:`pairank.cluster.pools.judge_pool`), and the
driver (:mod:`pairank.jobs.judging.passes`) decides what each pass is asked. On the actor,
:class:`ModeRunner` turns a batch of one pass into rows:

* ``pairwise`` (REQUESTS -> JUDGMENTS): the verdict of each rendered prompt, read
  as label probabilities (``logprob``), as a generated verdict parsed by
  :func:`pairank.judges.verdicts.parse_verdict` (``generate``: an unparseable answer
  is re-asked at most ``retries`` times at ``retry_temperature`` with a new seed,
  then it is an error row; never a guess; with ``verdict_scale: 5`` the five levels
  [[A>>B]] .. [[B>>A]] are stored as label A, A, tie, B, B and p_a 1, 0.75, 0.5, 0.25, 0),
  or as ``samples`` generations whose p_a is the fraction choosing A, a tie counting
  half (``sample``).
* ``analysis`` and ``analysis_pairwise`` (PASS_REQUESTS -> PASSES): a generated
  analysis of one output (PRePair), or of one output while both are shown (PRePair^).
* ``score`` (PASS_REQUESTS -> PASSES): a G-Eval style Likert score: the
  probability-weighted mean of the score tokens at the next position::

      >>> expected_score([math.log(0.5), math.log(0.5), -math.inf], (1, 3))
      (1.5, {'1': 0.5, '2': 0.5, '3': 0.0})

Every engine prompt is counted per pass in :attr:`ModeRunner.calls`, so a test
(or the report) can see that an output was analysed once.

Sampling is seeded per request from its key, so the same request gets the same
answer on any actor, and the cache can keep it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from pairank.judges.interface import (
    REQUEST_COLUMNS,
    Generated,
    GenerateParams,
    GeneratingJudge,
    Judge,
    OptionScore,
    check_columns,
    identity_columns,
    judgment_rows,
    judgment_table,
    label_of,
    logsumexp,
)
from pairank.storage.keys import canonical_json
from pairank.storage.schemas import PASSES

#: Columns of a first-pass batch (PASS_REQUESTS) the actor reads.
PASS_COLUMNS = {
    "key": "stable pass key",
    "context_id": "input id",
    "aspect": "aspect",
    "kind": "analysis, analysis_pairwise or score",
    "candidate_id": "output analysed or scored",
    "other_id": "the other output shown (analysis_pairwise)",
    "focus": "slot of the analysed output (analysis_pairwise)",
    "prompt": "rendered prompt",
    "prompt_hash": "template hash",
}
ANALYSIS_KINDS = ("analysis", "analysis_pairwise")


def judging_settings(judging) -> dict:
    """The settings of a mode that change its verdicts (they go into the judge identity)."""
    j = judging
    generate = {
        "max_tokens": j.max_tokens,
        "temperature": j.temperature,
        "retries": j.retries,
        "retry_temperature": j.retry_temperature,
        "allow_ties": j.allow_ties,
    }
    if j.mode == "generate":
        # Five levels are another verdict; three add nothing, so the judgments made before scales existed stay valid.
        return {**generate, "verdict_scale": 5} if j.verdict_scale == 5 else generate
    if j.mode == "sample":
        return {
            "max_tokens": j.max_tokens,
            "samples": j.samples,
            "temperature": j.sample_temperature,
            "allow_ties": j.allow_ties,
        }
    if j.mode in ("prepair", "prepair_pairwise"):
        out = {"analysis_max_tokens": j.analysis_max_tokens, "verdict": j.verdict}
        return {**out, **generate} if j.verdict == "generate" else out
    if j.mode == "pointwise":
        return {"scale": list(j.scale), "tie_margin": j.tie_margin}
    return {}


def judging_identity(engine: dict, judging) -> dict:
    """The identity of the verdicts: the engine's, plus the mode and its settings (logprob adds nothing).

    >>> from pairank.jobs.specs.job import JudgingSpec
    >>> judging_identity({"engine": "e", "sampling": {"t": 0}}, JudgingSpec())
    {'engine': 'e', 'sampling': {'t': 0}}
    >>> judging_identity({"engine": "e", "sampling": {}}, JudgingSpec(mode="pointwise"))["sampling"]["mode"]
    'pointwise'
    >>> five = judging_identity({"engine": "e"}, JudgingSpec(mode="generate", verdict_scale=5))
    >>> five["sampling"]["judging"]["verdict_scale"]
    5
    """
    if judging is None or judging.mode == "logprob":
        return engine
    sampling = {**engine.get("sampling", {}), "mode": judging.mode, "judging": judging_settings(judging)}
    return {**engine, "sampling": sampling}


def pass_identity(engine: dict, judging, kind: str) -> dict:
    """The identity of a first pass: it does not change with the verdict settings, so analyses are reused."""
    settings: dict[str, Any] = {"pass": kind}
    if kind in ANALYSIS_KINDS:
        settings["max_tokens"] = judging.analysis_max_tokens
    else:
        settings["scale"] = list(judging.scale)
    return {**engine, "sampling": {**engine.get("sampling", {}), **settings}}


def score_options(scale: tuple[int, int]) -> list[list[str]]:
    """The surface forms of each score, e.g. ``[["1", " 1"], ...]``."""
    return [[str(s), f" {s}"] for s in range(scale[0], scale[1] + 1)]


def expected_score(logprobs: list[float], scale: tuple[int, int]) -> tuple[float, dict[str, float]]:
    """Probability-weighted mean score and the normalised distribution over the scores."""
    total = logsumexp(logprobs)
    probs = [0.0 if lp == -math.inf else math.exp(lp - total) for lp in logprobs]
    scores = range(scale[0], scale[1] + 1)
    return sum(s * p for s, p in zip(scores, probs)), {str(s): round(p, 6) for s, p in zip(scores, probs)}


def request_seed(key: str, base: int, attempt: int = 0) -> int:
    """A seed per request and attempt, from its key.

    >>> request_seed("00000010", 0) , request_seed("00000010", 0, attempt=1) != request_seed("00000010", 0)
    (16, True)
    """
    return (int(key[:8], 16) + base + 1_000_003 * attempt) % (2**31 - 1)


def failure_rows(
    engine_identity: dict, judging, judging_pass: str, batch: pa.Table, error: str, seconds: float = 0.0
) -> pa.Table:
    """Error rows for every request of ``batch`` in ``judging_pass`` (a judgment or a first pass), naming ``error``.

    Needs no engine: a pool answers with these the requests no engine could judge
    (``functools.partial(failure_rows, engine_identity, judging)``).
    """
    n = batch.num_rows
    share = [seconds / max(n, 1)] * n
    if judging_pass == "pairwise":
        return judgment_table(
            batch,
            judging_identity(engine_identity, judging),
            p_a=[None] * n,
            label=[None] * n,
            raw_text=[None] * n,
            input_tokens=[0] * n,
            output_tokens=[0] * n,
            seconds=share,
            error=[error] * n,
        )
    identity = pass_identity(engine_identity, judging, judging_pass)
    return pass_table(
        batch,
        identity,
        text=[None] * n,
        score=[None] * n,
        input_tokens=[0] * n,
        output_tokens=[0] * n,
        seconds=share,
        error=[error] * n,
    )


def build_runner(build: Callable[[Any], Judge], judge_spec, judging=None) -> EngineModes:
    """The engine ``build(judge_spec)``, in the ``judging`` mode unless a call names another: what a judge actor
    or replica runs.

    Pools and Serve replicas receive ``functools.partial(build_runner, engine.build, judge_spec, judging)``
    as their factory and call it once, in their own process. The builder travels with it, so an engine
    registered in the driver's process only (see :func:`pairank.judges.register`) builds there too.
    """
    return EngineModes(build(judge_spec), judging)


def mode_key(judging) -> str:
    """What tells one judging mode's settings from another's (the settings as canonical JSON).

    >>> from pairank.jobs.specs.job import JudgingSpec
    >>> mode_key(JudgingSpec()) == mode_key(JudgingSpec(mode="logprob")) != mode_key(JudgingSpec(mode="generate"))
    True
    """
    return "" if judging is None else canonical_json(judging.model_dump(mode="json"))


class EngineModes:
    """One engine, built once, and a :class:`ModeRunner` per judging settings it is asked in.

    A call names its judging settings (``judging``; None: those it was built with), so the jobs that share a
    warm pool (:func:`pairank.cluster.pools.warm.warm_pools`) each judge in their own mode on the same engine, and an
    actor that Ray restarted with the arguments it was first built with still judges in the calls' mode.
    """

    def __init__(self, judge: Judge, judging=None):
        self.judge, self.judging = judge, judging
        self.runners = {mode_key(judging): ModeRunner(judge, judging)}  # checks that the engine can run it
        self.making = threading.Lock()  # an actor's calls run on several threads

    def runner(self, judging=None) -> ModeRunner:
        """The runner of ``judging`` (None: the settings it was built with), made on first use; an engine that
        cannot run the mode raises ``ValueError`` here."""
        key = mode_key(self.judging if judging is None else judging)
        with self.making:
            if key not in self.runners:
                self.runners[key] = ModeRunner(self.judge, judging)
            return self.runners[key]

    def run(self, judging_pass: str, batch: pa.Table, judging=None) -> pa.Table:
        """The rows of one pass's batch in the mode of ``judging`` (:meth:`ModeRunner.run`)."""
        return self.runner(judging).run(judging_pass, batch)

    def info(self, judging=None) -> dict:
        """The counters of the runner of ``judging``: engine prompts per judging pass (``calls``)."""
        return self.runner(judging).info()


class ModeRunner:
    """One judge engine and the judging mode: runs any pass's batch on it."""

    def __init__(self, judge: Judge, judging=None):
        self.judge, self.judging = judge, judging
        self.engine_identity = judge.identity()
        self.identity = judging_identity(self.engine_identity, judging)
        self.verdict = judging.verdict_kind if judging is not None else "logprob"
        self.calls: Counter = Counter()
        self.seed = getattr(getattr(judge, "spec", None), "seed", 0) or 0
        needs_engine = self.verdict != "logprob" or (judging is not None and judging.mode != "logprob")
        if needs_engine and not isinstance(judge, GeneratingJudge):
            raise ValueError(f"judging.mode {judging.mode!r}: the {judge.engine} engine cannot generate")

    @property
    def generating(self) -> GeneratingJudge:
        """The engine, for the modes that generate (``__init__`` checked that it can)."""
        assert isinstance(self.judge, GeneratingJudge), f"the {self.judge.engine} engine cannot generate"
        return self.judge

    def run(self, judging_pass: str, batch: pa.Table) -> pa.Table:
        """Rows of one pass's batch; an engine failure becomes error rows (retried on the next run)."""
        if judging_pass not in ("pairwise", "analysis", "analysis_pairwise", "score"):
            raise ValueError(
                f"unknown judging pass {judging_pass!r}; expected pairwise, analysis, analysis_pairwise or score"
            )
        started = time.perf_counter()
        try:
            return self.pairwise(batch) if judging_pass == "pairwise" else self.first_pass(judging_pass, batch)
        except Exception as exc:
            if self.judge.is_fatal(exc):
                raise  # the engine is gone: its actor ends and Ray restarts it (pairank.cluster.pools.judge_pool)
            if judging_pass == "pairwise":
                check_columns(batch, REQUEST_COLUMNS, "pairwise pass")
            else:
                check_columns(batch, PASS_COLUMNS, f"{judging_pass} pass")
            return self._failed(judging_pass, batch, f"{type(exc).__name__}: {exc}", time.perf_counter() - started)

    def _failed(self, judging_pass: str, batch: pa.Table, error: str, seconds: float) -> pa.Table:
        return failure_rows(self.engine_identity, self.judging, judging_pass, batch, error, seconds)

    # -- pairwise verdicts ---------------------------------------------------------------------------------------

    def pairwise(self, requests: pa.Table) -> pa.Table:
        check_columns(requests, REQUEST_COLUMNS, "pairwise pass")
        self.calls["pairwise"] += requests.num_rows
        if self.verdict == "logprob":
            if self.identity is self.engine_identity:
                return self.judge.judge(requests)
            prompts = requests.column("prompt").to_pylist()
            return judgment_rows(requests, self.generating.score(prompts), self.identity)
        if self.verdict == "generate":
            return self._generated(requests)
        return self._sampled(requests)

    def _generated(self, requests: pa.Table) -> pa.Table:
        from pairank.judges.verdicts import parse_verdict

        j = self.judging
        prompts, keys = requests.column("prompt").to_pylist(), requests.column("key").to_pylist()
        seeds = [request_seed(k, self.seed) for k in keys]
        answers = self.generating.generate(prompts, GenerateParams(j.max_tokens, j.temperature), seeds)
        scale = j.verdict_scale
        verdicts = [
            None if a.error else parse_verdict(a.texts[0] if a.texts else "", j.allow_ties, scale) for a in answers
        ]
        out_tokens = [a.output_tokens for a in answers]
        seconds = [a.seconds for a in answers]
        attempts = [1] * len(prompts)
        for attempt in range(1, j.retries + 1):
            todo = [i for i, v in enumerate(verdicts) if v is not None and v.label is None]
            if not todo:
                break
            self.calls["pairwise_retry"] += len(todo)
            again = self.generating.generate(
                [prompts[i] for i in todo],
                GenerateParams(j.max_tokens, j.retry_temperature),
                [request_seed(keys[i], self.seed, attempt) for i in todo],
            )
            for i, a in zip(todo, again):
                out_tokens[i] += a.output_tokens
                seconds[i] += a.seconds
                attempts[i] += 1
                if a.error is None:
                    answers[i], verdicts[i] = a, parse_verdict(a.texts[0] if a.texts else "", j.allow_ties, scale)
        errors = []
        for a, v, n in zip(answers, verdicts, attempts):
            if a.error is not None or v is None:  # (v is None exactly when the answer is an error)
                errors.append(a.error)
            elif v.label is None:
                errors.append(f"no verdict after {n} answer{'s' if n > 1 else ''}: {v.error}")
            else:
                errors.append(None)
        return judgment_table(
            requests,
            self.identity,
            p_a=[None if e or v is None else v.p_a for v, e in zip(verdicts, errors)],
            label=[None if e or v is None else v.label for v, e in zip(verdicts, errors)],
            raw_text=[a.texts[0] if a.texts else None for a in answers],
            input_tokens=[a.input_tokens for a in answers],
            output_tokens=out_tokens,
            seconds=seconds,
            error=errors,
        )

    def _sampled(self, requests: pa.Table) -> pa.Table:
        from pairank.judges.verdicts import parse_verdict

        j = self.judging
        prompts, keys = requests.column("prompt").to_pylist(), requests.column("key").to_pylist()
        answers = self.generating.generate(
            prompts,
            GenerateParams(j.max_tokens, j.sample_temperature, n=j.samples),
            [request_seed(k, self.seed) for k in keys],
        )
        p_a: list[float | None] = []
        label: list[str | None] = []
        raw: list[str | None] = []
        errors: list[str | None] = []
        for a in answers:
            verdicts = [parse_verdict(t, j.allow_ties) for t in a.texts]
            votes = Counter(v.label or "none" for v in verdicts)
            parsed = len(verdicts) - votes["none"]
            raw.append(canonical_json({"votes": dict(sorted(votes.items())), "texts": a.texts}) if a.texts else None)
            if a.error is None and parsed == 0:
                first = verdicts[0].error if verdicts else "no text"
                errors.append(f"none of the {len(verdicts)} samples has a verdict (first: {first})")
            else:
                errors.append(a.error)
            if errors[-1] is None:
                p = (votes["A"] + 0.5 * votes["tie"]) / parsed
                p_a.append(p)
                label.append(label_of(p))
            else:
                p_a.append(None)
                label.append(None)
        return judgment_table(
            requests,
            self.identity,
            p_a=p_a,
            label=label,
            raw_text=raw,
            input_tokens=[a.input_tokens for a in answers],
            output_tokens=[a.output_tokens for a in answers],
            seconds=[a.seconds for a in answers],
            error=errors,
        )

    # -- first passes --------------------------------------------------------------------------------------------

    def first_pass(self, kind: str, requests: pa.Table) -> pa.Table:
        check_columns(requests, PASS_COLUMNS, f"{kind} pass")
        prompts, keys = requests.column("prompt").to_pylist(), requests.column("key").to_pylist()
        self.calls[kind] += len(prompts)
        identity = pass_identity(self.engine_identity, self.judging, kind)
        started = time.perf_counter()
        answers: list[OptionScore] | list[Generated]
        if kind == "score":
            scale = tuple(self.judging.scale)
            answers = self.generating.option_logprobs(prompts, score_options(scale))
            text: list[str | None] = []
            score: list[float | None] = []
            out_tokens: list[int] = []
            errors: list[str | None] = []
            for a in answers:
                logprobs, error = a.logprobs or [], a.error
                if error is None and a.logprobs is None:
                    error = "no option log-probabilities in the engine's answer"
                if error is None and all(lp == -math.inf for lp in logprobs):
                    error = "every score token has probability 0"
                if error is None:
                    value, dist = expected_score(logprobs, scale)
                    mass = sum(math.exp(lp) for lp in logprobs if lp != -math.inf)
                    text.append(canonical_json({"probabilities": dist, "mass": round(mass, 6)}))
                    score.append(value)
                else:
                    text.append(None)
                    score.append(None)
                out_tokens.append(0 if error else 1)
                errors.append(error)
        else:
            params = GenerateParams(self.judging.analysis_max_tokens, 0.0)
            answers = self.generating.generate(prompts, params, [request_seed(k, self.seed) for k in keys])
            text = [a.texts[0].strip() if a.texts else None for a in answers]
            score = [None] * len(answers)
            out_tokens = [a.output_tokens for a in answers]
            errors = [a.error or (None if t else "empty analysis") for a, t in zip(answers, text)]
        share = (time.perf_counter() - started) / max(len(answers), 1)
        return pass_table(
            requests,
            identity,
            text=[t if e is None else None for t, e in zip(text, errors)],
            score=score,
            input_tokens=[a.input_tokens for a in answers],
            output_tokens=out_tokens,
            seconds=[share] * len(answers),
            error=errors,
        )

    def info(self) -> dict:
        return {"calls": dict(self.calls)}


def pass_table(requests: pa.Table, identity: dict, **values: list) -> pa.Table:
    """PASSES rows: the pass request's columns, the identity, and text, score, tokens, seconds and error."""
    columns = {
        **identity_columns(requests, identity),
        **{c: requests.column(c) for c in ("context_id", "aspect", "kind", "candidate_id", "other_id", "focus")},
        **{c: values[c] for c in ("text", "score", "input_tokens", "output_tokens", "seconds", "error")},
        "created_at": [dt.datetime.now(dt.UTC)] * requests.num_rows,
    }
    return pa.table(columns, schema=PASSES)


def pair_scores_verdict(score_a: float, score_b: float, scale: tuple[int, int], tie_margin: float) -> tuple[float, str]:
    """p_a and label of a pair compared by pointwise scores.

    ``p_a = 1/2 + (s_a - s_b) / (2 (high - low))``, in [0, 1] and linear in the
    score difference; scores at most ``tie_margin`` apart are a tie (p_a = 1/2)::

        >>> pair_scores_verdict(4.0, 2.0, (1, 5), 0.0)
        (0.75, 'A')
        >>> pair_scores_verdict(3.0, 3.1, (1, 5), 0.2)
        (0.5, 'tie')
    """
    diff = score_a - score_b
    if abs(diff) <= tie_margin:
        return 0.5, "tie"
    p = min(1.0, max(0.0, 0.5 + diff / (2 * (scale[1] - scale[0]))))
    return p, label_of(p)


def describe_scores(score_a: float, score_b: float) -> str:
    return json.dumps({"score_a": round(score_a, 6), "score_b": round(score_b, 6)})
