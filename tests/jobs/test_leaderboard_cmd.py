"""`pairank leaderboard` over real runs: a static job with the SIMULATED judge on local Ray,
then the leaderboard files under the storage root (local and S3) and the page in Chromium."""

from __future__ import annotations

import json
import uuid

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main
from pairank.jobs.leaderboard import build_leaderboard
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.operators.leaderboard import OVERALL
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import LEADERBOARD
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.validation import validate
from tests.browser import check_rows_in_dom, check_screenshot, render
from tests.helpers import ROOT, write_input

PROMPTS = str(ROOT / "configs/prompts/summarization")
SYSTEMS = ["M0", "M1", "M10", "M11", "M12"]  # the first 5 summaries of each SummEval article, by id


def spec_for(input_folder, output, **over) -> dict:
    spec = {
        "name": "night-1",
        "input": input_folder.uri,
        "output": str(output),
        "aspects": ["coherence", "fluency"],
        "prompts": PROMPTS,
        "judge": {
            "engine": "simulated",
            "seed": 5,
            "quality": input_folder.join("human_scores.parquet").uri,
            "scale": 2.0,
            "noise": 0.5,
            "position_bias": 0.3,
        },
        "scheduler": {"name": "full"},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 64},
        "report": {"bootstrap": 50},
        "winrate": {
            "baseline": "M0",
            "methods": ["observed", "bwrs"],
            "prior": "in_dist",
            "gold_fraction": 0.5,
            "draws": 1000,
        },
        "flush_rows": 256,
    }
    for key, value in over.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


@pytest.fixture(scope="module")
def small_input(tmp_path_factory, summeval_tables):
    return write_input(tmp_path_factory.mktemp("lb") / "input", summeval_tables, 8, 5)


@pytest.mark.browser
def test_leaderboard_of_a_simulated_run(tmp_path, small_input, ray_local, capsys):
    out = tmp_path / "store"
    result = run_job(parse_spec(spec_for(small_input, out), "test"), progress=lambda m: None)
    assert result.errors == 0 and result.judged > 0
    # the run report's judge bias: a full matrix judges every pair in both orders; no system is named "simulated"
    bias = result.report["judge_bias"]
    assert [(r["aspect"], r["n_pairs"]) for r in bias["flips"]] == [("coherence", 8 * 10), ("fluency", 8 * 10)]
    assert [r["aspect"] for r in bias["length"]] == ["coherence", "fluency"] and bias["self_preference"] == []
    assert "## Judge bias" in result.layout.report_md.read_text()

    assert main(["leaderboard", "--root", str(out), "--n-boot", "60", "--seed", "2"]) == 0
    folder = out / "leaderboard"
    assert capsys.readouterr().out.strip() == str(folder / "index.html")
    table = validate(pq.read_table(folder / "leaderboard.parquet"), LEADERBOARD, "leaderboard.parquet")
    rows = table.to_pylist()
    rates = pq.read_table(out / "runs/night-1/winrates.parquet").to_pylist()
    for aspect in (OVERALL, "coherence", "fluency"):
        mine = [r for r in rows if r["aspect"] == aspect]
        assert sorted(r["system"] for r in mine) == SYSTEMS
        assert sorted(r["rank"] for r in mine)[0] == 1
        for r in mine:
            assert r["strength_low"] <= r["strength_high"] and r["n_boot"] == 60
            # a judge is model x prompt, and each aspect has its own prompt: overall has both aspects' judges
            assert r["n_judges"] == (2 if aspect == OVERALL else 1) == len(r["judges"])
            assert r["n_judgments"] > 0 and all(j.startswith("simulated@") for j in r["judges"])
            assert r["winrate_baseline"] == "M0"
            if aspect != OVERALL and r["system"] != "M0":  # carried: bwrs where it has an estimate, else observed
                pooled = {
                    w["method"]: w
                    for w in rates
                    if w["estimate"] is not None
                    and (w["aspect"], w["system"], w["judge"]) == (aspect, r["system"], "*")
                }
                want = pooled.get("bwrs") or pooled["observed"]
                assert (r["winrate_method"], r["winrate_estimate"]) == (want["method"], want["estimate"])
                assert r["winrate_low"] <= r["winrate_estimate"] <= r["winrate_high"]
    over = {r["system"]: r["n_judgments"] for r in rows if r["aspect"] == OVERALL}
    for s in SYSTEMS:
        assert over[s] == sum(r["n_judgments"] for r in rows if r["system"] == s and r["aspect"] != OVERALL)

    meta = json.loads((folder / "leaderboard.json").read_text())
    assert meta["runs"] == ["night-1"] and meta["n_boot"] == 60 and meta["seed"] == 2
    assert meta["baseline"] == "M0" and meta["judges"] and meta["generated_at"]
    assert meta["judgments"]["used"] == len(JudgmentCache(RunLayout.of(str(out), "x").judgments).read())
    assert len(meta["rows"]) == len(rows)
    assert meta["judge_bias"]["flips"] == bias["flips"]  # the board's judgments are the run's
    assert sorted(meta["quality"]) == ["coherence", "fluency", OVERALL] and "categories" not in meta
    assert [r["reference"] for r in meta["quality"]["coherence"]["references"]] == ["human scores"]
    assert not [p for p in folder.iterdir() if p.name.startswith(".")]  # no temporary files left

    dom, shot = render(folder / "index.html", tmp_path / "chromium")
    check_rows_in_dom(dom, rows)
    assert "Position bias" in dom and "Spearman against human scores" in dom and "Judge bias" in dom
    assert "<h2>Quality</h2>" in dom
    check_screenshot(shot)


