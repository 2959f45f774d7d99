"""The leaderboard operator: Bradley-Terry strengths recovered from simulated judgments, ties,
errors, the regulariser, the seeded bootstrap, carried win rates, and the static page in Chromium."""

from __future__ import annotations

import math
import re

import numpy as np
import pyarrow as pa
import pytest

from pairank.operators.html_plots import strength_text, winrate_text
from pairank.operators.judge_bias import judge_bias
from pairank.operators.leaderboard import (
    OVERALL,
    LeaderboardOptions,
    aspect_rows,
    bt_strengths,
    leaderboard,
)
from pairank.operators.leaderboard_html import render_html
from pairank.storage.schemas import LEADERBOARD, POSITION_BIAS, SPEARMAN, WINRATES
from pairank.storage.validation import TableError, validate
from tests.browser import check_rows_in_dom, check_screenshot, render
from tests.helpers import leaderboard_candidates as candidates
from tests.helpers import leaderboard_judgment as judgment
from tests.helpers import leaderboard_table as table


def simulate(theta: dict[str, float], contexts: int, seed: int, aspect="coherence", context_sd=0.15):
    """Every ordered pair in every context; slot A wins with p = sigmoid(theta_a - theta_b + context effects)."""
    rng = np.random.default_rng(seed)
    systems = sorted(theta)
    rows = []
    ctxs = [f"c{k:03d}" for k in range(contexts)]
    for ctx in ctxs:
        local = {s: theta[s] + rng.normal(0, context_sd) for s in systems}
        for a in systems:
            for b in systems:
                if a != b:
                    p = 1 / (1 + math.exp(local[b] - local[a]))
                    rows.append(judgment(ctx, aspect, f"{ctx}/{a}", f"{ctx}/{b}", "A" if rng.random() < p else "B"))
    return table(rows), candidates(ctxs, systems)


TRUE = {"S1": -1.5, "S2": -0.9, "S3": -0.3, "S4": 0.3, "S5": 0.9, "S6": 1.5}


@pytest.fixture(scope="module")
def simulated():
    judgments, cands = simulate(TRUE, contexts=120, seed=7)
    return judgments, cands, leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=200, seed=3))


def test_recovers_the_order_and_covers_the_true_strengths(simulated):
    _, _, board = simulated
    rows = aspect_rows(board.table, "coherence").to_pylist()
    assert [r["system"] for r in rows] == sorted(TRUE, key=lambda s: -TRUE[s])
    assert [r["rank"] for r in rows] == [1, 2, 3, 4, 5, 6]
    centre = np.mean(list(TRUE.values()))
    covered = [r["strength_low"] <= TRUE[r["system"]] - centre <= r["strength_high"] for r in rows]
    assert sum(covered) >= len(TRUE) - 1, rows
    assert abs(sum(r["strength"] for r in rows)) < 1e-9  # centred
    for r in rows:
        assert r["n_judgments"] == 120 * 10 and r["n_boot"] == 200 and r["n_contexts"] == 120
        assert r["elo"] == pytest.approx(1000 + 400 / math.log(10) * r["strength"])
        assert r["elo_low"] < r["elo"] < r["elo_high"]
        assert r["judges"] == ["simulated@p"] and r["n_judges"] == 1 and r["n_opponents"] == 5
    # one aspect: overall is the same fit
    overall = aspect_rows(board.table, OVERALL).to_pylist()
    assert [r["strength"] for r in overall] == pytest.approx([r["strength"] for r in rows])
    validate(board.table, LEADERBOARD, "the leaderboard")


def test_bootstrap_is_seeded(simulated):
    judgments, cands, board = simulated
    again = leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=200, seed=3))
    other = leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=200, seed=4))
    cols = ["strength_low", "strength_high"]
    assert again.table.select(cols).equals(board.table.select(cols))
    assert not other.table.select(cols).equals(board.table.select(cols))
    assert other.table.column("strength").equals(board.table.column("strength"))


