"""Judge biases beside position bias: length preference, self-preference, and flips when the slots swap.

Every figure reads *decisive* verdicts: rows without error whose hard verdict
(:func:`pairank.operators.scores.hard_verdict`: the row's label, else the side of 0.5
p_a is on) is a win of slot A or of slot B. Ties and error rows are left out. A
*judge* is a judge identity (``engine, model, revision, prompt_hash, sampling``),
named as the win-rate tables name it (:func:`pairank.operators.votes.judge_name`);
each figure is given per aspect and judge (self-preference: per aspect and judge
model). Intervals are 95% Wilson score intervals (:func:`wilson`).

- **Length preference** (:func:`length_preference`). The share of decisive verdicts
  won by the longer candidate (length: characters of the candidate's ``text``; pairs
  of equal length left out), and a logistic regression of "slot A won" on
  ``x = log(len_a / len_b)`` with an intercept, fitted by Newton's method
  (:func:`logistic_fit`) with its standard errors. The slope is the change in the
  log-odds of slot A winning per unit of log length ratio: 0 is no preference, a
  positive slope favours the longer output (an output twice as long gains
  ``slope * log 2`` in log-odds); the intercept is the slot's own pull at equal
  length. Rows with an empty text are left out of the fit; where the fit has no
  finite maximum (one outcome only, one length ratio only, or outcomes separated
  by length) the slope is null. Neither figure is causal: where longer outputs are
  also better, a preference for quality shows as one for length, and quality
  differences unrelated to length pull the slope towards 0.
- **Self-preference** (:func:`self_preference`). Where a judge model is also a
  system of the candidates (compared by :func:`model_key`: case-insensitive, without
  a path or an organisation prefix), the share of that system's decisive comparisons
  against other systems that this judge model gives it, next to the share the other
  judge models in the table give it (null without one). The two shares are over the
  comparisons each judge made, which need not be the same ones. No row: not
  applicable.
- **Flips** (:func:`slot_flips`). Unordered pairs judged by one judge in both slot
  orders (same context and aspect; the newest verdict of each order). Where both
  verdicts are decisive, the pair is *consistent* when the same candidate wins both
  times and a *flip* when the same slot does. A judge that only looks at slots flips
  every pair, one that answers by coin flips about half, a perfect one none.
  Unlike :func:`pairank.operators.reports.position_bias` (the slot-A share over all
  rows) and the LLMBar positional agreement of :mod:`pairank.operators.meta_eval`
  (labelled pairs only, ties as answers), this needs no labels and no symmetric
  schedule beyond the pairs it counts.

A hand-made example: a judge that always picks slot A flips its one pair and
prefers the longer output in one of its two verdicts::

    >>> judgments, candidates = _example()
    >>> [(r["judge"], r["n_decisive"], r["flips"]) for r in slot_flips(judgments).to_pylist()]
    [('m@h', 1, 1)]
    >>> [(r["n_unequal"], r["longer_won"]) for r in length_preference(judgments, candidates).to_pylist()]
    [(2, 1)]
"""

from __future__ import annotations

import math
import posixpath
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from scipy.special import expit

from pairank.operators.checks import require_columns
from pairank.operators.scores import hard_verdict
from pairank.operators.votes import JUDGE_COLUMNS, judge_names
from pairank.storage.schemas import column

#: Columns of the judgments table these operators read; ``label`` and ``created_at`` too where the table has them.
COLUMNS = JUDGE_COLUMNS + ("context_id", "aspect", "candidate_a", "candidate_b", "p_a", "error")
#: The normal quantile of a 95% interval.
Z95 = 1.959963984540054