@pytest.mark.s3
def test_leaderboard_under_an_s3_root(tmp_path, small_input, ray_local):
    root = f"s3://pairank/lb-{uuid.uuid4().hex[:8]}"
    spec = spec_for(small_input, root, name="s3-night", aspects=["coherence"], winrate=None, subset={"contexts": 4})
    run_job(parse_spec(spec, "test"), progress=lambda m: None)
    result = build_leaderboard(root, n_boot=20)
    assert result.table.uri == f"{root}/leaderboard/leaderboard.parquet"
    table = validate(Location.of(result.table.uri).read_parquet(), LEADERBOARD, result.table.uri)
    assert sorted(set(table.column("system").to_pylist())) == SYSTEMS
    assert set(table.column("aspect").to_pylist()) == {OVERALL, "coherence"}
    assert all(r["n_contexts"] == 4 for r in table.to_pylist())  # the run's subset
    assert Location.of(result.json.uri).read_json()["runs"] == ["s3-night"]
    assert "<svg" in Location.of(result.html.uri).read_text()


# --- errors, on hand-made roots (no Ray) -------------------------------------------------------------


def fake_run(root: Location, name: str, input_folder: Location, aspects=("coherence",)) -> None:
    RunLayout(root, name).manifest.write_json(
        {
            "name": name,
            "state": "done",
            "started_at": "2026-01-01T00:00:00+00:00",
            "spec": {"input": input_folder.uri, "aspects": list(aspects), "subset": {}},
        }
    )


def test_no_runs_under_the_root(tmp_path, capsys):
    assert main(["leaderboard", "--root", str(tmp_path / "empty")]) == 2
    err = capsys.readouterr().err
    assert "no runs under the storage root" in err and "pairank run" in err


def test_a_run_without_manifest(tmp_path, small_input, capsys):
    root = Location.of(str(tmp_path / "store"))
    fake_run(root, "good", small_input)
    (tmp_path / "store/runs/broken").mkdir(parents=True)
    assert main(["leaderboard", "--root", root.uri]) == 2
    err = capsys.readouterr().err
    assert "runs/broken/manifest.json: run 'broken' has no manifest.json" in err
    assert main(["leaderboard", "--root", root.uri, "--runs", "nope"]) == 2
    assert "runs ['nope'] are not under" in capsys.readouterr().err


