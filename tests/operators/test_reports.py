"""The run report's Markdown (operators/reports.py): names with markup from the data stay text, rendered as
CommonMark with tables (markdown-it-py) and, for the page test, loaded in headless Chromium."""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pytest
from markdown_it import MarkdownIt

from pairank.operators.judge_bias import judge_bias
from pairank.operators.meta_eval import markdown as meta_eval_markdown
from pairank.operators.reports import (
    build_report,
    escape_markdown,
    judgment_totals,
    position_bias,
    render_markdown,
    winrate_lines,
)
from pairank.operators.style_control import style_control_section
from pairank.storage.schemas import META_EVAL, SPEARMAN, WINRATE_JUDGES, WINRATES
from tests.browser import render
from tests.operators.rows import judgment
from tests.operators.style_world import QUALITY, world

#: The systems of the style world renamed to markup; the first is the win-rate baseline.
NAMES = {
    "S0": "<script>alert(1)</script>",
    "S1": "<img src=x onerror=alert(2)>",
    "S2": "<svg onload=alert(3)>",
    "S3": "<b onmouseover=alert(4)>bold</b>",
    "S4": "a|b `c` *d* _e_ ~f~ [g](javascript:alert(5)) &amp; \\",
    "S5": "plain_name",
}
BASELINE = NAMES["S0"]
ASPECT = "<iframe src=javascript:alert(6)>"
JUDGE_MODEL = NAMES["S1"]  # a judge model that is also a system: the self-preference table names it
ERROR = "boom <script>alert(8)</script>\nsecond | line"
#: Elements that none of the report's own Markdown makes: any of them in the page came from the data.
INJECTED = {"script", "img", "svg", "b", "iframe", "a", "em", "del", "s"}


def commonmark(text: str) -> str:
    """CommonMark (raw HTML allowed, as the spec has it) with GitHub's tables and strikethrough, as a page."""
    body = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(text)
    return f'<!doctype html><html><head><meta charset="utf-8"></head><body>{body}</body></html>'


class Elements(HTMLParser):
    """The elements of a page (tag, attributes), and the text cells of each table row."""

    def __init__(self, page: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "tr":
            self.rows.append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1].append("".join(self._cell).strip())
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)


def hostile_report() -> dict:
    """A run's report whose systems, aspect, judge model, baseline, run name, input and failure carry markup."""
    candidates, judged = world(length_bias=1.0, seed=3, contexts=12)
    renamed = pa.array([NAMES[s] for s in candidates["system"].to_pylist()])
    candidates = candidates.set_column(candidates.schema.get_field_index("system"), "system", renamed)
    rows = [
        {**judgment(r["context_id"], ASPECT, r["candidate_a"], r["candidate_b"], r["p_a"]), "model": JUDGE_MODEL}
        for r in judged.to_pylist()
    ]
    rows.append({**judgment("c0", ASPECT, "c0/S0", "c0/S1", None, error=ERROR), "model": JUDGE_MODEL})
    judgments = pa.Table.from_pylist(rows)
    spearman = pa.Table.from_pylist(
        [{"aspect": ASPECT, "method": "win_ratio", "level": "dataset", "rho": 0.5, "n": 72}], schema=SPEARMAN
    )
    rates = [
        dict.fromkeys(WINRATES.names)
        | {"aspect": ASPECT, "system": NAMES[s], "baseline": BASELINE, "method": "observed", "prior": ""}
        | {"judge": f"{JUDGE_MODEL}@h", "estimate": 0.6, "mass": 0.95, "status": "ok"}
        | {"n_pairs": 12, "n_judges": 1, "n_gold": 0, "n_ties": 0}
        for s in QUALITY
        if s != "S0"
    ]
    judges = [
        dict.fromkeys(WINRATE_JUDGES.names)
        | {"aspect": ASPECT, "system": NAMES[s], "baseline": BASELINE, "judge": f"{JUDGE_MODEL}@h"}
        | {"n_votes": 12, "n_ties": 0, "k": 0.5, "n_q0": 0, "n_q1": 0, "below_chance": False}
        for s in QUALITY
        if s != "S0"
    ]
    spec = {
        "name": "<script>alert(9)</script>",
        "input": "<svg onload=alert(10)>/in_put",
        "aspects": [ASPECT],
        "scheduler": {"name": "full"},
        "scoring": {"verdicts": ["hard"]},
    }
    extra = {
        "judge_bias": judge_bias(judgments, candidates),
        "style_control": style_control_section(judgments, candidates, BASELINE),
        "transitivity": [{"aspect": ASPECT, "contexts": 12, "triads": 240, "intransitive": 3, "fraction": 0.0125}],
        "seeds": [{"aspect": ASPECT, "level": "sample", "n": 3, "mean": 0.4, "se": 0.1}],
        "winrates": rates,
        "winrate_judges": judges,
    }
    judge = {"engine": "replay", "model": JUDGE_MODEL, "revision": "<b onmouseover=alert(11)>r</b>"}
    totals = judgment_totals(judgments)
    counts = {"contexts": 12, "candidates": 72, "requests": judgments.num_rows, "cached": 0, "judged_now": 0}
    return build_report(spec, judge, totals, spearman, position_bias(judgments), counts, 1.0, extra)


