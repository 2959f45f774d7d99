"""The leaderboard page's style-controlled view (:mod:`pairank.operators.leaderboard_html` places it).

A checkbox at the top of the page (no script: CSS shows the elements of class
``styled`` and hides those of class ``raw`` while it is checked) switches every
aspect's table from the Bradley-Terry ranking to the style-controlled one
(:mod:`pairank.operators.style_control`): rank and strength with length and markdown
held equal, the rank without style control beside it, and the length-controlled win
rate against the baseline where there is one. Every name is escaped.

    >>> rows = [{"system": "<b>", "rank": 2, "style_rank": 1, "style_strength": 0.4, "style_low": 0.1,
    ...          "style_high": 0.7, "lc_win_rate": None, "lc_low": None, "lc_high": None, "style_status": "ok"}]
    >>> page = style_table(rows, None)
    >>> "&lt;b&gt;" in page, "<b>" in page, "+0.400 [+0.100, +0.700]" in page
    (True, False, True)
    >>> style_toggle([{"style_status": "no candidate texts"}])
    []
"""

from __future__ import annotations

import html

TOGGLE_ID = "style-control"
STYLE_CSS = f"""
.styled {{ display: none; }}
#{TOGGLE_ID}:checked ~ .styled {{ display: block; }}
#{TOGGLE_ID}:checked ~ .raw {{ display: none; }}
label.toggle {{ font-size: 0.95em; background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px;
                padding: 3px 10px; cursor: pointer; }}
"""


def _esc(value) -> str:
    return "" if value is None else html.escape(str(value), quote=True)


def _interval(value, low, high, spec: str) -> str:
    if value is None:
        return "–"
    if low is None or high is None:
        return f"{value:{spec}} [no interval]"
    return f"{value:{spec}} [{low:{spec}}, {high:{spec}}]"


def has_style(rows: list[dict]) -> bool:
    """Whether any row has a style-controlled strength (the page then offers the toggle)."""
    return any(r.get("style_strength") is not None for r in rows)


def style_toggle(rows: list[dict]) -> list[str]:
    """The checkbox and its note (nothing when no row has a style-controlled strength); it must precede, as a
    sibling, the ``raw`` and ``styled`` elements it switches."""
    if not has_style(rows):
        return []
    return [
        f'<input type="checkbox" id="{TOGGLE_ID}" class="toggle-box">',
        f'<label class="toggle" for="{TOGGLE_ID}">Style-controlled ranking</label>',
        '<p class="note styled">Style-controlled: Bradley-Terry with the log length ratio and normalised markdown '
        "headers, bold spans and list items as covariates (LMArena's style control), so a system is not ranked up "
        "for being longer or more formatted; 95% intervals (of which kind: leaderboard.json's intervals). "
        "Length-controlled win rate against the baseline: one fit over all systems with the judge's length and slot "
        "preference shared (AlpacaEval 2's GLM under compat alpaca-eval), at equal length with slots balanced. "
        "The coefficients are in the run reports' Style control section.</p>",
    ]


def style_table(rows: list[dict], baseline: str | None) -> str:
    """One aspect's style-controlled table, best first; rows without a style-controlled strength last, with why."""
    with_lc = any(r.get("lc_win_rate") is not None for r in rows)
    head = ["style rank", "system", "style-controlled θ [95% interval]", "rank without style control"]
    if with_lc:
        head.append(f"length-controlled win rate vs {baseline} [95% interval]")
    ordered = sorted(rows, key=lambda r: (r.get("style_rank") is None, r.get("style_rank") or 0, r["system"]))
    out = ['<div class="scroll"><table><thead><tr>']
    out += [f'<th class="{"name" if h == "system" else ""}">{_esc(h)}</th>' for h in head]
    out.append("</tr></thead><tbody>")
    for r in ordered:
        strength = (
            _interval(r.get("style_strength"), r.get("style_low"), r.get("style_high"), "+.3f")
            if r.get("style_strength") is not None
            else f"– ({r.get('style_status') or 'not computed'})"
        )
        cells = [
            _esc(r.get("style_rank") or "–"),
            f'<td class="name">{_esc(r["system"])}</td>',
            _esc(strength),
            _esc(r["rank"]),
        ]
        if with_lc:
            cells.append(
                _esc(
                    "baseline"
                    if r["system"] == baseline
                    else _interval(r.get("lc_win_rate"), r.get("lc_low"), r.get("lc_high"), ".3f")
                )
            )
        cls = ' class="baseline"' if baseline is not None and r["system"] == baseline else ""
        out.append(f"<tr{cls}>" + "".join(c if c.startswith("<td") else f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    return "".join(out)