def test_a_tie_counts_half_a_win_to_each_side():
    # x vs y: 3 wins, 1 loss and 2 ties is the same as 4 wins and 2 losses.
    with_ties = ["A", "A", "A", "B", "tie", "tie"]
    plain = ["A", "A", "A", "A", "B", "B"]
    cands = candidates(["c"], ["x", "y"])

    def fit(labels, prior):
        rows = [judgment("c", "coherence", "c/x", "c/y", lab, i=i) for i, lab in enumerate(labels)]
        board = leaderboard(table(rows), cands, options=LeaderboardOptions(n_boot=0, prior_ties=prior))
        return {r["system"]: r for r in aspect_rows(board.table, "coherence").to_pylist()}

    a, b = fit(with_ties, 1.0), fit(plain, 1.0)
    assert a["x"]["strength"] == pytest.approx(b["x"]["strength"])
    exact = fit(with_ties, 0.0)  # no prior: the MLE, theta_x - theta_y = ln(4 / 2)
    assert exact["x"]["strength"] - exact["y"]["strength"] == pytest.approx(math.log(4 / 2))
    assert exact["x"]["strength"] == pytest.approx(fit(plain, 0.0)["x"]["strength"])
    assert 0 < a["x"]["strength"] - a["y"]["strength"] < math.log(2)  # the virtual ties shrink it a little
    assert (a["x"]["n_wins"], a["x"]["n_losses"], a["x"]["n_ties"]) == (3, 1, 2)
    assert (a["y"]["n_wins"], a["y"]["n_losses"], a["y"]["n_ties"]) == (1, 3, 2)
    assert a["x"]["win_ratio"] == pytest.approx(4 / 6) and a["y"]["win_ratio"] == pytest.approx(2 / 6)
    assert a["x"]["strength_low"] is None and a["x"]["n_boot"] == 0


def test_error_rows_are_skipped_and_counted(simulated):
    judgments, cands, _ = simulated
    errors = [
        judgment("c000", "coherence", "c000/S1", f"c000/{s}", None, error="engine died", i=9)
        for s in ("S2", "S3", "S3")
    ]
    errors = [{**e, "key": f"err{i}"} for i, e in enumerate(errors)]
    both = pa.concat_tables([judgments, table(errors)])
    opts = LeaderboardOptions(n_boot=20, seed=1)
    clean = leaderboard(judgments, cands, options=opts)
    board = leaderboard(both, cands, options=opts)
    assert board.counts["coherence"]["errors"] == 3 and board.counts[OVERALL]["errors"] == 3
    assert board.counts["coherence"]["used"] == judgments.num_rows
    errs = {r["system"]: r["n_errors"] for r in aspect_rows(board.table, "coherence").to_pylist()}
    assert errs == {"S1": 3, "S2": 1, "S3": 2, "S4": 0, "S5": 0, "S6": 0}
    for col in ("strength", "strength_low", "strength_high", "n_judgments", "win_ratio"):
        assert board.table.column(col).equals(clean.table.column(col))


def test_a_system_that_always_wins_stays_finite_and_ranks_first():
    systems = ["best", "m1", "m2", "m3"]
    rows, rng = [], np.random.default_rng(0)
    for k in range(30):
        ctx = f"c{k}"
        for a in systems:
            for b in systems:
                if a == b:
                    continue
                label = "A" if a == "best" else "B" if b == "best" else rng.choice(["A", "B", "tie"])
                rows.append(judgment(ctx, "fluency", f"{ctx}/{a}", f"{ctx}/{b}", label))
    board = leaderboard(
        table(rows), candidates([f"c{k}" for k in range(30)], systems), options=LeaderboardOptions(n_boot=50)
    )
    top = aspect_rows(board.table, "fluency").to_pylist()[0]
    assert top["system"] == "best" and top["win_ratio"] == 1.0 and top["rank"] == 1
    assert all(math.isfinite(top[c]) for c in ("strength", "strength_low", "strength_high", "elo"))
    assert 2 < top["strength"] < 10
    with pytest.raises(ValueError, match="prior_ties"):  # the plain MLE has no answer here
        bt_strengths(np.array([[0.0, 5.0], [0.0, 0.0]]), prior_ties=0)


