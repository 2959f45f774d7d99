"""Nightly, incremental runs with the SIMULATED judge on local Ray: nights that insert only what is new,
a night with nothing new, a changed judge, a writer that loses the commit race, and bad inputs.

The two-night acceptance scenario with the real vLLM CPU judge on SeaweedFS S3 is in
``test_nightly_engine.py``; this module covers the rules around it quickly."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pairank.jobs.cli.main import main
from pairank.jobs.nightly import NightlyError, run_nightly
from pairank.jobs.specs.job import SpecError, parse_spec
from pairank.operators.leaderboard import OVERALL
from pairank.storage.commits import CommitConflict, CommitLog, NightlyLayout
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import NIGHTLY_STATE
from pairank.storage.store.cache import JudgmentCache
from pairank.storage.validation import validate
from tests.browser import check_screenshot, render
from tests.helpers import ROOT

OLD = ["M0", "M1", "M10", "M11"]  # "S1..S4": SummEval systems ranked on night 1
NEW = "M12"  # "S5": the system that arrives on night 2


def write_drop(prefix, name, tables, contexts, systems):
    """An input folder under the prefix: those systems' outputs for those contexts, with their human scores."""
    candidates, human = tables
    mask = pc.and_(
        pc.is_in(candidates.column("context_id"), pa.array(contexts)),
        pc.is_in(candidates.column("system"), pa.array(systems)),
    )
    small = candidates.filter(mask)
    folder = Location.of(str(prefix)).join(name)
    folder.join("candidates.parquet").write_parquet(small)
    folder.join("human_scores.parquet").write_parquet(
        human.filter(pc.is_in(human.column("candidate_id"), small.column("candidate_id")))
    )
    return set(small.column("candidate_id").to_pylist())


def nightly_spec(prefix, output, night, **over) -> dict:
    spec = {
        "name": "board",
        "input": str(prefix),
        "output": str(output),
        "aspects": ["coherence"],
        "prompts": str(ROOT / "configs/prompts/summarization"),
        "judge": {"engine": "simulated", "seed": 3, "scale": 2.0, "noise": 0.3, "position_bias": 0.3},
        "scheduler": {"name": "pairs_anchors"},
        "pool": {"size": 1, "num_cpus": 1},
        "report": {"bootstrap": 20},
        "nightly": {"night": night, "n_boot": 30},
    }
    for key, value in over.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


def run(prefix, output, night, progress=lambda m: None, **over):
    return run_nightly(parse_spec(nightly_spec(prefix, output, night, **over), "test"), progress=progress)


def cache_keys(output) -> dict[str, dict]:
    table = JudgmentCache(RunLayout.of(str(output), "x").judgments).read()
    return {r["key"]: r for r in table.to_pylist()}


def state_of(output, commit) -> list[dict]:
    layout = NightlyLayout(Location.of(str(output)), "board")
    loc = layout.attempt(commit.folder).join("state.parquet")
    return validate(loc.read_parquet(), NIGHTLY_STATE, loc.uri).to_pylist()


@pytest.fixture(scope="module")
def contexts(summeval_tables):
    return sorted(set(summeval_tables[0].column("context_id").to_pylist()))[:5]


