"""What a nightly night costs against ranking everything again (SIMULATED judge; scheduling only).

SummEval, coherence: night 1 ranks 12 systems on 80 articles (``pairank run`` of a
nightly spec, scaled PAIRS: every context's 12 outputs are anchors sorted by PAIRS
beam). Night 2 adds a 13th system on those 80 articles and 20 new articles with all
13 systems. For night 2 this reports the comparisons judged

- by the nightly job (new outputs binary-inserted among the sorted anchors, new
  articles sorted from scratch);
- by a plain ``pairs_anchors`` run over the night-2 union from an empty cache
  (what re-ranking everything with the same scheduler costs);
- by a full matrix over the union, and by the full matrix of only the pairs that
  involve a new output (counted, not run),

and the per-article Spearman of each ranking against the human coherence scores
(sample level, the report's number). The SIMULATED judge draws p_a from the human
scores (scale 2, noise 0.5, position bias 0.3): these numbers describe scheduling,
never a judge's quality.

Run from the repository root:  .venv/bin/python bench/nightly_insertion.py
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._common import PROMPTS, ensure_summeval, machine, now, table, write_result

OLD_CONTEXTS, NEW_CONTEXTS, OLD_SYSTEMS = 80, 20, 12


def main() -> None:
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pairank.jobs.nightly import run_nightly
    from pairank.jobs.run import run_job
    from pairank.jobs.specs.job import parse_spec
    from pairank.storage.fs import Location
    from pairank.storage.layout import RunLayout
    from pairank.storage.store.cache import JudgmentCache

    data = ensure_summeval()
    cand = pq.read_table(data / "candidates.parquet")
    human = pq.read_table(data / "human_scores.parquet")
    contexts = sorted(set(cand.column("context_id").to_pylist()))[: OLD_CONTEXTS + NEW_CONTEXTS]
    systems = sorted(set(cand.column("system").to_pylist()), key=lambda s: int(s[1:]))
    old, new = systems[:OLD_SYSTEMS], systems[OLD_SYSTEMS]

    def drop(folder: Location, ctxs: list[str], syss: list[str]) -> int:
        mask = pc.and_(
            pc.is_in(cand.column("context_id"), pa.array(ctxs)), pc.is_in(cand.column("system"), pa.array(syss))
        )
        t = cand.filter(mask)
        folder.join("candidates.parquet").write_parquet(t)
        folder.join("human_scores.parquet").write_parquet(
            human.filter(pc.is_in(human.column("candidate_id"), t.column("candidate_id")))
        )
        return t.num_rows

    rows = []
    with tempfile.TemporaryDirectory(prefix="pairank-nightly-bench-") as tmp:
        prefix = Location.of(tmp).join("inputs")
        judge = {
            "engine": "simulated",
            "seed": 7,
            "quality": str(data / "human_scores.parquet"),
            "scale": 2.0,
            "noise": 0.5,
            "position_bias": 0.3,
        }
        base = {
            "input": prefix.uri,
            "aspects": ["coherence"],
            "prompts": str(PROMPTS),
            "judge": judge,
            "scheduler": {"name": "pairs_anchors"},
            "pool": {"size": 1, "num_cpus": 1, "batch_size": 4096},
            "report": {"bootstrap": 200},
            "flush_rows": 100000,
        }

        def night(label: str) -> tuple[dict, float, dict]:
            spec = parse_spec(
                {
                    **base,
                    "name": "bench",
                    "output": str(Path(tmp) / "store"),
                    "nightly": {"night": label, "n_boot": 100},
                },
                "bench",
            )
            started = time.perf_counter()
            result = run_nightly(spec, progress=lambda m: None)
            return result.counts, time.perf_counter() - started, result.report

        def rho(report: dict, method: str) -> float:
            return next(r["rho"] for r in report["spearman"] if r["method"] == method and r["level"] == "sample")

        n1 = drop(prefix.join("night-1"), contexts[:OLD_CONTEXTS], old)
        c1, s1, r1 = night("night-1")
        cache = JudgmentCache(RunLayout.of(str(Path(tmp) / "store"), "").judgments)
        before = set(cache.read().column("key").to_pylist())
        rows.append(
            ["night 1: nightly (all new)", n1, c1["judged_now"], round(rho(r1, "pairs_anchors"), 3), round(s1, 1)]
        )

        added = drop(prefix.join("night-2-system"), contexts[:OLD_CONTEXTS], [new])
        added += drop(prefix.join("night-2-articles"), contexts[OLD_CONTEXTS:], old + [new])
        c2, s2, r2 = night("night-2")
        asked = [r for r in cache.read().to_pylist() if r["key"] not in before]
        on_old = sum(r["context_id"] in contexts[:OLD_CONTEXTS] for r in asked)
        split = {
            "old_articles_insertion": on_old,
            "new_articles_sort": len(asked) - on_old,
            "per_old_article": round(on_old / OLD_CONTEXTS, 2),
            "per_new_article": round((len(asked) - on_old) / NEW_CONTEXTS, 1),
            "bound_per_old_article": 2 * math.ceil(math.log2(OLD_SYSTEMS + 1)),
        }
        union = n1 + added
        rows.append(
            ["night 2: nightly insertion", added, c2["judged_now"], round(rho(r2, "pairs_anchors"), 3), round(s2, 1)]
        )

        spec = parse_spec(
            {**base, "name": "scratch", "output": str(Path(tmp) / "scratch"), "input": str(Path(tmp) / "union")},
            "bench",
        )
        union_loc = Location.of(str(Path(tmp) / "union"))
        drop(union_loc, contexts, old + [new])
        started = time.perf_counter()
        scratch = run_job(spec, progress=lambda m: None)
        rows.append(
            [
                "night 2: pairs_anchors from scratch",
                union,
                scratch.judged,
                round(rho(scratch.report, "pairs_anchors"), 3),
                round(time.perf_counter() - started, 1),
            ]
        )
        n = OLD_SYSTEMS + 1
        full = (OLD_CONTEXTS + NEW_CONTEXTS) * n * (n - 1)
        only_new = OLD_CONTEXTS * 2 * OLD_SYSTEMS + NEW_CONTEXTS * n * (n - 1)
        rows.append(["night 2: full matrix over the union (counted)", union, full, None, None])
        rows.append(["night 2: full matrix of pairs with a new output (counted)", added, only_new, None, None])
        counts = {"night_1": c1, "night_2": c2, "night_2_split": split}
    cols = ["case", "outputs", "comparisons judged", "Spearman (per article)", "wall s"]
    print(table(rows, cols))
    ratios = {
        "nightly_vs_scratch": round(c2["judged_now"] / scratch.judged, 3),
        "nightly_vs_full": round(c2["judged_now"] / full, 3),
        "nightly_vs_full_new_pairs": round(c2["judged_now"] / only_new, 3),
    }
    print(json.dumps(ratios), json.dumps(split))
    write_result(
        "nightly_insertion",
        {
            "benchmark": "nightly_insertion",
            "when": now(),
            "machine": machine(),
            "rows": [dict(zip(cols, r)) for r in rows],
            "ratios": ratios,
            "counts": counts,
        },
    )


if __name__ == "__main__":
    main()