#: Output of :func:`length_preference` (a report table, never read back).
LENGTH_PREFERENCE = pa.schema(
    [
        column("aspect", pa.string(), "Aspect judged."),
        column("judge", pa.string(), "Judge identity, named as in the win-rate tables."),
        column("n_decisive", pa.int64(), "Decisive verdicts (A or B; ties and error rows left out)."),
        column("n_unequal", pa.int64(), "Decisive verdicts between candidates of different text length."),
        column("longer_won", pa.int64(), "Of those, won by the longer candidate."),
        column("longer_share", pa.float64(), "longer_won / n_unequal; null without one.", True),
        column("longer_low", pa.float64(), "Lower end of its 95% Wilson interval.", True),
        column("longer_high", pa.float64(), "Upper end of its 95% Wilson interval.", True),
        column("n_fit", pa.int64(), "Decisive verdicts in the logistic fit (both texts non-empty)."),
        column("length_coef", pa.float64(), "Slope of the log-odds of slot A winning on log(len_a / len_b).", True),
        column("length_se", pa.float64(), "Standard error of the slope (inverse Fisher information).", True),
        column("slot_intercept", pa.float64(), "Intercept: log-odds of slot A winning at equal length.", True),
    ]
)

#: Output of :func:`self_preference`.
SELF_PREFERENCE = pa.schema(
    [
        column("aspect", pa.string(), "Aspect judged."),
        column("system", pa.string(), "The system that is also a judge model."),
        column("judge_model", pa.string(), "The judge model(s) naming it, as the judgments write them."),
        column("n", pa.int64(), "Decisive comparisons of the system against other systems under this judge model."),
        column("wins", pa.int64(), "Of those, won by the system."),
        column("share", pa.float64(), "wins / n; null without one.", True),
        column("ci_low", pa.float64(), "Lower end of its 95% Wilson interval.", True),
        column("ci_high", pa.float64(), "Upper end of its 95% Wilson interval.", True),
        column("others_n", pa.int64(), "The same comparisons counted under every other judge model."),
        column(
            "others_share", pa.float64(), "The system's win share under the other judge models; null without one.", True
        ),
    ]
)

#: Output of :func:`slot_flips`.
SLOT_FLIPS = pa.schema(
    [
        column("aspect", pa.string(), "Aspect judged."),
        column("judge", pa.string(), "Judge identity, named as in the win-rate tables."),
        column("n_pairs", pa.int64(), "Unordered pairs with a verdict in both slot orders."),
        column("n_decisive", pa.int64(), "Of those, decisive in both orders."),
        column("flips", pa.int64(), "Of those, won by the same slot both times."),
        column("flip_rate", pa.float64(), "flips / n_decisive; null without one.", True),
        column("ci_low", pa.float64(), "Lower end of its 95% Wilson interval.", True),
        column("ci_high", pa.float64(), "Upper end of its 95% Wilson interval.", True),
    ]
)


# ---------------------------------------------------------------------------
# the maths


