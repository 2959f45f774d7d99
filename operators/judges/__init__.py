"""Judges: one module per engine, looked up by name in :data:`JUDGES`.

``judge_identity(spec)`` gives what keys a judgment (known without starting an
engine); ``make_judge(spec)`` builds the engine, once per actor.
"""

from __future__ import annotations

from collections.abc import Callable

from pairank.operators.judges.base import Judge


def _vllm(spec) -> Judge:
    from pairank.operators.judges.vllm_judge import VllmJudge

    return VllmJudge(spec)


def _http(spec) -> Judge:
    from pairank.operators.judges.http_judge import HttpJudge

    return HttpJudge(spec)


def _replay(spec) -> Judge:
    from pairank.operators.judges.replay_judge import ReplayJudge

    return ReplayJudge(spec)


def _simulated(spec) -> Judge:
    from pairank.operators.judges.simulated import SimulatedJudge

    return SimulatedJudge(spec)


def _vllm_identity(spec) -> dict:
    from pairank.operators.judges.vllm_judge import vllm_identity

    return vllm_identity(spec)


def _http_identity(spec) -> dict:
    from pairank.operators.judges.http_judge import http_identity

    return http_identity(spec)


def _replay_identity(spec) -> dict:
    from pairank.operators.judges.replay_judge import replay_identity

    return replay_identity(spec)


def _simulated_identity(spec) -> dict:
    from pairank.operators.judges.simulated import simulated_identity

    return simulated_identity(spec)


#: engine name -> (constructor, identity). Engines import lazily: vLLM is heavy
#: and only the judge actors need it.
JUDGES: dict[str, tuple[Callable[[object], Judge], Callable[[object], dict]]] = {
    "vllm": (_vllm, _vllm_identity),
    "http": (_http, _http_identity),
    "replay": (_replay, _replay_identity),
    "simulated": (_simulated, _simulated_identity),
}


def _lookup(engine: str):
    try:
        return JUDGES[engine]
    except KeyError:
        raise ValueError(f"unknown judge engine {engine!r}; available: {', '.join(sorted(JUDGES))}") from None


def make_judge(spec) -> Judge:
    return _lookup(spec.engine)[0](spec)


def judge_identity(spec) -> dict:
    return _lookup(spec.engine)[1](spec)
