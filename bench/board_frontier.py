"""Benchmark (SIMULATED judges): the systems' board to a stated confidence, against the designs it replaces (issue 50
item 4, its first rows).

The world of a seed: S = 20 systems with seeded strengths theta_s ~ N(0, 0.5^2) and C = 500 contexts, each with a
difficulty d_c ~ U(0.5, 1.5). The quality of system s's output on context c is ``d_c theta_s + u_cs`` with
``u_cs ~ N(0, 1)``: a better system is not better on every prompt. The judge is the SIMULATED judge's model,
``logit p = scale (q_a - q_b) + slot bias + eps`` (noise 1), with the scale and slot bias fitted to LLMBar Natural's
published GPT-4 and LLaMA-2-70B-chat verdicts (``bench/frontier.py``'s ``judges``, ``jobs.frontier.fit_judge``);
``eps`` is seeded per (context, slot-A system, slot-B system), so every arm sees the same verdict for the same
request. The truth is the order of theta; "full" is the pooled Bradley-Terry board of the full matrix.

Arms (every comparison symmetric, both orders, unless "one order"):

* full: every (context, ordered pair): C S (S - 1) = 190,000 judgments;
* baseline: every system against one seeded baseline system on every context (AlpacaEval's design), 2 C (S - 1);
* random: uniform (context, pair) comparisons at 10% of the full matrix, and at the board's own spend;
* board order: ``scheduler.name: board`` with ``target: order`` at margin 0.2 and at 0.1 (stops by itself), one
  order at margin 0.2, and margin 0 with a budget of 10% (stops by budget);
* board top3: ``target: topk``, ``k: 3``, margin 0.05, budget 10%.

Boards other than board's own are pooled Bradley-Terry fits (``jobs.schedulers.board.fit``) of the arm's comparisons.
Measured per seed: comparisons, Spearman and Kendall tau against the truth and against the full matrix's board,
whether the top 3 are exactly right (members and order), and the rule that stopped a board.

Run from the repository root:  .venv/bin/python bench/board_frontier.py [--seeds 20] [--judges gpt-4,llama2]
Writes bench/results/board_frontier[<tag>].json (after every seed) and prints the table that BENCHMARKS.md shows.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit
from scipy.stats import kendalltau, spearmanr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C
from frontier import judges as fitted_judges

from pairank.jobs.schedulers import BoardSettings, run_lockstep
from pairank.jobs.schedulers.board import fit

NAME = "board_frontier"
SYSTEMS, CONTEXTS = 20, 500
FULL = CONTEXTS * SYSTEMS * (SYSTEMS - 1)
BOARD_ARMS = {
    "board order m=0.2": {"margin": 0.2},
    "board order m=0.1": {"margin": 0.1},
    "board order m=0.2, one order": {"margin": 0.2, "symmetric": False},
    "board order, budget 10%": {"margin": 0.0, "budget": FULL // 10},
    "board top3": {"target": "topk", "k": 3, "margin": 0.05, "budget": FULL // 10},
}


class World:
    """One seed's systems, contexts and judge verdicts ``p[c, i, j]`` (system i in slot A)."""

    def __init__(self, seed: int, judge: dict) -> None:
        g = np.random.default_rng([seed, 50])
        self.theta = g.normal(0.0, 0.5, SYSTEMS)
        difficulty = g.uniform(0.5, 1.5, CONTEXTS)
        q = difficulty[:, None] * self.theta[None, :] + g.normal(0.0, 1.0, (CONTEXTS, SYSTEMS))
        eps = g.standard_normal((CONTEXTS, SYSTEMS, SYSTEMS))
        logit = judge["scale"] * (q[:, :, None] - q[:, None, :]) + judge["position_bias"] + judge["noise"] * eps
        self.p = expit(logit)
        self.baseline = int(g.integers(SYSTEMS))
        self.names = [f"s{s:02d}" for s in range(SYSTEMS)]
        self.contexts = {f"c{c:03d}": [f"c{c:03d}/{n}" for n in self.names] for c in range(CONTEXTS)}
        self.system = {cid: cid.split("/")[1] for ids in self.contexts.values() for cid in ids}
        self.where = {cid: (int(cid[1:4]), int(cid[-2:])) for cid in self.system}

    def judge(self, batch: list[tuple[str, str, str]]) -> list[float]:
        out = []
        for _, a, b in batch:
            (c, i), (_, j) = self.where[a], self.where[b]
            out.append(float(self.p[c, i, j]))
        return out

    def board_of(self, pairs: np.ndarray) -> list[int]:
        """The pooled Bradley-Terry order (best first) of symmetric comparisons ``pairs[k] = (c, i, j)``."""
        c, i, j = pairs[:, 0], pairs[:, 1], pairs[:, 2]
        outcome = 0.5 + (self.p[c, i, j] - self.p[c, j, i]) / 2.0
        n, wins = np.zeros((SYSTEMS, SYSTEMS)), np.zeros((SYSTEMS, SYSTEMS))
        np.add.at(n, (i, j), 1.0)
        np.add.at(n, (j, i), 1.0)
        np.add.at(wins, (i, j), outcome)
        np.add.at(wins, (j, i), 1.0 - outcome)
        mean, _ = fit(n, wins)
        return sorted(range(SYSTEMS), key=lambda s: (-mean[s], s))


def all_pairs() -> np.ndarray:
    return np.array([(c, i, j) for c in range(CONTEXTS) for i in range(SYSTEMS) for j in range(i + 1, SYSTEMS)])


