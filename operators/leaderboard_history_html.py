"""The leaderboard page's history: each system's strength night by night, as a chart and a table."""

from __future__ import annotations

from pairank.operators.html_plots import (
    PLOT_WIDTH,
    aspects_in_order,
    esc,
    number_text,
    short_label,
    strength_text,
    tick_values,
    value_span,
)
from pairank.operators.leaderboard import OVERALL

#: History charts: the plot's height, the width of one night's column, and the left margin for the θ ticks.
HISTORY_HEIGHT = 220


NIGHT_WIDTH = 76


HISTORY_LEFT = 56


#: Line colours of the history charts, one per system, cycled; a system keeps its colour on every chart.
PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#bc4c00", "#e85aad", "#57606a", "#0550ae")


def _nights(rows: list[dict]) -> list[tuple[int, str]]:
    """The nights of history rows as ``(seq, night)``, in seq order; one label per seq.

    >>> _nights([{"seq": 2, "night": "b", "aspect": "x", "system": "s"},
    ...          {"seq": 1, "night": "a", "aspect": "x", "system": "s"}])
    [(1, 'a'), (2, 'b')]
    """
    label: dict[int, str] = {}
    seen: set[tuple] = set()
    for i, r in enumerate(rows):
        if label.setdefault(r["seq"], r["night"]) != r["night"]:
            raise ValueError(
                f"history row {i}: night: expected {label[r['seq']]!r} (seq {r['seq']}), found {r['night']!r}"
            )
        where = (r["seq"], r["aspect"], r["system"])
        if where in seen:
            raise ValueError(f"history row {i}: expected one row per (seq, aspect, system), found {where} again")
        seen.add(where)
    return sorted(label.items())


def _colours(rows: list[dict]) -> dict[str, str]:
    """A palette colour per system, in order of first night then name, so adding a night keeps the colours."""
    first: dict[str, int] = {}
    for r in rows:
        first[r["system"]] = min(first.get(r["system"], r["seq"]), r["seq"])
    order = sorted(first, key=lambda s: (first[s], s))
    return {s: PALETTE[i % len(PALETTE)] for i, s in enumerate(order)}


def _latest_order(rows: list[dict]) -> list[str]:
    """One aspect's systems by rank on its latest night; those absent that night last, by name."""
    last = max(r["seq"] for r in rows)
    rank = {r["system"]: r["rank"] for r in rows if r["seq"] == last}
    return sorted({r["system"] for r in rows}, key=lambda s: (s not in rank, rank.get(s, 0), s))


