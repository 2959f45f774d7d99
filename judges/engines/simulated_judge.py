"""The SIMULATED judge: verdicts drawn from a model, never from a language model.

For planning, scale tests and benchmarks. Its rows say ``engine=simulated,
model=simulated``; they are never a claim about any real judge's quality.

The model, for candidate ``a`` in slot A and ``b`` in slot B of one context::

    logit = scale * (q_a - q_b) + position_bias + intransitivity * sin(phase_a - phase_b) + noise * eps
            + length_bias * log(len(text_a) / len(text_b))
    p_a   = sigmoid(logit)

* ``q`` is the latent quality: a standard normal per (seed, context, candidate),
  the same for every aspect; or, with ``quality`` set to a human scores table,
  the candidate's mean human score for the aspect, z-scored within its context.
* ``phase`` is uniform on [0, 2 pi) per (seed, context, candidate); the sine term
  is antisymmetric, so it bends the preferences into cycles (rock-paper-scissors)
  without favouring either slot.
* ``length_bias`` (with ``lengths``, the candidates table giving the texts) is a
  judge that prefers longer outputs whatever their quality (negative: shorter ones):
  the style a length-controlled score should see through.
* ``eps`` is a standard normal per (seed, context, aspect, a, b): the same
  request always gets the same answer (the judgment cache and resumed runs rely
  on that), while (a, b) and (b, a) get independent draws.

Every draw comes from a hash of its key (blake2b of each string, folded with
splitmix64), so it is the same in every process and Python version::

    >>> round(latent_quality(0, "doc-1", "x"), 6) == round(latent_quality(0, "doc-1", "x"), 6)
    True
    >>> float(simulated_p_a(1.0, 0.0, scale=2.0, noise=0.0, position_bias=0.0, intransitivity=0.0,
    ...                     phase_a=0.0, phase_b=0.0, eps=0.0)) == float(1 / (1 + np.exp(-2.0)))
    True
"""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.special import expit, log_expit, ndtri

from pairank.judges.interface import (
    Judge,
    LabelScore,
    check_columns,
    judgment_rows,
)
from pairank.storage.fs import Location
from pairank.storage.schemas import CANDIDATES, HUMAN_SCORES
from pairank.storage.validation import validate

#: Columns of a request batch this judge reads (the prompt only for its words: :func:`prompt_words`).
COLUMNS = {
    "key": "stable judgment key",
    "context_id": "input id",
    "aspect": "aspect compared",
    "candidate_a": "candidate in slot A",
    "candidate_b": "candidate in slot B",
    "prompt_hash": "template hash",
}


def prompt_words(requests: pa.Table) -> list[int]:
    """The words of each request's prompt (0 without a ``prompt`` column): the simulated judge's stand-in for its
    prompt tokens, so that token counts and metrics move in a simulated run as in a real one (its one output token
    is its verdict's label).

    >>> prompt_words(pa.table({"prompt": ["Which is better? A or B", ""]})), prompt_words(pa.table({"key": ["k"]}))
    ([6, 0], [0])
    """
    if "prompt" not in requests.column_names:
        return [0] * requests.num_rows
    column = requests.column("prompt")
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return ascii_words(array.cast(pa.large_string())).tolist()