@pytest.mark.browser
def test_nights_insert_only_new_outputs(tmp_path, summeval_tables, contexts, ray_local):
    prefix, out = tmp_path / "inputs", tmp_path / "store"
    write_drop(prefix, "2026-11-20", summeval_tables, contexts[:3], OLD)

    first = run(prefix, out, "2026-11-20")
    c1 = first.counts
    assert first.commit.seq == 1 and c1["contexts_new"] == 3 and c1["new_outputs"] == 12
    assert c1["judged_now"] == c1["requests"] > 0 and c1["errors_now"] == 0
    night1 = cache_keys(out)
    assert len(night1) == c1["judged_now"]
    state1 = state_of(out, first.commit)
    assert len(state1) == 12 and {r["role"] for r in state1} == {"anchor"}  # 4 outputs < 97 anchors: all sorted
    order1 = {
        ctx: [r["candidate_id"] for r in sorted(state1, key=lambda r: r["rank"]) if r["context_id"] == ctx]
        for ctx in contexts[:3]
    }

    # night 2: S5 for the old prompts, and two new prompts with all five systems
    s5 = write_drop(prefix, "2026-11-21-s5", summeval_tables, contexts[:3], [NEW])
    fresh = write_drop(prefix, "2026-11-21-prompts", summeval_tables, contexts[3:], OLD + [NEW])
    second = run(prefix, out, "2026-11-21")
    c2 = second.counts
    assert second.commit.seq == 2 and second.commit.record["parent"] == 1
    assert (c2["contexts_new"], c2["contexts_extended"], c2["contexts_unchanged"]) == (2, 3, 0)
    assert c2["new_outputs"] == 3 + 10 and c2["cached"] == 0
    night2 = {k: r for k, r in cache_keys(out).items() if k not in night1}
    assert len(night2) == c2["judged_now"] == c2["requests"]
    for r in night2.values():  # every comparison asked involves an output new tonight
        assert {r["candidate_a"], r["candidate_b"]} & (s5 | fresh), r
    per_old_context = [sum(r["context_id"] == ctx for r in night2.values()) for ctx in contexts[:3]]
    assert all(0 < n <= 2 * math.ceil(math.log2(4 + 1)) for n in per_old_context)  # binary insertion, both orders
    state2 = state_of(out, second.commit)
    for ctx in contexts[:3]:  # old outputs keep their order; S5 is placed among them
        ranked = [r["candidate_id"] for r in sorted(state2, key=lambda r: r["rank"]) if r["context_id"] == ctx]
        assert [c for c in ranked if c not in s5] == order1[ctx] and len(ranked) == 5
    placed_at = {r["candidate_id"]: r["night"] for r in state2}
    assert {placed_at[c] for c in s5 | fresh} == {"2026-11-21"}
    assert {placed_at[c] for ctx in order1.values() for c in ctx} == {"2026-11-20"}

    # the latest leaderboard and its history: both nights, S5 from night 2 on
    folder = out / "leaderboard"
    history = pq.read_table(folder / "history.parquet").to_pylist()
    by_night = {
        n: sorted(r["system"] for r in history if r["night"] == n and r["aspect"] == OVERALL)
        for n in ("2026-11-20", "2026-11-21")
    }
    assert by_night == {"2026-11-20": sorted(OLD), "2026-11-21": sorted(OLD + [NEW])}
    doc = json.loads((folder / "leaderboard.json").read_text())
    assert doc["nightly"] == {
        "name": "board",
        "night": "2026-11-21",
        "commit": 2,
        "nights": ["2026-11-20", "2026-11-21"],
    }
    assert sorted(r["system"] for r in doc["rows"] if r["aspect"] == OVERALL) == sorted(OLD + [NEW])
    assert len(doc["history"]) == len(history)
    as_of_night2 = {name: (folder / name).read_bytes() for name in ("leaderboard.parquet", "history.parquet")}
    report = json.loads(second.run.report_json.read_text())
    assert report["counts"]["judged_now"] == c2["judged_now"] and report["nightly"]["commit"] == 2
    manifest = second.run.manifest.read_json()
    assert manifest["state"] == "done" and manifest["spec"]["input"].endswith("/input")

    # the page shows every system of the latest night with its interval, and the history of both nights
    dom, shot = render(folder / "index.html", tmp_path / "chromium")
    assert "History" in dom and dom.count('class="history"') >= 2
    for night in ("2026-11-20", "2026-11-21"):
        assert night in dom
    for r in doc["rows"]:
        assert r["system"] in dom
    check_screenshot(shot)

    # a night with nothing new asks nothing and still commits (the history grows)
    third = run(prefix, out, "2026-11-22")
    assert third.counts["requests"] == 0 and third.counts["contexts_unchanged"] == 5 and third.commit.seq == 3
    assert len(cache_keys(out)) == len(night1) + len(night2)
    assert state_of(out, third.commit) == state2

    # the same night label again is refused, before anything is judged
    with pytest.raises(NightlyError, match="night '2026-11-22' of 'board' is already committed"):
        run(prefix, out, "2026-11-22")

    # a changed judge (another prompt hash, model, or here seed) ranks every context again with the new judge
    rebuilt = run(prefix, out, "2026-11-23", judge={"seed": 4})
    assert rebuilt.counts["contexts_rebuilt"] == 5 and rebuilt.counts["judged_now"] > 0
    assert {r["judge"] for r in state_of(out, rebuilt.commit)} != {r["judge"] for r in state2}

    # `pairank leaderboard` over the root still reads the nightly runs
    assert main(["leaderboard", "--root", str(out), "--runs", "board-2026-11-21", "--n-boot", "10"]) == 0

    # a past night's leaderboard is rebuilt exactly from the log, by night label or commit number
    for as_of in ("2026-11-21", "2"):
        assert main(["leaderboard", "--root", str(out), "--nightly", "board", "--as-of", as_of]) == 0
        past = out / "leaderboard" / "as-of" / "2026-11-21"
        assert {name: (past / name).read_bytes() for name in as_of_night2} == as_of_night2
        assert json.loads((past / "leaderboard.json").read_text()) == doc
    assert main(["leaderboard", "--root", str(out), "--nightly", "board", "--as-of", "1999-01-01"]) == 2

    # every committed night's placements and leaderboard rows, as Delta tables other tools query
    import polars

    placed = polars.read_delta(str(out / "nightly/board/state")).to_dicts()
    key = lambda r: (r["aspect"], r["context_id"], r["rank"])  # noqa: E731
    night2 = sorted(
        ({k: v for k, v in r.items() if k not in ("seq", "committed_night")} for r in placed if r["seq"] == 2), key=key
    )
    assert night2 == sorted(state2, key=key) and {r["committed_night"] for r in placed if r["seq"] == 2} == {
        "2026-11-21"
    }
    assert {r["seq"] for r in placed} == {1, 2, 3, 4}
    boards = polars.read_delta(str(out / "nightly/board/history"))
    assert boards.filter(polars.col("seq") == 2).height == len([r for r in history if r["night"] == "2026-11-21"])


