"""The leaderboard page's Human labels section (:mod:`pairank.operators.leaderboard_html` places it).

Shown when the board's metadata holds ``prediction_powered`` (``pairank leaderboard --human``): how many human
labels were used on how many judged keys, the judge's disagreement with them, then per system the
prediction-powered rank-set and win rate with its interval beside the judge-only ones
(:mod:`pairank.operators.prediction_powered`), and a plot of both win rates. Every name is escaped.

    >>> meta = {"prediction_powered": {"source": "<h>.parquet", "labels": 3, "labelled": 2, "judged_keys": 9,
    ...         "disagree": 0.5, "mean_abs_gap": 0.4, "alpha": 0.1, "rows": [
    ...     {"system": "<b>", "rank": 1, "win_rate": 0.6, "win_low": 0.5, "win_high": 0.7, "rank_low": 1,
    ...      "rank_high": 2, "judge_win_rate": 0.4, "judge_low": 0.35, "judge_high": 0.45, "judge_rank_low": 2,
    ...      "judge_rank_high": 2, "rectifier": 0.2, "power": 0.8, "n_judged": 6, "n_human": 2}]}}
    >>> page = "".join(prediction_powered_section(meta))
    >>> "&lt;b&gt;" in page, "<b>" in page, "1–2" in page, "0.600 [0.500, 0.700]" in page
    (True, False, True, True)
    >>> prediction_powered_section({})
    []
"""

from __future__ import annotations

from pairank.operators.html_plots import NAME, esc, interval_plot, interval_text


def _ranks(low, high) -> str:
    if low is None or high is None:
        return "–"
    return str(low) if low == high else f"{low}–{high}"


def prediction_powered_section(meta: dict) -> list[str]:
    """The section's HTML parts (none without ``meta["prediction_powered"]``)."""
    pp = meta.get("prediction_powered")
    if not pp:
        return []
    level = f"{1 - pp['alpha']:.0%}"
    disagree = "–" if pp.get("disagree") is None else f"{pp['disagree']:.1%}"
    head = [
        "system",
        f"prediction-powered rank-set ({level})",
        f"prediction-powered win rate [{level} interval]",
        f"judge-only rank-set ({level})",
        f"judge-only win rate [{level} bootstrap interval]",
        "human − judge",
        "PPI++ λ",
        "judged keys",
        "labelled keys",
    ]
    out = [
        "<h2>Human labels: prediction-powered rank-sets</h2>",
        f'<p class="meta">{esc(pp["labels"])} human labels from {esc(pp["source"])} on {esc(pp["labelled"])} of '
        f"the {esc(pp['judged_keys'])} judged (context, system pair) keys. The judge's likelier side is not the "
        f"humans' on {esc(disagree)} of them (mean absolute gap of the probabilities "
        f"{esc(pp.get('mean_abs_gap'))}).</p>",
        '<p class="note">Win rate: the probability that the humans prefer the system in a judged key involving '
        "it, estimated from the judge's verdicts on every key corrected by the human-minus-judge gap on the "
        f"labelled ones (Chatzi et al. 2024, PPI++). All rank-sets hold the systems' true ranks at once with "
        f"probability at least {esc(level)}, provided the labelled keys are a uniform random subsample of the "
        "judged ones. The judge-only columns are the judge's own win rate with a bootstrap interval: they say "
        "nothing about how far the judge is from people.</p>",
        '<div class="scroll"><table><thead><tr>',
        *(f"<th{NAME if h == 'system' else ''}>{esc(h)}</th>" for h in head),
        "</tr></thead><tbody>",
    ]
    for r in pp["rows"]:
        cells = [
            _ranks(r["rank_low"], r["rank_high"]),
            interval_text(r["win_rate"], r["win_low"], r["win_high"], ".3f") if r["win_rate"] is not None else "–",
            _ranks(r["judge_rank_low"], r["judge_rank_high"]),
            interval_text(r["judge_win_rate"], r["judge_low"], r["judge_high"], ".3f"),
            "–" if r["rectifier"] is None else f"{r['rectifier']:+.3f}",
            "–" if r["power"] is None else f"{r['power']:.2f}",
            r["n_judged"],
            r["n_human"],
        ]
        out.append(f"<tr><td{NAME}>{esc(r['system'])}</td>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    out.append("</tbody></table></div>")
    items = []
    for r in pp["rows"]:
        items.append((f"{r['system']} (humans)", r["win_rate"], r["win_low"], r["win_high"], r["system"]))
        items.append((f"{r['system']} (judge)", r["judge_win_rate"], r["judge_low"], r["judge_high"], r["system"]))
    out.append(interval_plot(items, 0.0, 1.0, 0.5, f"win rate, prediction-powered and judge-only ({level})"))
    return out