def ascii_words(array: pa.LargeStringArray) -> np.ndarray:
    r"""The runs of non-whitespace bytes in each string of ``array`` (what ``\S+`` matches; null: 0), counted over
    the array's bytes at once: a regex count cost about 55 us per 3 KB prompt, which made the SIMULATED judge
    the stream's bottleneck (BENCHMARKS.md §20).

    >>> ascii_words(pa.array([" two  words ", None, "", "é\tx\n", "one"], pa.large_string())).tolist()
    [2, 0, 0, 2, 1]
    """
    n = len(array)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    _, offsets_buf, data_buf = array.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int64)[array.offset : array.offset + n + 1]
    first, last = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buf, dtype=np.uint8)[first:last] if data_buf is not None else np.zeros(0, np.uint8)
    # not ASCII whitespace as RE2's \s has it (tab, newline, form feed, return, space; no byte of a multi-byte
    # UTF-8 character is one of them): comparisons, three times faster than a 256-entry lookup
    word = (data > 32) | (data < 9) | (data == 11) | ((data > 13) & (data < 32))
    starts = word.copy()
    starts[1:] &= ~word[:-1]  # a word begins where a non-space byte follows a space...
    begins = offsets[:-1] - first
    inside = begins < len(data)
    starts[begins[inside]] = word[begins[inside]]  # ...or opens its string
    counts = np.diff(np.searchsorted(np.flatnonzero(starts), offsets - first))
    if array.null_count:
        counts[~array.is_valid().to_numpy(zero_copy_only=False)] = 0
    return counts


#: A column of strings: a sequence, a numpy array of objects, or an Arrow array (``Any`` to mypy).
Strings = Sequence[str] | np.ndarray

# ---------------------------------------------------------------------------
# seeded draws


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def _codes(column) -> np.ndarray:
    """The 64-bit blake2b hash of each string of ``column``, each distinct string hashed once."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else pa.array(column, type=pa.string())
    encoded = array.dictionary_encode()
    table = np.array([_hash64(s) for s in encoded.dictionary.to_pylist()], dtype=np.uint64)
    return table[encoded.indices.to_numpy(zero_copy_only=False)]


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser: a bijection of uint64 that mixes every bit (arithmetic wraps)."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _uniforms(seed: int, tag: str, *columns: Strings) -> np.ndarray:
    """One uniform in (0, 1) per row of ``columns`` (sequences or Arrow arrays of strings).

    The key of a row is (tag, seed, its strings); each string is hashed with
    blake2b and the hashes are folded in order with :func:`_splitmix64`.
    """
    h = np.full(len(columns[0]), _hash64(f"{tag}\x00{seed}"), dtype=np.uint64)
    for column in columns:
        h = _splitmix64(h ^ _codes(column))
    return ((h >> np.uint64(11)).astype(np.float64) + 0.5) / 2.0**53  # 53 random bits


def latent_qualities(seed: int, context_ids: Strings, candidate_ids: Strings) -> np.ndarray:
    """Seeded standard normal latent quality per (context, candidate)."""
    return ndtri(_uniforms(seed, "quality", context_ids, candidate_ids))


def latent_quality(seed: int, context_id: str, candidate_id: str) -> float:
    """The latent quality of one candidate (see :func:`latent_qualities`)."""
    return float(latent_qualities(seed, [context_id], [candidate_id])[0])


def phases(seed: int, context_ids: Strings, candidate_ids: Strings) -> np.ndarray:
    """Seeded phase in [0, 2 pi) per (context, candidate), for the intransitive term."""
    return 2.0 * np.pi * _uniforms(seed, "phase", context_ids, candidate_ids)


def comparison_noise(seed: int, context_ids: Strings, aspects: Strings, a: Strings, b: Strings) -> np.ndarray:
    """Seeded standard normal per ordered comparison (context, aspect, a, b)."""
    return ndtri(_uniforms(seed, "noise", context_ids, aspects, a, b))


# ---------------------------------------------------------------------------
# the model (scalars or numpy arrays alike)


def simulated_logit(q_a, q_b, *, scale, noise, position_bias, intransitivity, phase_a, phase_b, eps):
    """``scale (q_a - q_b) + position_bias + intransitivity sin(phase_a - phase_b) + noise eps``."""
    q_a, q_b, phase_a, phase_b, eps = (np.asarray(x, dtype=np.float64) for x in (q_a, q_b, phase_a, phase_b, eps))
    return scale * (q_a - q_b) + position_bias + intransitivity * np.sin(phase_a - phase_b) + noise * eps


def simulated_p_a(q_a, q_b, *, scale, noise, position_bias, intransitivity, phase_a, phase_b, eps):
    """P(A) = sigmoid(:func:`simulated_logit`).

    >>> kw = {"scale": 2.0, "noise": 0.0, "intransitivity": 0.0, "phase_a": 0.0, "phase_b": 0.0, "eps": 0.0}
    >>> float(simulated_p_a(0.0, 0.0, position_bias=0.0, **kw)), float(simulated_p_a(0.0, 0.0, position_bias=1.0, **kw))
    (0.5, 0.7310585786300049)
    >>> simulated_p_a(np.array([1.0, -1.0]), 0.0, position_bias=0.0, **kw).round(3).tolist()
    [0.881, 0.119]
    """
    return expit(
        simulated_logit(
            q_a,
            q_b,
            scale=scale,
            noise=noise,
            position_bias=position_bias,
            intransitivity=intransitivity,
            phase_a=phase_a,
            phase_b=phase_b,
            eps=eps,
        )
    )


def model_of(spec) -> dict:
    """The model's coefficients from a :class:`pairank.judges.engines.simulated.SimulatedJudgeSpec`."""
    return {k: float(getattr(spec, k)) for k in ("scale", "noise", "position_bias", "intransitivity")}