def check_markup_stayed_text(page: str) -> None:
    """No element or handler came from the data, and each name with markup is the page's text as it was."""
    found = Elements(page)
    body = found.tags[[t for t, _ in found.tags].index("body") :]
    injected = sorted({t for t, _ in body if t in INJECTED})
    handlers = sorted({k for _, attrs in body for k in attrs if k.startswith("on")})
    assert injected == [] and handlers == [], f"elements {injected} and handlers {handlers} came from the data"
    for name in [*NAMES.values(), ASPECT, JUDGE_MODEL, "<script>alert(9)</script>", "<svg onload=alert(10)>/in_put"]:
        assert html.escape(name, quote=False) in page, f"{name!r} is not text of the page"
    assert html.escape(ERROR.replace("\n", " "), quote=False) in page


def test_a_report_of_names_with_markup_renders_them_as_text():
    report = hostile_report()
    assert report["style_control"][0]["length_controlled"] and report["judge_bias"]["self_preference"]
    check_markup_stayed_text(commonmark(render_markdown(report)))


def test_a_bar_in_a_name_stays_in_its_table_cell():
    report = hostile_report()
    found = Elements(commonmark("\n".join(winrate_lines(report["winrates"], report["winrate_judges"]))))
    assert [len(r) for r in found.rows] == [14] * 6 + [11] * 6  # a header and five rows, for rates and judges
    assert [r[1:3] for r in found.rows[1:6]] == [[NAMES[s], BASELINE] for s in QUALITY if s != "S0"]
    assert [r[2] for r in found.rows[7:]] == [f"{JUDGE_MODEL}@h"] * 5
    failures = Elements(commonmark(render_markdown(report))).rows[-1]
    assert failures == [ERROR.replace("\n", " "), "1"]


def test_the_meta_evaluation_table_escapes_its_names():
    row = dict.fromkeys(META_EVAL.names) | {"subset": "x|<b onclick=y>", "aspect": "a", "judge": NAMES["S4"]}
    row |= {"n_pairs": 4, "n_correct_False": 3, "n_correct_True": 2, "n_correct_both": 2, "n_equal": 3}
    found = Elements(commonmark(meta_eval_markdown(pa.Table.from_pylist([row], schema=META_EVAL))))
    assert [t for t, _ in found.tags if t in INJECTED] == []
    assert found.rows[1][:3] == ["x|<b onclick=y>", "a", NAMES["S4"]] and len(found.rows[1]) == len(found.rows[0])


def test_escape_markdown_of_a_table_cell():
    cell = escape_markdown("a|b\r\nc")
    assert cell == "a\\|b c"
    assert Elements(commonmark(f"| x | y |\n|---|---|\n| {cell} | 1 |\n")).rows == [["x", "y"], ["a|b c", "1"]]


@pytest.mark.browser
def test_a_report_of_names_with_markup_in_headless_chromium(tmp_path: Path):
    page = tmp_path / "report.html"
    page.write_text(commonmark(render_markdown(hostile_report())), encoding="utf-8")
    dom, _ = render(page, tmp_path / "chromium")
    check_markup_stayed_text(dom)
    assert "Win rates against the baseline" in dom and "Style control" in dom and "Judge bias" in dom
