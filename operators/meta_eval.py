"""Judge meta-evaluation against human pairwise labels, with LLMBar's statistics.

One row per (subset, aspect, judge): how often the judge picks the human-preferred
candidate, in the labelled slot order and swapped, and how often the two orders
agree. The statistics and their formatting are those of every
``evaluators/<LLM>/<mode>/statistics.json`` that LLMBar publishes (computed by its
``LLMEvaluator/evaluate.py``), so the published files are reproduced exactly from
the imported verdicts (``storage.importers.llmbar``) or replayed ones.

Definitions. A labelled pair (``context_id, candidate_a, candidate_b, preferred``
of PAIRWISE_LABELS, preferred A or B) has two orders: the *original* one
(``swap = False``: the judgment whose candidate_a is the label's candidate_a) and
the *swapped* one (``swap = True``). Output 1 is the label's candidate_a, output 2
its candidate_b. A judgment's *winner* is "1" or "2" in that numbering (label A in
the original order is "1", in the swapped order "2"), "tie", or none (an error row,
or no judgment in that order).

- ``total`` (``n_pairs``): pairs the judge judged in either order, error rows
  included. LLMBar divides by its number of records, null winners included.
- ``correct_False`` / ``correct_True``: pairs whose original / swapped winner is the
  preferred output; ``correct_both``: right in both orders; ``equal``: the two
  winners are the same value, where two missing winners are the same too (LLMBar
  compares ``None == None``).
- Strings: ``f"{n} / {total} = {n / total * 100}%"`` with Python's float ``str``,
  and ``correct_average`` = ``f"{(n_False + n_True) / 2 / total * 100}%"``.
- ``kappa_False`` / ``kappa_True``: Cohen's kappa (:func:`cohen_kappa`) between
  ``1 if winner == "1" else 0`` and the label coded ``1`` (A) or ``2`` (B), as
  LLMBar codes them: its judge "2" and a missing verdict become 0 while the label
  stays 1 or 2, so only "both say 1" agrees. This is NOT the usual kappa between
  verdict and label: a judge that is always right scores ``p / (1 + p)``, with
  ``p`` the share of pairs preferring output 1 (1/3 on a balanced set).
- ``kappa_average`` = ``(kappa_False + kappa_True) / 2``; ``kappa_agreement``:
  Cohen's kappa between the two orders' ``1 if winner == "1" else 0``.
- A kappa is null where it is undefined (one class in both vectors).

Subsets: the ``context_id`` up to its last "/" (``LLMBar/Natural/12`` ->
``LLMBar/Natural``). A single imported LLMBar subset has bare ids (``12``): its
subset is ``""``.

Ties. LLMBar's own verdicts have none; a ``tie`` verdict here is a winner of its
own, "tie": it is never correct (the truth is output 1 or 2), two tied orders
agree positionally (``equal``: the same value, as two picks of output 1 do),
while a tie and a pick, or a tie and a missing winner, do not; and in the kappas
a tie codes 0, like a pick of output 2 or a missing verdict. So a judge that
always ties has accuracy 0 and full positional agreement. Three pairs whose
preferred output is 1, judged (tie, tie), (tie, 1) and (1, 1)::

    >>> s = statistics({0: {0: "tie", 1: "tie"}, 1: {0: "tie", 1: "1"}, 2: {0: "1", 1: "1"}}, [("", "A")] * 3)
    >>> s["n_correct_False"], s["n_correct_True"], s["n_correct_both"], s["n_equal"]
    (1, 2, 1, 2)

Scope: ``tie`` labels and pairs without a label have no truth and are left out.
Every aspect of the judgments is compared with the same labels (they have no
aspect). A judge with no judgment in one order for any pair of a subset gets null
for that order and for the statistics that combine both orders; a pair that misses
one order among others counts as a missing winner there (like LLMBar's null
winner). Several judgments of one judge, pair and order: the newest verdict, else
the newest error row (as :func:`pairank.storage.store.cache.latest_per_key`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from pairank.operators.checks import require_columns
from pairank.operators.reports import escape_markdown
from pairank.operators.votes import JUDGE_COLUMNS, VOTE_COLUMNS, judge_names
from pairank.storage.schemas import LABELS, META_EVAL
from pairank.storage.validation import TableError

#: Columns of the judgments table the meta-evaluation reads (those votes are made from).
JUDGMENT_COLUMNS = VOTE_COLUMNS
#: Columns of the pairwise labels table it reads.
LABEL_COLUMNS = ("context_id", "candidate_a", "candidate_b", "preferred")
ORIGINAL, SWAPPED = 0, 1
#: (order, judgment label) -> winner in the labelled numbering (output 1 = the label's candidate_a).
WINNER = {(ORIGINAL, "A"): "1", (ORIGINAL, "B"): "2", (SWAPPED, "A"): "2", (SWAPPED, "B"): "1"}


def subset_of(context_id: str) -> str:
    """The subset of a context: its id up to the last "/", or "" for a bare id.

    >>> subset_of("LLMBar/Natural/12"), subset_of("12")
    ('LLMBar/Natural', '')
    """
    return context_id.rpartition("/")[0]


def ratio(n: int, total: int) -> str:
    """LLMBar's formatting of a count.

    >>> ratio(76, 100), ratio(1, 3)
    ('76 / 100 = 76.0%', '1 / 3 = 33.33333333333333%')
    """
    return f"{n} / {total} = {n / total * 100}%"


def cohen_kappa(y1: Sequence, y2: Sequence) -> float | None:
    """Cohen's kappa of two label vectors (None where undefined).

    The float operations are those of scikit-learn's ``cohen_kappa_score`` without
    weights, which LLMBar calls, so its published values come out bit for bit:
    ``1 - sum(off-diagonal observed) / sum(off-diagonal expected)`` over the sorted
    union of the values.

    >>> cohen_kappa([1, 0, 1, 0], [1, 0, 1, 1])
    0.5
    >>> round(cohen_kappa([1, 1, 0, 0], [1, 1, 2, 2]), 12)  # LLMBar's coding of a judge that is always right
    0.333333333333
    >>> cohen_kappa([1, 1], [1, 1]) is None
    True
    """
    if len(y1) != len(y2):
        raise ValueError(f"cohen_kappa: vectors of {len(y1)} and {len(y2)} values")
    classes, codes = np.unique(np.concatenate([np.asarray(y1), np.asarray(y2)]), return_inverse=True)
    k = len(classes)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (codes[: len(y1)], codes[len(y1) :]), 1)
    sum0, sum1 = confusion.sum(axis=0), confusion.sum(axis=1)
    if sum0.sum() == 0:
        return None
    expected = np.outer(sum0, sum1) / np.sum(sum0)
    weights = np.ones((k, k), dtype=np.int64)
    np.fill_diagonal(weights, 0)
    denominator = np.sum(weights * expected)
    if denominator == 0:
        return None
    return float(1 - np.sum(weights * confusion) / denominator)


def labelled_index(labels: pa.Table) -> tuple[list[tuple[str, str]], dict[tuple[str, str, str], tuple[int, int]]]:
    """(subset, preferred) of each A/B label, and (context, slot A, slot B) -> (label number, order)."""
    require_columns(labels, LABEL_COLUMNS, "meta_eval: the pairwise labels table")
    pairs: list[tuple[str, str]] = []
    index: dict[tuple[str, str, str], tuple[int, int]] = {}
    seen: dict[tuple[str, str, str], int] = {}
    for row, (ctx, a, b, pref) in enumerate(zip(*(labels.column(c).to_pylist() for c in LABEL_COLUMNS))):
        for k in {(ctx, a, b), (ctx, b, a)}:
            if k in seen:
                raise TableError(
                    "pairwise labels",
                    row,
                    "candidate_a",
                    "one label per pair",
                    f"({ctx}, {a}, {b}), also labelled in row {seen[k]}",
                )
            seen[k] = row
        if pref not in ("A", "B"):  # a tie or unknown preference: no truth
            continue
        index[(ctx, a, b)] = (len(pairs), ORIGINAL)
        index[(ctx, b, a)] = (len(pairs), SWAPPED)
        pairs.append((subset_of(ctx), pref))
    return pairs, index


def meta_eval(judgments: pa.Table, labels: pa.Table) -> pa.Table:
    """META_EVAL rows per (subset, aspect, judge), sorted; see the module docstring."""
    require_columns(judgments, JUDGMENT_COLUMNS, "meta_eval: the judgments table")
    pairs, index = labelled_index(labels)
    rows = judgments.select(list(JUDGMENT_COLUMNS)).to_pylist()
    for i, r in enumerate(rows):
        if r["label"] is not None and r["label"] not in LABELS:
            raise TableError("judgments", i, "label", f"one of {list(LABELS)} or null", repr(r["label"]))
    # newest verdict wins, else the newest error row: later rows of this order overwrite earlier ones
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["error"] is None, rows[i]["created_at"]))
    groups: dict[tuple, dict[int, dict[int, str | None]]] = {}
    for i in order:
        r = rows[i]
        hit = index.get((r["context_id"], r["candidate_a"], r["candidate_b"]))
        if hit is None:
            continue
        number, slot = hit
        ok = r["error"] is None and r["label"] is not None
        winner = None if not ok else "tie" if r["label"] == "tie" else WINNER[(slot, r["label"])]
        ident = tuple(r[c] for c in JUDGE_COLUMNS)
        groups.setdefault((pairs[number][0], r["aspect"], ident), {}).setdefault(number, {})[slot] = winner
    idents = sorted({ident for _, _, ident in groups})
    names = dict(zip(idents, judge_names(idents)))
    out = [
        {
            "subset": subset,
            "aspect": aspect,
            "judge": names[ident],
            **dict(zip(JUDGE_COLUMNS, ident)),
            **statistics(got, pairs),
        }
        for (subset, aspect, ident), got in groups.items()
    ]
    out.sort(key=lambda r: (r["subset"], r["aspect"], r["judge"]))
    return pa.Table.from_pylist(out, schema=META_EVAL)


def statistics(got: dict[int, dict[int, str | None]], pairs: list[tuple[str, str]]) -> dict:
    """LLMBar's statistics of one judge: ``got`` maps a label number to {order: winner} for the orders judged."""
    numbers = sorted(got)
    total = len(numbers)
    truth = ["1" if pairs[n][1] == "A" else "2" for n in numbers]
    has = [sum(slot in got[n] for n in numbers) for slot in (ORIGINAL, SWAPPED)]
    winners = [[got[n].get(slot) for n in numbers] for slot in (ORIGINAL, SWAPPED)]
    right = [[w == t for w, t in zip(ws, truth)] for ws in winners]
    picks_1 = [[int(w == "1") for w in ws] for ws in winners]
    human = [1 if t == "1" else 2 for t in truth]
    row: dict = {"n_pairs": total, "n_original": has[ORIGINAL], "n_swapped": has[SWAPPED]}
    for slot, swap in ((ORIGINAL, "False"), (SWAPPED, "True")):
        if has[slot]:
            n = sum(right[slot])
            row |= {
                f"n_correct_{swap}": n,
                f"correct_{swap}": ratio(n, total),
                f"kappa_{swap}": cohen_kappa(picks_1[slot], human),
            }
    if all(has):
        both = sum(a and b for a, b in zip(*right))
        equal = sum(a == b for a, b in zip(*winners))
        average = (row["n_correct_False"] + row["n_correct_True"]) / 2 / total * 100
        kappas = (row["kappa_False"], row["kappa_True"])
        row |= {
            "n_correct_both": both,
            "n_equal": equal,
            "correct_both": ratio(both, total),
            "equal": ratio(equal, total),
            "correct_average": f"{average}%",
            "kappa_average": None if None in kappas else (kappas[0] + kappas[1]) / 2,
            "kappa_agreement": cohen_kappa(*picks_1),
        }
    return row