def wilson(k: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    """The Wilson score interval of ``k`` successes in ``n`` trials; (None, None) without a trial.

    >>> [round(v, 4) for v in wilson(6, 8)], wilson(0, 0)
    ([0.4093, 0.9285], (None, None))
    >>> [round(v, 4) for v in wilson(0, 10)]
    [0.0, 0.2775]
    """
    if n == 0:
        return None, None
    p, z2 = k / n, z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    half = z / (1 + z2 / n) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def share(k: int, n: int) -> dict:
    """``k / n`` with its Wilson interval, as the tables' ``share``, ``ci_low`` and ``ci_high``.

    >>> share(1, 2)["share"], share(0, 0)
    (0.5, {'share': None, 'ci_low': None, 'ci_high': None})
    """
    low, high = wilson(k, n)
    return {"share": k / n if n else None, "ci_low": low, "ci_high": high}


def logistic_fit(x, y, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray] | None:
    """Maximum-likelihood ``(intercept, slope)`` of ``P(y = 1) = sigmoid(b0 + b1 x)`` and their standard errors.

    Newton's method from 0; the errors are the square roots of the diagonal of the
    inverse Fisher information at the maximum. None where there is no finite maximum:
    one outcome only, one value of ``x`` only, or outcomes separated by ``x`` (Newton
    does not converge). With two values of ``x`` the fit reproduces each value's
    observed share: 3 of 4 at x = 1 and 1 of 4 at x = -1 give b1 = logit(3/4) = log 3::

        >>> b, se = logistic_fit([1, 1, 1, 1, -1, -1, -1, -1], [1, 1, 1, 0, 1, 0, 0, 0])
        >>> round(float(b[1]), 9) == round(math.log(3), 9), abs(float(b[0])) < 1e-12, round(float(se[1]), 6)
        (True, True, 0.816497)
        >>> logistic_fit([1, 2, 3], [0, 0, 1]) is None  # separated: no finite slope
        True
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if len(x) < 3 or np.ptp(x) == 0 or y.min() == y.max():
        return None
    design = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(max_iter):
        p = expit(design @ beta)
        info = design.T @ (design * (p * (1 - p))[:, None])
        try:
            step = np.linalg.solve(info, design.T @ (y - p))
        except np.linalg.LinAlgError:
            return None
        beta = beta + step
        if not np.all(np.isfinite(beta)):
            return None
        if np.max(np.abs(step)) < 1e-10 * (1.0 + np.max(np.abs(beta))):
            p = expit(design @ beta)
            cov = np.linalg.inv(design.T @ (design * (p * (1 - p))[:, None]))
            return beta, np.sqrt(np.diag(cov))
    return None


def model_key(name: str) -> str:
    """A model or system name as self-preference compares them: lower case, without a path or org prefix.

    >>> model_key("/m/Gemma-3-270M/"), model_key("google/gemma-3-270m"), model_key("GPT-4")
    ('gemma-3-270m', 'gemma-3-270m', 'gpt-4')
    """
    return posixpath.basename(str(name).strip().rstrip("/")).lower()


# ---------------------------------------------------------------------------
# the tables


def verdict_rows(judgments: pa.Table) -> list[dict]:
    """The rows with a verdict, oldest first, each with its ``judge`` name and ``a_won``: True where slot A won,
    False where slot B did, None for a tie."""
    require_columns(judgments, COLUMNS, "judge bias: the judgments table")
    extra = [c for c in ("label", "created_at") if c in judgments.column_names]
    rows = judgments.select(list(COLUMNS) + extra).to_pylist()
    identities = sorted({tuple(r[c] for c in JUDGE_COLUMNS) for r in rows})  # all rows: named as the leaderboard does
    names = dict(zip(identities, judge_names(identities)))
    rows = [r for r in rows if r["error"] is None]
    if "created_at" in extra:
        rows.sort(key=lambda r: r["created_at"])  # stable: equal times keep the table's order
    out = []
    for r in rows:
        won = hard_verdict(r["p_a"], r.get("label"))
        out.append({**r, "judge": names[tuple(r[c] for c in JUDGE_COLUMNS)], "a_won": None if won == 0.5 else won == 1})
    return out


def _lookup(candidates: pa.Table, column: str, rows: list[dict]) -> dict[str, Any]:
    """``candidate_id -> column`` of the candidates; a judged candidate missing from them is an error."""
    require_columns(candidates, ("candidate_id", column), "judge bias: the candidates table")
    found = dict(zip(candidates.column("candidate_id").to_pylist(), candidates.column(column).to_pylist()))
    for r in rows:
        for slot in ("candidate_a", "candidate_b"):
            if r[slot] not in found:
                raise ValueError(
                    f"judge bias: judgment of context {r['context_id']!r}, aspect {r['aspect']!r}: "
                    f"{slot} {r[slot]!r} is not in the candidates table"
                )
    return found


def _by(rows: list[dict], *keys: str) -> dict[tuple, list[dict]]:
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[tuple(r[k] for k in keys)].append(r)
    return dict(sorted(groups.items()))


def length_preference(judgments: pa.Table, candidates: pa.Table) -> pa.Table:
    """LENGTH_PREFERENCE rows per (aspect, judge): the longer output's win share and the fitted length slope."""
    return pa.Table.from_pylist(_length_rows(verdict_rows(judgments), candidates), schema=LENGTH_PREFERENCE)


def _length_rows(rows: list[dict], candidates: pa.Table) -> list[dict]:
    rows = [r for r in rows if r["a_won"] is not None]
    length = {cid: len(text or "") for cid, text in _lookup(candidates, "text", rows).items()}
    out = []
    for (aspect, judge), mine in _by(rows, "aspect", "judge").items():
        la = np.array([length[r["candidate_a"]] for r in mine])
        lb = np.array([length[r["candidate_b"]] for r in mine])
        a_won = np.array([r["a_won"] for r in mine])
        unequal = la != lb
        longer_won = int(np.sum(a_won[unequal] == (la > lb)[unequal]))
        s = share(longer_won, int(unequal.sum()))
        ok = (la > 0) & (lb > 0)
        fit = logistic_fit(np.log(la[ok] / lb[ok]), a_won[ok])
        out.append(
            {
                "aspect": aspect,
                "judge": judge,
                "n_decisive": len(mine),
                "n_unequal": int(unequal.sum()),
                "longer_won": longer_won,
                "longer_share": s["share"],
                "longer_low": s["ci_low"],
                "longer_high": s["ci_high"],
                "n_fit": int(ok.sum()),
                "length_coef": None if fit is None else float(fit[0][1]),
                "length_se": None if fit is None else float(fit[1][1]),
                "slot_intercept": None if fit is None else float(fit[0][0]),
            }
        )
    return out


def self_preference(judgments: pa.Table, candidates: pa.Table) -> pa.Table:
    """SELF_PREFERENCE rows per (aspect, system that is a judge model); none when no judge model is a system."""
    return pa.Table.from_pylist(_self_rows(verdict_rows(judgments), candidates), schema=SELF_PREFERENCE)


def _self_rows(rows: list[dict], candidates: pa.Table) -> list[dict]:
    rows = [r for r in rows if r["a_won"] is not None]
    system_of = _lookup(candidates, "system", rows)
    judges = {model_key(r["model"]) for r in rows}
    out = []
    for me in sorted(s for s in set(system_of.values()) if model_key(s) in judges):
        for (aspect,), mine in _by(rows, "aspect").items():
            own, others = _self_counts(mine, system_of, me)
            if own[0]:
                models = ", ".join(sorted({r["model"] for r in mine if model_key(r["model"]) == model_key(me)}))
                out.append(
                    {
                        "aspect": aspect,
                        "system": me,
                        "judge_model": models,
                        "n": own[0],
                        "wins": own[1],
                        **share(own[1], own[0]),
                        "others_n": others[0],
                        "others_share": others[1] / others[0] if others[0] else None,
                    }
                )
    return out


def _self_counts(rows: list[dict], system_of: dict, me: str) -> tuple[list[int], list[int]]:
    """[comparisons, wins] of system ``me`` against other systems: under its own judge model, under the others."""
    own, others = [0, 0], [0, 0]
    for r in rows:
        a_is_me, b_is_me = system_of[r["candidate_a"]] == me, system_of[r["candidate_b"]] == me
        if a_is_me != b_is_me:
            c = own if model_key(r["model"]) == model_key(me) else others
            c[0] += 1
            c[1] += int(r["a_won"] == a_is_me)
    return own, others


def slot_flips(judgments: pa.Table) -> pa.Table:
    """SLOT_FLIPS rows per (aspect, judge) with a pair judged in both slot orders."""
    return pa.Table.from_pylist(_flip_rows(verdict_rows(judgments)), schema=SLOT_FLIPS)


def _flip_rows(rows: list[dict]) -> list[dict]:
    verdict = {}  # (aspect, judge, context, slot A, slot B) -> the newest a_won
    for r in rows:
        verdict[(r["aspect"], r["judge"], r["context_id"], r["candidate_a"], r["candidate_b"])] = r["a_won"]
    counts: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])  # [pairs, decisive, flips]
    for (aspect, judge, ctx, a, b), first in verdict.items():
        swapped = (aspect, judge, ctx, b, a)
        if a < b and swapped in verdict:
            c = counts[(aspect, judge)]
            c[0] += 1
            if first is not None and verdict[swapped] is not None:
                c[1] += 1
                c[2] += int(first == verdict[swapped])
    out = []
    for (aspect, judge), (pairs, decisive, flips) in sorted(counts.items()):
        s = share(flips, decisive)
        out.append(
            {
                "aspect": aspect,
                "judge": judge,
                "n_pairs": pairs,
                "n_decisive": decisive,
                "flips": flips,
                "flip_rate": s["share"],
                "ci_low": s["ci_low"],
                "ci_high": s["ci_high"],
            }
        )
    return out


