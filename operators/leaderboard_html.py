"""The leaderboard as one self-contained static HTML page.

No server, no network, no script: inline CSS and inline SVG drawn here. The page
has a table per aspect (``overall`` first: rank, system, strength and Elo with
their intervals, win ratio, comparisons, contexts, judges, errors, and the carried
win rate where there is one; a toggle switches them to the style-controlled ranking:
:mod:`pairank.operators.leaderboard_style_html`), a strength plot with interval bars per aspect, a
win-rate plot with intervals when win rates are given, position-bias and
Spearman panels when those tables are given, and a judge-bias panel (length
preference, self-preference, flips when the slots swap) when ``meta`` holds one;
given the leaderboards of earlier nightly runs, a history section: per aspect a
line chart of each system's strength per night with its interval, a legend, and a
table of rank and strength per night. Every system's interval is also written as
text (:func:`strength_text`), so the page can be read and checked without the
plots. All text from the tables is escaped.

    >>> strength_text({"strength": 0.25, "strength_low": -0.1, "strength_high": 0.5})
    '+0.250 [-0.100, +0.500]'
    >>> "<b>" in render_html(_example(), {"runs": ["<b>"]})
    False
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable

import pyarrow as pa

from pairank.operators.board_quality_html import category_links, quality_panel
from pairank.operators.checks import require_columns
from pairank.operators.judge_bias import NOTE, text_tables
from pairank.operators.leaderboard import OVERALL
from pairank.operators.leaderboard_style_html import STYLE_CSS, has_style, style_table, style_toggle

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; margin: 24px; color: #1d232a; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.25em; margin-top: 1.6em; border-bottom: 1px solid #d0d7de; padding-bottom: 4px; }
h3 { font-size: 1.05em; margin: 1em 0 0.4em; }
p.meta, p.note { color: #57606a; font-size: 0.9em; max-width: 60em; }
.banner { background: #fff8c5; border: 1px solid #d4a72c; border-radius: 6px; padding: 0.5em 1em; max-width: 60em; }
table { border-collapse: collapse; font-size: 0.88em; margin: 0.4em 0 1em; }
th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right; vertical-align: top; white-space: nowrap; }
th { white-space: normal; }
.scroll { overflow-x: auto; }
th { background: #f6f8fa; }
td.name, th.name { text-align: left; }
td.name { white-space: normal; overflow-wrap: anywhere; max-width: 18em; }
td.judges { text-align: left; font-size: 0.85em; color: #57606a; white-space: normal; max-width: 22em; }
tr.baseline td { background: #fff8c5; }
.panels { display: flex; flex-wrap: wrap; gap: 18px; }
figure { margin: 0; }
figcaption { font-size: 0.85em; color: #57606a; }
svg text { font-family: inherit; font-size: 11px; fill: #1d232a; }
svg .axis { stroke: #8c959f; stroke-width: 1; }
svg .grid { stroke: #d0d7de; stroke-width: 1; stroke-dasharray: 3 3; }
svg .ref { stroke: #cf222e; stroke-width: 1; stroke-dasharray: 4 3; }
svg .bar { stroke: #0969da; stroke-width: 2.5; }
svg .dot { fill: #0969da; }
svg .fill { fill: #54aeff; }
svg .trend { fill: none; stroke-width: 1.8; }
svg .whisker { stroke-width: 1.5; opacity: 0.55; }
ul.legend { list-style: none; padding: 0; margin: 0.3em 0; display: flex; flex-wrap: wrap; gap: 2px 14px;
            font-size: 0.85em; max-width: 60em; }
ul.legend .swatch { display: inline-block; width: 16px; height: 4px; margin-right: 5px; vertical-align: middle; }
table.history td.empty { background: #f6f8fa; }
"""

PLOT_WIDTH = 520
LABEL_WIDTH = 140
ROW_HEIGHT = 22
#: History charts: the plot's height, the width of one night's column, and the left margin for the θ ticks.
HISTORY_HEIGHT = 220
NIGHT_WIDTH = 76
HISTORY_LEFT = 56
#: The class of a table cell holding a name (left-aligned).
NAME = ' class="name"'
#: Line colours of the history charts, one per system, cycled; a system keeps its colour on every chart.
PALETTE = ("#0969da", "#cf222e", "#1a7f37", "#8250df", "#bf8700", "#1b7c83", "#bc4c00", "#e85aad", "#57606a",
           "#0550ae")


