"""Benchmark: comparisons vs Spearman for every scheduler, all replayed from one judged matrix.

The judgments: ``bench/configs/summeval_matrix.yaml`` judged the FULL matrix of 8
SummEval documents x 16 summaries (every ordered pair, 240 per document and aspect)
for coherence and fluency, once, with the embedded CPU judge (Gemma-3-270M base
model on the vLLM CPU build): 3,840 judgments. This script copies them (one
Parquet file, sorted, verdicts only) to ``bench/data/summeval_matrix/judgments.parquet``,
so the curves replay without the CPU judge. The inputs are the SummEval tables in
``runs/data/summeval``, which ``pairank import summeval ../shared/data/summeval
runs/data/summeval`` makes (done for you if missing); judging the matrix again is
``pairank run bench/configs/summeval_matrix.yaml`` (19 minutes on 2 cores).

The runs: every scheduler runs through ``jobs.run.run_job`` with the matrix
spec's input, subset, aspects and prompts and ``judge: {engine: replay, source:
<that file>}``, into one temporary output root, with ``report.bootstrap`` 200.
The first run (``full``) replays every judgment through the Ray pool into that
root's cache; every later run finds its comparisons there (``counts.cached``), so
they all see exactly the same verdicts and none starts Ray.

* static, ranked by ``win_ratio_soft`` and ``win_ratio_hard``: ``full``; and
  ``random``, ``no_repeat``, ``symmetric`` at R ordered comparisons per context
  and aspect in ``--grid``, each with ``--seeds`` seeds (one run per seed).
  ``no_repeat`` caps at the 120 unordered pairs of 16 candidates.
* adaptive, ranked by the scheduler's own ranking, with ``scheduler.repeats``
  ``--repeats`` (seeds in the same rounds): ``pairs_greedy`` and ``pairs_beam``
  (symmetric true and false, the beam with its default ``beam.score: mean``;
  and, symmetric, the beam with ``beam.score: sum`` and with ``compat: pairs-code``),
  ``pairs_anchors`` (``anchors.size`` in ``--anchors``, so most of the 16
  candidates are inserted, not sorted; anchors sorted by the default PAIRS-beam,
  and for the middle size also by PAIRS-greedy),
  ``adaptive_symmetric`` (``sampling.budget`` in ``--budgets`` unordered pairs).

Recorded per run, method and aspect: comparisons used (ordered judgments per
context and aspect; for adaptive runs per seed from the rankings'
``n_comparisons``, and the report's ``counts.requests``, the union of the seeds),
Spearman against the human scores at sample level (mean over the 8 contexts; the
report's 95 % bootstrap CI for the first seed) and dataset level (pooled), each
as mean and standard error across seeds, and the candidates each ranking covers
(a static win ratio ranks only the candidates it compared; at small R that is
fewer than 16). The judgments are fixed, so the SE across seeds is how much a
result depends on the scheduler's seeded draw (which pairs, which starting order),
not judge noise. Also recorded (``agree_full``): Spearman between each ranking
and the full matrix's soft win ratios of the same judgments, mean over contexts:
how close a schedule gets to what all 240 comparisons say, whatever the judge's
quality. For each point, the values of the ``symmetric``, ``random`` and
``no_repeat`` static curves (soft and hard) at the same comparisons,
interpolated, are kept beside it (``vs_static``).

Read it as a comparison of schedulers on the same judgments, not as a quality
claim: Gemma-3-270M is a weak base model with a strong first-slot bias (in this
matrix slot A wins all 3,840 comparisons, p_a 0.86 to 1.0), so absolute Spearman
against humans is low, hard win ratios of symmetric schedules are all ties, and a
ranking from one order per pair is decided by which slot each candidate drew.
8 contexts make the sample-level CI wide.

Run from the repository root:  .venv/bin/python bench/scheduler_curves.py [--quick]
Knobs: --grid, --seeds, --repeats, --budgets, --anchors, --bootstrap, --contexts,
--data (replay another file as is), --wait-s (for the matrix to finish).
Writes bench/results/scheduler_curves[-TAG].json (``--quick``: ``-quick``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "scheduler_curves"
CONFIG = C.ROOT / "bench" / "configs" / "summeval_matrix.yaml"
MATRIX_ROOT = C.ROOT / "runs" / "bench" / "summeval-matrix"
DATA = C.ROOT / "bench" / "data" / "summeval_matrix" / "judgments.parquet"
STATIC_METHODS = ("win_ratio_soft", "win_ratio_hard")


# ---------------------------------------------------------------- the judged matrix
def matrix_report() -> Path:
    return MATRIX_ROOT / "runs" / "summeval-matrix" / "report.json"


def prepare_data(wait_s: float) -> dict:
    """Copy the finished matrix's judgments into DATA (sorted, verdicts only); wait for it if needed."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from pairank.storage.fs import Location
    from pairank.storage.schemas import JUDGMENTS
    from pairank.storage.store.cache import JudgmentCache

    deadline = time.time() + wait_s
    while not matrix_report().is_file():
        if DATA.is_file() and not (MATRIX_ROOT / "tables" / "judgments").is_dir():
            print(f"no matrix run under {MATRIX_ROOT}; replaying {DATA} as it is")
            return {"source": str(DATA.relative_to(C.ROOT)), "written": False}
        if time.time() > deadline:
            raise SystemExit(f"{matrix_report()} not there after {wait_s:.0f} s: the matrix is not judged yet")
        print(f"waiting for the matrix ({matrix_report().relative_to(C.ROOT)}) ...", flush=True)
        time.sleep(30)
    table = JudgmentCache(Location.of(str(MATRIX_ROOT / "tables" / "judgments"))).read()
    errors = table.num_rows - table.column("error").null_count
    table = table.filter(pc.is_null(table.column("error")))
    order = pc.sort_indices(table, [(c, "ascending") for c in ("aspect", "context_id", "candidate_a", "candidate_b")])
    table = table.take(order).select(JUDGMENTS.names).cast(JUDGMENTS)
    DATA.parent.mkdir(parents=True, exist_ok=True)
    same = DATA.is_file() and pq.read_table(DATA).equals(table)
    if not same:
        pq.write_table(table, DATA, compression="zstd")
    report = json.loads(matrix_report().read_text())
    return {
        "source": str(DATA.relative_to(C.ROOT)),
        "written": not same,  # False: the file already held exactly these rows
        "rows": table.num_rows,
        "error_rows_left_out": errors,
        "bytes": DATA.stat().st_size,
        "matrix_cost": report.get("cost"),
        "matrix_position_bias": report.get("position_bias"),
    }