def measure(world: World, order: list[int], full: list[int] | None, comparisons: int, stopped: str = "") -> dict:
    truth = sorted(range(SYSTEMS), key=lambda s: -world.theta[s])
    rank = np.empty(SYSTEMS)
    rank[order] = np.arange(SYSTEMS)
    true_rank = np.empty(SYSTEMS)
    true_rank[truth] = np.arange(SYSTEMS)
    row = {
        "comparisons": comparisons,
        "share": comparisons / FULL,
        "spearman_truth": float(spearmanr(rank, true_rank)[0]),
        "kendall_truth": float(kendalltau(rank, true_rank)[0]),
        "top3_right": order[:3] == truth[:3],
        "stopped": stopped,
    }
    if full is not None:
        full_rank = np.empty(SYSTEMS)
        full_rank[full] = np.arange(SYSTEMS)
        row["spearman_full"] = float(spearmanr(rank, full_rank)[0])
        row["kendall_full"] = float(kendalltau(rank, full_rank)[0])
    return row


def run_seed(seed: int, judge: dict) -> dict[str, dict]:
    world = World(seed, judge)
    everything = all_pairs()
    full = world.board_of(everything)
    rows = {"full": measure(world, full, full, FULL)}
    for name, over in BOARD_ARMS.items():
        t0 = time.process_time()
        views = BoardSettings(name="board", seed=seed, **over).machines(world.contexts, world.system, seed)
        stats = run_lockstep(views, world.judge)
        board = views[0].board
        order = [world.names.index(s) for s in board.order()]
        rows[name] = measure(world, order, full, stats["comparisons"], board.stopped or "")
        rows[name]["rounds"] = board.rounds
        rows[name]["cpu_s"] = round(time.process_time() - t0, 2)
    others = [s for s in range(SYSTEMS) if s != world.baseline]
    star = np.array([(c, min(s, world.baseline), max(s, world.baseline)) for c in range(CONTEXTS) for s in others])
    rows["baseline"] = measure(world, world.board_of(star), full, 2 * len(star))
    gen = np.random.default_rng([seed, 51])
    spend = {"random 10%": FULL // 10, "random at board m=0.2's spend": rows["board order m=0.2"]["comparisons"]}
    for name, comparisons in spend.items():
        picked = everything[gen.choice(len(everything), comparisons // 2, replace=False)]
        rows[name] = measure(world, world.board_of(picked), full, comparisons)
    return rows


def summarise(seeds: list[dict[str, dict]]) -> list[dict]:
    out = []
    for arm in seeds[0]:
        rows = [s[arm] for s in seeds]
        entry = {"arm": arm, "seeds": len(rows)}
        for key in ("comparisons", "share", "spearman_truth", "kendall_truth", "spearman_full", "kendall_full"):
            values = np.array([r[key] for r in rows if key in r], dtype=float)
            entry[key] = {"mean": float(values.mean()), "sd": float(values.std(ddof=1)) if len(values) > 1 else 0.0}
        entry["top3_right"] = float(np.mean([r["top3_right"] for r in rows]))
        stops = [r["stopped"] for r in rows if r["stopped"]]
        entry["stopped"] = {rule: stops.count(rule) for rule in sorted(set(stops))}
        out.append(entry)
    return out


def table_md(judge: str, summary: list[dict]) -> str:
    lines = [
        f"**{judge}**",
        "",
        "| arm | comparisons (share of full) | Spearman vs truth | Kendall vs truth | Spearman vs full | "
        "Kendall vs full | top 3 exactly right | stopped by |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for e in summary:
        m = {k: e[k]["mean"] for k in ("comparisons", "share", "spearman_truth", "kendall_truth")}
        full = "-" if e["arm"] == "full" else f"{e['spearman_full']['mean']:.3f}"
        kfull = "-" if e["arm"] == "full" else f"{e['kendall_full']['mean']:.3f}"
        stops = ", ".join(f"{rule} {n}" for rule, n in e["stopped"].items()) or "-"
        lines.append(
            f"| {e['arm']} | {m['comparisons']:,.0f} ({m['share']:.1%}) | {m['spearman_truth']:.3f} "
            f"± {e['spearman_truth']['sd']:.3f} | {m['kendall_truth']:.3f} | {full} | {kfull} "
            f"| {e['top3_right']:.0%} | {stops} |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--judges", default="gpt-4,llama2")
    ap.add_argument("--tag", default="", help="suffix of the result file (runs of judges in parallel processes)")
    args = ap.parse_args()
    names = args.judges.split(",")
    fitted = fitted_judges(names)
    result: dict = {"benchmark": NAME, "when": C.now(), "machine": C.machine(), "systems": SYSTEMS}
    result |= {"contexts": CONTEXTS, "judges": {}}
    started = time.perf_counter()
    for name in names:
        seeds = []
        for seed in range(args.seeds):
            seeds.append(run_seed(seed, fitted[name]))
            print(f"{name} seed {seed}: " + ", ".join(f"{a} {r['comparisons']}" for a, r in seeds[-1].items()))
            result["judges"][name] = {"fitted": fitted[name], "summary": summarise(seeds), "seeds": seeds}
            result["wall_s"] = round(time.perf_counter() - started, 1)
            C.write_result(f"{NAME}{args.tag}", result)  # after every seed: an interrupted run keeps what it measured
        print(table_md(name, result["judges"][name]["summary"]))
    print(C.RESULTS / f"{NAME}{args.tag}.json")


if __name__ == "__main__":
    main()