def test_aspects_pool_into_overall_and_same_system_pairs_are_skipped():
    cands = candidates(["c1", "c2"], ["x", "y", "z"])
    extra = pa.Table.from_pylist(
        [{"context_id": "c1", "context": "doc", "candidate_id": "c1/x2", "system": "x", "text": "t"}]
    )
    cands = pa.concat_tables([cands, extra])
    rows = [
        judgment(c, asp, f"{c}/{a}", f"{c}/{b}", lab, i=i)
        for i, (c, asp, a, b, lab) in enumerate(
            [
                ("c1", "coherence", "x", "y", "A"),
                ("c1", "coherence", "y", "z", "A"),
                ("c2", "fluency", "z", "x", "tie"),
                ("c2", "fluency", "y", "x", "B"),
                ("c1", "fluency", "x", "x2", "A"),  # two candidates of system x: says nothing about systems
            ]
        )
    ]
    board = leaderboard(table(rows), cands, options=LeaderboardOptions(n_boot=10))
    assert board.counts["fluency"]["same_system"] == 1 and board.counts[OVERALL]["same_system"] == 1
    per = {(r["aspect"], r["system"]): r for r in board.table.to_pylist()}
    assert (
        per[(OVERALL, "x")]["n_judgments"]
        == per[("coherence", "x")]["n_judgments"] + per[("fluency", "x")]["n_judgments"]
        == 3
    )
    assert board.table.column("aspect").to_pylist()[:3] == [OVERALL] * 3
    assert sorted({a for a, _ in per}) == ["coherence", "fluency", OVERALL]


def test_a_candidate_missing_from_the_candidates_is_an_error():
    rows = [judgment("c1", "coherence", "c1/x", "c1/ghost", "A")]
    with pytest.raises(ValueError, match="candidate_b 'c1/ghost' is not in the candidates table"):
        leaderboard(table(rows), candidates(["c1"], ["x", "y"]))


def winrate_row(aspect, system, method, estimate, low=None, high=None, judge="*", status="ok", baseline="S1"):
    return {
        "aspect": aspect,
        "system": system,
        "baseline": baseline,
        "method": method,
        "prior": "in_dist",
        "judge": judge,
        "estimate": estimate,
        "mode": estimate,
        "ci_low": low,
        "ci_high": high,
        "mass": 0.95,
        "n_pairs": 120,
        "n_judges": 1,
        "n_gold": 10,
        "n_ties": 0,
        "draws_kept": None,
        "draws_dropped": None,
        "rhat": None,
        "ess_bulk": None,
        "status": status,
    }


def winrates_table() -> pa.Table:
    rows = [
        winrate_row("coherence", "S2", "dawid_skene", None, status="refused: r_hat 1.2 > 1.01"),
        winrate_row("coherence", "S2", "bwrs", 0.41, 0.30, 0.52),
        winrate_row("coherence", "S2", "observed", 0.44, 0.35, 0.53),
        winrate_row("coherence", "S3", "dawid_skene", 0.61, 0.52, 0.70),
        winrate_row("coherence", "S3", "bwrs", 0.60, 0.50, 0.69),
        winrate_row("coherence", "S4", "observed", 0.71, 0.60, 0.80, judge="simulated@p"),  # one judge's: not pooled
        winrate_row("coherence", "S4", "observed", 0.70, 0.62, 0.78),
    ]
    return validate(pa.Table.from_pylist(rows), WINRATES, "winrates")


def test_win_rates_are_carried_not_recomputed(simulated):
    judgments, cands, _ = simulated
    board = leaderboard(judgments, cands, winrates_table(), LeaderboardOptions(n_boot=0))
    per = {(r["aspect"], r["system"]): r for r in board.table.to_pylist()}
    assert board.baseline == "S1"
    s2, s3, s4 = (per[("coherence", s)] for s in ("S2", "S3", "S4"))
    assert (s2["winrate_method"], s2["winrate_estimate"], s2["winrate_low"], s2["winrate_high"]) == (
        "bwrs",
        0.41,
        0.30,
        0.52,
    )
    assert (s3["winrate_method"], s3["winrate_estimate"]) == ("dawid_skene", 0.61)
    assert (s4["winrate_method"], s4["winrate_estimate"], s4["winrate_n_pairs"]) == ("observed", 0.70, 120)
    assert per[("coherence", "S1")]["winrate_status"] == "baseline"
    assert per[("coherence", "S5")]["winrate_estimate"] is None and per[("coherence", "S5")]["winrate_baseline"] == "S1"
    assert per[(OVERALL, "S2")]["winrate_estimate"] is None
    only_observed = leaderboard(
        judgments, cands, winrates_table(), LeaderboardOptions(n_boot=0, winrate_methods=("observed",))
    )
    assert aspect_rows(only_observed.table, "coherence").to_pylist()[4]["winrate_method"] == "observed"
    two = pa.concat_tables(
        [
            winrates_table(),
            validate(
                pa.Table.from_pylist([winrate_row("coherence", "S3", "observed", 0.5, baseline="S2")]), WINRATES, "w"
            ),
        ]
    )
    with pytest.raises(ValueError, match="several baselines"):
        leaderboard(judgments, cands, two, LeaderboardOptions(n_boot=0))
    assert leaderboard(judgments, cands, two, LeaderboardOptions(n_boot=0, baseline="S2")).baseline == "S2"


