"""The leaderboard's style-controlled columns and the page's toggle (issue 18 item 1), on judgments of a judge
that prefers longer outputs (tests/operators/style_world.py)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from pairank.operators.leaderboard import OVERALL, LeaderboardOptions, leaderboard
from pairank.operators.leaderboard_html import render_html
from pairank.operators.leaderboard_style_html import TOGGLE_ID
from pairank.operators.style_control import length_controlled_winrates, style_controlled_bt
from pairank.storage.schemas import LEADERBOARD, STYLE_COLUMNS
from pairank.storage.validation import validate
from tests.browser import render
from tests.operators.rows import judgment
from tests.operators.style_world import rho, world

STYLE = [f.name for f in STYLE_COLUMNS]


@pytest.fixture(scope="module")
def biased():
    """Two aspects judged by a length-biased judge (the verbose systems are the weak ones), each on half of the
    contexts."""
    cands, judged = world(length_bias=1.5, seed=11, contexts=120, markdown=True)
    rows = [
        judgment(
            r["context_id"],
            "helpfulness" if int(r["context_id"][1:]) < 60 else "clarity",
            r["candidate_a"],
            r["candidate_b"],
            r["p_a"],
        )
        for r in judged.to_pylist()
    ]
    judgments = pa.Table.from_pylist(rows)
    board = leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=0, baseline="S2"))
    return judgments, cands, board


def by_aspect(board, aspect: str) -> dict[str, dict]:
    return {r["system"]: r for r in board.table.to_pylist() if r["aspect"] == aspect}


def test_style_columns_are_the_style_controlled_fits_of_each_aspect_and_of_all(biased):
    judgments, cands, board = biased
    validate(board.table, LEADERBOARD, "the board")
    for aspect in ("helpfulness", "clarity", OVERALL):
        mine = judgments if aspect == OVERALL else judgments.filter(pc.equal(judgments.column("aspect"), aspect))
        rows = by_aspect(board, aspect)
        strengths, _ = style_controlled_bt(mine, cands)
        for s in strengths.to_pylist():
            r = rows[s["system"]]
            assert (r["style_strength"], r["style_low"], r["style_high"], r["style_rank"], r["style_status"]) == (
                pytest.approx(s["strength"]),
                pytest.approx(s["strength_low"]),
                pytest.approx(s["strength_high"]),
                s["rank"],
                "ok",
            )
        lc = {x["system"]: x for x in length_controlled_winrates(mine, cands, "S2").to_pylist()}
        assert rows["S2"]["lc_win_rate"] is None  # the baseline itself
        for system, x in lc.items():
            assert (rows[system]["lc_win_rate"], rows[system]["lc_low"], rows[system]["lc_high"]) == (
                pytest.approx(x["lc_win_rate"]),
                pytest.approx(x["lc_low"]),
                pytest.approx(x["lc_high"]),
            )
        # the plain strengths reward verbosity; the style-controlled ones see through it
        assert (
            rho({s: r["strength"] for s, r in rows.items()})
            < 0
            < 0.8
            < rho({s: -r["style_rank"] for s, r in rows.items()})
        )


def test_without_texts_or_with_a_separated_fit_the_columns_are_null_and_say_why(biased):
    judgments, cands, board = biased
    plain = leaderboard(judgments, cands.drop_columns(["text"]), options=LeaderboardOptions(n_boot=0, baseline="S2"))
    assert plain.table.drop_columns(STYLE).equals(board.table.drop_columns(STYLE))  # the rest is unchanged
    assert set(plain.table.column("style_status").to_pylist()) == {"no candidate texts"}
    assert plain.table.column("style_strength").null_count == plain.table.num_rows
    slot_a = judgments.set_column(
        judgments.schema.get_field_index("label"), "label", pa.array(["A"] * judgments.num_rows)
    )  # a judge that always picks slot A
    stuck = leaderboard(slot_a, cands, options=LeaderboardOptions(n_boot=0))
    assert set(stuck.table.column("style_status").to_pylist()) == {"not identified (separated outcomes)"}
    assert stuck.table.column("style_rank").null_count == stuck.table.num_rows


def test_a_board_written_before_the_style_columns_still_validates(biased):
    _, _, board = biased
    former = board.table.drop_columns(STYLE)
    again = validate(former, LEADERBOARD, "leaderboard.parquet")
    assert again.schema.equals(LEADERBOARD) and all(again.column(c).null_count == again.num_rows for c in STYLE)
    assert again.drop_columns(STYLE).equals(former)


def page(board) -> str:
    meta = {"runs": ["r"], "judges": board.judges, "baseline": board.baseline, "counts": board.counts}
    return render_html(board.table, meta)


def test_the_page_offers_the_style_controlled_view_only_where_there_is_one(biased):
    judgments, cands, board = biased
    html = page(board)
    toggle = html.index(f'<input type="checkbox" id="{TOGGLE_ID}"')
    assert toggle < html.index('<div class="raw">') < html.index('<div class="styled">')
    assert html.count('<div class="styled">') == 3 and "<script" not in html  # one per aspect and overall
    assert f"#{TOGGLE_ID}:checked ~ .styled" in html
    # a style-controlled table lists the systems by style rank with their rank without style control
    styled = html.split('<div class="styled">')[1].split("</div>")[0]
    rows = sorted(by_aspect(board, OVERALL).values(), key=lambda r: r["style_rank"])
    positions = [styled.index(f'<td class="name">{r["system"]}</td>') for r in rows]
    assert positions == sorted(positions)
    plain = leaderboard(judgments, cands.drop_columns(["text"]), options=LeaderboardOptions(n_boot=0))
    assert TOGGLE_ID not in page(plain).split("</style>")[1] and 'class="styled"' not in page(plain)


@pytest.mark.browser
def test_the_toggle_switches_the_tables_in_chromium(biased, tmp_path):
    """Chromium draws the page differently with the box ticked (the raw tables hidden, the styled ones shown)."""
    _, _, board = biased
    html = page(board)
    unticked, ticked = tmp_path / "unticked.html", tmp_path / "ticked.html"
    unticked.write_text(html, encoding="utf-8")
    ticked.write_text(html.replace(f'id="{TOGGLE_ID}"', f'id="{TOGGLE_ID}" checked'), encoding="utf-8")
    dom, shot = render(unticked, tmp_path / "a")
    dom_ticked, shot_ticked = render(ticked, tmp_path / "b")
    assert "Style-controlled ranking" in dom and "style-controlled θ" in dom
    assert shot.read_bytes() != shot_ticked.read_bytes()


def intervals(board, aspect: str) -> dict[str, tuple]:
    return {s: (r["style_low"], r["style_high"]) for s, r in by_aspect(board, aspect).items()}


def test_n_boot_reaches_the_style_controlled_intervals(biased):
    """``--n-boot`` (LeaderboardOptions.n_boot) is the bootstrap count of the style-controlled strengths too: 0 is
    the fit's Wald interval (the fixture's board), N refits on resampled contexts a percentile interval that
    another N or seed changes; the point strengths, ranks and LC columns do not move."""
    judgments, cands, wald = biased
    boot = {
        (n, seed): leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=n, seed=seed, baseline="S2"))
        for n, seed in ((30, 0), (60, 0), (30, 1))
    }
    assert wald.intervals["style_strength"].startswith("Wald") and "n_boot 0" in wald.intervals["style_strength"]
    for (n, _), board in boot.items():
        assert board.intervals["style_strength"] == (
            f"bootstrap percentile, 95%, over contexts resampled with replacement ({n} refits)"
        )
    for aspect in ("helpfulness", "clarity", OVERALL):
        w = by_aspect(wald, aspect)
        for board in boot.values():
            b = by_aspect(board, aspect)
            for system, r in w.items():
                kept = ("style_strength", "style_rank", "lc_win_rate", "lc_low", "lc_high")
                assert [b[system][c] for c in kept] == pytest.approx([r[c] for c in kept])
                assert b[system]["style_low"] < b[system]["style_strength"] < b[system]["style_high"]
                # the bootstrap measures the same spread as Wald's, not another scale
                width, wald_width = (x["style_high"] - x["style_low"] for x in (b[system], r))
                assert 0.5 < width / wald_width < 2.0
        assert intervals(wald, aspect) != intervals(boot[30, 0], aspect) != intervals(boot[60, 0], aspect)
        assert intervals(boot[30, 0], aspect) != intervals(boot[30, 1], aspect)
    again = leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=30, seed=0, baseline="S2"))
    assert intervals(again, OVERALL) == intervals(boot[30, 0], OVERALL)  # seeded


def test_n_boot_reaches_the_style_intervals_under_compat_lmarena(biased):
    judgments, cands, _ = biased
    boards = {
        n: leaderboard(judgments, cands, options=LeaderboardOptions(n_boot=n, baseline="S2", compat=("lmarena",)))
        for n in (0, 20)
    }
    assert boards[0].intervals["style_strength"].startswith("sandwich")
    assert boards[20].intervals["style_strength"].startswith("bootstrap percentile, 95%, over battles")
    assert intervals(boards[0], OVERALL) != intervals(boards[20], OVERALL)
    strengths = [{s: r["style_strength"] for s, r in by_aspect(b, OVERALL).items()} for b in boards.values()]
    assert strengths[0] == pytest.approx(strengths[1])