def markdown(table: pa.Table) -> str:
    """A META_EVAL table as Markdown: percentages to one decimal, kappas to three (the Parquet keeps them exact).

    >>> row = dict.fromkeys(META_EVAL.names)
    >>> row |= {"subset": "", "aspect": "x", "judge": "GPT-4/CoT", "n_pairs": 4, "n_correct_False": 3,
    ...         "n_correct_True": 2, "n_correct_both": 2, "n_equal": 3, "kappa_False": 0.5}
    >>> print(markdown(pa.Table.from_pylist([row], schema=META_EVAL)).splitlines()[-1])
    | (none) | x | GPT-4/CoT | 4 | 75.0 | 50.0 | 62.5 | 50.0 | 75.0 | 0.500 | – | – | – |
    """
    head = [
        "subset",
        "aspect",
        "judge",
        "pairs",
        "acc. original %",
        "acc. swapped %",
        "acc. average %",
        "both right %",
        "same pick %",
        "κ original",
        "κ swapped",
        "κ average",
        "κ agreement",
    ]
    lines = [
        "# Judge meta-evaluation",
        "",
        (
            "Accuracy against the human pairwise labels in the labelled slot order (original) and swapped, right in "
            "both orders, and positional agreement (both orders pick the same output), over the pairs each judge "
            "judged; kappas as LLMBar computes them (operators.meta_eval: not the usual verdict-vs-label kappa). "
            "– : not available (an order never judged, or an undefined kappa); subset (none): bare context ids."
        ),
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]

    def pct(n, total):
        return "–" if n is None else f"{n / total * 100:.1f}"

    def kappa(k):
        return "–" if k is None else f"{k:.3f}"

    for r in table.to_pylist():
        total = r["n_pairs"]
        average = (
            None
            if r["n_correct_False"] is None or r["n_correct_True"] is None
            else (r["n_correct_False"] + r["n_correct_True"]) / 2
        )
        names = [escape_markdown(r["subset"]) if r["subset"] else "(none)", escape_markdown(r["aspect"])]
        cells = [*names, escape_markdown(r["judge"]), str(total)]
        cells += [pct(r[c], total) for c in ("n_correct_False", "n_correct_True")] + [pct(average, total)]
        cells += [pct(r[c], total) for c in ("n_correct_both", "n_equal")]
        cells += [kappa(r[c]) for c in ("kappa_False", "kappa_True", "kappa_average", "kappa_agreement")]
        lines.append("| " + " | ".join(cells) + " |")
    if any("embedded default" in (m or "") for m in table.column("model").to_pylist()):
        lines += [
            "",
            "The embedded Gemma-3-270M is a small base model with a strong first-slot bias: its accuracy is expected "
            "near chance, and in the generating modes most of its answers have no verdict (error rows, counted in "
            "the pairs but never right). It shows the path works; it is not a quality claim.",
        ]
    return "\n".join(lines) + "\n"