def test_a_judged_candidate_missing_from_the_inputs(tmp_path, small_input, capsys):
    from tests.helpers import leaderboard_judgment as judgment
    from tests.helpers import leaderboard_table as table

    root = Location.of(str(tmp_path / "store"))
    fake_run(root, "night-1", small_input)
    ctx = small_input.join("candidates.parquet").read_parquet().column("context_id")[0].as_py()
    rows = [
        judgment(ctx, "coherence", f"{ctx}/M0", f"{ctx}/M1", "A"),
        judgment(ctx, "coherence", f"{ctx}/M0", f"{ctx}/M99", "B"),
    ]
    JudgmentCache(RunLayout(root, "").judgments).append(table(rows))
    assert main(["leaderboard", "--root", root.uri]) == 2
    err = capsys.readouterr().err
    assert f"candidate_b '{ctx}/M99' is not in the candidates of the runs' inputs" in err and small_input.uri in err


def test_the_json_and_table_agree_on_a_hand_made_root(tmp_path, small_input):
    from tests.helpers import leaderboard_judgment as judgment
    from tests.helpers import leaderboard_table as table

    root = Location.of(str(tmp_path / "store"))
    fake_run(root, "night-1", small_input, aspects=("coherence",))
    cands = small_input.join("candidates.parquet").read_parquet()
    ctxs = sorted(set(cands.column("context_id").to_pylist()))
    rows = [
        judgment(c, "coherence", f"{c}/{a}", f"{c}/{b}", "A" if a < b else "tie", i=0)
        for c in ctxs
        for a in SYSTEMS
        for b in SYSTEMS
        if a != b
    ]
    rows += [judgment(ctxs[0], "relevance", f"{ctxs[0]}/M0", f"{ctxs[0]}/M1", "A")]  # not an aspect of the run
    JudgmentCache(RunLayout(root, "").judgments).append(table(rows))
    result = build_leaderboard(root.uri, n_boot=10, seed=1)
    assert result.meta["judgments"]["used"] == len(rows) - 1
    saved = pa.Table.from_pylist(
        json.loads((tmp_path / "store/leaderboard/leaderboard.json").read_text())["rows"], schema=LEADERBOARD
    )
    assert saved.equals(pq.read_table(tmp_path / "store/leaderboard/leaderboard.parquet"))
    assert [r["system"] for r in saved.to_pylist() if r["aspect"] == "coherence"] == SYSTEMS  # "M0" beats all


# --- quality figures and category boards, on hand-made roots judged by the SIMULATED judge in-process -------

ASPECTS = ("coherence", "fluency")
#: The category of each of the 8 contexts, in id order: 4 news, 3 science, and one without a category.
CATEGORIES = ["news"] * 4 + ["science"] * 3 + [None]


def categorised_input(folder, summeval_tables, contexts=None) -> Location:
    """8 SummEval articles x 5 summaries with a category per article (only ``contexts`` of them, when given)."""
    out = write_input(folder, summeval_tables, 8, 5)
    cands = out.join("candidates.parquet").read_parquet()
    ids = cands.column("context_id").to_pylist()
    category = dict(zip(sorted(set(ids)), CATEGORIES))
    cands = cands.append_column("category", pa.array([category[c] for c in ids], type=pa.string()))
    if contexts is not None:
        cands = cands.filter(pc.is_in(cands.column("context_id"), pa.array(sorted(contexts))))
        human = out.join("human_scores.parquet").read_parquet()
        out.join("human_scores.parquet").write_parquet(
            human.filter(pc.is_in(human.column("candidate_id"), cands.column("candidate_id")))
        )
    out.join("candidates.parquet").write_parquet(cands)
    return out


