"""vLLM's async engine behind the synchronous calls the vLLM judge makes.

vLLM's ``AsyncLLM`` keeps every request it has been given in flight at once
(continuous batching) and runs its engine core in a second process, so the core
never waits between batches. Here it lives on an event loop of its own thread, and
:meth:`AsyncEngine.generate` is the blocking call of ``vllm.LLM.generate``: any
number of threads may call it at once (a judge actor with ``max_concurrency`` k
holds k batches in the engine), each waiting for its own batch only, as
``ray.data.llm``'s vLLM engine stage keeps several batches in its engine.

In a judge actor the engine exports vLLM's own metrics (requests running and waiting, KV-cache use, prompt and
generated tokens, prefix-cache hits, time to first token) through Ray's metrics agent (:func:`ray_stat_loggers`).

The engine core outlives a process that is SIGKILLed (or ended by ``ray.kill``): it
would hold its memory and cores for ever. So a small watcher process, started once the
engine is up, waits on a pipe from this process and kills the engine's processes
when the pipe closes, that is when this process is gone, however it ended.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path


def ray_stat_loggers() -> list:
    """vLLM's engine metrics through Ray's metrics agent (``RayPrometheusStatLogger``: ``vllm:*`` exported as
    ``ray_vllm_*``), in a process that runs in Ray (a judge actor); none elsewhere. Ray is only looked up here, not
    imported: a process without it has no agent to export to."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return []
    from vllm.v1.metrics.ray_wrappers import RayPrometheusStatLogger

    return [RayPrometheusStatLogger]


class AsyncEngine:
    """``AsyncLLM`` built from ``engine_kwargs`` (``vllm.LLM``'s keywords), driven from any thread."""

    def __init__(self, engine_kwargs: dict):
        from vllm import AsyncEngineArgs
        from vllm.v1.engine.async_llm import AsyncLLM

        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="vllm-async-engine", daemon=True)
        self.thread.start()

        async def build():  # on the loop: the engine's output handler runs there
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_kwargs), stat_loggers=ray_stat_loggers())

        self.engine = self._wait(build())
        self.watcher = kill_when_gone(children(os.getpid()))

    def _wait(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def generate(self, prompts: list, params, use_tqdm: bool = False) -> list:
        """One final ``RequestOutput`` per prompt (a text or vLLM's ``TokensPrompt``), in order; ``params`` is one
        SamplingParams or one per prompt.

        Blocks the calling thread only; an engine error (``EngineDeadError`` when the
        core process died) is raised here as ``vllm.LLM.generate`` raises it.
        """
        per_prompt = params if isinstance(params, list) else [params] * len(prompts)
        return self._wait(self._batch(prompts, per_prompt))

    async def _batch(self, prompts: list, params: list) -> list:
        return list(await asyncio.gather(*(self._one(p, sp) for p, sp in zip(prompts, params))))

    async def _one(self, prompt, params):
        from vllm.sampling_params import RequestOutputKind

        params = params.clone()
        params.output_kind = RequestOutputKind.FINAL_ONLY  # one output, with every completion (n > 1)
        final = None
        async for out in self.engine.generate(prompt, params, request_id=uuid.uuid4().hex):
            final = out
        return final

    def shutdown(self) -> None:
        self.engine.shutdown()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        if self.watcher.stdin is not None:  # (always: kill_when_gone opens a pipe)
            self.watcher.stdin.close()  # the watcher ends (killing what is left of the engine's processes)
        self.watcher.wait(timeout=10)


#: The watcher: read stdin to its end (this process is gone), then SIGKILL the pids of its arguments.
_WATCHER = """import os, signal, sys
sys.stdin.buffer.read()
for pid in sys.argv[1:]:
    try:
        os.kill(int(pid), signal.SIGKILL)
    except OSError:
        pass
"""


def kill_when_gone(pids: list[int]) -> subprocess.Popen:
    """A process that SIGKILLs ``pids`` once the calling process has ended (its stdin pipe then closes).

    It runs in a session of its own, so that a signal to the caller's process group does not end it first.
    """
    return subprocess.Popen(
        [sys.executable, "-c", _WATCHER, *map(str, pids)], stdin=subprocess.PIPE, start_new_session=True
    )


def children(pid: int) -> list[int]:
    """Every live descendant of process ``pid`` (from /proc)."""
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        kids = [p for p, pp in parents.items() if pp == parent]
        found += kids
        todo += kids
    return sorted(found)
