"""The judge interface: request rows in, judgment rows out.

A judge's ``identity`` is everything about it that determines an outcome (model,
revision, sampling settings, label words); it is known from the spec alone, so
the driver can key requests and consult the cache without starting an engine.

Label-probability judges read P(A) and P(B) at the answer position, summing the
probabilities of every surface form of each label, and set
``p_a = P(A) / (P(A) + P(B))``::

    >>> round(p_a_from_logprobs(math.log(0.3), math.log(0.1)), 3)
    0.75
    >>> logsumexp([math.log(0.2), math.log(0.1)]) == math.log(0.30000000000000004)
    True
"""

from __future__ import annotations

import datetime as dt
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from pairank.operators.checks import require_columns
from pairank.storage.keys import canonical_json
from pairank.storage.schemas import JUDGMENTS

#: Columns of a request batch that every judge reads.
REQUEST_COLUMNS = {
    "key": "stable judgment key",
    "context_id": "input id",
    "aspect": "aspect compared",
    "candidate_a": "candidate in slot A",
    "candidate_b": "candidate in slot B",
    "prompt": "rendered judge prompt",
    "prompt_hash": "template hash",
}


def logsumexp(values: Sequence[float]) -> float:
    finite = [v for v in values if v is not None and v != -math.inf]
    if not finite:
        return -math.inf
    top = max(finite)
    return top + math.log(sum(math.exp(v - top) for v in finite))


def p_a_from_logprobs(logprob_a: float, logprob_b: float) -> float:
    """P(A) / (P(A) + P(B)) computed stably from log-probabilities."""
    if logprob_a == -math.inf and logprob_b == -math.inf:
        return 0.5
    d = logprob_b - logprob_a
    if d > 0:
        e = math.exp(-d)
        return e / (1.0 + e)
    return 1.0 / (1.0 + math.exp(d))


def label_of(p_a: float) -> str:
    """The hard verdict of a probability: 'A' above 0.5, 'B' below, 'tie' at 0.5."""
    return "A" if p_a > 0.5 else "B" if p_a < 0.5 else "tie"


@dataclass
class LabelScore:
    """What an engine read for one prompt."""

    logprob_a: float | None = None
    logprob_b: float | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    raw_text: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class GenerateParams:
    """What to generate per prompt: ``n`` texts of at most ``max_tokens`` at ``temperature``."""

    max_tokens: int
    temperature: float = 0.0
    n: int = 1


@dataclass
class Generated:
    """What an engine generated for one prompt."""

    texts: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class OptionScore:
    """Log-probability of each option (all its surface forms) at the next token of one prompt."""

    logprobs: list[float] | None = None
    input_tokens: int = 0
    seconds: float = 0.0
    error: str | None = None


def check_columns(batch: pa.Table, needed: dict[str, str], who: str) -> None:
    require_columns(batch, needed, f"{who}: request batch")


class Judge(ABC):
    """Turns a batch of request rows into judgment rows (one per request, same order)."""

    engine: str = ""

    @abstractmethod
    def identity(self) -> dict:
        """Engine, model, revision and sampling settings: what determines an outcome."""

    @abstractmethod
    def judge(self, requests: pa.Table) -> pa.Table:
        """One judgment row per request row."""

    def close(self) -> None:  # pragma: no cover - a no-op unless the engine holds resources
        return None

    def is_fatal(self, exc: BaseException) -> bool:
        """Whether ``exc`` means the engine is gone for good (its actor then ends and Ray restarts it with a
        fresh engine); otherwise the failure becomes error rows. Engines that can die inside a live process
        override this."""
        return False


class LabelProbabilityJudge(Judge):
    """A judge whose engine returns label log-probabilities for prompts."""

    @abstractmethod
    def score(self, prompts: list[str]) -> list[LabelScore]:
        """One :class:`LabelScore` per prompt."""

    def judge(self, requests: pa.Table) -> pa.Table:
        check_columns(requests, REQUEST_COLUMNS, type(self).__name__)
        prompts = requests.column("prompt").to_pylist()
        started = time.perf_counter()
        try:
            scores = self.score(prompts)
        except Exception as exc:  # an engine failure becomes error rows, retried on the next run
            if self.is_fatal(exc):
                raise  # a dead engine answers nothing more: its actor ends and Ray restarts it
            elapsed = time.perf_counter() - started
            msg = f"{type(exc).__name__}: {exc}"
            scores = [LabelScore(seconds=elapsed / max(len(prompts), 1), error=msg) for _ in prompts]
        return judgment_rows(requests, scores, self.identity())