def test_leaderboard_schema_rejects_bad_values(simulated):
    _, _, board = simulated
    rows = board.table.to_pylist()
    rows[2]["win_ratio"] = 1.5
    with pytest.raises(TableError, match=r"column `win_ratio` in lb.parquet row 2: expected a value in \[0, 1\]"):
        validate(pa.Table.from_pylist(rows, schema=LEADERBOARD), LEADERBOARD, "lb.parquet")
    rows = board.table.to_pylist()
    rows[1]["system"] = rows[0]["system"]
    with pytest.raises(TableError, match="one row per"):
        validate(pa.Table.from_pylist(rows, schema=LEADERBOARD), LEADERBOARD, "lb.parquet")
    for f in LEADERBOARD:
        assert f.metadata and f.metadata[b"description"], f.name


def test_options_are_checked():
    with pytest.raises(ValueError, match="mass"):
        LeaderboardOptions(mass=1.5)
    with pytest.raises(ValueError, match="winrate_methods"):
        LeaderboardOptions(winrate_methods=("magic",))


NASTY = '<script>alert("x")</script>&M'
#: A system named like the judge model ("simulated"), so the page has a self-preference row.
SELF = "org/Simulated"


def page_inputs(simulated):
    judgments, cands, _ = simulated
    sysmap = {"S6": NASTY, "S5": SELF}
    cands = cands.set_column(3, "system", pa.array([sysmap.get(s, s) for s in cands.column("system").to_pylist()]))
    board = leaderboard(judgments, cands, winrates_table(), LeaderboardOptions(n_boot=50))
    bias = pa.Table.from_pylist(
        [{"run": "night-1", "aspect": "coherence", "n": 3600, "slot_a_win_fraction": 0.56, "mean_p_a": 0.55}]
    )
    spear = pa.Table.from_pylist(
        [
            {
                "run": "night-1",
                "aspect": "coherence",
                "method": "win_ratio_hard",
                "level": "sample",
                "rho": 0.62,
                "ci_low": 0.48,
                "ci_high": 0.74,
                "n": 120,
            }
        ]
    )
    validate(bias.drop_columns(["run"]), POSITION_BIAS, "bias")
    validate(spear.drop_columns(["run"]), SPEARMAN, "spearman")
    meta = {
        "generated_at": "2026-01-01T00:00:00+00:00",
        "runs": ["night-1"],
        "judges": board.judges,
        "n_boot": 50,
        "seed": 0,
        "baseline": board.baseline,
        "counts": board.counts,
        "prior_ties": 1.0,
        "judge_bias": judge_bias(judgments, cands),
    }
    return board, render_html(board.table, meta, bias, spear), meta


