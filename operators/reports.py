"""Report operators: position bias and Spearman correlation with human scores.

The other judge biases (length preference, self-preference, flips when the slots
swap) are computed in :mod:`pairank.operators.judge_bias`; a report's ``judge_bias``
section is rendered here after the position bias.

Spearman is computed at two levels, as in the comparative-assessment papers:
*sample level* ranks the candidates of each context against that context's human
scores and averages over contexts (with a bootstrap interval over contexts);
*dataset level* pools every candidate.

The run report's Markdown is written here (:func:`render_markdown`, with the sections ``pairank winrate`` prints);
every piece of text from the data in it (names, aspects, contexts, errors) goes through :func:`escape_markdown`.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pairank.operators.judge_bias import NOTE as JUDGE_BIAS_NOTE
from pairank.operators.judge_bias import text_tables
from pairank.operators.scores import hard_verdict
from pairank.storage.schemas import POSITION_BIAS, SPEARMAN


def position_bias(judgments: pa.Table) -> pa.Table:
    """Per aspect: judgments with a verdict, fraction won by slot A, mean p_a.

    Swapping the slots of every comparison maps p_a to 1 - p_a, so a judge with no
    positional preference sits at 0.5 on a symmetric schedule. Slot A's wins are the
    rows' hard verdicts (:func:`pairank.operators.scores.hard_verdict`: the label where the
    table has one, else the side of 0.5 p_a is on), so a tie counts half a slot-A win.
    """
    return position_table(position_counts(judgments))


def position_counts(judgments: pa.Table) -> dict[str, list[float]]:
    """Per aspect, ``[rows with a verdict, slot-A wins, sum of p_a]``: what :func:`position_bias` is made of, and
    what parts of one run add up to (:func:`add_counts`)."""
    ok = judgments.filter(pc.is_null(judgments.column("error")))
    labels = ok.column("label").to_pylist() if "label" in ok.column_names else [None] * ok.num_rows
    by: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    for aspect, p, label in zip(ok.column("aspect").to_pylist(), ok.column("p_a").to_pylist(), labels):
        c = by[aspect]
        c[0] += 1
        c[1] += hard_verdict(p, label)
        c[2] += p
    return dict(by)


def position_table(counts: dict[str, list[float]]) -> pa.Table:
    """The POSITION_BIAS table of :func:`position_counts`."""
    rows = [
        {"aspect": aspect, "n": int(n), "slot_a_win_fraction": wins / n, "mean_p_a": total / n}
        for aspect, (n, wins, total) in sorted(counts.items())
        if n
    ]
    return pa.Table.from_pylist(rows, schema=POSITION_BIAS)


def add_counts(into: dict, more: dict) -> dict:
    """``into`` with ``more`` added: numbers add, dicts add key by key, lists add element-wise (``into`` changes).

    >>> add_counts({"n": 1, "by": {"x": [1, 2.0]}}, {"n": 2, "by": {"x": [1, 1.0], "y": [3, 0.5]}})
    {'n': 3, 'by': {'x': [2, 3.0], 'y': [3, 0.5]}}
    """
    for k, v in more.items():
        if k not in into:
            into[k] = v
        elif isinstance(v, dict):
            add_counts(into[k], v)
        elif isinstance(v, list):
            into[k] = [a + b for a, b in zip(into[k], v)]
        else:
            into[k] += v
    return into


def judgment_totals(judgments: pa.Table) -> dict:
    """What a report counts of the judgments a run used: rows, rows with a verdict, tokens, engine seconds and the
    failures (an error's first 300 characters -> rows); the totals of a run's parts add up (:func:`add_counts`)."""
    failures: dict[str, int] = defaultdict(int)
    for e in judgments.column("error").to_pylist():
        if e is not None:
            failures[e[:300]] += 1
    return {
        "judgments": judgments.num_rows,
        "with_verdict": judgments.num_rows - sum(failures.values()),
        "input_tokens": int(pc.sum(judgments.column("input_tokens")).as_py() or 0),
        "output_tokens": int(pc.sum(judgments.column("output_tokens")).as_py() or 0),
        "engine_seconds": float(pc.sum(judgments.column("seconds")).as_py() or 0.0),
        "failures": dict(failures),
    }


def _spearman(x: list[float], y: list[float]) -> float | None:
    from scipy import stats  # here: the block-scoring tasks import this module for its counts only

    if len(x) < 2 or len(set(x)) < 2 or len(set(y)) < 2:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rho = stats.spearmanr(x, y).statistic
    return None if rho is None or math.isnan(rho) else float(rho)


def spearman_table(rankings: pa.Table, human: pa.Table, n_boot: int = 1000, seed: int = 0) -> pa.Table:
    """SPEARMAN rows per (aspect, method, level); aspects with no human scores are skipped."""
    truth = {
        (c, a): s
        for c, a, s in zip(
            human.column("candidate_id").to_pylist(),
            human.column("aspect").to_pylist(),
            human.column("score").to_pylist(),
        )
    }
    groups: dict[tuple[str, str], dict[str, list[tuple[float, float]]]] = defaultdict(lambda: defaultdict(list))
    # only the rows of scored candidates become Python objects (a run without human scores makes none)
    rankings = rankings.filter(pc.is_in(rankings.column("candidate_id"), human.column("candidate_id")))
    for ctx, aspect, cid, method, score in zip(
        *(rankings.column(c).to_pylist() for c in ("context_id", "aspect", "candidate_id", "method", "score"))
    ):
        h = truth.get((cid, aspect))
        if h is not None:
            groups[(aspect, method)][ctx].append((score, h))
    rows = []
    for (aspect, method), contexts in sorted(groups.items()):
        per_context = [_spearman([s for s, _ in v], [h for _, h in v]) for v in contexts.values()]
        rhos = np.asarray([r for r in per_context if r is not None])
        lo = hi = None
        if len(rhos) >= 2 and n_boot > 0 and np.ptp(rhos) > 0:
            from scipy import stats

            ci = stats.bootstrap(
                (rhos,), np.mean, n_resamples=n_boot, random_state=np.random.default_rng(seed), method="percentile"
            ).confidence_interval
            lo, hi = float(ci.low), float(ci.high)
        rows.append(
            {
                "aspect": aspect,
                "method": method,
                "level": "sample",
                "rho": float(rhos.mean()) if len(rhos) else None,
                "ci_low": lo,
                "ci_high": hi,
                "n": int(len(rhos)),
            }
        )
        pooled = [pair for v in contexts.values() for pair in v]
        rows.append(
            {
                "aspect": aspect,
                "method": method,
                "level": "dataset",
                "rho": _spearman([s for s, _ in pooled], [h for _, h in pooled]),
                "ci_low": None,
                "ci_high": None,
                "n": len(pooled),
            }
        )
    return pa.Table.from_pylist(rows, schema=SPEARMAN)


def build_report(
    spec: dict,
    judge: dict,
    totals: dict,
    spearman: pa.Table,
    bias: pa.Table,
    counts: dict,
    wall_seconds: float,
    extra: dict | None = None,
) -> dict:
    """The report as plain data: settings, counts, cost, Spearman, bias, failures, and ``extra`` sections.

    ``totals``: :func:`judgment_totals` of the judgments the run used (or of its parts, added up).
    """
    failures = totals["failures"]
    return {
        "name": spec.get("name"),
        "settings": {
            "input": spec.get("input"),
            "output": spec.get("output"),
            "aspects": spec.get("aspects"),
            "scheduler": spec.get("scheduler"),
            "scoring": spec.get("scoring"),
            "judging": spec.get("judging") or {"mode": "logprob"},
            "judge": judge,
        },
        "counts": {**counts, "judgments": totals["judgments"], "with_verdict": totals["with_verdict"]},
        "cost": {
            "input_tokens": totals["input_tokens"],
            "output_tokens": totals["output_tokens"],
            "engine_seconds": totals["engine_seconds"],
            "wall_seconds": float(wall_seconds),
        },
        "spearman": spearman.to_pylist(),
        "position_bias": bias.to_pylist(),
        "failures": [{"error": k, "count": v} for k, v in sorted(failures.items(), key=lambda kv: -kv[1])[:20]],
        "distinct_failures": len(failures),
        **(extra or {}),
    }


#: What a character from the data becomes in Markdown: HTML's three specials as entities (no tag, comment or
#: entity of the data survives), Markdown's own inline specials escaped, and a line break a space (a table row is
#: one line). ``_`` is escaped where :func:`escape_markdown` finds it may open or close emphasis.
_MARKDOWN = str.maketrans(
    {
        "&": "&amp;",
        "<": "&lt;",
        ">": "&gt;",
        "\\": "\\\\",
        "`": "\\`",
        "*": "\\*",
        "[": "\\[",
        "]": "\\]",
        "|": "\\|",
        "~": "\\~",
    }
)
_LINE_BREAK = re.compile(r"\r\n?|\n")
#: An underscore that is not between two letters or digits (CommonMark never reads ``a_b`` as emphasis).
_EMPHASIS_UNDERSCORE = re.compile(r"(?<![^\W_])_|_(?![^\W_])")


def escape_markdown(text: object) -> str:
    r"""``text`` (a name, an aspect, a context id, an error from the data) as Markdown that shows it as it is.

    Safe anywhere inline, table cells included: no HTML, link, code span, emphasis or cell border comes from it.

    >>> print(escape_markdown("<script>alert(1)</script> & <img src=x onerror=alert(1)>"))
    &lt;script&gt;alert(1)&lt;/script&gt; &amp; &lt;img src=x onerror=alert(1)&gt;
    >>> print(escape_markdown("[x](javascript:y) `z` *w* ~v~ a|b \\"))
    \[x\](javascript:y) \`z\` \*w\* \~v\~ a\|b \\
    >>> print(escape_markdown("gpt_4 _x_ __init__"), escape_markdown("two\r\nlines\nhere"), sep=" / ")
    gpt_4 \_x\_ \_\_init\_\_ / two lines here
    """
    out = _LINE_BREAK.sub(" ", str(text)).translate(_MARKDOWN)
    return _EMPHASIS_UNDERSCORE.sub(r"\\_", out)


def _fmt(v) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.3f}"
    return str(v)


def render_markdown(report: dict, notice: str | None = None) -> str:
    """The report as Markdown; ``notice`` (the judge engine's, e.g. that the verdicts are simulated) opens it."""
    s = report["settings"]
    c, cost = report["counts"], report["cost"]
    judge = s["judge"]
    lines = [
        f"# pairank report: {escape_markdown(report['name'])}",
        "",
        *([f"> {notice}", ""] if notice else []),
        *(
            [
                "> **Embedded Gemma-3-270M**: a small base model with a strong first-slot bias, fine for demos and "
                "tests; its verdicts say nothing about the candidates' quality, and in the generating modes it "
                "rarely writes a verdict marker (those answers are counted error rows).",
                "",
            ]
            if "embedded default" in str(judge.get("model"))
            else []
        ),
        f"- judge: {judge['engine']} {escape_markdown(judge['model'])} "
        f"revision {escape_markdown(judge.get('revision') or '–')}"
        + "".join(f"; {line}" for line in report.get("judge_choices") or []),
        _judging_line(s.get("judging") or {"mode": "logprob"}, report.get("first_passes"), report.get("pool")),
        *_engines_line(report.get("engines")),
        f"- aspects: {', '.join(map(escape_markdown, s['aspects']))}; scheduler: {s['scheduler']['name']}"
        + (f" (R={s['scheduler']['comparisons']})" if s["scheduler"].get("comparisons") else "")
        + f"; win ratios: {', '.join(s['scoring']['verdicts'])}",
        f"- input: {escape_markdown(s['input'])}",
        "",
        "## Counts and cost",
        "",
        "| contexts | candidates | comparisons | from cache | judged now | with verdict | errors |",
        "|---|---|---|---|---|---|---|",
        f"| {c['contexts']} | {c['candidates']} | {c['requests']} | {c['cached']} | {c['judged_now']} "
        f"| {c['with_verdict']} | {c['judgments'] - c['with_verdict']} |",
        "",
        f"Tokens in/out: {cost['input_tokens']} / {cost['output_tokens']}; engine seconds: "
        f"{cost['engine_seconds']:.1f}; wall seconds: {cost['wall_seconds']:.1f}.",
        "",
        "## Spearman with human scores",
        "",
    ]
    if report["spearman"]:
        lines += ["| aspect | method | level | rho | 95% CI | n |", "|---|---|---|---|---|---|"]
        for r in report["spearman"]:
            ci = f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if r["ci_low"] is not None else "–"
            aspect = escape_markdown(r["aspect"])
            lines.append(f"| {aspect} | {r['method']} | {r['level']} | {_fmt(r['rho'])} | {ci} | {r['n']} |")
    else:
        lines.append("No human scores for these aspects.")
    lines += ["", "## Position bias", "", "| aspect | n | slot A wins | mean p_a |", "|---|---|---|---|"]
    for r in report["position_bias"]:
        aspect = escape_markdown(r["aspect"])
        lines.append(f"| {aspect} | {r['n']} | {_fmt(r['slot_a_win_fraction'])} | {_fmt(r['mean_p_a'])} |")
    lines += judge_bias_lines(report.get("judge_bias"))
    lines += style_control_lines(report.get("style_control"))
    if report.get("fit_sample"):
        f = report["fit_sample"]
        lines += [
            "",
            f"_The length slopes and style control are fitted on a sample of whole contexts, "
            f"{f['sample']} of the {f['comparisons']} comparisons (the same contexts on every run); every "
            "count is over all of them._",
        ]
    lines += _nightly_lines(report.get("nightly"))
    lines += _adaptive_lines(report.get("adaptive"))
    lines += _consistency_lines(report.get("transitivity"), report.get("seeds"))
    lines += winrate_lines(report.get("winrates"), report.get("winrate_judges"))
    lines += ["", "## Failures", ""]
    if report["failures"]:
        lines += ["| error | count |", "|---|---|"] + [
            f"| {escape_markdown(f['error'])} | {f['count']} |" for f in report["failures"]
        ]
    else:
        lines.append("None.")
    return "\n".join(lines) + "\n"


def style_control_lines(sections: list[dict] | None) -> list[str]:
    """The report's Markdown for :func:`pairank.operators.style_control.style_control_section`."""
    if not sections:
        return []
    note = (
        "Strengths with style held equal (Bradley-Terry with length and markdown covariates; "
        "`operators/style_control.py`)."
    )
    lines = ["", "## Style control", "", note]
    for s in sections:
        aspect = escape_markdown(s["aspect"])
        if "not_identified" in s:
            why = escape_markdown(s["not_identified"].split(": ", 1)[-1])
            lines += ["", f"**{aspect}**: not identified ({why})."]
            continue
        lines += ["", f"**{aspect}**", "", "| rank | system | strength | 95% interval |", "|---|---|---|---|"]
        lines += [
            f"| {r['rank']} | {escape_markdown(r['system'])} | {r['strength']:.3f} | [{r['strength_low']:.3f}, "
            f"{r['strength_high']:.3f}] |"
            for r in s["strengths"]
        ]
        coefs = ", ".join(f"{c['feature']} {c['coef']:+.3f} ± {c['se']:.3f}" for c in s["coefficients"])
        lines += ["", f"Style coefficients (logit, ± SE): {coefs}."]
        if s.get("length_controlled"):
            lines += [
                "",
                "| system | vs | win rate | length-controlled | 95% interval | n |",
                "|---|---|---|---|---|---|",
            ]
            lines += [
                f"| {escape_markdown(r['system'])} | {escape_markdown(r['baseline'])} | {r['win_rate']:.3f} | "
                + (
                    "– | – |"
                    if r["lc_win_rate"] is None
                    else f"{r['lc_win_rate']:.3f} | [{r['lc_low']:.3f}, {r['lc_high']:.3f}] |"
                )
                + f" {r['n']} |"
                for r in s["length_controlled"]
            ]
    return lines


def judge_bias_lines(section: dict | None) -> list[str]:
    """The ``judge_bias`` section (:func:`pairank.operators.judge_bias.judge_bias`) as Markdown: three tables."""
    if not section:
        return []
    lines = ["", "## Judge bias", "", JUDGE_BIAS_NOTE]
    for t in text_tables(section):
        lines += ["", f"### {t.title}", ""]
        if not t.rows:
            lines.append(escape_markdown(t.empty))  # may name the judge models
            continue
        lines += [t.note, "", "| " + " | ".join(t.head) + " |", "|" + "---|" * len(t.head)]
        # the first ``t.names`` cells are names from the data, the others numbers formatted here
        lines += [
            "| " + " | ".join(escape_markdown(v) if i < t.names else v for i, v in enumerate(row)) + " |"
            for row in t.rows
        ]
    return lines


def _nightly_lines(nightly: dict | None) -> list[str]:
    """A nightly run's section: the night, its commit, and what it placed per context and aspect."""
    if not nightly:
        return []
    return [
        "",
        f"## Nightly: {nightly['night']} (commit {nightly['commit']})",
        "",
        "| contexts x aspects new | with new outputs | unchanged | rebuilt (judge changed) | outputs placed |",
        "|---|---|---|---|---|",
        f"| {nightly['new']} | {nightly['extended']} | {nightly['unchanged']} | {nightly['rebuilt']} "
        f"| {nightly['new_outputs']} |",
        "",
        f"Tables of the night: {escape_markdown(nightly['attempt'])}.",
    ]


def _engines_line(engines: dict | None) -> list[str]:
    """One line on the engines the pools lost (a killed process, a lost node) and what was judged again.

    With the restarts' times, how long a restarted engine took to judge again (the longest); with the pool's sizes,
    how many actors it had at most and at the end, and how many it stopped when idle:

    >>> _engines_line({"lost": 1, "restarted": 1, "dead": [], "batches_retried": 1, "rows_split": 0, "rows_failed": 0})
    ['- engines lost: 1 (1 restarted, 0 dead); 1 batches judged again, 0 comparisons sent one by one, 0 failed']
    >>> back = [{"slot": 0, "at": 10.0, "judging_at": 12.5}, {"slot": 1, "at": 20.0, "judging_at": None}]
    >>> _engines_line({"lost": 2, "restarted": 2, "restarts": back})[0].split("; ")[:2]
    ['- engines lost: 2 (2 restarted, 0 dead)', 'restarted engines judging again within 2.5 s']
    >>> _engines_line({"lost": 0, "actors_most": 3, "actors_end": 1, "actors_stopped": 2})[0].split("; ")[-1]
    'actors: 3 at most, 1 at the end (2 stopped when idle)'
    >>> _engines_line({"lost": 0, "actors_most": 1, "actors_end": 1, "actors_warm": 1})[0].split("; ")[-1]
    '1 engine up already as the job began (a warm pool)'
    """
    if not engines:
        return []
    dead = len(engines.get("dead", []))
    back = [r["judging_at"] - r["at"] for r in engines.get("restarts", []) if r.get("judging_at") is not None]
    again = f"restarted engines judging again within {max(back):.1f} s; " if back else ""
    line = (
        f"- engines lost: {engines.get('lost', 0)} ({engines.get('restarted', 0)} restarted, {dead} dead); {again}"
        f"{engines.get('batches_retried', 0)} batches judged again, {engines.get('rows_split', 0)} comparisons "
        f"sent one by one, {engines.get('rows_failed', 0)} failed"
    )
    if "actors_most" in engines:
        stopped = engines.get("actors_stopped", 0)
        line += f"; actors: {engines['actors_most']} at most, {engines['actors_end']} at the end" + (
            f" ({stopped} stopped when idle)" if stopped else ""
        )
    if engines.get("actors_warm"):
        warm = engines["actors_warm"]
        line += f"; {warm} engine{'s' * (warm != 1)} up already as the job began (a warm pool)"
    return [line]


def _judging_line(judging: dict, first_passes: dict | None, pool: list | None) -> str:
    """One line: the mode, its prompt variants, first passes reused and run, and engine prompts per judging pass."""
    parts = [f"- judging mode: {judging['mode']}"]
    if judging.get("variants"):
        parts.append(f"prompt variants {', '.join(map(escape_markdown, judging['variants']))}")
    if first_passes:
        fp = first_passes
        parts.append(
            f"{fp['kind']} passes: {fp.get('cached', 0)} from cache, {fp.get('run', 0)} run, "
            f"{fp.get('errors', 0)} failed"
        )
    if pool:
        calls: dict[str, int] = defaultdict(int)
        for actor in pool:
            for judging_pass, n in actor.get("calls", {}).items():
                calls[judging_pass] += n
        parts.append("engine prompts " + ", ".join(f"{k} {v}" for k, v in sorted(calls.items())))
    return "; ".join(parts)


def _adaptive_lines(adaptive: dict | None) -> list[str]:
    if not adaptive:
        return []
    rounds = adaptive["rounds"]
    lines = [
        "",
        "## Adaptive rounds",
        "",
        f"{len(rounds)} rounds over {adaptive['machines']} machines; stopped: {adaptive['stopped']}"
        + (
            f" ({adaptive['unfinished_count']} unfinished, ranked by win ratio only)"
            if adaptive["unfinished_count"]
            else ""
        )
        + f". Judge seconds {adaptive['judge_seconds']:.1f}, driver seconds {adaptive['driver_seconds']:.2f}.",
        *(f"\n{line}." for line in adaptive.get("board_lines", [])),
        "",
        "| round | asked | cached | judged | errors | contexts done | used in all |",
        "|---|---|---|---|---|---|---|",
    ]
    shown = rounds if len(rounds) <= 40 else rounds[:20] + rounds[-20:]
    for r in shown:
        lines.append(
            f"| {r['round']} | {r['requests']} | {r['cache_hits']} | {r['judged']} | {r['errors']} "
            f"| {r['contexts_done']} | {r['asked_total']} |"
        )
    return lines


def _consistency_lines(transitivity: list | None, seeds: list | None) -> list[str]:
    lines: list[str] = []
    if transitivity:
        lines += [
            "",
            "## Transitivity (full matrices)",
            "",
            "| aspect | contexts | triads | intransitive | fraction |",
            "|---|---|---|---|---|",
        ]
        for r in transitivity:
            lines.append(
                f"| {escape_markdown(r['aspect'])} | {r['contexts']} | {r['triads']} | {r['intransitive']} "
                f"| {_fmt(r['fraction'])} |"
            )
    if seeds:
        lines += [
            "",
            "## Spread across seeds",
            "",
            "| aspect | level | seeds | mean rho | standard error |",
            "|---|---|---|---|---|",
        ]
        for r in seeds:
            lines.append(
                f"| {escape_markdown(r['aspect'])} | {r['level']} | {r['n']} | {_fmt(r['mean'])} | {_fmt(r['se'])} |"
            )
    return lines


def winrate_lines(winrates: list | None, judges: list | None) -> list[str]:
    """Markdown of the win-rate rows (WINRATES) and the judges behind them (WINRATE_JUDGES)."""
    if not winrates:
        return []
    lines = [
        "",
        "## Win rates against the baseline",
        "",
        "Class 0 = the system's output is better. `human` is the win rate over human-labelled pairs (the reference); "
        "`observed` is a judge's raw rate; `bwrs` and `dawid_skene` correct it for the judge's accuracies. "
        "Tied swap-and-sum votes are broken by a seeded coin.",
        "",
        "| aspect | system | baseline | method | prior | judge | estimate | mode | interval | pairs | judges | gold "
        "| ties | status |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in winrates:
        ci = f"[{_fmt(r['ci_low'])}, {_fmt(r['ci_high'])}]" if r["ci_low"] is not None else "–"
        lines.append(
            f"| {escape_markdown(r['aspect'])} | {escape_markdown(r['system'])} | {escape_markdown(r['baseline'])} "
            f"| {r['method']} | {r['prior'] or '–'} | {escape_markdown(r['judge'] or '–')} | {_fmt(r['estimate'])} "
            f"| {_fmt(r['mode'])} | {ci} | {r['n_pairs']} "
            f"| {r['n_judges']} | {r['n_gold']} | {r['n_ties']} | {escape_markdown(r['status'])} |"
        )
    if judges:
        lines += [
            "",
            "Judges (q0: agreement where the system truly wins; q1: where the baseline does; a judge below chance "
            "is reported, never inverted):",
            "",
            "| aspect | system | judge | votes | ties | k | q0 (n) | q1 (n) | DS q0 | DS q1 | below chance |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in judges:
            lines.append(
                f"| {escape_markdown(r['aspect'])} | {escape_markdown(r['system'])} | {escape_markdown(r['judge'])} "
                f"| {r['n_votes']} | {r['n_ties']} | {_fmt(r['k'])} "
                f"| {_fmt(r['q0'])} ({r['n_q0']}) | {_fmt(r['q1'])} ({r['n_q1']}) | {_fmt(r['ds_q0'])} "
                f"| {_fmt(r['ds_q1'])} | {'**yes**' if r['below_chance'] else 'no'} |"
            )
    return lines