def test_a_writer_that_loses_the_commit_race(tmp_path, summeval_tables, contexts, ray_local):
    """Writer A plans night 'a'; while it runs, writer B commits night 'b' on the same head. A's commit is refused,
    B's commit and view stand, and A's judgments stay in the cache (B reused them: nothing was paid twice)."""
    prefix, out = tmp_path / "inputs", tmp_path / "store"
    write_drop(prefix, "one", summeval_tables, contexts[:2], OLD)
    run(prefix, out, "n1")
    write_drop(prefix, "two", summeval_tables, contexts[:2], [NEW])
    seen = {}

    def a_progress(msg: str) -> None:  # after A judged, before A commits: B runs the same night through
        if "judgments on the runs' contexts" in msg and "b" not in seen:
            seen["b"] = run(prefix, out, "b")

    with pytest.raises(CommitConflict, match="another writer committed night 'b' as commit 2"):
        run(prefix, out, "a", progress=a_progress)
    b = seen["b"]
    assert b.commit.seq == 2 and b.counts["judged_now"] == 0 and b.counts["cached"] == b.counts["requests"] > 0
    log = CommitLog(NightlyLayout(Location.of(str(out)), "board"))
    assert [c.night for c in log.commits()] == ["n1", "b"]
    assert json.loads((out / "leaderboard/leaderboard.json").read_text())["nightly"]["night"] == "b"
    assert not (out / "runs/board-a").exists()  # the loser wrote no run: its attempt folder is never read
    again = run(prefix, out, "a")  # on top of b: nothing new is left
    assert again.commit.seq == 3 and again.counts["requests"] == 0


def test_nightly_refuses_removed_outputs(tmp_path, summeval_tables, contexts, ray_local):
    prefix, out = tmp_path / "inputs", tmp_path / "store"
    write_drop(prefix, "one", summeval_tables, contexts[:1], OLD)
    run(prefix, out, "n1")
    write_drop(prefix, "one", summeval_tables, contexts[:1], OLD[:3])  # the drop was rewritten without M11
    with pytest.raises(NightlyError, match=r"output '.*M11' .* was ranked on night 'n1' but is no longer"):
        run(prefix, out, "n2")
    write_drop(prefix, "one", summeval_tables, contexts[:1], OLD)  # restored, but one output edited
    loc = Location.of(str(prefix / "one" / "candidates.parquet"))
    table = loc.read_parquet()
    edited = table.column("text").to_pylist()
    edited[0] += " (edited)"
    loc.write_parquet(table.set_column(table.schema.get_field_index("text"), "text", pa.array(edited)))
    first = table.column("candidate_id")[0].as_py()
    with pytest.raises(NightlyError, match=rf"the text of output '{first}' changed since night 'n1'.*new candidate_id"):
        run(prefix, out, "n2")


def test_nightly_spec_rules(tmp_path):
    base = nightly_spec(tmp_path, tmp_path, "n1")
    with pytest.raises(SpecError, match="set scheduler.name: pairs_anchors"):
        parse_spec({**base, "scheduler": {"name": "pairs_beam"}}, "nightly.yaml")
    with pytest.raises(SpecError, match="remove subset"):
        parse_spec({**base, "subset": {"contexts": 2}}, "nightly.yaml")
    with pytest.raises(SpecError, match="nightly.night"):
        parse_spec({**base, "nightly": {"night": "../up"}}, "nightly.yaml")


