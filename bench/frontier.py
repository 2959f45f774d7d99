"""Benchmark (SIMULATED judge): one cost-quality frontier for every scheduler (issue 29).

Spearman against the human scores (and against the full matrix's ranking of the
same judgments) as a function of the comparisons asked, for every scheduler, on:

* SummEval (16 summaries per article), HANNA (11 stories per prompt), TopicalChat
  (6 responses per dialogue): every (context, aspect) with the set's modal number
  of candidates and some spread in its mean human score is a context; the judge's
  latent quality is that mean human score, z-scored within the context. Imported
  with ``pairank import`` (SummEval ships in data/; HANNA and TopicalChat are
  imported from /work/shared/data into runs/data/ when missing);
* synthetic contexts of N = 50, 200 and 1,000 candidates (seeded standard normal
  qualities).

The judge is the SIMULATED judge (``judges/engines/simulated_judge.py``) with the
coefficients of a real judge: LLMBar Natural's published verdicts, in both orders,
of GPT-4 and of LLaMA-2-70B-chat (prompting mode "Vanilla"; ``data/llmbar-natural``),
give each judge's accuracy, slot-A share and flip rate, and
``jobs.frontier.fit_judge`` fits the simulated judge's scale and slot bias (noise
1) whose hard verdicts match them. The frontier uses its soft p (logprob mode);
``--verdict hard`` uses its hard verdicts.

Schedulers (``jobs.frontier.arms``): full; random and symmetric at budgets of
0.5% .. 75% of N(N-1) (up to 10% at N = 200, 5% at N = 1,000); pairs_greedy
(symmetric and one order), pairs_beam, pairs_anchors (two anchor counts),
adaptive_symmetric (uncertainty and d_optimal selection, ``sampling.budget`` on
the same grid), poe (Gaussian symmetric, Gaussian one order debiased, Bradley-Terry
symmetric; ``comparisons`` on the grid). Static schedulers rank by soft win ratio.
At large N the sweep is cut to keep it to minutes on 2 shared cores (the caps of
``jobs.frontier.AFFORDABLE`` and ``arms``' docstring): at N = 200 adaptive_symmetric
up to 5%; at N = 1,000 adaptive_symmetric at N comparisons only, poe Gaussian
symmetric up to 1%, no random, pairs_beam or one-order pairs_greedy.

Each point is the mean over seeds (``--seeds``, 20) of each seed's mean over
contexts, with its standard deviation and standard error across seeds; a seed
draws the judge's noise, the schedulers' seeds, and a seeded sample of the set's
contexts (``--contexts``; by default 20 per seed for the human sets, 4 at N = 50,
1 at N = 200 and 1,000). Also measured: what poe costs the driver per round
with 10,000 contexts of 16 (``run_lockstep``, machine time without the judge),
and the batched PoE solve of 10,000 contexts alone, in CPU seconds of the process
(wall time on a shared host counts the other processes too).

Writes bench/results/frontier[-quick].part-<judge>-<set>.json (every record of every
seed, saved as each set finishes: an interrupted run resumes where it stopped; judges and sets
can run in parallel processes), .part-driver.json, and then assembles them into
bench/results/frontier[-quick].json (every point with its spread, the summary), the plot
bench/results/frontier[-quick].svg and the tables bench/results/frontier[-quick].md;
the default full run also writes jobs/frontier_table.csv, the table `pairank plan
--recommend` reads (``--assemble`` does only the assembling).

Run from the repository root:  .venv/bin/python bench/frontier.py [--quick]
Knobs: --seeds, --sets, --judges, --contexts, --verdict, --driver-contexts, --tag.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "frontier"
LLMBAR = C.ROOT / "data" / "llmbar-natural"
SETS = {
    "summeval": ("SummEval", C.ROOT / "data" / "summeval", None),
    "hanna": ("HANNA", C.ROOT / "runs" / "data" / "hanna", "hanna"),
    "topicalchat": ("TopicalChat", C.ROOT / "runs" / "data" / "topicalchat", "topicalchat"),
    "syn50": ("synthetic N=50", None, 50),
    "syn200": ("synthetic N=200", None, 200),
    "syn1000": ("synthetic N=1000", None, 1000),
}
#: Contexts per seed: a seeded sample of a set's (context, aspect)s, or synthetic contexts.
CONTEXTS = {"summeval": 20, "hanna": 20, "topicalchat": 20, "syn50": 4, "syn200": 1, "syn1000": 1}
JUDGES = {"gpt-4": ("GPT-4", "Vanilla"), "llama2": ("LLaMA2", "Vanilla")}


def judges(names: list[str]) -> dict[str, dict]:
    import pyarrow.parquet as pq

    from pairank.jobs.frontier import fit_judge, verdict_stats

    judgments = pq.read_table(LLMBAR / "judgments.parquet")
    labels = pq.read_table(LLMBAR / "pairwise_labels.parquet")
    return {k: fit_judge(verdict_stats(judgments, labels, *JUDGES[k])) for k in names}


def world_of(key: str, seed: int, contexts: int):
    import pyarrow.parquet as pq

    from pairank.jobs.frontier import human_world, synthetic_world

    label, folder, extra = SETS[key]
    if folder is None:
        return synthetic_world(extra, contexts, seed)
    if not (folder / "candidates.parquet").is_file():
        cli = Path(sys.executable).parent / "pairank"
        src = C.ROOT.parent / "shared" / "data" / extra
        subprocess.run([str(cli), "import", extra, str(src), str(folder)], check=True, cwd=C.ROOT)
    world = _WORLDS.get(key)
    if world is None:
        world = _WORLDS[key] = human_world(
            label, pq.read_table(folder / "candidates.parquet"), pq.read_table(folder / "human_scores.parquet")
        )
    rows = np.sort(np.random.default_rng([seed, 29]).choice(len(world.contexts), contexts, replace=False))
    return world.take(rows)


_WORLDS: dict = {}


def arms_for(n: int, quick: bool):
    from pairank.jobs.frontier import arms, budget_grid

    grid = budget_grid(n)
    return arms(n, grid[:: max(1, len(grid) // 3)] if quick else grid)


def run_set(key: str, judge: dict, seeds: list[int], contexts: int, verdict: str, quick: bool, partial: Path) -> dict:
    """Every arm on every seed of one set; the records so far are saved to ``partial`` after each seed."""
    from pairank.jobs.frontier import sweep

    records, started = [], time.time()
    n = None
    for seed in seeds:
        world = world_of(key, seed, contexts)
        n = world.n
        records += sweep(world, judge, [seed], arms_for(n, quick), verdict)
        print(f"  seed {seed}: {time.time() - started:.0f} s", flush=True)
        done = {"set": SETS[key][0], "n": n, "contexts_per_seed": contexts, "records": records}
        partial.write_text(json.dumps({"judge": judge, "verdict": verdict, "set": {**done, "seeds": seed + 1}}) + "\n")
    return done


# ---------------------------------------------------------------- the driver's cost at 10^4 contexts
def driver_cost(contexts: int) -> dict:
    """poe's machine time per round (requests, answers, batched solves) for ``contexts`` contexts of 16."""
    from pairank.jobs.frontier import synthetic_world
    from pairank.jobs.schedulers import parse_scheduler, run_lockstep
    from pairank.operators.product_of_experts import bt_scores, gaussian_scores

    world = synthetic_world(16, contexts, 0)
    p = world.judge({"scale": 1.2, "noise": 1.0, "position_bias": 0.1}, 0)
    col = {c: k for k, c in enumerate(world.ids)}
    row = {c: r for r, c in enumerate(world.contexts)}
    out = {"contexts": contexts, "candidates": 16, "cases": []}
    for label, sched in (
        ("poe (defaults: 2 rounds)", {"name": "poe"}),
        ("poe patience 2 (a solve every round)", {"name": "poe", "patience": 2}),
        ("poe bt, patience 2", {"name": "poe", "expert": "bt", "patience": 2}),
    ):
        settings = parse_scheduler(sched)
        judge_s = [0.0, 0.0]

        def judge(reqs, judge_s=judge_s):
            t, cpu = time.perf_counter(), time.process_time()
            answers = [float(p[row[x], col[a], col[b]]) for x, a, b in reqs]
            judge_s[0] += time.perf_counter() - t
            judge_s[1] += time.process_time() - cpu
            return answers

        t, cpu = time.perf_counter(), time.process_time()
        machines = [settings.machine(ctx, world.ids, 0) for ctx in world.contexts]
        build, build_cpu = time.perf_counter() - t, time.process_time() - cpu
        t, cpu = time.perf_counter(), time.process_time()
        stats = run_lockstep(machines, judge)
        for m in machines:
            m.ranking()
        total, cpu = time.perf_counter() - t, time.process_time() - cpu
        rounds = len(stats["rounds"])
        out["cases"].append(
            {
                "case": label,
                "scheduler": sched,
                "build_s": round(build, 2),
                "build_cpu_s": round(build_cpu, 2),
                "rounds": rounds,
                "requests": stats["comparisons"],
                "machine_s": round(total - judge_s[0], 2),
                "machine_s_per_round": round((total - judge_s[0]) / rounds, 3),
                "machine_us_per_request": round(1e6 * (total - judge_s[0]) / stats["comparisons"], 2),
                # CPU time of the process without the judge's lookups: the wall time above counts the other
                # processes of a shared host too
                "machine_cpu_s": round(cpu - judge_s[1], 2),
                "machine_cpu_s_per_round": round((cpu - judge_s[1]) / rounds, 3),
            }
        )
        print(f"  driver cost {label}: {out['cases'][-1]}", flush=True)
        del machines
    # The batched solve alone: every context's judgments after the defaults' budget (64 pairs of 120).
    gen = np.random.default_rng(0)
    counts = np.zeros((contexts, 16, 16))
    for c in range(contexts):
        for i, j in zip(*np.triu_indices(16, 1)):
            if gen.random() < 64 / 120:
                counts[c, i, j] = 1.0
    sums = counts * gen.uniform(0, 1, size=counts.shape)
    solves = {}
    for label, fn in (
        ("gaussian", lambda: gaussian_scores(counts, sums, np.full(contexts, 0.5))),
        ("bt", lambda: bt_scores(counts, sums, np.zeros(contexts), 0.01)),
    ):
        t, cpu = time.perf_counter(), time.process_time()
        fn()
        solves[label] = {"wall_s": round(time.perf_counter() - t, 3), "cpu_s": round(time.process_time() - cpu, 3)}
    out["solve_s"] = solves
    print(f"  batched solve of {contexts} contexts: {solves}", flush=True)
    return out


