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
from dataclasses import dataclass

import pyarrow as pa

from operators.checks import require_columns
from storage.keys import canonical_json
from storage.schemas import JUDGMENTS

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

    def close(self) -> None:  # pragma: no cover - engines that hold resources override
        pass


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
            elapsed = time.perf_counter() - started
            msg = f"{type(exc).__name__}: {exc}"
            scores = [LabelScore(seconds=elapsed / max(len(prompts), 1), error=msg) for _ in prompts]
        return judgment_rows(requests, scores, self.identity())


def judgment_rows(requests: pa.Table, scores: list[LabelScore], identity: dict) -> pa.Table:
    """Assemble JUDGMENTS rows from requests and what the engine read."""
    now = dt.datetime.now(dt.timezone.utc)
    p_a, la, lb, label, error = [], [], [], [], []
    for s in scores:
        err = s.error
        if err is None and (s.logprob_a is None or s.logprob_b is None):
            err = "no label log-probabilities in the engine's answer"
        if err is None and s.logprob_a == -math.inf and s.logprob_b == -math.inf:
            err = "both labels have probability 0"
        if err is None:
            p = p_a_from_logprobs(s.logprob_a, s.logprob_b)
            p_a.append(p)
            label.append(label_of(p))
        else:
            p_a.append(None)
            label.append(None)
        la.append(s.logprob_a if s.logprob_a is None or math.isfinite(s.logprob_a) else None)
        lb.append(s.logprob_b if s.logprob_b is None or math.isfinite(s.logprob_b) else None)
        error.append(err)
    n = requests.num_rows
    columns = {
        "key": requests.column("key"),
        "engine": [identity["engine"]] * n,
        "model": [identity["model"]] * n,
        "revision": [identity.get("revision") or ""] * n,
        "prompt_hash": requests.column("prompt_hash"),
        "sampling": [canonical_json(identity.get("sampling", {}))] * n,
        "context_id": requests.column("context_id"),
        "aspect": requests.column("aspect"),
        "candidate_a": requests.column("candidate_a"),
        "candidate_b": requests.column("candidate_b"),
        "p_a": p_a,
        "logprob_a": la,
        "logprob_b": lb,
        "label": label,
        "raw_text": [s.raw_text for s in scores],
        "input_tokens": [s.input_tokens for s in scores],
        "output_tokens": [s.output_tokens for s in scores],
        "seconds": [s.seconds for s in scores],
        "error": error,
        "created_at": [now] * n,
    }
    return pa.table(columns, schema=JUDGMENTS)