def simulate_matrices(
    seed: int, context_ids: Sequence[str], candidate_ids: Sequence[str], aspect: str, **model: float
) -> tuple[np.ndarray, np.ndarray]:
    """Latent qualities ``q[c, i]`` and every ``P[c, i, j]`` = p_a of (i in A, j in B).

    The same candidate ids in every context; ``model`` holds scale, noise,
    position_bias and intransitivity. The diagonal is 0.5 and means nothing.

    >>> q, p = simulate_matrices(0, ["c"], ["x", "y"], "a", scale=1.0, noise=0.0, position_bias=0.0, intransitivity=0.0)
    >>> p.shape, bool((p[0, 0, 1] > 0.5) == (q[0, 0] > q[0, 1])), round(float(p[0, 0, 1] + p[0, 1, 0]), 12)
    ((1, 2, 2), True, 1.0)
    """
    n_c, n = len(context_ids), len(candidate_ids)
    ctx_col = np.repeat(np.asarray(context_ids, dtype=object), n)
    cand_col = np.tile(np.asarray(candidate_ids, dtype=object), n_c)
    q = latent_qualities(seed, ctx_col, cand_col).reshape(n_c, n)
    phase = phases(seed, ctx_col, cand_col).reshape(n_c, n)
    ctx_pairs = np.repeat(np.asarray(context_ids, dtype=object), n * n)
    a = np.tile(np.repeat(np.asarray(candidate_ids, dtype=object), n), n_c)
    b = np.tile(np.asarray(candidate_ids, dtype=object), n_c * n)
    eps = comparison_noise(seed, ctx_pairs, [aspect] * len(a), a, b).reshape(n_c, n, n)
    q_a, q_b = q[:, :, None], q[:, None, :]  # (C, N, 1) against (C, 1, N): slot A on rows, B on columns
    p = simulated_p_a(q_a, q_b, phase_a=phase[:, :, None], phase_b=phase[:, None, :], eps=eps, **model)
    idx = np.arange(n)
    p[:, idx, idx] = 0.5
    return q, p


# ---------------------------------------------------------------------------
# quality from human scores


