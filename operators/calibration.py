"""Batch Calibration of a binary A/B judge (uniform prior).

Batch Calibration (Zhou et al. 2023, "Batch Calibration: Rethinking Calibration
for In-Context Learning and Prompt Engineering", arXiv:2309.17249) estimates the
judge's contextual prior, here its preference for a slot, from a batch's own
outputs: the mean of P(A) and the mean of P(B) = 1 - P(A) over the batch. It then
divides the prior out and normalises::

    p_cal(A) = (p_a / mean(p_a)) / (p_a / mean(p_a) + (1 - p_a) / mean(1 - p_a))

This multiplies the odds of every verdict by the same constant, so the order of
the verdicts within a batch is kept, 0 and 1 stay 0 and 1, and a judge whose mean
is already 0.5 is left as it is. One pass brings a biased batch's mean near 0.5,
not exactly to it: the closer the verdicts sit to 0 and 1, the more is left.

    >>> p, prior = batch_calibrate([0.9, 0.6])
    >>> prior
    0.75
    >>> [round(float(x), 4) for x in p]  # 0.9/0.75 / (0.9/0.75 + 0.1/0.25)
    [0.75, 0.3333]

Ties. A tie (p_a = 0.5) moves with the prior like any other verdict, and
:func:`calibrate_table` recomputes every label from the calibrated p_a by the
judges' own rule (A above 0.5, B below, tie at exactly 0.5), so label and p_a
always agree: a tie stays a tie only in a group whose prior is 0.5 (or 0 or 1,
left unchanged), and otherwise becomes a win of the slot the judge favours less.
Generated verdicts are categorical (p_a 1, 0.5 or 0 for A, tie, B): they keep
their 0s and 1s, so all the calibration does to them is turn every tie into a
win of one slot. It means nothing there; job specs refuse
``scoring.calibration: batch`` for the generate and pointwise modes.

    >>> p, prior = batch_calibrate([1.0, 1.0, 0.5, 0.0])  # verdicts A, A, tie, B
    >>> prior, p.tolist()  # the tie: 0.5/0.625 / (0.5/0.625 + 0.5/0.375), now a B
    (0.625, [1.0, 1.0, 0.375, 0.0])
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: Columns of the judgments table this operator reads (besides the ``by`` columns).
COLUMNS = ("p_a", "error")
#: The column the operator adds.
PRIOR_A = pa.field(
    "prior_a", pa.float64(), nullable=True, metadata={"description": "Batch Calibration prior P(A) of the row's group."}
)


def _check_probabilities(p: np.ndarray, rows: Sequence[int] | None = None) -> None:
    """ValueError naming the first value that is not a float in [0, 1]."""
    bad = np.flatnonzero(~((p >= 0.0) & (p <= 1.0)))  # NaN fails both comparisons
    if bad.size:
        i = int(bad[0])
        where = f"row {rows[i]}" if rows is not None else f"index {i}"
        raise ValueError(f"p_a at {where}: expected a float in [0, 1], found {float(p[i])!r}")


def batch_calibrate(p_a: Sequence[float] | np.ndarray, prior: float | None = None) -> tuple[np.ndarray, float]:
    """Calibrated P(A) of every verdict of one batch, and the batch's prior P(A).

    ``prior`` overrides the estimate (e.g. one made over a larger batch that
    contains this one); unset, it is the mean of ``p_a``.

    An empty batch gives an empty array and the uniform prior 0.5. A batch whose
    prior is exactly 0 or 1 (every verdict the same extreme) is returned unchanged:
    it says nothing about how content and position combine, and the formula would
    divide by zero.

    >>> batch_calibrate([0.3, 0.7])[0].tolist()  # mean 0.5: nothing to remove
    [0.3, 0.7]
    >>> batch_calibrate([1.0, 1.0])[0].tolist(), batch_calibrate([1.0, 1.0])[1]
    ([1.0, 1.0], 1.0)
    """
    p = np.asarray(p_a, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"p_a: expected a 1-d sequence of probabilities, found shape {p.shape}")
    if p.size == 0:
        return p.copy(), 0.5
    _check_probabilities(p)
    prior = float(p.mean()) if prior is None else float(prior)
    if not 0.0 <= prior <= 1.0:
        raise ValueError(f"prior: expected a probability in [0, 1], found {prior!r}")
    if prior in (0.0, 1.0):
        return p.copy(), prior
    a = p / prior
    b = (1.0 - p) / (1.0 - prior)
    return a / (a + b), prior


def _label(p: float) -> str:
    """The judges' labelling rule (``judges.interface.label_of``): a tie is exactly 0.5."""
    return "A" if p > 0.5 else "B" if p < 0.5 else "tie"


def calibrate_table(judgments: pa.Table, by: Sequence[str] = ("aspect",)) -> pa.Table:
    """``judgments`` with ``p_a`` calibrated per group of ``by`` and a ``prior_a`` column.

    The prior is estimated over the rows without error of each group; error rows
    keep their values and get a null ``prior_a``. ``label`` (where present) is
    recomputed from the calibrated ``p_a`` (a "tie" row whose p_a moved off 0.5 is
    relabelled "A" or "B"; see the module docstring). Columns keep their order; ``prior_a``
    comes last (or is replaced in place when the table already has one).
    """
    by = list(by)
    missing = [c for c in (*by, *COLUMNS) if c not in judgments.column_names]
    if missing:
        raise ValueError(
            f"calibrate_table: expected columns {[*by, *COLUMNS]}, found {judgments.column_names} (missing {missing})"
        )
    p = np.asarray(judgments.column("p_a").to_numpy(zero_copy_only=False), dtype=float)  # nulls become NaN
    ok = pc.is_null(judgments.column("error")).to_numpy(zero_copy_only=False)
    groups: dict[tuple, list[int]] = defaultdict(list)
    keys = zip(*(judgments.column(c).to_pylist() for c in by)) if by else ((),) * judgments.num_rows
    for row, (key, good) in enumerate(zip(keys, ok)):
        if good:
            groups[tuple(key)].append(row)
    ok_rows = np.flatnonzero(ok)
    _check_probabilities(p[ok_rows], ok_rows.tolist())

    calibrated = p.copy()
    prior = np.full(judgments.num_rows, np.nan)
    for rows in groups.values():
        calibrated[rows], prior[rows] = batch_calibrate(p[rows])

    table = _set(judgments, "p_a", pa.array(calibrated, type=pa.float64(), mask=np.isnan(p)))
    if "label" in table.column_names:
        old = judgments.column("label").to_pylist()
        labels = [_label(float(x)) if good else o for x, good, o in zip(calibrated, ok, old)]
        table = _set(table, "label", pa.array(labels, type=pa.string()))
    prior_a = pa.array(prior, type=pa.float64(), mask=~ok)
    if PRIOR_A.name in table.column_names:
        return _set(table, PRIOR_A.name, prior_a)
    return table.append_column(PRIOR_A, prior_a)


def _set(table: pa.Table, name: str, values: pa.Array) -> pa.Table:
    """Replace column ``name``, keeping its field (type, description) and position."""
    i = table.schema.get_field_index(name)
    return table.set_column(i, table.schema.field(i), values)
