"""Each judge's vote on (system, baseline) pairs, and the human truth, from pairank tables.

A *pair* is one context in which both the system and the baseline have a
candidate. A *judge* is one judge identity: the columns ``engine, model,
revision, prompt_hash, sampling`` of a judgments table, named by :func:`judge_name`.
Several models, prompt modes or sampling settings in one table are several judges
(the annotators of Dawid-Skene).

Swap-and-sum: every judgment of the pair, in either slot order, gives the first
candidate (the system) 1 point for a win, 0.5 for a ``tie`` verdict and 0 for a
loss. Over the ``n`` orders judged, more than ``n/2`` points is a vote for the
system (:data:`~pairank.operators.winrate.SYSTEM`), fewer a vote for the baseline; exactly
``n/2`` is a tie, broken by a seeded coin (:func:`~pairank.operators.winrate.tie_break`)
and counted. Error rows are not votes.

Ties. The points are the rows' hard verdicts (:data:`pairank.operators.scores.LABEL_POINTS`,
read from ``label``: a ``tie`` with p_a 0.5 is 0.5 whatever mode made it), so a
vote agrees with the hard win ratio of the two candidates over the same rows:
above 1/2 is the system's vote, below the baseline's, and exactly 1/2 (a tie in
every order judged, or the same slot winning both orders) is the coin's. A
judge whose every verdict is a tie ties every pair; the coin splits its votes
about evenly, and :attr:`PairVotes.ties` counts them::

    >>> points("tie", True), points("A", True), points("A", False), points("B", False)
    (0.5, 1.0, 0.0, 1.0)
    >>> points("tie", True) + points("B", False)  # a tie, then a win in the other order: 1.5 of 2, the system's
    1.5

The truth of a pair comes from the input's pairwise labels when one names both
candidates, else from the human scores of the aspect (a higher mean score wins);
an equal score or a ``tie`` label leaves the truth unknown (``NO_VOTE``).
"""

from __future__ import annotations

import hashlib
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pairank.operators.checks import require_columns
from pairank.operators.scores import LABEL_POINTS
from pairank.operators.winrate import BASELINE, NO_VOTE, SYSTEM, tie_break
from pairank.storage.keys import sampling_mode

JUDGE_COLUMNS = ("engine", "model", "revision", "prompt_hash", "sampling")
VOTE_COLUMNS = JUDGE_COLUMNS + ("context_id", "aspect", "candidate_a", "candidate_b", "label", "error", "created_at")

#: A labelled or unlabelled pair: (context_id, first candidate, second candidate); vote 0 = first is better.
Pair = tuple[str, str, str]


def points(label: str, first_in_slot_a: bool) -> float:
    """The first candidate's points from one verdict: 1 for a win, 0.5 for a tie, 0 for a loss."""
    try:
        won_a = LABEL_POINTS[label]
    except KeyError:
        raise ValueError(f"label: expected one of {list(LABEL_POINTS)} or null, found {label!r}") from None
    return won_a if first_in_slot_a else 1.0 - won_a


def judge_name(identity: dict) -> str:
    """A short readable name of a judge identity: ``model/mode`` or ``model@prompt``.

    >>> judge_name({"engine": "published", "model": "GPT-4", "sampling": '{"mode":"CoT"}', "prompt_hash": "x"})
    'GPT-4/CoT'
    >>> judge_name({"engine": "vllm", "model": "/m/gemma-3-270m", "sampling": "{}", "prompt_hash": "0123456789"})
    'gemma-3-270m@01234567'
    """
    model = posixpath.basename(str(identity.get("model") or "").rstrip("/")) or str(identity.get("engine"))
    mode = sampling_mode(identity.get("sampling"))
    return f"{model}/{mode}" if mode else f"{model}@{str(identity.get('prompt_hash') or '')[:8]}"


def judge_names(identities: Sequence[tuple]) -> list[str]:
    """Names of distinct identities (tuples of :data:`JUDGE_COLUMNS`), made unique with a short hash."""
    names = [judge_name(dict(zip(JUDGE_COLUMNS, ident))) for ident in identities]
    counts = {n: names.count(n) for n in names}
    return [
        n if counts[n] == 1 else f"{n}#{hashlib.sha256(repr(ident).encode()).hexdigest()[:6]}"
        for n, ident in zip(names, identities)
    ]


@dataclass(frozen=True)
class PairVotes:
    """Votes of each judge on each pair, and the human truth where known."""

    pairs: list[Pair]
    judges: list[str]
    votes: np.ndarray  # int8 (n_pairs, n_judges): SYSTEM, BASELINE or NO_VOTE
    orders: np.ndarray = field(repr=False)  # int8 (n_pairs, n_judges): judgments behind each vote
    ties: np.ndarray = field(repr=False)  # int (n_judges,): tied votes broken by the coin
    truth: np.ndarray = field(repr=False)  # int8 (n_pairs,): SYSTEM, BASELINE or NO_VOTE

    @property
    def n_pairs(self) -> int:
        return len(self.pairs)

    def judge(self, name: str) -> np.ndarray:
        return self.votes[:, self.judges.index(name)]