class GeneratingJudge(LabelProbabilityJudge):
    """An engine that also generates text and reads the probabilities of any single-token options.

    The judging modes (:mod:`pairank.judges.modes`) are built on these two calls.
    """

    @abstractmethod
    def generate(self, prompts: list[str], params: GenerateParams, seeds: list[int]) -> list[Generated]:
        """One :class:`Generated` per prompt; ``seeds[i]`` makes prompt i's sampling repeatable."""

    @abstractmethod
    def option_logprobs(self, prompts: list[str], options: list[list[str]]) -> list[OptionScore]:
        """Per prompt, the log-probability of each option at the next token.

        An option is a list of surface forms (e.g. ``["3", " 3"]``); forms that are
        not exactly one token for the engine's tokenizer are skipped, and an option
        left without any form is an error at the first call.
        """


def single_token_forms(encode, options: list[list[str]]) -> list[list[int]]:
    """Token ids of each option's single-token surface forms (see :meth:`GeneratingJudge.option_logprobs`).

    >>> single_token_forms(lambda s: [ord(c) for c in s], [["1", " 1"], ["2"]])
    [[49], [50]]
    """
    out = []
    for forms in options:
        ids = sorted({tokens[0] for tokens in map(encode, forms) if len(tokens) == 1})
        if not ids:
            raise ValueError(f"option {forms}: no surface form is a single token for this tokenizer")
        out.append(ids)
    return out


def judgment_rows(requests: pa.Table, scores: list[LabelScore], identity: dict) -> pa.Table:
    """Assemble JUDGMENTS rows from requests and the label log-probabilities an engine read."""
    p_a: list[float | None] = []
    label: list[str | None] = []
    la, lb, error = [], [], []
    for s in scores:
        err = s.error
        if err is None and (s.logprob_a is None or s.logprob_b is None):
            err = "no label log-probabilities in the engine's answer"
        if err is None and s.logprob_a == -math.inf and s.logprob_b == -math.inf:
            err = "both labels have probability 0"
        if err is None and s.logprob_a is not None and s.logprob_b is not None:  # (err is None says both are)
            p = p_a_from_logprobs(s.logprob_a, s.logprob_b)
            p_a.append(p)
            label.append(label_of(p))
        else:
            p_a.append(None)
            label.append(None)
        la.append(s.logprob_a if s.logprob_a is None or math.isfinite(s.logprob_a) else None)
        lb.append(s.logprob_b if s.logprob_b is None or math.isfinite(s.logprob_b) else None)
        error.append(err)
    return judgment_table(
        requests,
        identity,
        p_a=p_a,
        logprob_a=la,
        logprob_b=lb,
        label=label,
        raw_text=[s.raw_text for s in scores],
        input_tokens=[s.input_tokens for s in scores],
        output_tokens=[s.output_tokens for s in scores],
        seconds=[s.seconds for s in scores],
        error=error,
    )


def judgment_table(requests: pa.Table, identity: dict, **values: Sequence) -> pa.Table:
    """JUDGMENTS rows: the request's columns, the judge identity, and ``values`` per outcome column.

    ``values`` gives p_a, label, raw_text, input_tokens, output_tokens, seconds and
    error (logprob_a and logprob_b are null where not given).
    """
    n = requests.num_rows
    columns = {
        **identity_columns(requests, identity),
        "context_id": requests.column("context_id"),
        "aspect": requests.column("aspect"),
        "candidate_a": requests.column("candidate_a"),
        "candidate_b": requests.column("candidate_b"),
        "p_a": values["p_a"],
        "logprob_a": values.get("logprob_a", [None] * n),
        "logprob_b": values.get("logprob_b", [None] * n),
        "label": values["label"],
        "raw_text": values["raw_text"],
        "input_tokens": values["input_tokens"],
        "output_tokens": values["output_tokens"],
        "seconds": values["seconds"],
        "error": values["error"],
        "created_at": [dt.datetime.now(dt.UTC)] * n,
    }
    return pa.table(columns, schema=JUDGMENTS)


def identity_columns(requests: pa.Table, identity: dict) -> dict:
    """The key and judge columns every result row carries: key, engine, model, revision, prompt hash, sampling."""
    n = requests.num_rows
    return {
        "key": requests.column("key"),
        "engine": [identity["engine"]] * n,
        "model": [identity["model"]] * n,
        "revision": [identity.get("revision") or ""] * n,
        "prompt_hash": requests.column("prompt_hash"),
        "sampling": [canonical_json(identity.get("sampling", {}))] * n,
    }