def test_a_dated_night_label_from_yaml_or_set_is_a_string(tmp_path):
    """YAML reads 2026-11-21 as a date; the label stays the text the user wrote."""
    from pairank.jobs.specs.job import load_spec

    path = tmp_path / "nightly.yaml"
    path.write_text(json.dumps(nightly_spec(tmp_path, tmp_path, None)).replace('"night": null', '"night": "x"'))
    assert load_spec(path, ["nightly.night=2026-11-21"]).nightly.night == "2026-11-21"
    path.write_text(path.read_text().replace('"night": "x"', '"night": 2026-11-20'))
    assert load_spec(path).nightly.night == "2026-11-20"


def test_the_shipped_nightly_config_loads():
    from pairank.jobs.specs.job import load_spec

    spec = load_spec(ROOT / "configs/nightly.yaml")
    assert spec.nightly is not None and spec.scheduler.name == "pairs_anchors"
    assert spec.input == str((ROOT / "runs/nightly-in").resolve())


def test_import_slices_drops_and_run_commits_a_night(tmp_path, shared_data, ray_local, capsys):
    """The README's steps: `pairank import --systems/--contexts` writes drops, `pairank run` runs the night."""
    prefix = tmp_path / "nightly-in"
    src = str(shared_data / "summeval")
    assert main(["import", "summeval", src, str(prefix / "d1"), "--systems", "M0,M1", "--contexts", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["candidates"] == 4
    assert main(["import", "summeval", src, str(prefix / "d2"), "--systems", "M10", "--contexts", "2"]) == 0
    counts = json.loads(capsys.readouterr().out)
    assert (counts["contexts"], counts["candidates"]) == (2, 2)  # one output per context: fine in a drop
    assert main(["import", "summeval", src, str(prefix / "d3"), "--systems", "M99"]) == 2
    assert "--systems ['M99']: not systems of summeval" in capsys.readouterr().err

    spec = tmp_path / "nightly.yaml"
    spec.write_text(json.dumps(nightly_spec(prefix, tmp_path / "store", None)))  # JSON is YAML
    assert main(["run", str(spec), "--set", "nightly.night=n1"]) == 0
    report = capsys.readouterr().out.strip()
    assert report == str(tmp_path / "store/runs/board-n1/report.md") and (tmp_path / "store/runs/board-n1").is_dir()
    head = CommitLog(NightlyLayout(Location.of(str(tmp_path / "store")), "board")).head()
    assert head.night == "n1" and head.record["counts"]["new_outputs"] == 6
    assert len(head.record["input_folders"]) == 2


def test_a_night_with_win_rates_carries_them_and_reports_the_night(tmp_path, summeval_tables, contexts, ray_local):
    prefix, out = tmp_path / "inputs", tmp_path / "store"
    write_drop(prefix, "one", summeval_tables, contexts[:3], OLD)
    night = run(prefix, out, "n1", winrate={"baseline": "M0", "methods": ["observed"]})
    rows = json.loads((out / "leaderboard/leaderboard.json").read_text())["rows"]
    mine = {r["system"]: r for r in rows if r["aspect"] == "coherence"}
    assert mine["M0"]["winrate_status"] == "baseline"
    for system in OLD[1:]:
        assert mine[system]["winrate_method"] == "observed" and 0 <= mine[system]["winrate_estimate"] <= 1
    assert night.run.winrates.exists()
    md = night.run.report_md.read_text()
    assert "## Nightly: n1 (commit 1)" in md and "| 3 | 0 | 0 | 0 | 12 |" in md


def test_a_root_shared_with_other_jobs(tmp_path, summeval_tables, contexts, ray_local):
    """A plain job on the same root judged these prompts with a fifth system: the night reuses its judgments of
    the four systems it ranks, and leaves the fifth system's out of its leaderboard."""
    from pairank.jobs.run import run_job

    prefix, out = tmp_path / "inputs", tmp_path / "store"
    other = Location.of(str(tmp_path / "other"))
    write_drop(tmp_path, "other", summeval_tables, contexts[:2], OLD + [NEW])
    plain = {k: v for k, v in nightly_spec(other.uri, out, None).items() if k != "nightly"}
    run_job(parse_spec({**plain, "name": "plain", "scheduler": {"name": "full"}}, "test"), progress=lambda m: None)
    write_drop(prefix, "one", summeval_tables, contexts[:2], OLD)
    night = run(prefix, out, "n1")
    assert night.counts["cached"] == night.counts["requests"] > 0 and night.counts["judged_now"] == 0
    rows = json.loads((out / "leaderboard/leaderboard.json").read_text())
    assert sorted({r["system"] for r in rows["rows"]}) == sorted(OLD)
    assert rows["judgments"]["outside_subsets"] > 0