def esc(value) -> str:
    """Any value as escaped HTML text (None as an empty string)."""
    return "" if value is None else html.escape(str(value), quote=True)


def _num(x, fmt: str) -> str:
    """``x`` formatted, a dash when missing, and never a negative zero.

    >>> _num(-0.0000001, "+.3f"), _num(None, ".2f")
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
        return f"{_num(value, fmt)} [no interval]"
    return f"{_num(value, fmt)} [{_num(low, fmt)}, {_num(high, fmt)}]"


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


def _ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values covering [lo, hi].

    >>> _ticks(0.0, 1.0)
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
    items: list[tuple[str, float | None, float | None, float | None, str]],
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
    for t in _ticks(lo, hi):
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
        parts.append(f'<text x="{LABEL_WIDTH - 8}" y="{y + 4:.1f}" text-anchor="end">{esc(_short(label))}</text>')
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


def _short(label: str, width: int = 22) -> str:
    """A plot label that fits the label column (the full text is in the row's tooltip and the tables).

    >>> _short("a" * 30)
    'aaaaaaaaaaaaaaaaaaaaa…'
    """
    return label if len(label) <= width else label[: width - 1] + "…"


def _span(values: Iterable[float | None], pad: float = 0.08) -> tuple[float, float]:
    vs = [v for v in values if v is not None and math.isfinite(v)]
    if not vs:
        return -1.0, 1.0
    lo, hi = min(vs), max(vs)
    width = max(hi - lo, 0.2)
    return lo - pad * width, hi + pad * width


def _aspects(rows: list[dict]) -> list[str]:
    names = sorted({r["aspect"] for r in rows} - {OVERALL})
    return ([OVERALL] if any(r["aspect"] == OVERALL for r in rows) else []) + names


def _table(rows: list[dict], baseline: str | None, with_winrates: bool) -> str:
    head = ["rank", "system", "strength θ [interval]", "Elo-like [interval]", "win ratio", "comparisons",
            "W / L / T", "contexts", "opponents", "judges", "errors"]
    if with_winrates:
        head += ["win rate vs baseline [interval]", "method", "pairs", "win-rate judges"]
    out = ['<div class="scroll"><table><thead><tr>']
    out += [f'<th class="{"name" if h in ("system", "judges") else ""}">{esc(h)}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    for r in rows:
        cls = ' class="baseline"' if baseline is not None and r["system"] == baseline else ""
        cells = [
            esc(r["rank"]),
            f'<td class="name">{esc(r["system"])}</td>',
            esc(strength_text(r)),
            esc(elo_text(r)),
            esc(_num(r["win_ratio"], ".3f")),
            esc(r["n_judgments"]),
            esc(f'{r["n_wins"]} / {r["n_losses"]} / {r["n_ties"]}'),
            esc(r["n_contexts"]),
            esc(r["n_opponents"]),
            f'<td class="judges">{esc(r["n_judges"])}: {esc(", ".join(r["judges"]))}</td>',
            esc(r["n_errors"]),
        ]
        if with_winrates:
            cells += [
                esc(winrate_text(r) or r.get("winrate_status") or ""),
                esc(r.get("winrate_method") or ""),
                esc(_num(r.get("winrate_n_pairs"), "d")),
                esc(_num(r.get("winrate_n_judges"), "d")),
            ]
        out.append(f"<tr{cls}>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _strength_panels(rows: list[dict]) -> str:
    aspects = _aspects(rows)
    lo, hi = _span(v for r in rows for v in (r["strength"], r["strength_low"], r["strength_high"]))
    out = ['<div class="panels">']
    for aspect in aspects:
        mine = [r for r in rows if r["aspect"] == aspect]
        items = [
            (r["system"], r["strength"], r["strength_low"], r["strength_high"],
             f'{r["system"]} ({aspect}): θ {strength_text(r)}, Elo {elo_text(r)}, {r["n_judgments"]} comparisons')
            for r in mine
        ]
        mass = mine[0]["mass"] if mine else 0.95
        out.append(
            f"<figure>{interval_plot(items, lo, hi, 0.0, 'centred log-strength θ')}"
            f"<figcaption>{esc(aspect)}: strengths with {esc(f'{mass:.0%}')} bootstrap intervals</figcaption></figure>"
        )
    out.append("</div>")
    return "".join(out)


def _winrate_panels(rows: list[dict], baseline: str | None) -> str:
    out = ['<div class="panels">']
    for aspect in _aspects(rows):
        mine = [r for r in rows if r["aspect"] == aspect and r.get("winrate_estimate") is not None]
        if not mine:
            continue
        items = [
            (f'{r["system"]} ({r["winrate_method"]})', r["winrate_estimate"], r.get("winrate_low"),
             r.get("winrate_high"), f'{r["system"]} vs {baseline} ({aspect}, {r["winrate_method"]}): {winrate_text(r)}')
            for r in mine
        ]
        out.append(
            f"<figure>{interval_plot(items, 0.0, 1.0, 0.5, f'win rate against {baseline}')}"
            f"<figcaption>{esc(aspect)}: calibrated win rates against {esc(baseline)}</figcaption></figure>"
        )
    out.append("</div>")
    return "".join(out)


def _bias_panel(bias: list[dict]) -> str:
    def label(r):
        return f'{r["run"]} / {r["aspect"]}' if r.get("run") else r["aspect"]

    items = [
        (label(r), r["slot_a_win_fraction"], None, None,
         f'{label(r)}: slot A won {_num(r["slot_a_win_fraction"], ".3f")} of {r["n"]} judgments')
        for r in bias
    ]
    rows = "".join(
        f"<tr><td class=\"name\">{esc(r.get('run') or '')}</td><td class=\"name\">{esc(r['aspect'])}</td>"
        f"<td>{esc(r['n'])}</td><td>{esc(_num(r['slot_a_win_fraction'], '.3f'))}</td>"
        f"<td>{esc(_num(r['mean_p_a'], '.3f'))}</td></tr>"
        for r in bias
    )
    return (
        '<p class="note">The fraction of judgments won by the candidate shown first (slot A; a tie counts half). '
        "A judge without positional preference sits at 0.5 on a symmetric schedule.</p>"
        f"<figure>{interval_plot(items, 0.0, 1.0, 0.5, 'slot-A win fraction')}</figure>"
        '<table><thead><tr><th class="name">run</th><th class="name">aspect</th><th>judgments</th>'
        f"<th>slot-A win fraction</th><th>mean p_a</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _share_plot(rows: list[dict], value: str, low: str, high: str, reference: float | None, axis: str) -> str:
    items = [(_short(f"{r['aspect']} / {r['judge']}", 19), r[value], r[low], r[high],
              f"{r['aspect']} / {r['judge']}: {axis} {interval_text(r[value], r[low], r[high], '.3f')}") for r in rows]
    return f"<figure>{interval_plot(items, 0.0, 1.0, reference, axis)}</figure>" if rows else ""


def _judge_bias_panel(bias: dict) -> str:
    """Length preference, self-preference and flips (:func:`pairank.operators.judge_bias.text_tables`), the share
    won by the longer output and the flip rates also plotted."""
    plots = [_share_plot(bias["length"], "longer_share", "longer_low", "longer_high", 0.5, "share won by the longer"),
             "", _share_plot(bias["flips"], "flip_rate", "ci_low", "ci_high", None, "flip rate")]
    out = [f'<p class="note">{esc(NOTE)}</p>']
    for t, plot in zip(text_tables(bias), plots):
        th = "".join(f'<th{NAME if i < t.names else ""}>{esc(h)}</th>' for i, h in enumerate(t.head))
        body = "".join("<tr>" + "".join(f'<td{NAME if i < t.names else ""}>{esc(v)}</td>' for i, v in enumerate(r))
                       + "</tr>" for r in t.rows)  # fmt: skip
        table = f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'
        out.append(f'<h3>{esc(t.title)}</h3><p class="note">{esc(t.note if t.rows else t.empty)}</p>'
                   + (plot + table if t.rows else ""))
    return "".join(out)


def _spearman_panel(spearman: list[dict]) -> str:
    def label(r):
        return " / ".join(str(x) for x in (r.get("run"), r["aspect"], r["method"], r["level"]) if x)

    items = [(label(r), r["rho"], r["ci_low"], r["ci_high"],
              f'{label(r)}: rho {interval_text(r["rho"], r["ci_low"], r["ci_high"], ".3f")}, n={r["n"]}')
             for r in spearman]
    rows = "".join(
        f"<tr><td class=\"name\">{esc(r.get('run') or '')}</td><td class=\"name\">{esc(r['aspect'])}</td>"
        f"<td class=\"name\">{esc(r['method'])}</td><td class=\"name\">{esc(r['level'])}</td>"
        f"<td>{esc(interval_text(r['rho'], r['ci_low'], r['ci_high'], '.3f'))}</td><td>{esc(r['n'])}</td></tr>"
        for r in spearman
    )
    return (
        '<p class="note">Spearman correlation of each run\'s rankings with the human scores, with 95% bootstrap '
        "intervals over contexts (sample level: per context, averaged; dataset level: all candidates pooled).</p>"
        f"<figure>{interval_plot(items, -1.0, 1.0, 0.0, 'Spearman rho')}</figure>"
        '<table><thead><tr><th class="name">run</th><th class="name">aspect</th><th class="name">method</th>'
        f'<th class="name">level</th><th>rho [interval]</th><th>n</th></tr></thead><tbody>{rows}</tbody></table>'
    )


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
            raise ValueError(f"history row {i}: night: expected {label[r['seq']]!r} (seq {r['seq']}), "
                             f"found {r['night']!r}")
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


def history_plot(rows: list[dict], nights: list[tuple[int, str]], systems: list[str], colours: dict[str, str],
                 aspect: str) -> str:
    """An inline SVG of one aspect's strength per night: a line per system, a dot and interval bar per point.

    A line joins a system's points on consecutive nights and breaks where it is absent.
    """
    width = max(PLOT_WIDTH, HISTORY_LEFT + NIGHT_WIDTH * len(nights) + 16)
    step = (width - HISTORY_LEFT - 16) / len(nights)
    top, bottom = 14, 14 + HISTORY_HEIGHT
    height = bottom + 26
    lo, hi = _span(v for r in rows for v in (r["strength"], r["strength_low"], r["strength_high"]))
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
    for t in _ticks(lo, hi):
        parts.append(f'<line class="grid" x1="{HISTORY_LEFT}" y1="{y(t):.1f}" x2="{width - 16:.0f}" y2="{y(t):.1f}"/>')
        parts.append(f'<text x="{HISTORY_LEFT - 6}" y="{y(t) + 4:.1f}" text-anchor="end">{esc(f"{t:g}")}</text>')
    parts.append(f'<line class="axis" x1="{HISTORY_LEFT}" y1="{bottom}" x2="{width - 16:.0f}" y2="{bottom}"/>')
    parts.append(f'<text x="14" y="{(top + bottom) / 2:.1f}" text-anchor="middle" '
                 f'transform="rotate(-90 14 {(top + bottom) / 2:.1f})">θ</text>')
    for i, (_, night) in enumerate(nights):
        parts.append(f'<text x="{HISTORY_LEFT + (i + 0.5) * step:.1f}" y="{bottom + 16}" text-anchor="middle">'
                     f"{esc(_short(night, 12))}</text>")
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
            points = " ".join(f'{x(r["seq"], system):.1f},{y(r["strength"]):.1f}' for r in run)
            parts.append(f'<polyline class="trend" stroke="{colour}" points="{points}"/>')
        for r in mine:
            px = x(r["seq"], system)
            tip = f"{system} ({aspect}) {r['night']}: θ {strength_text(r)}"
            parts.append(f"<g><title>{esc(tip)}</title>")
            if r["strength_low"] is not None and r["strength_high"] is not None:
                parts.append(f'<line class="whisker" stroke="{colour}" x1="{px:.1f}" y1="{y(r["strength_low"]):.1f}" '
                             f'x2="{px:.1f}" y2="{y(r["strength_high"]):.1f}"/>')
            parts.append(f'<circle cx="{px:.1f}" cy="{y(r["strength"]):.1f}" r="3.5" fill="{colour}"/></g>')
    parts.append("</svg>")
    return "".join(parts)


def _history_table(rows: list[dict], nights: list[tuple[int, str]], systems: list[str]) -> str:
    cell = {(r["system"], r["seq"]): f'{r["rank"]} ({_num(r["strength"], "+.3f")})' for r in rows}
    head = "".join(f"<th>{esc(night)}</th>" for _, night in nights)
    body = "".join(
        f'<tr><td class="name">{esc(s)}</td>'
        + "".join(f"<td>{esc(cell[s, seq])}</td>" if (s, seq) in cell else '<td class="empty"></td>'
                  for seq, _ in nights)
        + "</tr>"
        for s in systems
    )
    return (f'<div class="scroll"><table class="history"><thead><tr><th class="name">system</th>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div>")


def _history_section(rows: list[dict]) -> str:
    nights = _nights(rows)
    colours = _colours(rows)
    out = [
        '<p class="note">Each system\'s strength θ per night with its bootstrap interval, one chart per aspect '
        f"({esc(OVERALL)} first); a system appears from the night it was first ranked. Strengths are centred per "
        "night, so compare positions within a night and trends across nights. The tables give rank (θ) per night, "
        "systems in order of their rank on the latest night.</p>"
    ]
    for aspect in _aspects(rows):
        mine = [r for r in rows if r["aspect"] == aspect]
        systems = _latest_order(mine)
        legend = "".join(f'<li><span class="swatch" style="background: {colours[s]}"></span>{esc(s)}</li>'
                         for s in systems)
        out.append(
            f'<h3>{esc(aspect)}</h3><figure><div class="scroll">{history_plot(mine, nights, systems, colours, aspect)}'
            f'</div><ul class="legend">{legend}</ul><figcaption>{esc(aspect)}: strength θ per night with bootstrap '
            f"intervals</figcaption></figure>{_history_table(mine, nights, systems)}"
        )
    return "".join(out)


def _unfinished_banner(meta: dict) -> list[str]:
    """A warning naming each run of the board that has not finished, with its count of judgments."""
    unfinished = meta.get("unfinished") or []
    if not unfinished:
        return []
    used = (meta.get("judgments") or {}).get("used")
    items = "".join(
        f"<li>{esc(u['note'])}: {esc(u['judgments'])} of the {esc(used)} judgments used are on its contexts</li>"
        for u in unfinished
    )
    return [
        f'<div class="banner" role="alert"><strong>Not final.</strong> Runs that have not finished feed this board; it '
        f"may change when they do (<code>pairank leaderboard --finished-only</code> leaves them out).<ul>{items}</ul>"
        "</div>"
    ]


def render_html(
    board: pa.Table,
    meta: dict,
    position_bias: pa.Table | None = None,
    spearman: pa.Table | None = None,
    *,
    history: pa.Table | None = None,
) -> str:
    """The page for a LEADERBOARD table.

    ``meta`` may hold ``generated_at``, ``runs``, ``judges``, ``n_boot``, ``seed``,
    ``mass``, ``prior_ties``, ``baseline``, ``counts`` (per aspect, from
    :class:`pairank.operators.leaderboard.Leaderboard`), ``judge_bias`` (from
    :func:`pairank.operators.judge_bias.judge_bias`: a Judge bias section after
    the position bias), ``quality`` (:func:`pairank.operators.board_quality.board_quality`:
    a Quality section after the strengths) and ``categories`` or ``category`` (links
    to the category boards, or back). ``position_bias`` and ``spearman`` are POSITION_BIAS and
    SPEARMAN tables, each optionally with a ``run`` column. ``history`` holds the
    LEADERBOARD rows of the nightly runs so far with two more columns, ``night``
    (the night's label) and ``seq`` (int, the order of the nights); with at least
    one row the page gets a History section after the strengths. A ``seq`` with two
    labels, or a (seq, aspect, system) twice, is a ValueError.
    """
    rows = board.to_pylist()
    baseline = meta.get("baseline")
    with_winrates = any(r.get("winrate_estimate") is not None for r in rows)
    mass = rows[0]["mass"] if rows else meta.get("mass", 0.95)
    prior = format(meta.get("prior_ties", 1.0), "g")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<title>pairank leaderboard</title>",
        f"<style>{CSS}{STYLE_CSS}</style></head><body>",
        "<h1>pairank leaderboard</h1>",
        *_unfinished_banner(meta),
        *category_links(meta),
        f'<p class="meta">Generated {esc(meta.get("generated_at", ""))} from runs '
        f'{esc(", ".join(meta.get("runs", [])))}; judges: {esc(", ".join(meta.get("judges", [])))}; '
        f'{esc(meta.get("n_boot", ""))} bootstrap resamples of contexts (seed {esc(meta.get("seed", ""))}).</p>',
        '<p class="note">Strength θ is a Bradley-Terry log-strength centred to mean 0 (P(x beats y) = '
        "1 / (1 + e<sup>θy − θx</sup>)); the Elo-like scale is 1000 + 400/ln 10 · θ. Ties count half a win to each "
        f"side; every system also ties a virtual reference system {esc(prior)} time(s) so "
        f"that an unbeaten system stays finite. Intervals: central {esc(f'{mass:.0%}')} of the strengths refitted on "
        "contexts resampled with replacement. Win ratio: (wins + ties/2) / comparisons. Error rows are skipped and "
        "counted.</p>",
        *style_toggle(rows),
    ]
    counts = meta.get("counts", {})
    for aspect in _aspects(rows):
        mine = [r for r in rows if r["aspect"] == aspect]
        c = counts.get(aspect, {})
        note = ""
        if c:
            note = (f'<p class="meta">{esc(c.get("used"))} comparisons used of {esc(c.get("judgments"))} judgments '
                    f'({esc(c.get("errors"))} error rows, {esc(c.get("same_system"))} same-system pairs skipped) '
                    f'over {esc(c.get("contexts"))} contexts.</p>')
        table = _table(mine, baseline, with_winrates and aspect != OVERALL)
        if has_style(rows):
            table = f'<div class="raw">{table}</div><div class="styled">{style_table(mine, baseline)}</div>'
        parts.append(f"<h2>{esc(aspect)}</h2>{note}{table}")
    parts.append("<h2>Strengths</h2>")
    parts.append(_strength_panels(rows))
    parts += quality_panel(meta)
    if history is not None and history.num_rows:
        require_columns(history, ("night", "seq", "aspect", "system", "rank", "strength", "strength_low",
                                  "strength_high"), "the history table")
        parts.append("<h2>History</h2>")
        parts.append(_history_section(history.to_pylist()))
    if with_winrates:
        parts.append(f"<h2>Win rates against {esc(baseline)}</h2>")
        parts.append('<p class="note">Carried from the runs\' win-rate tables (not recomputed): per system and aspect '
                     "the first method with an estimate among the preferred ones, with its credible interval.</p>")
        parts.append(_winrate_panels(rows, baseline))
    if position_bias is not None and position_bias.num_rows:
        parts.append("<h2>Position bias</h2>")
        parts.append(_bias_panel(position_bias.to_pylist()))
    if meta.get("judge_bias"):
        parts.append("<h2>Judge bias</h2>" + _judge_bias_panel(meta["judge_bias"]))
    if spearman is not None and spearman.num_rows:
        parts.append("<h2>Spearman against human scores</h2>")
        parts.append(_spearman_panel(spearman.to_pylist()))
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def _example() -> pa.Table:
    from pairank.storage.schemas import LEADERBOARD

    row = {f.name: None for f in LEADERBOARD}
    row.update(aspect=OVERALL, system="<b>", rank=1, strength=0.0, elo=1000.0, mass=0.95, n_boot=0, win_ratio=0.5,
               n_judgments=1, n_wins=0, n_losses=0, n_ties=1, n_errors=0, n_contexts=1, n_opponents=1, n_judges=1,
               judges=["j"])
    return pa.Table.from_pylist([row], schema=LEADERBOARD)