def judge_bias(judgments: pa.Table, candidates: pa.Table) -> dict:
    """The ``judge_bias`` section of a report or leaderboard: the rows of the three tables, and the judge models.

    ``judge_models`` are the models of the rows with a verdict, so a reader of an empty
    ``self_preference`` sees which models were not systems.
    """
    rows = verdict_rows(judgments)
    return {
        "length": _length_rows(rows, candidates),
        "self_preference": _self_rows(rows, candidates),
        "judge_models": sorted({r["model"] for r in rows}),
        "flips": _flip_rows(rows),
    }


def merge_sections(parts: list[dict], fitted: dict) -> dict:
    """One ``judge_bias`` section of a run scored in parts (:func:`judge_bias` of each part's judgments, the parts
    holding whole contexts): counts added up, shares and intervals computed again; the length slopes come from
    ``fitted``, the section of the run's judgments or of a sample of them (``n_fit`` says how many rows).

    Judges are named within each part, so the parts must hold one judge identity each (or the same set).
    """
    length: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    own: dict[tuple, list] = {}
    flips: dict[tuple, list[int]] = defaultdict(lambda: [0, 0, 0])
    for part in parts:
        for r in part["length"]:
            c = length[(r["aspect"], r["judge"])]
            c[0], c[1], c[2] = c[0] + r["n_decisive"], c[1] + r["n_unequal"], c[2] + r["longer_won"]
        for r in part["self_preference"]:
            others_wins = round((r["others_share"] or 0.0) * r["others_n"])
            o = own.setdefault((r["aspect"], r["system"]), [set(), 0, 0, 0, 0])
            o[0] |= set(r["judge_model"].split(", "))
            o[1], o[2], o[3], o[4] = o[1] + r["n"], o[2] + r["wins"], o[3] + r["others_n"], o[4] + others_wins
        for r in part["flips"]:
            c = flips[(r["aspect"], r["judge"])]
            c[0], c[1], c[2] = c[0] + r["n_pairs"], c[1] + r["n_decisive"], c[2] + r["flips"]
    fits = {(r["aspect"], r["judge"]): r for r in fitted["length"]}
    no_fit = {"n_fit": 0, "length_coef": None, "length_se": None, "slot_intercept": None}
    length_rows = []
    for (aspect, judge), (n, unequal, longer) in sorted(length.items()):
        s, fit = share(longer, unequal), fits.get((aspect, judge), no_fit)
        length_rows.append(
            {
                "aspect": aspect,
                "judge": judge,
                "n_decisive": n,
                "n_unequal": unequal,
                "longer_won": longer,
                "longer_share": s["share"],
                "longer_low": s["ci_low"],
                "longer_high": s["ci_high"],
                **{k: fit[k] for k in no_fit},
            }
        )
    self_rows = [
        {
            "aspect": aspect,
            "system": system,
            "judge_model": ", ".join(sorted(models)),
            "n": n,
            "wins": wins,
            **share(wins, n),
            "others_n": others_n,
            "others_share": others / others_n if others_n else None,
        }
        for (system, aspect), (models, n, wins, others_n, others) in sorted(
            ((system, aspect), c) for (aspect, system), c in own.items()
        )
    ]
    flip_rows = []
    for (aspect, judge), (pairs, decisive, flipped) in sorted(flips.items()):
        s = share(flipped, decisive)
        flip_rows.append(
            {
                "aspect": aspect,
                "judge": judge,
                "n_pairs": pairs,
                "n_decisive": decisive,
                "flips": flipped,
                "flip_rate": s["share"],
                "ci_low": s["ci_low"],
                "ci_high": s["ci_high"],
            }
        )
    models = sorted({m for part in parts for m in part["judge_models"]})
    return {"length": length_rows, "self_preference": self_rows, "judge_models": models, "flips": flip_rows}