def simulated_judgments(input_folder: Location) -> pa.Table:
    """Every ordered pair of every context and aspect, judged by the SIMULATED judge in this process."""
    from pairank.judges.engines.simulated import SimulatedJudgeSpec
    from pairank.judges.engines.simulated_judge import SimulatedJudge

    cands = input_folder.join("candidates.parquet").read_parquet().to_pylist()
    requests = [
        {
            "key": f"{a['context_id']}|{aspect}|{a['candidate_id']}|{b['candidate_id']}",
            "context_id": a["context_id"],
            "aspect": aspect,
            "candidate_a": a["candidate_id"],
            "candidate_b": b["candidate_id"],
            "prompt_hash": "h",
        }
        for aspect in ASPECTS
        for a in cands
        for b in cands
        if a["context_id"] == b["context_id"] and a["candidate_id"] != b["candidate_id"]
    ]
    spec = SimulatedJudgeSpec(
        seed=5, quality=input_folder.join("human_scores.parquet").uri, scale=2.0, noise=0.5, position_bias=0.3
    )
    return SimulatedJudge(spec).judge(pa.Table.from_pylist(requests))


def judged_root(root: Location, name: str, input_folder: Location, judgments: pa.Table) -> Location:
    fake_run(root, name, input_folder, aspects=ASPECTS)
    JudgmentCache(RunLayout(root, "").judgments).append(judgments)
    return root


@pytest.fixture(scope="module")
def category_roots(tmp_path_factory, summeval_tables):
    """A root whose run has every context, and one whose run has the news contexts only; the same judgments."""
    base = tmp_path_factory.mktemp("categories")
    full = categorised_input(base / "input", summeval_tables)
    ctxs = sorted(set(full.join("candidates.parquet").read_parquet().column("context_id").to_pylist()))
    news = categorised_input(base / "news-input", summeval_tables, contexts=ctxs[:4])
    judgments = simulated_judgments(full)
    whole = judged_root(Location.of(str(base / "whole")), "all", full, judgments)
    alone = judged_root(Location.of(str(base / "alone")), "news-only", news, judgments)
    return (
        build_leaderboard(whole.uri, n_boot=30, seed=4),
        build_leaderboard(alone.uri, n_boot=30, seed=4),
        base / "whole/leaderboard",
    )


def _figures(quality: dict) -> dict:
    """The quality figures without the references' sources (the two roots' inputs are different folders)."""
    return {
        a: {**q, "references": [{k: v for k, v in r.items() if k != "source"} for r in q["references"]]}
        for a, q in quality.items()
    }


def test_a_category_board_equals_the_board_of_a_run_restricted_to_its_contexts(category_roots):
    whole, alone, folder = category_roots
    assert [(c["category"], c["contexts"], c["folder"]) for c in whole.categories] == [
        ("news", 4, "categories/news"),
        ("science", 3, "categories/science"),
    ]  # the 8th context has no category
    assert json.loads((folder / "leaderboard.json").read_text())["categories"] == whole.categories
    news = validate(pq.read_table(folder / "categories/news/leaderboard.parquet"), LEADERBOARD, "news")
    assert news.equals(pq.read_table(alone.table.path))  # strengths, intervals, ranks, counts: every column
    meta = json.loads((folder / "categories/news/leaderboard.json").read_text())
    assert meta["category"] == "news" and meta["counts"] == alone.meta["counts"]
    assert _figures(meta["quality"]) == _figures(alone.meta["quality"])
    assert meta["judge_bias"] == alone.meta["judge_bias"]
    # the whole board has all 8 contexts, each category board its own
    contexts = {
        c: json.loads((folder / f"categories/{c}/leaderboard.json").read_text())["counts"][OVERALL]["contexts"]
        for c in ("news", "science")
    }
    assert contexts == {"news": 4, "science": 3} and whole.meta["counts"][OVERALL]["contexts"] == 8
    # quality: the human scores of the runs' inputs are the reference, per aspect and overall
    for aspect in (OVERALL, *ASPECTS):
        q = whole.meta["quality"][aspect]
        (human,) = q["references"]
        assert human["reference"] == "human scores" and human["systems"] == len(SYSTEMS)
        assert q["brier"]["held_out_contexts"] == 2 and q["brier"]["n"] > 0 and q["systems"] == len(SYSTEMS)
        assert 0.0 <= q["separability"] <= 1.0 and q["pairs"] == 10