def human_quality(uri: str) -> dict[tuple[str, str], float]:
    """``{(candidate_id, aspect): z}``: mean human score, z-scored within (context, aspect).

    ``uri`` is a human_scores parquet or a folder holding ``human_scores.parquet``;
    the contexts come from the ``candidates.parquet`` beside it (the layout
    ``pairank import`` writes). A context whose scores are all equal gets 0.
    """
    loc = Location.of(uri)
    scores_loc = loc.join("human_scores.parquet") if loc.is_dir() else loc
    folder = loc if loc.is_dir() else Location(loc.fs, posixpath.dirname(loc.path), posixpath.dirname(loc.uri))
    cand_loc = folder.join("candidates.parquet")
    if not scores_loc.exists():
        raise FileNotFoundError(f"simulated judge quality: {scores_loc}: no human scores table")
    if not cand_loc.exists():
        raise FileNotFoundError(
            f"simulated judge quality: {cand_loc}: no candidates table beside {scores_loc} "
            "(it gives each candidate's context)"
        )
    scores = validate(scores_loc.read_parquet(), HUMAN_SCORES, scores_loc.uri)
    cands = cand_loc.read_parquet().select(["context_id", "candidate_id"]).to_pydict()
    context_of = dict(zip(cands["candidate_id"], cands["context_id"]))
    sums: dict[tuple[str, str], list[float]] = {}
    for cid, aspect, score in zip(*(scores.column(c).to_pylist() for c in ("candidate_id", "aspect", "score"))):
        if cid not in context_of:
            raise ValueError(f"simulated judge quality: candidate {cid!r} of {scores_loc} is not in {cand_loc}")
        sums.setdefault((cid, aspect), []).append(score)
    groups: dict[tuple[str, str], list[tuple[str, float]]] = {}
    for (cid, aspect), values in sums.items():
        groups.setdefault((context_of[cid], aspect), []).append((cid, float(np.mean(values))))
    out: dict[tuple[str, str], float] = {}
    for (_, aspect), members in groups.items():
        means = np.array([m for _, m in members])
        sd = means.std()
        for cid, m in members:
            out[(cid, aspect)] = float((m - means.mean()) / sd) if sd > 0 else 0.0
    return out


def text_lengths(uri: str) -> dict[str, int]:
    """``{candidate_id: len(text)}`` of a candidates table (or the folder holding ``candidates.parquet``)."""
    loc = Location.of(uri)
    loc = loc.join("candidates.parquet") if loc.is_dir() else loc
    if not loc.exists():
        raise FileNotFoundError(f"simulated judge lengths: {loc}: no candidates table")
    table = validate(loc.read_parquet(), CANDIDATES, loc.uri)
    return {
        c: max(1, len(t)) for c, t in zip(table.column("candidate_id").to_pylist(), table.column("text").to_pylist())
    }


# ---------------------------------------------------------------------------
# the judge


#: Exit status of a simulated engine that ends its process in the ``crash_on`` fault drill.
EXIT_DRILL = 71


def record_call(folder: str, keys: list[str]) -> None:
    """One batch that reached the engine, in the ``calls_log`` folder: ``{"at": unix time, "pid": ..., "keys": [...]}``
    as a file of its own (no two writers share a file)."""
    at = time.time()
    name = f"{int(at * 1e6)}-{os.getpid()}-{uuid.uuid4().hex[:8]}.json"
    Location.of(folder).join(name).write_json({"at": at, "pid": os.getpid(), "keys": keys})


#: How often a held batch looks for its gate's ``release`` file (seconds): the gate is an event, this only its poll.
HOLD_POLL_S = 0.05


def pass_gate(folder: str, keys: list[str], hold_from: int, poll_s: float = HOLD_POLL_S) -> int:
    """A batch through the ``hold`` gate (see ``SimulatedJudgeSpec.hold``): its number, taken by creating
    ``batch-<n>.json`` (the first free one: of concurrent batches each gets its own); from ``hold_from`` on, it
    returns once ``release`` exists, or an ``open-<m>`` with ``m > n`` (the batches below ``m`` let through, the
    rest still held: a run held again further on)."""
    gate = Location.of(folder)
    record = json.dumps({"at": time.time(), "pid": os.getpid(), "keys": keys, "id": uuid.uuid4().hex}).encode()
    number = 0
    while not gate.join(f"batch-{number}.json").create_exclusive(record):
        number += 1
    if number >= hold_from:
        while not opened(gate, number):
            time.sleep(poll_s)
    return number