# ---------------------------------------------------------------- runs
def arms(args) -> list[dict]:
    """Every run: a label, the scheduler settings, and the seeds to run it with."""
    out = [{"family": "full", "label": "full", "scheduler": {"name": "full"}, "seeds": [0]}]
    for name in ("random", "no_repeat", "symmetric"):
        for r in args.grid:
            out.append(
                {
                    "family": name,
                    "label": f"{name} R={r}",
                    "scheduler": {"name": name, "comparisons": r},
                    "seeds": list(range(args.seeds)),
                }
            )
    for name in ("pairs_greedy", "pairs_beam"):
        for sym in (True, False):
            out.append(
                {
                    "family": f"{name}{'' if sym else ' (one order)'}",
                    "label": f"{name} symmetric={str(sym).lower()}",
                    "scheduler": {"name": name, "symmetric": sym, "repeats": args.repeats},
                }
            )
    # The beam ranked by the sum of log p (the default before the mean), and the public code's rules.
    out.append(
        {
            "family": "pairs_beam (score=sum)",
            "label": "pairs_beam symmetric=true score=sum",
            "scheduler": {"name": "pairs_beam", "symmetric": True, "beam": {"score": "sum"}, "repeats": args.repeats},
        }
    )
    out.append(
        {
            "family": "pairs_beam (compat=pairs-code)",
            "label": "pairs_beam symmetric=true compat=pairs-code",
            "scheduler": {"name": "pairs_beam", "symmetric": True, "compat": "pairs-code", "repeats": args.repeats},
        }
    )
    for size in args.anchors:
        for sym in (True, False) if size == args.anchors[len(args.anchors) // 2] else (True,):
            out.append(
                {
                    "family": f"pairs_anchors{'' if sym else ' (one order)'}",
                    "label": f"pairs_anchors anchors={size} symmetric={str(sym).lower()}",
                    "scheduler": {
                        "name": "pairs_anchors",
                        "symmetric": sym,
                        "anchors": {"size": size},
                        "repeats": args.repeats,
                    },
                }
            )
    mid = args.anchors[len(args.anchors) // 2]
    out.append(
        {
            "family": "pairs_anchors (inner=pairs_greedy)",
            "label": f"pairs_anchors anchors={mid} symmetric=true inner=pairs_greedy",
            "scheduler": {
                "name": "pairs_anchors",
                "symmetric": True,
                "anchors": {"size": mid, "inner": "pairs_greedy"},
                "repeats": args.repeats,
            },
        }
    )
    for budget in args.budgets:
        out.append(
            {
                "family": "adaptive_symmetric",
                "label": f"adaptive_symmetric budget={budget}",
                "scheduler": {"name": "adaptive_symmetric", "sampling": {"budget": budget}, "repeats": args.repeats},
            }
        )
    return out


def spec_for(data: Path, output: str, scheduler: dict, args, name: str):
    from pairank.jobs.specs.job import load_spec, parse_spec

    d = load_spec(CONFIG).model_dump(mode="json", exclude_unset=True)  # what the file sets; defaults apply again
    d.update(
        name=name,
        output=output,
        judge={"engine": "replay", "source": str(data)},
        scheduler=scheduler,
        pool={"size": 1, "num_cpus": 1, "batch_size": 1024},
        report={"bootstrap": args.bootstrap, "seed": 0},
        flush_rows=100_000,
    )
    if args.contexts:
        d["subset"] = {**d["subset"], "contexts": args.contexts}
    return parse_spec(d, f"{CONFIG} (replay)")


def run_one(spec) -> dict:
    """run_job, then what this benchmark needs from its report and rankings."""
    from pairank.jobs.run import run_job

    t = time.perf_counter()
    result = run_job(spec, progress=lambda _m: None)
    seconds = time.perf_counter() - t
    report = result.report
    rankings = result.layout.rankings.read_parquet().to_pylist()
    used: dict[tuple[str, str], int] = {}
    scores: dict[tuple[str, str, str], dict[str, float]] = {}
    for r in rankings:
        used[(r["method"], r["aspect"])] = used.get((r["method"], r["aspect"]), 0) + r["n_comparisons"]
        scores.setdefault((r["method"], r["aspect"], r["context_id"]), {})[r["candidate_id"]] = r["score"]
    return {
        "seconds": round(seconds, 2),
        "counts": report["counts"],
        "spearman": report["spearman"],
        "seeds": report.get("seeds"),
        "adaptive": {k: v for k, v in (report.get("adaptive") or {}).items() if k != "rounds"} or None,
        "rounds": len((report.get("adaptive") or {}).get("rounds") or []) or None,
        # ordered pairs each ranking method was answered, per aspect (each pair counts for both candidates)
        "ordered_pairs": {f"{m}|{a}": n // 2 for (m, a), n in used.items()},
        "scores": scores,
    }


def agreement(scores: dict, reference: dict, method: str, aspect: str) -> float | None:
    """Mean over contexts of Spearman between a ranking's scores and the full matrix's soft win ratios.

    How well a schedule approximates what the complete matrix of the SAME judge
    says, whatever that judge's quality; candidates a ranking leaves out are
    left out of its context's rho, and a context whose ranking is all ties is skipped.
    """
    import numpy as np
    from scipy.stats import spearmanr

    rhos = []
    for (m, a, ctx), mine in scores.items():
        if m != method or a != aspect:
            continue
        full = reference.get(("win_ratio_soft", aspect, ctx), {})
        common = sorted(set(mine) & set(full))
        x, y = [mine[c] for c in common], [full[c] for c in common]
        if len(common) >= 2 and np.ptp(x) > 0 and np.ptp(y) > 0:
            rhos.append(float(spearmanr(x, y).statistic))
    return round(float(np.mean(rhos)), 4) if rhos else None


def rho_rows(spearman: list[dict], method: str, aspect: str) -> dict:
    rows = {r["level"]: r for r in spearman if r["method"] == method and r["aspect"] == aspect}
    s, d = rows.get("sample", {}), rows.get("dataset", {})
    return {
        "sample": s.get("rho"),
        "ci": [s.get("ci_low"), s.get("ci_high")],
        "contexts": s.get("n"),
        "dataset": d.get("rho"),
        "ranked": d.get("n"),
    }


def spread(values: list) -> dict:
    from pairank.operators.transitivity import seed_spread

    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "se": None, "n": 0}
    s = seed_spread(values)
    return {"mean": round(s["mean"], 4), "se": None if s["se"] is None else round(s["se"], 4), "n": s["n"]}


def summarise(arm: dict, runs: list[dict], aspects: list[str], n_contexts: int, reference: dict) -> list[dict]:
    """One row per (method, aspect): comparisons and Spearman, mean and SE across seeds."""
    from pairank.jobs.judging.adaptive import method_name
    from pairank.jobs.schedulers import parse_scheduler

    rows = []
    sched = arm["scheduler"]
    if sched["name"] in ("pairs_greedy", "pairs_beam", "pairs_anchors", "adaptive_symmetric"):
        spec = parse_scheduler(sched)
        run = runs[0]
        methods = [method_name(spec, s) for s in range(spec.seed, spec.seed + spec.repeats)]
        for aspect in aspects:
            per = [rho_rows(run["spearman"], m, aspect) for m in methods]
            cmp = [run["ordered_pairs"].get(f"{m}|{aspect}", 0) / n_contexts for m in methods]
            rows.append(
                {
                    "method": sched["name"],
                    "aspect": aspect,
                    "comparisons": spread(cmp),
                    "comparisons_union_of_seeds": run["counts"]["requests"] / len(aspects) / n_contexts,
                    "sample": spread([p["sample"] for p in per]),
                    "dataset": spread([p["dataset"] for p in per]),
                    "agree_full": spread([agreement(run["scores"], reference, m, aspect) for m in methods]),
                    "first_seed_ci": per[0]["ci"],
                    "ranked_per_context": spread([(p["ranked"] or 0) / n_contexts for p in per]),
                    "per_seed": [{"comparisons": c, **p} for c, p in zip(cmp, per)],
                    "report_seeds": [s for s in run["seeds"] or [] if s["aspect"] == aspect],
                }
            )
        return rows
    for method in STATIC_METHODS:
        for aspect in aspects:
            per = [rho_rows(run["spearman"], method, aspect) for run in runs]
            cmp = [run["counts"]["requests"] / len(aspects) / n_contexts for run in runs]
            rows.append(
                {
                    "method": method,
                    "aspect": aspect,
                    "comparisons": spread(cmp),
                    "sample": spread([p["sample"] for p in per]),
                    "dataset": spread([p["dataset"] for p in per]),
                    "agree_full": spread([agreement(run["scores"], reference, method, aspect) for run in runs]),
                    "first_seed_ci": per[0]["ci"],
                    "ranked_per_context": spread([(p["ranked"] or 0) / n_contexts for p in per]),
                    "per_seed": [{"comparisons": c, **p} for c, p in zip(cmp, per)],
                }
            )
    return rows


def against_static(points: list[dict], reference: str = "symmetric") -> None:
    """Add, to each point, the reference static curve's Spearman at the same comparisons (interpolated)."""
    import numpy as np

    for method in STATIC_METHODS:
        for aspect in {p["aspect"] for p in points}:
            curve = sorted(
                (p["comparisons"]["mean"], p["sample"]["mean"], p["dataset"]["mean"], p["agree_full"]["mean"])
                for p in points
                if p["family"] in (reference, "full")
                and p["method"] == method
                and p["aspect"] == aspect
                and p["sample"]["mean"] is not None
            )
            if len(curve) < 2:
                continue
            xs, ys, ds, gs = (np.array(v, dtype=float) for v in zip(*curve))
            for p in points:
                if p["aspect"] != aspect or p["sample"]["mean"] is None:
                    continue
                x = p["comparisons"]["mean"]
                p.setdefault("vs_static", {})[f"{reference}/{method}"] = {
                    "sample": round(float(np.interp(x, xs, ys)), 4),
                    "dataset": round(float(np.interp(x, xs, ds)), 4),
                    "agree_full": round(float(np.interp(x, xs, gs)), 4),
                    "extrapolated": bool(x < xs[0] or x > xs[-1]),
                }


def fmt(s: dict) -> str:
    if s["mean"] is None:
        return "n/a"  # undefined in every seed: the ranking is all ties (e.g. hard win ratios of an A-only judge)
    return f"{s['mean']:.3f}" + (f"±{s['se']:.3f}" if s.get("se") is not None else "")


def print_table(points: list[dict], aspects: list[str]) -> None:
    keyed: dict[tuple[str, str], dict[str, dict]] = {}
    for p in points:
        keyed.setdefault((p["label"], p["method"]), {})[p["aspect"]] = p
    header = ["run", "method", "cmp/ctx", "ranked/ctx"]
    for a in aspects:
        header += [f"{a} sample", f"{a} dataset", f"{a} vs sym-soft", f"{a} agree full"]
    rows = []
    for (label, method), by in keyed.items():
        first = next(iter(by.values()))
        ranked = first["ranked_per_context"]["mean"]
        row = [label, method, f"{first['comparisons']['mean']:.1f}", "-" if ranked is None else f"{ranked:.1f}"]
        for a in aspects:
            p = by.get(a)
            ref = (p or {}).get("vs_static", {}).get("symmetric/win_ratio_soft")
            delta = (
                "-"
                if not p or not ref or p["sample"]["mean"] is None
                else f"{p['sample']['mean'] - ref['sample']:+.3f}"
            )
            row += [
                fmt(p["sample"]) if p else "-",
                fmt(p["dataset"]) if p else "-",
                delta,
                fmt(p["agree_full"]) if p else "-",
            ]
        rows.append(row)
    print(C.table(rows, header))
    print(
        "mean±SE across seeds; n/a: Spearman undefined (all candidates tied); vs sym-soft: sample rho minus the "
        "symmetric static schedule's (win_ratio_soft) at the same comparisons, interpolated; agree full: Spearman with "
        "the full matrix's soft win ratios (same judge), mean over contexts"
    )


# ---------------------------------------------------------------- main
def main() -> None:
    def ints(s):
        return [int(x) for x in s.split(",") if x]

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tiny version, to check the script")
    ap.add_argument("--grid", type=ints, default=[8, 16, 32, 64, 128], help="R per context for the static schedulers")
    ap.add_argument("--seeds", type=int, default=10, help="seeds per static random scheduler")
    ap.add_argument("--repeats", type=int, default=10, help="scheduler.repeats for the adaptive schedulers")
    ap.add_argument("--budgets", type=ints, default=[8, 16, 32, 64], help="adaptive_symmetric sampling.budget grid")
    ap.add_argument("--anchors", type=ints, default=[4, 6, 8], help="pairs_anchors anchors.size grid")
    ap.add_argument("--bootstrap", type=int, default=200)
    ap.add_argument("--contexts", type=int, default=None, help="subset.contexts (unset: the matrix's 8)")
    ap.add_argument("--data", type=Path, default=None, help="replay this judgments file as it is (no copy)")
    ap.add_argument("--wait-s", type=float, default=3600, help="how long to wait for the matrix to finish")
    ap.add_argument("--keep", action="store_true", help="keep the temporary output root")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    if args.quick:
        args.grid, args.seeds, args.repeats, args.budgets, args.anchors = [8, 32], 2, 2, [8], [6]
        args.bootstrap, args.contexts = 50, args.contexts or 3

    C.ensure_summeval()
    data_info = {"source": str(args.data), "written": False} if args.data else prepare_data(args.wait_s)
    data = args.data.resolve() if args.data else DATA

    started, t0 = C.now(), time.time()
    root = tempfile.mkdtemp(prefix="pairank-curves-")
    points, runs_log = [], []
    aspects, reference = None, {}
    try:
        for arm in arms(args):
            runs = []
            for seed in arm.get("seeds", [0]):
                sched = {**arm["scheduler"], "seed": seed}
                slug = arm["label"].replace(" ", "_").replace("=", "") + f"-s{seed}"
                spec = spec_for(data, root, sched, args, slug)
                aspects, n_contexts = spec.aspects, spec.subset.contexts
                runs.append(run_one(spec))
                runs_log.append(
                    {
                        "label": arm["label"],
                        "seed": seed,
                        **{k: runs[-1][k] for k in ("seconds", "counts", "adaptive", "rounds")},
                    }
                )
                errors = runs[-1]["counts"].get("errors_now", 0)
                if errors:
                    raise SystemExit(f"{arm['label']} seed {seed}: {errors} replay errors (is the matrix complete?)")
            if arm["family"] == "full":
                reference = runs[0]["scores"]
            for row in summarise(arm, runs, aspects, n_contexts, reference):
                points.append({"family": arm["family"], "label": arm["label"], "scheduler": arm["scheduler"], **row})
            took = sum(r["seconds"] for r in runs)
            print(f"{arm['label']}: {len(runs)} run(s), {took:.1f} s", flush=True)
    finally:
        if args.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)

    for reference in ("symmetric", "random", "no_repeat"):
        against_static(points, reference)
    print()
    print_table(points, aspects)
    name = NAME + ("-quick" if args.quick else "") + (f"-{args.tag}" if args.tag else "")
    path = C.write_result(
        name,
        {
            "benchmark": NAME,
            "judge": "replay of the full matrix judged by " + C.MODEL_LABEL,
            "note": "Gemma-3-270M is a weak, first-slot-biased base model: absolute Spearman is low; the curves "
            "compare schedulers on the same judgments.",
            "started_at": started,
            "finished_at": C.now(),
            "wall_seconds": round(time.time() - t0, 1),
            "machine": C.machine(),
            "data": data_info,
            "settings": {
                "config": str(CONFIG.relative_to(C.ROOT)),
                "contexts": n_contexts,
                "aspects": aspects,
                "grid": args.grid,
                "seeds": args.seeds,
                "repeats": args.repeats,
                "budgets": args.budgets,
                "anchors": args.anchors,
                "bootstrap": args.bootstrap,
                "comparisons_unit": "ordered judgments per context and aspect (a symmetric comparison is 2)",
            },
            "points": points,
            "runs": runs_log,
        },
    )
    print(f"\nwrote {path}")


if __name__ == "__main__":
    main()
