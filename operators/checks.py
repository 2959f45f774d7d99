"""Input checks shared by operators; errors say what was expected and where it was not."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pyarrow as pa


def require_columns(table: pa.Table, columns: Iterable[str], what: str) -> None:
    """A ValueError naming ``what`` and the columns of ``columns`` that ``table`` lacks.

    >>> require_columns(pa.table({"a": [1]}), ["a", "b"], "the judgments table")
    Traceback (most recent call last):
    ...
    ValueError: the judgments table lacks columns ['b']; it needs ['a', 'b']
    """
    missing = [c for c in columns if c not in table.column_names]
    if missing:
        raise ValueError(f"{what} lacks columns {missing}; it needs {sorted(columns)}")


def finite_vector(values: Sequence[float], what: str) -> np.ndarray:
    """``values`` as a non-empty 1-d float array; a ValueError names the first non-finite entry.

    >>> finite_vector([1, 2.5], "scores").tolist()
    [1.0, 2.5]
    >>> finite_vector([1, float("nan")], "scores")
    Traceback (most recent call last):
    ...
    ValueError: scores at index 1: expected a finite number, found nan
    """
    x = np.asarray(values, dtype=float)
    if x.ndim != 1 or x.size == 0:
        raise ValueError(f"{what}: expected a non-empty 1-d sequence of numbers, found shape {x.shape}")
    bad = np.flatnonzero(~np.isfinite(x))
    if bad.size:
        raise ValueError(f"{what} at index {int(bad[0])}: expected a finite number, found {float(x[bad[0]])!r}")
    return x