def opened(gate: Location, number: int) -> bool:
    """Whether the gate lets batch ``number`` through: ``release``, or an ``open-<m>`` with ``m > number``."""
    names = [posixpath.basename(f.path) for f in gate.files()]
    return "release" in names or any(n.startswith("open-") and n[5:].isdigit() and int(n[5:]) > number for n in names)


class SimulatedJudge(Judge):
    """A :class:`Judge` that answers from the model above; ``sleep`` is injected for tests."""

    engine = "simulated"

    def __init__(self, spec: Any, sleep: Callable[[float], None] = time.sleep) -> None:
        """``spec``: a :class:`pairank.judges.engines.simulated.SimulatedJudgeSpec`."""
        self.spec = spec
        self.sleep = sleep
        if spec.start_seconds > 0:
            sleep(spec.start_seconds)  # a slow engine's start
        self.human = human_quality(spec.quality) if spec.quality else None
        self.lengths = text_lengths(spec.lengths) if spec.length_bias else None

    def identity(self) -> dict:
        return self.spec.identity()

    def _quality(self, ctx: list[str], aspect: list[str], ids: list[str]) -> tuple[np.ndarray, list[str | None]]:
        if self.human is None:
            return latent_qualities(self.spec.seed, ctx, ids), [None] * len(ids)
        q = [self.human.get((cid, asp)) for cid, asp in zip(ids, aspect)]
        missing = "simulated: no human score of candidate {!r} for aspect {!r} in " + str(self.spec.quality)
        errors = [None if v is not None else missing.format(cid, asp) for v, cid, asp in zip(q, ids, aspect)]
        return np.array([np.nan if v is None else v for v in q]), errors

    def _log_length_ratio(self, lengths: dict[str, int], a: list[str], b: list[str]) -> np.ndarray:
        missing = [c for c in a + b if c not in lengths]
        if missing:
            raise ValueError(f"simulated judge lengths: candidate {missing[0]!r} is not in {self.spec.lengths}")
        return np.log([lengths[x] / lengths[y] for x, y in zip(a, b)])

    def judge(self, requests: pa.Table) -> pa.Table:
        check_columns(requests, COLUMNS, "SimulatedJudge")
        columns = ("context_id", "aspect", "candidate_a", "candidate_b")
        ctx, aspect, a, b = (requests.column(c).to_pylist() for c in columns)
        if self.spec.calls_log:
            record_call(self.spec.calls_log, requests.column("key").to_pylist())
        if self.spec.hold:
            pass_gate(self.spec.hold, requests.column("key").to_pylist(), self.spec.hold_from)
        if self.spec.crash_on and not {tuple(c) for c in self.spec.crash_on}.isdisjoint(zip(ctx, a, b)):
            os._exit(EXIT_DRILL)  # the fault drill: this engine's process dies as a killed one does
        seed, seconds = self.spec.seed, float(self.spec.seconds_per_comparison)
        q_a, err_a = self._quality(ctx, aspect, a)
        q_b, err_b = self._quality(ctx, aspect, b)
        logit = simulated_logit(
            q_a,
            q_b,
            phase_a=phases(seed, ctx, a),
            phase_b=phases(seed, ctx, b),
            eps=comparison_noise(seed, ctx, aspect, a, b),
            **model_of(self.spec),
        )
        if self.lengths is not None:
            logit = logit + self.spec.length_bias * self._log_length_ratio(self.lengths, a, b)
        words = prompt_words(requests)
        scores = [
            LabelScore(input_tokens=n, seconds=seconds, error=ea or eb)
            if ea or eb
            else LabelScore(
                logprob_a=float(log_expit(x)),
                logprob_b=float(log_expit(-x)),
                input_tokens=n,
                output_tokens=1,
                seconds=seconds,
            )
            for x, ea, eb, n in zip(logit, err_a, err_b, words)
        ]
        if seconds > 0 and scores:
            self.sleep(seconds * len(scores))
        return judgment_rows(requests, scores, self.identity())
