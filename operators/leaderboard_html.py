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

from typing import Any

import pyarrow as pa

from pairank.operators.board_quality_html import category_links, quality_panel
from pairank.operators.checks import require_columns
from pairank.operators.html_plots import (
    NAME,
    aspects_in_order,
    elo_text,
    esc,
    interval_plot,
    interval_text,
    number_text,
    short_label,
    strength_text,
    value_span,
    winrate_text,
)
from pairank.operators.judge_bias import NOTE, text_tables
from pairank.operators.leaderboard import OVERALL
from pairank.operators.leaderboard_history_html import history_section
from pairank.operators.leaderboard_style_html import STYLE_CSS, has_style, style_table, style_toggle
from pairank.operators.prediction_powered_html import prediction_powered_section

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


def _table(rows: list[dict], baseline: str | None, with_winrates: bool) -> str:
    head = [
        "rank",
        "system",
        "strength θ [interval]",
        "Elo-like [interval]",
        "win ratio",
        "comparisons",
        "W / L / T",
        "contexts",
        "opponents",
        "judges",
        "errors",
    ]
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
            esc(number_text(r["win_ratio"], ".3f")),
            esc(r["n_judgments"]),
            esc(f"{r['n_wins']} / {r['n_losses']} / {r['n_ties']}"),
            esc(r["n_contexts"]),
            esc(r["n_opponents"]),
            f'<td class="judges">{esc(r["n_judges"])}: {esc(", ".join(r["judges"]))}</td>',
            esc(r["n_errors"]),
        ]
        if with_winrates:
            cells += [
                esc(winrate_text(r) or r.get("winrate_status") or ""),
                esc(r.get("winrate_method") or ""),
                esc(number_text(r.get("winrate_n_pairs"), "d")),
                esc(number_text(r.get("winrate_n_judges"), "d")),
            ]
        out.append(f"<tr{cls}>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)


def _strength_panels(rows: list[dict]) -> str:
    aspects = aspects_in_order(rows)
    lo, hi = value_span(v for r in rows for v in (r["strength"], r["strength_low"], r["strength_high"]))
    out = ['<div class="panels">']
    for aspect in aspects:
        mine = [r for r in rows if r["aspect"] == aspect]
        items = [
            (
                r["system"],
                r["strength"],
                r["strength_low"],
                r["strength_high"],
                f"{r['system']} ({aspect}): θ {strength_text(r)}, Elo {elo_text(r)}, {r['n_judgments']} comparisons",
            )
            for r in mine
        ]
        mass = mine[0]["mass"] if mine else 0.95
        out.append(
            f"<figure>{interval_plot(items, lo, hi, 0.0, 'centred log-strength θ')}"
            f"<figcaption>{esc(aspect)}: strengths with {esc(f'{mass:.0%}')} intervals</figcaption></figure>"
        )
    out.append("</div>")
    return "".join(out)


def _winrate_panels(rows: list[dict], baseline: str | None) -> str:
    out = ['<div class="panels">']
    for aspect in aspects_in_order(rows):
        mine = [r for r in rows if r["aspect"] == aspect and r.get("winrate_estimate") is not None]
        if not mine:
            continue
        items = [
            (
                f"{r['system']} ({r['winrate_method']})",
                r["winrate_estimate"],
                r.get("winrate_low"),
                r.get("winrate_high"),
                f"{r['system']} vs {baseline} ({aspect}, {r['winrate_method']}): {winrate_text(r)}",
            )
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
        return f"{r['run']} / {r['aspect']}" if r.get("run") else r["aspect"]

    items = [
        (
            label(r),
            r["slot_a_win_fraction"],
            None,
            None,
            f"{label(r)}: slot A won {number_text(r['slot_a_win_fraction'], '.3f')} of {r['n']} judgments",
        )
        for r in bias
    ]
    rows = "".join(
        f'<tr><td class="name">{esc(r.get("run") or "")}</td><td class="name">{esc(r["aspect"])}</td>'
        f"<td>{esc(r['n'])}</td><td>{esc(number_text(r['slot_a_win_fraction'], '.3f'))}</td>"
        f"<td>{esc(number_text(r['mean_p_a'], '.3f'))}</td></tr>"
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
    items = [
        (
            short_label(f"{r['aspect']} / {r['judge']}", 19),
            r[value],
            r[low],
            r[high],
            f"{r['aspect']} / {r['judge']}: {axis} {interval_text(r[value], r[low], r[high], '.3f')}",
        )
        for r in rows
    ]
    return f"<figure>{interval_plot(items, 0.0, 1.0, reference, axis)}</figure>" if rows else ""


def _judge_bias_panel(bias: dict) -> str:
    """Length preference, self-preference and flips (:func:`pairank.operators.judge_bias.text_tables`), the share
    won by the longer output and the flip rates also plotted."""
    plots = [
        _share_plot(bias["length"], "longer_share", "longer_low", "longer_high", 0.5, "share won by the longer"),
        "",
        _share_plot(bias["flips"], "flip_rate", "ci_low", "ci_high", None, "flip rate"),
    ]
    out = [f'<p class="note">{esc(NOTE)}</p>']
    for t, plot in zip(text_tables(bias), plots):
        th = "".join(f"<th{NAME if i < t.names else ''}>{esc(h)}</th>" for i, h in enumerate(t.head))
        body = "".join(
            "<tr>" + "".join(f"<td{NAME if i < t.names else ''}>{esc(v)}</td>" for i, v in enumerate(r)) + "</tr>"
            for r in t.rows
        )
        table = f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{body}</tbody></table></div>'
        out.append(
            f'<h3>{esc(t.title)}</h3><p class="note">{esc(t.note if t.rows else t.empty)}</p>'
            + (plot + table if t.rows else "")
        )
    return "".join(out)


def _spearman_panel(spearman: list[dict]) -> str:
    def label(r):
        return " / ".join(str(x) for x in (r.get("run"), r["aspect"], r["method"], r["level"]) if x)

    items = [
        (
            label(r),
            r["rho"],
            r["ci_low"],
            r["ci_high"],
            f"{label(r)}: rho {interval_text(r['rho'], r['ci_low'], r['ci_high'], '.3f')}, n={r['n']}",
        )
        for r in spearman
    ]
    rows = "".join(
        f'<tr><td class="name">{esc(r.get("run") or "")}</td><td class="name">{esc(r["aspect"])}</td>'
        f'<td class="name">{esc(r["method"])}</td><td class="name">{esc(r["level"])}</td>'
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
    a Quality section after the strengths), ``prediction_powered`` (``pairank leaderboard --human``:
    :mod:`pairank.operators.prediction_powered_html`, after the quality) and ``categories`` or ``category`` (links
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
    strength_kind = str(meta.get("intervals", {}).get("strength", ""))
    lmarena = "compat lmarena" in strength_kind
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
        f"{esc(', '.join(meta.get('runs', [])))}; judges: {esc(', '.join(meta.get('judges', [])))}; "
        f"{esc(meta.get('n_boot', ''))} bootstrap resamples of {'battles' if lmarena else 'contexts'} "
        f"(seed {esc(meta.get('seed', ''))}).</p>",
        '<p class="note">Strength θ is a Bradley-Terry log-strength centred to mean 0 (P(x beats y) = '
        "1 / (1 + e<sup>θy − θx</sup>)); the Elo-like scale is 1000 + 400/ln 10 · θ. Ties count half a win to each "
        + (
            "side; compat lmarena: the fit is arena-rank's maximum likelihood, without a prior. Intervals: "
            f"{esc(strength_kind)}. "
            if lmarena
            else f"side; every system also ties a virtual reference system {esc(prior)} time(s) so "
            f"that an unbeaten system stays finite. Intervals: central {esc(f'{mass:.0%}')} of the strengths "
            "refitted on contexts resampled with replacement. "
        )
        + "Win ratio: (wins + ties/2) / comparisons. Error rows are skipped and counted.</p>",
        *style_toggle(rows),
    ]
    counts = meta.get("counts", {})
    for aspect in aspects_in_order(rows):
        mine = [r for r in rows if r["aspect"] == aspect]
        c = counts.get(aspect, {})
        note = ""
        if c:
            note = (
                f'<p class="meta">{esc(c.get("used"))} comparisons used of {esc(c.get("judgments"))} judgments '
                f"({esc(c.get('errors'))} error rows, {esc(c.get('same_system'))} same-system pairs skipped) "
                f"over {esc(c.get('contexts'))} contexts.</p>"
            )
        table = _table(mine, baseline, with_winrates and aspect != OVERALL)
        if has_style(rows):
            table = f'<div class="raw">{table}</div><div class="styled">{style_table(mine, baseline)}</div>'
        parts.append(f"<h2>{esc(aspect)}</h2>{note}{table}")
    parts.append("<h2>Strengths</h2>")
    parts.append(_strength_panels(rows))
    parts += quality_panel(meta)
    parts += prediction_powered_section(meta)
    if history is not None and history.num_rows:
        require_columns(
            history,
            ("night", "seq", "aspect", "system", "rank", "strength", "strength_low", "strength_high"),
            "the history table",
        )
        parts.append("<h2>History</h2>")
        parts.append(history_section(history.to_pylist()))
    if with_winrates:
        parts.append(f"<h2>Win rates against {esc(baseline)}</h2>")
        parts.append(
            '<p class="note">Carried from the runs\' win-rate tables (not recomputed): per system and aspect '
            "the first method with an estimate among the preferred ones, with its credible interval.</p>"
        )
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

    row: dict[str, Any] = {f.name: None for f in LEADERBOARD}
    row.update(
        aspect=OVERALL,
        system="<b>",
        rank=1,
        strength=0.0,
        elo=1000.0,
        mass=0.95,
        n_boot=0,
        win_ratio=0.5,
        n_judgments=1,
        n_wins=0,
        n_losses=0,
        n_ties=1,
        n_errors=0,
        n_contexts=1,
        n_opponents=1,
        n_judges=1,
        judges=["j"],
    )
    return pa.Table.from_pylist([row], schema=LEADERBOARD)