# ---------------------------------------------------------------- summaries
def summarise(result: dict) -> dict:
    """The issue's stated outcomes, per judge and set."""
    from pairank.jobs.frontier import comparisons_for, curves, value_at

    out = {}
    for key, done in result["sets"].items():
        cv = curves(done["records"])
        n = done["n"]
        full = cv["full"][0]
        greedy = cv["pairs_greedy"][0]
        poe_at = {}
        for fam in ("poe", "poe (one order)", "poe (bt)"):
            if fam in cv:
                at = value_at(cv[fam], greedy["comparisons"]["mean"])
                cheaper = [pt for pt in cv[fam] if pt["comparisons"]["mean"] <= greedy["comparisons"]["mean"]]
                if at is None and cheaper:  # its curve ends below greedy's cost: its last point is a lower bound
                    poe_at[fam] = {"human": cheaper[-1]["human"]["mean"], "bound": "at least"}
                else:
                    poe_at[fam] = {"human": at, "bound": None if at is not None else "not measured"}
        shares = {}
        for fam in ("poe", "poe (one order)", "poe (bt)", "symmetric", "random", "adaptive_symmetric"):
            if fam in cv:
                for metric in ("human", "full_matrix"):
                    need = comparisons_for(cv[fam], 0.95 * full[metric]["mean"], metric)
                    shares[f"{fam}|{metric}"] = None if need is None else need / (n * (n - 1))
        dopt = []
        for unc, opt in zip(cv.get("adaptive_symmetric", []), cv.get("adaptive_symmetric (d_optimal)", [])):
            dopt.append(
                {
                    "budget": unc["scheduler"]["sampling"]["budget"],
                    "uncertainty": [unc["comparisons"]["mean"], unc["human"]["mean"], unc["human"]["se"]],
                    "d_optimal": [opt["comparisons"]["mean"], opt["human"]["mean"], opt["human"]["se"]],
                }
            )
        out[key] = {
            "set": done["set"],
            "n": n,
            "full": {m: full[m]["mean"] for m in ("human", "full_matrix")},
            "pairs_greedy": {
                "comparisons": greedy["comparisons"]["mean"],
                "human": greedy["human"]["mean"],
                "se": greedy["human"]["se"],
                "sd": greedy["human"]["sd"],
            },
            "poe_at_greedy_cost": poe_at,
            "share_for_95pct_of_full": shares,
            "adaptive_symmetric_selection": dopt,
        }
    return out


