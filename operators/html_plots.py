"""The leaderboard page's small parts: escaped text, numbers with intervals, and SVG interval plots."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Sequence

from pairank.operators.leaderboard import OVERALL

PLOT_WIDTH = 520


LABEL_WIDTH = 140


ROW_HEIGHT = 22


#: The class of a table cell holding a name (left-aligned).
NAME = ' class="name"'


def esc(value) -> str:
    """Any value as escaped HTML text (None as an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def number_text(x, fmt: str) -> str:
    """``x`` formatted, a dash when missing, and never a negative zero.

    >>> number_text(-0.0000001, "+.3f"), number_text(None, ".2f")
    ('+0.000', '–')
    """
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    text = format(x, fmt)
    return format(0.0, fmt) if isinstance(x, float) and float(text) == 0 else text


def interval_text(value, low, high, fmt: str) -> str:
    """``value [low, high]``, or ``value [no interval]`` without one.

    >>> interval_text(0.5, 0.4, 0.61, ".2f"), interval_text(3.0, None, None, ".0f")
    ('0.50 [0.40, 0.61]', '3 [no interval]')
    """
    if low is None or high is None:
        return f"{number_text(value, fmt)} [no interval]"
    return f"{number_text(value, fmt)} [{number_text(low, fmt)}, {number_text(high, fmt)}]"


def strength_text(row: dict) -> str:
    """A row's centred log-strength with its bootstrap interval, as the page writes it."""
    return interval_text(row["strength"], row["strength_low"], row["strength_high"], "+.3f")


def elo_text(row: dict) -> str:
    """A row's Elo-like strength with its interval, as the page writes it."""
    return interval_text(row["elo"], row["elo_low"], row["elo_high"], ".0f")


def winrate_text(row: dict) -> str:
    """A row's carried win rate with its interval, or '' when it carries none."""
    if row.get("winrate_estimate") is None:
        return ""
    return interval_text(row["winrate_estimate"], row.get("winrate_low"), row.get("winrate_high"), ".3f")


def tick_values(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi].

    >>> tick_values(0.0, 1.0)
    [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    """
    if hi <= lo:
        return [lo]
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw - 1e-12)
    start = math.ceil(lo / step - 1e-9) * step
    out, x = [], start
    while x <= hi + 1e-9 * step:
        out.append(round(x, 10))
        x += step
    return out


def interval_plot(
    items: Sequence[tuple[str, float | None, float | None, float | None, str]],
    lo: float,
    hi: float,
    reference: float | None,
    axis_label: str,
) -> str:
    """An inline SVG: one row per item ``(label, value, low, high, tooltip)``: a bar low..high and a dot at value."""
    inner = PLOT_WIDTH - LABEL_WIDTH - 20
    height = 30 + ROW_HEIGHT * len(items) + 34

    def x(v: float) -> float:
        return LABEL_WIDTH + (v - lo) / (hi - lo) * inner

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{PLOT_WIDTH}" height="{height}" '
        f'viewBox="0 0 {PLOT_WIDTH} {height}" role="img" aria-label="{esc(axis_label)}">'
    ]
    bottom = 20 + ROW_HEIGHT * len(items)
    for t in tick_values(lo, hi):
        parts.append(f'<line class="grid" x1="{x(t):.1f}" y1="14" x2="{x(t):.1f}" y2="{bottom}"/>')
        parts.append(f'<text x="{x(t):.1f}" y="{bottom + 14}" text-anchor="middle">{esc(f"{t:g}")}</text>')
    if reference is not None and lo <= reference <= hi:
        parts.append(f'<line class="ref" x1="{x(reference):.1f}" y1="10" x2="{x(reference):.1f}" y2="{bottom}"/>')
    parts.append(f'<line class="axis" x1="{LABEL_WIDTH}" y1="{bottom}" x2="{LABEL_WIDTH + inner}" y2="{bottom}"/>')
    parts.append(
        f'<text x="{LABEL_WIDTH + inner / 2:.1f}" y="{bottom + 30}" text-anchor="middle">{esc(axis_label)}</text>'
    )
    for i, (label, value, low, high, tip) in enumerate(items):
        y = 20 + ROW_HEIGHT * i + ROW_HEIGHT / 2
        parts.append(f"<g><title>{esc(tip)}</title>")
        parts.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 4:.1f}" text-anchor="end">{esc(short_label(label))}</text>')
        if low is not None and high is not None:
            parts.append(f'<line class="bar" x1="{x(low):.1f}" y1="{y:.1f}" x2="{x(high):.1f}" y2="{y:.1f}"/>')
            for end in (low, high):
                parts.append(
                    f'<line class="bar" x1="{x(end):.1f}" y1="{y - 5:.1f}" x2="{x(end):.1f}" y2="{y + 5:.1f}"/>'
                )
        if value is not None:
            parts.append(f'<circle class="dot" cx="{x(value):.1f}" cy="{y:.1f}" r="4.5"/>')
        parts.append("</g>")
    parts.append("</svg>")
    return "".join(parts)


def short_label(label: str, width: int = 22) -> str:
    """A plot label that fits the label column (the full text is in the row's tooltip and the tables).

    >>> short_label("a" * 30)
    'aaaaaaaaaaaaaaaaaaaaa…'
    """
    return label if len(label) <= width else label[: width - 1] + "…"


def value_span(values: Iterable[float | None], pad: float = 0.08) -> tuple[float, float]:
    vs = [v for v in values if v is not None and math.isfinite(v)]
    if not vs:
        return -1.0, 1.0
    lo, hi = min(vs), max(vs)
    width = max(hi - lo, 0.2)
    return lo - pad * width, hi + pad * width


def aspects_in_order(rows: list[dict]) -> list[str]:
    names = sorted({r["aspect"] for r in rows} - {OVERALL})
    return ([OVERALL] if any(r["aspect"] == OVERALL for r in rows) else []) + names