def history_plot(
    rows: list[dict], nights: list[tuple[int, str]], systems: list[str], colours: dict[str, str], aspect: str
) -> str:
    """An inline SVG of one aspect's strength per night: a line per system, a dot and interval bar per point.

    A line joins a system's points on consecutive nights and breaks where it is absent.
    """
    width = max(PLOT_WIDTH, HISTORY_LEFT + NIGHT_WIDTH * len(nights) + 16)
    step = (width - HISTORY_LEFT - 16) / len(nights)
    top, bottom = 14, 14 + HISTORY_HEIGHT
    height = bottom + 26
    lo, hi = value_span(v for r in rows for v in (r["strength"], r["strength_low"], r["strength_high"]))
    column = {seq: i for i, (seq, _) in enumerate(nights)}
    slot = {s: i for i, s in enumerate(systems)}  # a small sideways offset per system, so intervals do not overlap
    dodge = min(3.0, 0.5 * step / len(systems))

    def x(seq: int, system: str) -> float:
        return HISTORY_LEFT + (column[seq] + 0.5) * step + (slot[system] - (len(systems) - 1) / 2) * dodge

    def y(v: float) -> float:
        return top + (hi - v) / (hi - lo) * HISTORY_HEIGHT

    label = f"{aspect}: strength θ per night"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="history" width="{width:.0f}" height="{height}" '
        f'viewBox="0 0 {width:.0f} {height}" role="img" aria-label="{esc(label)}">'
    ]
    for t in tick_values(lo, hi):
        parts.append(f'<line class="grid" x1="{HISTORY_LEFT}" y1="{y(t):.1f}" x2="{width - 16:.0f}" y2="{y(t):.1f}"/>')
        parts.append(f'<text x="{HISTORY_LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{esc(f"{t:g}")}</text>')
    parts.append(f'<line class="axis" x1="{HISTORY_LEFT}" y1="{bottom}" x2="{width - 16:.0f}" y2="{bottom}"/>')
    parts.append(
        f'<text x="14" y="{(top + bottom) / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {(top + bottom) / 2:.1f})">θ</text>'
    )
    for i, (_, night) in enumerate(nights):
        parts.append(
            f'<text x="{HISTORY_LEFT + (i + 0.5) * step:.1f}" y="{bottom + 16}" text-anchor="middle">'
            f"{esc(short_label(night, 12))}</text>"
        )
    for system in systems:
        mine = sorted((r for r in rows if r["system"] == system), key=lambda r: r["seq"])
        colour = colours[system]
        runs: list[list[dict]] = []
        for r in mine:
            if runs and column[r["seq"]] == column[runs[-1][-1]["seq"]] + 1:
                runs[-1].append(r)
            else:
                runs.append([r])
        for run in (run for run in runs if len(run) > 1):
            points = " ".join(f"{x(r['seq'], system):.1f},{y(r['strength']):.1f}" for r in run)
            parts.append(f'<polyline class="trend" stroke="{colour}" points="{points}"/>')
        for r in mine:
            px = x(r["seq"], system)
            tip = f"{system} ({aspect}) {r['night']}: θ {strength_text(r)}"
            parts.append(f"<g><title>{esc(tip)}</title>")
            if r["strength_low"] is not None and r["strength_high"] is not None:
                parts.append(
                    f'<line class="whisker" stroke="{colour}" x1="{px:.1f}" y1="{y(r["strength_low"]):.1f}" '
                    f'x2="{px:.1f}" y2="{y(r["strength_high"]):.1f}"/>'
                )
            parts.append(f'<circle cx="{px:.1f}" cy="{y(r["strength"]):.1f}" r="3.5" fill="{colour}"/></g>')
    parts.append("</svg>")
    return "".join(parts)


def _history_table(rows: list[dict], nights: list[tuple[int, str]], systems: list[str]) -> str:
    cell = {(r["system"], r["seq"]): f"{r['rank']} ({number_text(r['strength'], '+.3f')})" for r in rows}
    head = "".join(f"<th>{esc(night)}</th>" for _, night in nights)
    body = "".join(
        f'<tr><td class="name">{esc(s)}</td>'
        + "".join(
            f"<td>{esc(cell[s, seq])}</td>" if (s, seq) in cell else '<td class="empty"></td>' for seq, _ in nights
        )
        + "</tr>"
        for s in systems
    )
    return (
        f'<div class="scroll"><table class="history"><thead><tr><th class="name">system</th>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table></div>"
    )


def history_section(rows: list[dict]) -> str:
    nights = _nights(rows)
    colours = _colours(rows)
    out = [
        '<p class="note">Each system\'s strength θ per night with its bootstrap interval, one chart per aspect '
        f"({esc(OVERALL)} first); a system appears from the night it was first ranked. Strengths are centred per "
        "night, so compare positions within a night and trends across nights. The tables give rank (θ) per night, "
        "systems in order of their rank on the latest night.</p>"
    ]
    for aspect in aspects_in_order(rows):
        mine = [r for r in rows if r["aspect"] == aspect]
        systems = _latest_order(mine)
        legend = "".join(
            f'<li><span class="swatch" style="background: {colours[s]}"></span>{esc(s)}</li>' for s in systems
        )
        out.append(
            f'<h3>{esc(aspect)}</h3><figure><div class="scroll">{history_plot(mine, nights, systems, colours, aspect)}'
            f'</div><ul class="legend">{legend}</ul><figcaption>{esc(aspect)}: strength θ per night with bootstrap '
            f"intervals</figcaption></figure>{_history_table(mine, nights, systems)}"
        )
    return "".join(out)