#: What the section's three tables have in common, as the report and the page say it.
NOTE = "Decisive verdicts only (A or B; ties and error rows left out), per judge and aspect, with 95% Wilson intervals."


@dataclass(frozen=True)
class TextTable:
    """One figure of the section as the report and the page print it: cells are text, ``empty`` stands for no row,
    and the first ``names`` columns are names (the page aligns them left)."""

    title: str
    note: str
    head: list[str]
    rows: list[list[str]]
    empty: str
    names: int = 2


def _num(value, fmt: str = ".3f") -> str:
    """``value`` formatted, a dash when missing, and never a negative zero.

    >>> _num(-1e-17, "+.3f"), _num(None)
    ('+0.000', '–')
    """
    if value is None:
        return "–"
    text = format(value, fmt)
    return format(0.0, fmt) if float(text) == 0 else text


def _interval(value, low, high) -> str:
    """``value [low, high]`` to three decimals.

    >>> _interval(0.75, 0.40928, 0.92851), _interval(None, None, None)
    ('0.750 [0.409, 0.929]', '–')
    """
    return "–" if value is None else f"{value:.3f} [{_num(low)}, {_num(high)}]"


def text_tables(section: dict) -> list[TextTable]:
    """The section of :func:`judge_bias` as three tables of text: length, self-preference, flips."""
    models = ", ".join(section.get("judge_models") or []) or "none"
    return [
        TextTable(
            "Length preference",
            "The share of decisive verdicts won by the longer output (in characters; pairs of equal length left out), "
            'and the slope of a logistic regression of "slot A won" on log(len_a / len_b) with a slot intercept: '
            "0 is no preference, above 0 favours the longer output (– where the fit has no finite slope: one outcome "
            "or one length ratio only, or outcomes separated by length).",
            [
                "judge",
                "aspect",
                "decisive",
                "unequal length",
                "longer won",
                "share [95% CI]",
                "length slope ± se",
                "slot intercept",
            ],
            [
                [
                    r["judge"],
                    r["aspect"],
                    str(r["n_decisive"]),
                    str(r["n_unequal"]),
                    str(r["longer_won"]),
                    _interval(r["longer_share"], r["longer_low"], r["longer_high"]),
                    "–" if r["length_coef"] is None else f"{_num(r['length_coef'], '+.3f')} ± {_num(r['length_se'])}",
                    _num(r["slot_intercept"], "+.3f"),
                ]
                for r in section["length"]
            ],
            "No decisive verdicts.",
        ),
        TextTable(
            "Self-preference",
            "Where a judge model is also a system: that system's share of its decisive comparisons against other "
            "systems under this judge model, and under the other judge models of the table (other comparisons).",
            [
                "system",
                "judge model",
                "aspect",
                "comparisons",
                "win share [95% CI]",
                "other judges: comparisons",
                "other judges: win share",
            ],
            [
                [
                    r["system"],
                    r["judge_model"],
                    r["aspect"],
                    str(r["n"]),
                    _interval(r["share"], r["ci_low"], r["ci_high"]),
                    str(r["others_n"]),
                    _num(r["others_share"]),
                ]
                for r in section["self_preference"]
            ],
            f"Not applicable: no judge model ({models}) is a system of the candidates.",
            names=3,
        ),
        TextTable(
            "Flips when the slots swap",
            "Pairs judged in both slot orders by one judge (newest verdict of each order): a flip is the same slot "
            "winning both times. A judge that only looks at slots flips every pair, one that answers by coin about "
            "half.",
            ["judge", "aspect", "pairs in both orders", "decisive in both", "flips", "flip rate [95% CI]"],
            [
                [
                    r["judge"],
                    r["aspect"],
                    str(r["n_pairs"]),
                    str(r["n_decisive"]),
                    str(r["flips"]),
                    _interval(r["flip_rate"], r["ci_low"], r["ci_high"]),
                ]
                for r in section["flips"]
            ],
            "No pair was judged in both slot orders.",
        ),
    ]


def _example() -> tuple[pa.Table, pa.Table]:
    """Two candidates of one context, and a judge that picked slot A in both orders."""
    candidates = pa.table({"candidate_id": ["x", "y"], "system": ["s1", "s2"], "text": ["short", "much longer"]})
    judgments = pa.table(
        {
            "engine": ["e"] * 2,
            "model": ["m"] * 2,
            "revision": ["r"] * 2,
            "prompt_hash": ["h"] * 2,
            "sampling": ["{}"] * 2,
            "context_id": ["c"] * 2,
            "aspect": ["coherence"] * 2,
            "candidate_a": ["x", "y"],
            "candidate_b": ["y", "x"],
            "p_a": [0.9, 0.8],
            "label": ["A", "A"],
            "error": pa.nulls(2, pa.string()),
        }
    )
    return judgments, candidates
