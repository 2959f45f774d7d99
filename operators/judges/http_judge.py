"""The http judge: any OpenAI-compatible ``/v1/completions`` endpoint.

Each prompt is one completion request with ``max_tokens=1, temperature=0`` and
``logprobs`` set. For vLLM servers (and Ray Serve LLM deployments built on vLLM)
the label token ids are sent as ``logprob_token_ids`` with
``return_tokens_as_token_ids``, so the answer holds the full-vocabulary
log-probability of every label form, keyed ``token_id:<id>``. Other endpoints
are read by the label strings in ``top_logprobs``; a label missing there counts
as probability 0, and both missing is an error row.

The bearer token is read from the environment variable named in the spec and is
never written anywhere.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

from operators.judges.base import LabelProbabilityJudge, LabelScore, logsumexp


def http_identity(spec) -> dict:
    return {
        "engine": "http",
        "model": spec.model,
        "revision": spec.revision or "",
        "sampling": {
            "max_tokens": 1,
            "temperature": 0.0,
            "labels": {"a": list(spec.labels.a), "b": list(spec.labels.b)},
        },
    }


class HttpJudge(LabelProbabilityJudge):
    engine = "http"

    def __init__(self, spec):
        self.spec = spec
        self.base = spec.base_url.rstrip("/")
        self.headers = {"Content-Type": "application/json"}
        if spec.api_key_env:
            token = os.environ.get(spec.api_key_env)
            if not token:
                raise ValueError(f"judge.api_key_env names {spec.api_key_env!r}, which is not set")
            self.headers["Authorization"] = f"Bearer {token}"
        ids = spec.label_token_ids or self._tokenize_labels()
        self.ids_a = list(ids.get("a", [])) if ids else []
        self.ids_b = list(ids.get("b", [])) if ids else []

    def identity(self) -> dict:
        return http_identity(self.spec)

    def _post(self, url: str, body: dict) -> dict:
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=self.headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.spec.timeout_s) as resp:
            return json.loads(resp.read())

    def _tokenize_labels(self) -> dict | None:
        """Ask vLLM's /tokenize for the label ids; None where the endpoint has no such route."""
        root = self.base[: -len("/v1")] if self.base.endswith("/v1") else self.base
        out = {}
        for side, forms in (("a", self.spec.labels.a), ("b", self.spec.labels.b)):
            ids = []
            for form in forms:
                try:
                    answer = self._post(
                        f"{root}/tokenize", {"model": self.spec.model, "prompt": form, "add_special_tokens": False}
                    )
                except urllib.error.HTTPError as exc:
                    if exc.code in (404, 405):
                        return None
                    raise
                tokens = answer.get("tokens", [])
                if len(tokens) != 1:
                    raise ValueError(f"label {side.upper()} surface form {form!r} is {len(tokens)} tokens; expected one")
                ids.append(tokens[0])
            out[side] = ids
        return out

    def _one(self, prompt: str) -> LabelScore:
        body = {
            "model": self.spec.model,
            "prompt": prompt,
            "max_tokens": 1,
            "temperature": 0.0,
            "logprobs": 20,
        }
        if self.ids_a and self.ids_b:
            body["logprob_token_ids"] = self.ids_a + self.ids_b
            body["return_tokens_as_token_ids"] = True
        started = time.perf_counter()
        try:
            answer = self._post(f"{self.base}/completions", body)
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            return LabelScore(seconds=time.perf_counter() - started, error=f"HTTP {exc.code}: {detail}")
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return LabelScore(seconds=time.perf_counter() - started, error=f"{type(exc).__name__}: {exc}")
        seconds = time.perf_counter() - started
        usage = answer.get("usage") or {}
        choice = (answer.get("choices") or [{}])[0]
        top = ((choice.get("logprobs") or {}).get("top_logprobs") or [None])[0] or {}
        if self.ids_a and self.ids_b:
            la = [top.get(f"token_id:{t}") for t in self.ids_a]
            lb = [top.get(f"token_id:{t}") for t in self.ids_b]
        else:
            la = [top.get(form) for form in self.spec.labels.a]
            lb = [top.get(form) for form in self.spec.labels.b]
        found = any(v is not None for v in la + lb)
        return LabelScore(
            logprob_a=logsumexp([v for v in la if v is not None]) if found else None,
            logprob_b=logsumexp([v for v in lb if v is not None]) if found else None,
            input_tokens=int(usage.get("prompt_tokens", 0)),
            output_tokens=int(usage.get("completion_tokens", 0)),
            seconds=seconds,
            raw_text=choice.get("text"),
        )

    def score(self, prompts: list[str]) -> list[LabelScore]:
        with ThreadPoolExecutor(max_workers=self.spec.concurrency) as pool:
            return list(pool.map(self._one, prompts))
