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
from typing import Any

from pairank.judges.interface import (
    Generated,
    GenerateParams,
    GeneratingJudge,
    LabelScore,
    OptionScore,
    logsumexp,
    single_token_forms,
)


class HttpJudge(GeneratingJudge):
    engine = "http"

    def __init__(self, spec: Any) -> None:
        """``spec``: a :class:`pairank.judges.engines.http.HttpJudgeSpec`."""
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
        return self.spec.identity()

    def _post(self, url: str, body: dict) -> dict:
        req = urllib.request.Request(url, data=json.dumps(body).encode(), headers=self.headers, method="POST")
        with urllib.request.urlopen(req, timeout=self.spec.timeout_s) as resp:
            return json.loads(resp.read())

    def _tokenize(self, text: str) -> list[int] | None:
        """vLLM's /tokenize of ``text``; None where the endpoint has no such route."""
        root = self.base[: -len("/v1")] if self.base.endswith("/v1") else self.base
        try:
            answer = self._post(
                f"{root}/tokenize", {"model": self.spec.model, "prompt": text, "add_special_tokens": False}
            )
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405):
                return None
            raise
        return list(answer.get("tokens", []))

    def _tokenize_labels(self) -> dict | None:
        """Ask vLLM's /tokenize for the label ids; None where the endpoint has no such route."""
        out = {}
        for side, forms in (("a", self.spec.labels.a), ("b", self.spec.labels.b)):
            ids = []
            for form in forms:
                tokens = self._tokenize(form)
                if tokens is None:
                    return None
                if len(tokens) != 1:
                    raise ValueError(
                        f"label {side.upper()} surface form {form!r} is {len(tokens)} tokens; expected one"
                    )
                ids.append(tokens[0])
            out[side] = ids
        return out

    def _completion(self, body: dict) -> tuple[dict | None, float, str | None]:
        """POST /completions; (answer, seconds, error)."""
        started = time.perf_counter()
        try:
            answer = self._post(f"{self.base}/completions", {"model": self.spec.model, **body})
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:300]
            return None, time.perf_counter() - started, f"HTTP {exc.code}: {detail}"
        except (urllib.error.URLError, TimeoutError, OSError) as exc:
            return None, time.perf_counter() - started, f"{type(exc).__name__}: {exc}"
        return answer, time.perf_counter() - started, None

    def generate(self, prompts: list[str], params: GenerateParams, seeds: list[int]) -> list[Generated]:
        def one(prompt_seed: tuple[str, int]) -> Generated:
            prompt, seed = prompt_seed
            body = {
                "prompt": prompt,
                "max_tokens": params.max_tokens,
                "temperature": params.temperature,
                "n": params.n,
                "seed": seed,
            }
            answer, seconds, error = self._completion(body)
            if answer is None:  # (exactly when there is an error)
                return Generated(seconds=seconds, error=error)
            usage = answer.get("usage") or {}
            choices = sorted(answer.get("choices") or [], key=lambda c: c.get("index", 0))
            return Generated(
                texts=[c.get("text") or "" for c in choices],
                input_tokens=int(usage.get("prompt_tokens", 0)),
                output_tokens=int(usage.get("completion_tokens", 0)),
                seconds=seconds,
                error=None if choices else "the endpoint returned no choices",
            )

        with ThreadPoolExecutor(max_workers=self.spec.concurrency) as pool:
            return list(pool.map(one, zip(prompts, seeds)))

    def option_logprobs(self, prompts: list[str], options: list[list[str]]) -> list[OptionScore]:
        """By token id where the endpoint has vLLM's /tokenize, else by the forms' strings in top_logprobs."""
        key = tuple(map(tuple, options))
        cache = self.__dict__.setdefault("_option_ids", {})
        if key not in cache:
            probe = self._tokenize(options[0][0])
            cache[key] = None if probe is None else single_token_forms(self._tokenize, options)
        ids = cache[key]

        def one(prompt: str) -> OptionScore:
            body = {"prompt": prompt, "max_tokens": 1, "temperature": 0.0, "logprobs": 20}
            if ids is not None:
                body["logprob_token_ids"] = sorted({t for option in ids for t in option})
                body["return_tokens_as_token_ids"] = True
            answer, seconds, error = self._completion(body)
            if answer is None:  # (exactly when there is an error)
                return OptionScore(seconds=seconds, error=error)
            choice = (answer.get("choices") or [{}])[0]
            top = ((choice.get("logprobs") or {}).get("top_logprobs") or [None])[0] or {}
            names = [[f"token_id:{t}" for t in option] for option in ids] if ids is not None else options
            values = [[top[name] for name in option if name in top] for option in names]
            n_in = int((answer.get("usage") or {}).get("prompt_tokens", 0))
            if not any(values):
                return OptionScore(input_tokens=n_in, seconds=seconds, error="no option in the endpoint's logprobs")
            return OptionScore(logprobs=[logsumexp(v) for v in values], input_tokens=n_in, seconds=seconds)

        with ThreadPoolExecutor(max_workers=self.spec.concurrency) as pool:
            return list(pool.map(one, prompts))

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