def pair_votes(
    judgments: pa.Table, pairs: Sequence[Pair], truth: Sequence[int] | np.ndarray | None = None, seed: int = 0
):
    """Swap-and-sum votes of every judge in ``judgments`` on ``pairs`` (see the module docstring).

    ``judgments`` needs :data:`VOTE_COLUMNS`; only rows of ``pairs`` (either slot
    order) count, the latest row per (judge, context, slot order).
    """
    require_columns(judgments, VOTE_COLUMNS, "pair_votes: the judgments table")
    index = {}
    for i, (ctx, first, second) in enumerate(pairs):
        index[(ctx, first, second)] = (i, 1)
        index[(ctx, second, first)] = (i, -1)
    ids = pa.array(sorted({c for _, first, second in pairs for c in (first, second)}), pa.string())
    mine = pc.and_(pc.is_in(judgments.column("candidate_a"), ids), pc.is_null(judgments.column("error")))
    rows = judgments.filter(mine).sort_by("created_at").to_pylist()  # only rows that can be one of the pairs
    latest: dict[tuple, str] = {}
    identities: dict[tuple, None] = {}
    for r in rows:
        hit = index.get((r["context_id"], r["candidate_a"], r["candidate_b"]))
        if hit is None or r["label"] is None:
            continue
        ident = tuple(r[c] for c in JUDGE_COLUMNS)
        identities.setdefault(ident, None)
        latest[(ident, r["context_id"], r["candidate_a"], r["candidate_b"])] = r["label"]
    idents = sorted(identities)
    col = {ident: j for j, ident in enumerate(idents)}
    total = np.zeros((len(pairs), len(idents)))
    orders = np.zeros((len(pairs), len(idents)), dtype=np.int8)
    for (ident, ctx, a, b), label in latest.items():
        i, sign = index[(ctx, a, b)]
        total[i, col[ident]] += points(label, sign == 1)
        orders[i, col[ident]] += 1
    names = judge_names(idents)
    votes = np.full(total.shape, NO_VOTE, dtype=np.int8)
    votes[(orders > 0) & (2 * total > orders)] = SYSTEM
    votes[(orders > 0) & (2 * total < orders)] = BASELINE
    tied = (orders > 0) & (2 * total == orders)
    for i, j in zip(*np.nonzero(tied)):
        votes[i, j] = tie_break(seed, *pairs[i], names[j])
    t = np.full(len(pairs), NO_VOTE, dtype=np.int8) if truth is None else np.asarray(truth, dtype=np.int8)
    if t.shape != (len(pairs),):
        raise ValueError(f"pair_votes: truth has shape {t.shape}, expected ({len(pairs)},)")
    return PairVotes(list(pairs), names, votes, orders, tied.sum(axis=0), t)


def system_pairs(candidates: pa.Table, system: str, baseline: str) -> list[Pair]:
    """(context, system's candidate, baseline's candidate) for every context where both answered, by context id."""
    by_ctx: dict[str, dict[str, list[str]]] = {}
    for ctx, cid, sys in zip(*(candidates.column(c).to_pylist() for c in ("context_id", "candidate_id", "system"))):
        if sys in (system, baseline):
            by_ctx.setdefault(ctx, {}).setdefault(sys, []).append(cid)
    out = []
    for ctx in sorted(by_ctx):
        got = by_ctx[ctx]
        for sys in (system, baseline):
            if len(got.get(sys, [])) > 1:
                raise ValueError(f"context {ctx!r}: system {sys!r} has {len(got[sys])} candidates, expected one")
        if system in got and baseline in got:
            out.append((ctx, got[system][0], got[baseline][0]))
    return out


def human_truth(
    pairs: Sequence[Pair], aspect: str, human_scores: pa.Table | None = None, labels: pa.Table | None = None
) -> np.ndarray:
    """The true class of each pair: from a pairwise label naming both candidates, else from human scores.

    >>> labels = pa.table({"context_id": ["c"], "candidate_a": ["y"], "candidate_b": ["x"], "preferred": ["A"]})
    >>> human_truth([("c", "x", "y"), ("d", "u", "v")], "any", labels=labels).tolist()
    [1, -1]
    """
    verdict: dict[tuple, int] = {}
    if labels is not None and labels.num_rows:
        for ctx, a, b, pref in zip(
            *(labels.column(c).to_pylist() for c in ("context_id", "candidate_a", "candidate_b", "preferred"))
        ):
            if pref in ("A", "B"):
                winner, loser = (a, b) if pref == "A" else (b, a)
                verdict[(ctx, winner, loser)] = SYSTEM
                verdict[(ctx, loser, winner)] = BASELINE
    score: dict[str, float] = {}
    if human_scores is not None and human_scores.num_rows:
        rows = human_scores.filter(pc.equal(human_scores.column("aspect"), aspect))
        score = dict(zip(rows.column("candidate_id").to_pylist(), rows.column("score").to_pylist()))
    out = np.full(len(pairs), NO_VOTE, dtype=np.int8)
    for i, (ctx, first, second) in enumerate(pairs):
        if (ctx, first, second) in verdict:
            out[i] = verdict[(ctx, first, second)]
        elif first in score and second in score and score[first] != score[second]:
            out[i] = SYSTEM if score[first] > score[second] else BASELINE
    return out


def labelled_pairs(labels: pa.Table) -> tuple[list[Pair], np.ndarray]:
    """Every A/B pairwise label as a pair (context, candidate_a, candidate_b) with its truth; ties are left out.

    Used for out-of-distribution accuracies: class 0 is "the candidate listed first is better".
    """
    pairs, truth = [], []
    for ctx, a, b, pref in zip(
        *(labels.column(c).to_pylist() for c in ("context_id", "candidate_a", "candidate_b", "preferred"))
    ):
        if pref in ("A", "B"):
            pairs.append((ctx, a, b))
            truth.append(SYSTEM if pref == "A" else BASELINE)
    return pairs, np.asarray(truth, dtype=np.int8)