@pytest.mark.browser
def test_the_pages_show_the_quality_panel_and_link_the_categories(category_roots, tmp_path):
    whole, _, folder = category_roots
    dom, shot = render(folder / "index.html", tmp_path / "whole")
    check_rows_in_dom(dom, whole.board.table.to_pylist())
    assert "<h2>Quality</h2>" in dom and "human scores: Spearman" in dom
    assert 'href="categories/news/index.html"' in dom and 'href="categories/science/index.html"' in dom
    check_screenshot(shot)
    dom, _ = render(folder / "categories/science/index.html", tmp_path / "science")
    check_rows_in_dom(dom, pq.read_table(folder / "categories/science/leaderboard.parquet").to_pylist())
    assert "Category <strong>science</strong>" in dom and 'href="../../index.html"' in dom and "Quality" in dom


def test_the_command_prints_the_quality_and_the_categories_and_compares_with_a_reference(
    tmp_path, summeval_tables, capsys
):
    full = categorised_input(tmp_path / "input", summeval_tables)
    root = judged_root(Location.of(str(tmp_path / "store")), "all", full, simulated_judgments(full))
    assert main(["leaderboard", "--root", root.uri, "--n-boot", "30", "--seed", "4"]) == 0
    folder = tmp_path / "store/leaderboard"
    (tmp_path / "ref.json").write_bytes((folder / "leaderboard.json").read_bytes())
    capsys.readouterr()
    # the board itself as a reference, as Parquet (its folder) and as JSON: Spearman 1, agreement 1
    assert (
        main(
            [
                "leaderboard",
                "--root",
                root.uri,
                "--n-boot",
                "30",
                "--seed",
                "4",
                "--reference",
                str(folder),
                "--reference",
                str(tmp_path / "ref.json"),
            ]
        )
        == 0
    )
    err = capsys.readouterr().err
    assert "quality: coherence: separability" in err and "held-out comparisons" in err
    assert "human scores: Spearman" in err and f"leaderboard {folder / 'leaderboard.parquet'}: Spearman +1.00" in err
    assert "category news: 4 contexts" in err and "category science: 3 contexts" in err
    meta = json.loads((folder / "leaderboard.json").read_text())
    for aspect in (OVERALL, *ASPECTS):
        human, parquet, js = meta["quality"][aspect]["references"]
        assert human["reference"] == "human scores"
        for own in (parquet, js):
            assert own["spearman"] == pytest.approx(1.0) and own["systems"] == len(SYSTEMS)
            assert own["agreement"] == 1.0 and own["pairs"] == meta["quality"][aspect]["separable_pairs"] > 0
    news = json.loads((folder / "categories/news/leaderboard.json").read_text())
    assert [r["reference"] for r in news["quality"][OVERALL]["references"]] == [
        "human scores",
        f"leaderboard {folder / 'leaderboard.parquet'}",
        f"leaderboard {tmp_path / 'ref.json'}",
    ]

    (tmp_path / "bad.json").write_text('{"rows": [{"aspect": "coherence", "system": "M0"}]}')
    for bad, message in [
        (tmp_path / "missing.parquet", "no such file"),
        (tmp_path / "bad.json", "column `rank` in"),
        (tmp_path / "input", "no such file"),
    ]:
        assert main(["leaderboard", "--root", root.uri, "--n-boot", "0", "--reference", str(bad)]) == 2
        assert message in capsys.readouterr().err, bad
    assert main(["leaderboard", "--root", root.uri, "--nightly", "n", "--as-of", "1", "--reference", str(folder)]) == 2
    assert "--reference does not go with --as-of" in capsys.readouterr().err
