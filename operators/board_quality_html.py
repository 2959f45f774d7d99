"""The leaderboard page's quality panel and category links (:mod:`pairank.operators.leaderboard_html` places
them): HTML fragments from a board's ``meta``, every name escaped.

    >>> page = "".join(quality_panel({"quality": {"overall": {
    ...     "systems": 2, "pairs": 1, "separable_pairs": 1, "separability": 1.0, "brier": None,
    ...     "references": [{"reference": "<i>", "spearman": None, "agreement": None, "agreeing_pairs": 0, "pairs": 0,
    ...                     "systems": 0, "status": "none"}]}}}))
    >>> page.count("&lt;i&gt;"), "<i>" in page, "1.00 (1 of 1)" in page
    (2, False, True)
    >>> quality_panel({}), category_links({})
    ([], [])
"""

from __future__ import annotations

import html

from pairank.operators.board_quality import COIN_BRIER, HELD_OUT
from pairank.operators.leaderboard import OVERALL


def _esc(value) -> str:
    return "" if value is None else html.escape(str(value), quote=True)


def _num(x, spec: str) -> str:
    return "–" if x is None else format(x, spec)


def _brier_cells(b: dict | None) -> list[str]:
    if not b:
        return ["–", "–"]
    if b.get("brier") is None:
        return [f"– ({b['status']})", "–"]
    return [f"{b['brier']:.3f} on {b['n']} ({b['held_out_contexts']} held-out contexts)", f"{b['skill']:+.2f}"]


def quality_panel(meta: dict) -> list[str]:
    """A Quality section: per aspect separability, the Brier score and, per reference, Spearman and agreement."""
    quality = meta.get("quality") or {}
    if not quality:
        return []
    names = list(dict.fromkeys(r["reference"] for q in quality.values() for r in q["references"]))
    head = ["aspect", "systems", "separability (pairs)", "Brier (held-out comparisons)", "skill vs a coin"]
    for name in names:
        head += [f"{name}: Spearman", f"{name}: agreement (pairs)"]
    body = []
    for aspect in sorted(quality, key=lambda a: (a != OVERALL, a)):  # a JSON round trip sorts the keys
        q = quality[aspect]
        cells = [
            _esc(q["systems"]),
            _esc(f"{_num(q['separability'], '.2f')} ({q['separable_pairs']} of {q['pairs']})"),
            *(_esc(c) for c in _brier_cells(q.get("brier"))),
        ]
        by_name = {r["reference"]: r for r in q["references"]}
        for name in names:
            r = by_name.get(name)
            cells += (
                ["–", "–"]
                if r is None
                else [
                    _esc(_num(r["spearman"], "+.2f")),
                    _esc(f"{_num(r['agreement'], '.2f')} ({r['agreeing_pairs']} of {r['pairs']})"),
                ]
            )
        body.append(
            f'<tr><th class="name" scope="row">{_esc(aspect)}</th><td>' + "</td><td>".join(cells) + "</td></tr>"
        )
    th = '<th class="name">aspect</th>' + "".join(f"<th>{_esc(h)}</th>" for h in head[1:])
    note = (
        '<p class="note">Separability: the share of pairs of systems whose strength intervals do not overlap. '
        f"Brier: the model refitted without {_esc(f'{HELD_OUT:.0%}')} of the contexts (seeded), scored on their "
        f"decisive comparisons (ties left out); always answering 0.5 scores {_esc(f'{COIN_BRIER:.2f}')}, and skill "
        "is 1 − Brier / 0.25. Against a reference ranking (the systems' mean human scores, another leaderboard): "
        "Spearman of the strengths with its scores, and agreement, the share of the pairs separable here (and apart "
        "in the reference) that the reference orders the same way.</p>"
    )
    return [
        "<h2>Quality</h2>",
        note,
        f'<div class="scroll"><table><thead><tr>{th}</tr></thead><tbody>{"".join(body)}</tbody></table></div>',
    ]


def category_links(meta: dict) -> list[str]:
    """On a category's page, which category it is and a link back; on the board's page, a link per category."""
    if meta.get("category") is not None:
        back = _esc(meta.get("board", "../../index.html"))
        return [
            (
                f'<p class="meta">Category <strong>{_esc(meta["category"])}</strong>: the judgments on its contexts '
                f'alone (no carried win rates). <a href="{back}">The whole board</a>.</p>'
            )
        ]
    categories = meta.get("categories") or []
    if not categories:
        return []
    items = "".join(
        f'<li><a href="{_esc(c["folder"])}/index.html">{_esc(c["category"])}</a>: {_esc(c["contexts"])} contexts, '
        f"{_esc(c['judgments'])} judgments, {_esc(c['systems'])} systems</li>"
        if c.get("folder")
        else f"<li>{_esc(c['category'])}: {_esc(c['contexts'])} contexts, no judgments</li>"
        for c in categories
    )
    return [f'<p class="meta">A leaderboard per category of the contexts:</p><ul class="categories">{items}</ul>']