def test_page_is_self_contained_and_escaped(simulated):
    board, page, meta = page_inputs(simulated)
    assert "<script" not in page and "&lt;script&gt;" in page
    for bad in ("<link", "src=", "url(", "@import", "<iframe", "https://"):
        assert bad not in page, bad
    # strengths (overall, coherence), win rates, position bias, judge bias (length, flips), Spearman
    assert page.count("<svg") == 2 + 1 + 1 + 2 + 1
    assert "<h2>Judge bias</h2>" in page and "Not applicable" not in page
    # S5, named like the judge model, is the one self-preference row: its comparisons and wins (no ties here)
    # are the board's, and no other judge model judged it
    [own] = meta["judge_bias"]["self_preference"]
    [s5] = [r for r in board.table.to_pylist() if r["system"] == SELF and r["aspect"] == "coherence"]
    assert (own["system"], own["judge_model"], own["others_n"]) == (SELF, "simulated", 0)
    assert (own["n"], own["wins"]) == (s5["n_judgments"], s5["n_wins"]) and own["n"] == 120 * 5 * 2
    assert f"<td>{own['n']}</td>" in page and "org/Simulated" in page
    for r in board.table.to_pylist():
        assert strength_text(r) in page
        if r["winrate_estimate"] is not None:
            assert winrate_text(r) in page


@pytest.mark.browser
def test_page_renders_in_headless_chromium(simulated, tmp_path):
    board, page, _ = page_inputs(simulated)
    index = tmp_path / "index.html"
    index.write_text(page, encoding="utf-8")
    dom, shot = render(index, tmp_path / "chromium")
    check_rows_in_dom(dom, board.table.to_pylist())
    assert "<script" not in dom.split("</head>")[-1]  # the nasty system name stayed text
    assert "Position bias" in dom and "Spearman against human scores" in dom and "Win rates against S1" in dom
    assert "Judge bias" in dom and "Flips when the slots swap" in dom
    check_screenshot(shot)


HISTORY = LEADERBOARD.append(pa.field("night", pa.string())).append(pa.field("seq", pa.int64()))
#: (seq, night, system, rank, strength, interval half-width or None); C has no interval on night 2.
NIGHTS = [
    (1, "2026-11-20", "A", 1, 0.4, 0.2),
    (1, "2026-11-20", "B", 2, 0.0, 0.2),
    (1, "2026-11-20", "C", 3, -0.4, 0.2),
    (2, "2026-11-21", "D", 1, 0.9, 0.3),
    (2, "2026-11-21", "B", 2, 0.1, 0.2),
    (2, "2026-11-21", "A", 3, -0.2, 0.2),
    (2, "2026-11-21", "C", 4, -0.8, None),
]


def history_table(nights=NIGHTS, aspects=(OVERALL, "coherence")) -> pa.Table:
    rows = []
    for aspect in aspects:
        for seq, night, system, rank, strength, half in nights:
            row = {f.name: None for f in HISTORY}
            low, high = (None, None) if half is None else (strength - half, strength + half)
            row.update(
                aspect=aspect,
                system=system,
                rank=rank,
                strength=strength,
                strength_low=low,
                strength_high=high,
                elo=1000 + 400 / math.log(10) * strength,
                mass=0.95,
                n_boot=50,
                win_ratio=0.5,
                n_judgments=10,
                n_wins=5,
                n_losses=5,
                n_ties=0,
                n_errors=0,
                n_contexts=5,
                n_opponents=2,
                n_judges=1,
                judges=["simulated@p"],
                night=night,
                seq=seq,
            )
            rows.append(row)
    return pa.Table.from_pylist(rows, schema=HISTORY)


def latest_board(history: pa.Table) -> pa.Table:
    last = max(history.column("seq").to_pylist())
    rows = [r for r in history.to_pylist() if r["seq"] == last]
    return validate(pa.Table.from_pylist(rows, schema=HISTORY).select(LEADERBOARD.names), LEADERBOARD, "board")


def history_parts(page: str) -> tuple[list[str], list[str], list[str]]:
    """The history SVGs, legends and tables of a page, in page order."""
    section = page.split("<h2>History</h2>", 1)[1]
    svgs = re.findall(r'<svg[^>]*class="history".*?</svg>', section, re.S)
    legends = re.findall(r'<ul class="legend">(.*?)</ul>', section, re.S)
    tables = re.findall(r'<table class="history">(.*?)</table>', section, re.S)
    return svgs, legends, tables


def table_cells(table_html: str) -> tuple[list[str], dict[str, list[str]]]:
    """A history table's header (nights) and its cells per system."""
    head = re.findall(r"<th[^>]*>(.*?)</th>", table_html)
    rows = [re.findall(r"<td[^>]*>(.*?)</td>", tr) for tr in re.findall(r"<tr>(.*?)</tr>", table_html)]
    return head[1:], {cells[0]: cells[1:] for cells in rows if cells}