def summary_md(results: dict, summary: dict) -> str:
    """The stated outcomes as Markdown tables for BENCHMARKS.md."""

    def share(v):
        return "not reached" if v is None else f"{v:.1%}" if v >= 0.01 else f"{v:.2%}"

    lines = [
        "| set | N | judge | full: ρ | pairs_greedy: share, ρ ± sd | poe at greedy's cost (sym / one order / bt) "
        "| best poe ≥ greedy? | share for 0.95 × full's ρ vs human: poe / poe bt / symmetric / random / "
        "adaptive_symmetric "
        "| the same vs the full matrix's ranking |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for jk, per_set in summary.items():
        judge = results[jk]["judge"]["measured"]["judge"]
        for key in SETS:
            if key not in per_set:
                continue
            x = per_set[key]
            g, n = x["pairs_greedy"], x["n"]
            cells = []
            best, bound = None, False
            for fam in ("poe", "poe (one order)", "poe (bt)"):
                v = x["poe_at_greedy_cost"].get(fam)
                if v is None or v["human"] is None:
                    cells.append("–")
                    continue
                cells.append(("≥ " if v["bound"] else "") + f"{v['human']:.3f}")
                if best is None or v["human"] > best:
                    best, bound = v["human"], bool(v["bound"])
            if best is None:
                reached = "–"
            elif best >= g["human"]:
                reached = "yes"
            else:
                reached = "not measured at greedy's cost" if bound else f"no ({best - g['human']:+.3f})"
            sh = x["share_for_95pct_of_full"]
            fams = ("poe", "poe (bt)", "symmetric", "random", "adaptive_symmetric")
            lines.append(
                f"| {x['set']} | {n} | {judge} | {x['full']['human']:.3f} | {share(g['comparisons'] / (n * (n - 1)))}, "
                f"{g['human']:.3f} ± {g['sd']:.3f} | {' / '.join(cells)} | {reached} | "
                + " / ".join(share(sh[f"{f}|human"]) if f"{f}|human" in sh else "–" for f in fams)
                + " | "
                + " / ".join(share(sh[f"{f}|full_matrix"]) if f"{f}|full_matrix" in sh else "–" for f in fams)
                + " |"
            )
    lines += [
        "",
        "| set | judge | budgets compared | mean ρ uncertainty | mean ρ d_optimal | largest gap (d_optimal − "
        "uncertainty) | its se |",
        "|---|---|---|---|---|---|---|",
    ]
    for jk, per_set in summary.items():
        judge = results[jk]["judge"]["measured"]["judge"]
        for key in SETS:
            rows = per_set.get(key, {}).get("adaptive_symmetric_selection") or []
            if not rows:
                continue
            gaps = [
                (r["d_optimal"][1] - r["uncertainty"][1], math.hypot(r["d_optimal"][2], r["uncertainty"][2]))
                for r in rows
            ]
            k = max(range(len(gaps)), key=lambda i: abs(gaps[i][0]))
            unc, opt = (np.mean([r[k][1] for r in rows]) for k in ("uncertainty", "d_optimal"))
            lines.append(
                f"| {per_set[key]['set']} | {judge} | {len(rows)} | {unc:.3f} | {opt:.3f} | "
                f"{gaps[k][0]:+.4f} (budget {rows[k]['budget']}) | {gaps[k][1]:.4f} |"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------- the plot and the table
FAMILY_STYLE = {
    "full": ("black", "*"),
    "random": ("#999999", "."),
    "symmetric": ("#555555", "."),
    "pairs_greedy": ("#1f77b4", "o"),
    "pairs_greedy (one order)": ("#1f77b4", "s"),
    "pairs_beam": ("#17becf", "D"),
    "pairs_anchors": ("#9467bd", "^"),
    "adaptive_symmetric": ("#2ca02c", "v"),
    "adaptive_symmetric (d_optimal)": ("#98df8a", "v"),
    "poe": ("#d62728", "o"),
    "poe (one order)": ("#ff7f0e", "o"),
    "poe (bt)": ("#8c564b", "o"),
}


def plot(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    from pairank.jobs.frontier import curves

    judge_keys = list(results)
    set_keys = [k for k in SETS if any(k in results[j]["sets"] for j in judge_keys)]
    if not set_keys:
        return
    fig, axes = plt.subplots(
        len(judge_keys), len(set_keys), figsize=(3.2 * len(set_keys), 3.0 * len(judge_keys)), squeeze=False
    )
    for r, jk in enumerate(judge_keys):
        for c, sk in enumerate(set_keys):
            ax = axes[r][c]
            done = results[jk]["sets"].get(sk)
            if done is None:
                ax.set_visible(False)
                continue
            full_n = done["n"] * (done["n"] - 1)
            for fam, pts in curves(done["records"]).items():
                color, marker = FAMILY_STYLE.get(fam, ("grey", "x"))
                xs = [pt["comparisons"]["mean"] / full_n for pt in pts]
                ys = [pt["human"]["mean"] for pt in pts]
                es = [pt["human"]["sd"] for pt in pts]
                style = "--" if fam in ("random", "symmetric") else "-"
                ax.errorbar(xs, ys, yerr=es, color=color, marker=marker, ms=3, lw=1, ls=style, capsize=1.5, label=fam)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
            ax.set_title(f"{done['set']} · {results[jk]['judge']['measured']['judge']}", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
            if r == len(judge_keys) - 1:
                ax.set_xlabel("comparisons / N(N-1)", fontsize=7)
            if c == 0:
                ax.set_ylabel("Spearman vs human (mean ± sd over seeds)", fontsize=7)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=6, fontsize=7, frameon=False)
    fig.suptitle("SIMULATED judges fitted to LLMBar verdicts: Spearman vs comparisons asked", fontsize=9)
    fig.tight_layout(rect=(0, 0.1 / len(judge_keys), 1, 0.97))
    fig.savefig(path)
    plt.close(fig)


def fmt(s: dict, digits: int = 3) -> str:
    if s["mean"] is None or (isinstance(s["mean"], float) and math.isnan(s["mean"])):
        return "–"
    sd = s.get("sd")
    return f"{s['mean']:.{digits}f}" + ("" if sd is None or math.isnan(sd) else f" ± {sd:.{digits}f}")


def table_md(results: dict) -> str:
    from pairank.jobs.frontier import curves

    lines = []
    for res in results.values():
        for done in res["sets"].values():
            n = done["n"]
            lines += [
                f"### {done['set']} · judge {res['judge']['measured']['judge']} (SIMULATED)",
                "",
                "| scheduler | setting | comparisons / context | share of N(N-1) | Spearman vs human "
                "| vs full matrix |",
                "|---|---|---|---|---|---|",
            ]
            for fam, pts in curves(done["records"]).items():
                for pt in pts:
                    rest = {k: v for k, v in pt["scheduler"].items() if k != "name"}
                    cmp = pt["comparisons"]["mean"]
                    lines.append(
                        f"| {fam} | `{json.dumps(rest, sort_keys=True) if rest else '-'}` | {cmp:.1f} | "
                        f"{cmp / (n * (n - 1)):.4f} | {fmt(pt['human'])} | {fmt(pt['full_matrix'])} |"
                    )
            lines.append("")
    return "\n".join(lines)


# ---------------------------------------------------------------- the table `pairank plan --recommend` reads
def write_package_table(results: dict, path: Path) -> int:
    """Every point of the frontier as the CSV of :mod:`pairank.jobs.recommend` (its COLUMNS); returns the rows."""
    import csv

    from pairank.jobs.frontier import curves
    from pairank.jobs.recommend import COLUMNS

    rows = []
    for res in results.values():
        judge = res["judge"]
        for done in res["sets"].values():
            n = done["n"]
            for fam, pts in curves(done["records"]).items():
                for pt in pts:
                    rows.append(
                        {
                            "set": done["set"],
                            "n": n,
                            "judge": judge["measured"]["judge"],
                            **{k: judge[k] for k in ("scale", "noise", "position_bias")},
                            "family": fam,
                            "scheduler": json.dumps(pt["scheduler"], sort_keys=True),
                            "seeds": pt["human"]["n"],
                            "comparisons": round(pt["comparisons"]["mean"], 2),
                            "share": round(pt["comparisons"]["mean"] / (n * (n - 1)), 6),
                            **{
                                k + suffix: round(pt[k][stat], 4)
                                for k in ("human", "full_matrix")
                                for suffix, stat in (("", "mean"), ("_sd", "sd"))
                            },
                        }
                    )
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(COLUMNS), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


# ---------------------------------------------------------------- main
def assemble(name: str) -> dict:
    """Every judge's part and the driver's cost into one result, with the summary, plot and tables."""
    from pairank.jobs.frontier import curves

    results: dict = {}
    for jk in JUDGES:
        for sk in SETS:
            path = C.RESULTS / f"{name}.part-{jk}-{sk}.json"
            if path.is_file():
                part = json.loads(path.read_text())
                results.setdefault(jk, {"judge": part["judge"], "verdict": part["verdict"], "sets": {}})
                results[jk]["sets"][sk] = part["set"]
    driver = C.RESULTS / f"{name}.part-driver.json"
    out = {
        "benchmark": NAME,
        "simulated": True,
        "note": "SIMULATED judges fitted to LLMBar Natural's published verdicts; every Spearman is under the model",
        "machine": C.machine(),
        "assembled_at": C.now(),
        # every point (mean, sd, se over seeds); the per-seed records stay in the part files
        "results": {
            jk: {
                **{k: v for k, v in res.items() if k != "sets"},
                "sets": {
                    sk: {**{k: v for k, v in done.items() if k != "records"}, "curves": curves(done["records"])}
                    for sk, done in res["sets"].items()
                },
            }
            for jk, res in results.items()
        },
        "driver_cost": json.loads(driver.read_text()) if driver.is_file() else None,
        "summary": {jk: summarise(res) for jk, res in results.items()},
    }
    C.write_result(name, out)
    if name == NAME:  # the full default run is what plan reads
        write_package_table(results, C.ROOT / "jobs" / "frontier_table.csv")
    out["results"] = results
    plot(results, C.RESULTS / f"{name}.svg")
    (C.RESULTS / f"{name}.md").write_text(
        "# Frontier tables (SIMULATED judges; made by bench/frontier.py)\n\n"
        + summary_md(results, out["summary"])
        + "\n\n"
        + table_md(results),
        encoding="utf-8",
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smoke run: 2 seeds, few contexts, no N=1000")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--sets", default=",".join(SETS))
    ap.add_argument("--judges", default=",".join(JUDGES), help="judges to run now (each has its own part file)")
    ap.add_argument("--contexts", type=int, default=None, help="contexts per seed for every set (default per set)")
    ap.add_argument("--verdict", choices=["soft", "hard"], default="soft")
    ap.add_argument("--driver-contexts", type=int, default=10_000, help="0: do not measure the driver's cost")
    ap.add_argument("--assemble", action="store_true", help="only assemble the parts written so far")
    ap.add_argument("--tag", default="")
    args = ap.parse_args()
    sets = [s for s in args.sets.split(",") if s]
    judge_keys = [j for j in args.judges.split(",") if j]
    if args.quick:
        args.seeds, args.driver_contexts = 2, min(args.driver_contexts, 500)
        sets = [s for s in sets if s != "syn1000"]
        judge_keys = judge_keys[:1]
    name = NAME + ("-quick" if args.quick else "") + (f"-{args.verdict}" if args.verdict != "soft" else "")
    name += f"-{args.tag}" if args.tag else ""
    if not args.assemble:
        for jk, judge in judges(judge_keys).items():
            for sk in sets:
                part = C.RESULTS / f"{name}.part-{jk}-{sk}.json"  # one per (judge, set): processes may share the work
                if part.is_file() and json.loads(part.read_text())["set"].get("seeds") == args.seeds:
                    print(f"{jk} {sk}: done before, kept", flush=True)
                    continue
                contexts = args.contexts or CONTEXTS[sk]
                if args.quick:
                    contexts = max(1, contexts // 12)
                print(f"{jk} {sk}: {args.seeds} seeds x {contexts} contexts", flush=True)
                started = time.time()
                partial = part.with_suffix(".partial")
                done = run_set(sk, judge, list(range(args.seeds)), contexts, args.verdict, args.quick, partial)
                done.update(seeds=args.seeds, seconds=round(time.time() - started, 1), finished_at=C.now())
                res = {"judge": judge, "verdict": args.verdict, "set": done}
                part.write_text(json.dumps(res) + "\n", encoding="utf-8")
                partial.unlink(missing_ok=True)
        driver = C.RESULTS / f"{name}.part-driver.json"
        if args.driver_contexts and not driver.is_file():
            print(f"driver cost at {args.driver_contexts} contexts", flush=True)
            driver.write_text(json.dumps(driver_cost(args.driver_contexts), indent=1) + "\n", encoding="utf-8")
    out = assemble(name)
    print(json.dumps(out["summary"], indent=1))
    print(f"\nwrote {C.RESULTS / name}.json, .svg, .md")


if __name__ == "__main__":
    main()
