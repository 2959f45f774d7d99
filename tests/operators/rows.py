"""Judgment rows for operator tests: every JUDGMENTS column, only the comparison varies."""

from __future__ import annotations

import datetime as dt

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def judgment(ctx: str, aspect: str, a: str, b: str, p: float | None, error: str | None = None) -> dict:
    return {
        "key": f"{ctx}/{aspect}/{a}/{b}",
        "engine": "replay",
        "model": "m",
        "revision": "r",
        "prompt_hash": "h",
        "sampling": "{}",
        "context_id": ctx,
        "aspect": aspect,
        "candidate_a": a,
        "candidate_b": b,
        "p_a": p,
        "logprob_a": None,
        "logprob_b": None,
        "label": None if error else ("A" if p > 0.5 else "B" if p < 0.5 else "tie"),
        "raw_text": None,
        "input_tokens": 10,
        "output_tokens": 1,
        "seconds": 0.01,
        "error": error,
        "created_at": T0,
    }