def test_history_section_charts_every_night_and_system():
    history = history_table()
    page = render_html(latest_board(history), {"runs": ["night-2"]}, history=history)
    assert page.index("<h2>Strengths</h2>") < page.index("<h2>History</h2>")
    svgs, legends, tables = history_parts(page)
    assert len(svgs) == len(legends) == len(tables) == 2
    assert 'aria-label="overall: strength θ per night"' in svgs[0] and 'aria-label="coherence:' in svgs[1]
    per_aspect = len(NIGHTS)
    for svg, legend, tab in zip(svgs, legends, tables):
        assert 'role="img"' in svg
        assert svg.count("<circle") == per_aspect
        assert svg.count('class="whisker"') == per_aspect - 1  # C on night 2 has no interval
        assert svg.count("<polyline") == 3  # A, B and C have two nights; D only one
        assert svg.count("<g><title>") == per_aspect
        nights, cells = table_cells(tab)
        assert nights == ["2026-11-20", "2026-11-21"]
        assert list(cells) == ["D", "B", "A", "C"]  # by rank on the latest night
        assert re.findall(r"</span>(.*?)</li>", legend) == ["D", "B", "A", "C"]
        assert cells["D"] == ["", "1 (+0.900)"]  # not ranked on night 1: an empty cell
        assert cells["A"] == ["1 (+0.400)", "3 (-0.200)"]
        assert cells["C"] == ["3 (-0.400)", "4 (-0.800)"]
    colours = [re.findall(r"background: (#[0-9a-f]{6})", legend) for legend in legends]
    assert colours[0] == colours[1] and len(set(colours[0])) == 4  # distinct, and the same on every chart
    d_night_2 = next(r for r in history.to_pylist() if r["system"] == "D" and r["aspect"] == OVERALL)
    assert f"<title>D (overall) 2026-11-21: θ {strength_text(d_night_2)}</title>" in svgs[0]


def test_page_without_history_has_no_history_section():
    history = history_table()
    board = latest_board(history)
    for page in (render_html(board, {}), render_html(board, {}, history=history.slice(0, 0))):
        assert "History" not in page and 'class="history"' not in page and 'class="legend"' not in page
    assert "<h2>History</h2>" in render_html(board, {}, history=history)


def test_history_of_one_night_has_dots_only_and_escapes_its_labels():
    one = [(1, '<script>alert("n")</script>', s, rank, theta, half) for _, _, s, rank, theta, half in NIGHTS[:3]]
    history = history_table(one, aspects=(OVERALL,))
    page = render_html(latest_board(history), {}, history=history)
    assert "<script" not in page and "&lt;script&gt;alert(&quot;n&quot;)&lt;/script&gt;" in page
    (svg,), _, (tab,) = history_parts(page)
    assert svg.count("<circle") == 3 and "<polyline" not in svg
    nights, cells = table_cells(tab)
    assert nights == ["&lt;script&gt;alert(&quot;n&quot;)&lt;/script&gt;"] and list(cells) == ["A", "B", "C"]


def test_history_with_two_labels_for_one_night_is_an_error():
    history = history_table([(1, "2026-11-20", "A", 1, 0.1, None), (1, "2026-11-21", "B", 2, -0.1, None)])
    with pytest.raises(ValueError, match=r"history row 1: night: expected '2026-11-20' \(seq 1\)"):
        render_html(latest_board(history), {}, history=history)


def test_history_line_breaks_where_a_system_is_absent():
    gap = [
        (1, "n1", "A", 1, 0.1, None),
        (1, "n1", "B", 2, -0.1, None),
        (2, "n2", "B", 1, 0.0, None),
        (3, "n3", "A", 1, 0.2, None),
        (3, "n3", "B", 2, -0.2, None),
    ]
    history = history_table(gap, aspects=("coherence",))
    (svg,), _, (tab,) = history_parts(render_html(latest_board(history), {}, history=history))
    assert svg.count("<polyline") == 1 and svg.count("<circle") == 5  # B's line only: A misses night n2
    assert table_cells(tab)[1]["A"] == ["1 (+0.100)", "", "1 (+0.200)"]
