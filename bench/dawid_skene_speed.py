"""Benchmark (SIMULATED votes): one Bayesian Dawid-Skene fit per generator pair, cold and warm.

``operators.dawid_skene.dawid_skene`` on votes simulated from known accuracies
(each judge's q0, q1 uniform in [0.55, 0.9], win rate p uniform in [0.2, 0.8],
10% of votes missing), at sizes like LLMBar's generator pairs: 100 pairs x 45
judges, 200 x 8, 300 x 16. Defaults of ``dawid_skene`` throughout (2 chains x
(1000 tune + 4000 draws), cores 2); a fit counts as converged when r_hat <= 1.01
and bulk ESS >= 1000 over pi and every q.

Each case runs in a fresh interpreter, so its first call pays everything a new
process pays (importing PyMC, compiling); later calls in the same process get new
data (another seed) with the same number of judges. Cases:

- ``nutpie``: the default sampler (nutpie's compiled model is kept per number of
  judges; later calls only feed data and sample);
- ``pymc``: PyMC's own NUTS (``sampler="pymc"``; compiles the C logp on every call,
  from pytensor's cache when warm);
- ``pm.sample(nutpie)``: ``pm.sample(nuts_sampler="nutpie")`` on the same model,
  the alternative to nutpie's compile_pymc_model: it recompiles every call.

``cold``: a fresh, empty pytensor compiledir (``PYTENSOR_FLAGS=base_compiledir=``
a temp dir; pytensor's numba cache lives there too). ``warm``: the same case run
again on the compiledir the cold run filled. Crowd-kit's EM Dawid-Skene is timed
on the same data for comparison. The whole machine's busy and steal CPU seconds
during each case are recorded (the machine may be shared).

Run from the repository root:  .venv/bin/python bench/dawid_skene_speed.py [--quick]
Writes bench/results/dawid_skene_speed[-quick].json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common as C

NAME = "dawid_skene_speed"
LABEL = "SIMULATED votes (known q0, q1 per judge and win rate p); not a real judge"
SIZES = [(100, 45), (200, 8), (300, 16)]
SAMPLERS = ["nutpie", "pymc", "pm.sample(nutpie)"]
#: dawid_skene's defaults, which every case uses (pm.sample(nutpie) is given the same).
FIT = {"draws": 4000, "tune": 1000, "chains": 2, "cores": 2, "rhat_max": 1.01, "ess_min": 1000}
SIMULATION = {"q_range": [0.55, 0.9], "p_range": [0.2, 0.8], "missing": 0.1}


# ---------------------------------------------------------------- the simulated votes
def simulate(n: int, n_judges: int, seed: int):
    """Votes (n, judges), the true classes and the generating p, q0, q1."""
    import numpy as np

    rng = np.random.default_rng(seed)
    q0, q1, p = rng.uniform(0.55, 0.9, n_judges), rng.uniform(0.55, 0.9, n_judges), float(rng.uniform(0.2, 0.8))
    truth = (rng.random(n) >= p).astype(int)
    hit = np.where(truth[:, None] == 0, rng.random((n, n_judges)) < q0, rng.random((n, n_judges)) < q1)
    votes = np.where(hit, truth[:, None], 1 - truth[:, None])
    votes[rng.random(votes.shape) < 0.1] = -1
    return votes, truth, p


# ---------------------------------------------------------------- one case, in a child process
def fit_pm_nutpie(votes, judges, seed: int) -> dict:
    """``pm.sample(nuts_sampler="nutpie")`` on dawid_skene's model, diagnosed the same way."""
    from pairank.operators.dawid_skene import build_model, diagnostics, prepare, refusal

    t = time.perf_counter()
    import pymc as pm

    model = build_model(prepare(votes, judges))
    with model:
        idata = pm.sample(
            draws=4000, tune=1000, chains=2, cores=2, random_seed=seed, nuts_sampler="nutpie", progressbar=False
        )
    seconds = time.perf_counter() - t
    rhat, ess = diagnostics(idata.posterior, judges)
    pi = idata.posterior["pi"].values.ravel()
    return {
        "seconds": seconds,
        "rhat": rhat[0],
        "ess_bulk": ess[0],
        "ok": refusal(rhat, ess, 1.01, 1000) is None,
        "mean": float(pi.mean()),
        "low": None,
        "high": None,
    }


def run_case(case: dict) -> dict:
    t = time.perf_counter()
    from pairank.operators.dawid_skene import dawid_skene, em_dawid_skene

    out: dict = {"case": case, "import_seconds": round(time.perf_counter() - t, 3), "calls": []}
    n, n_judges = case["pairs"], case["judges"]
    judges = [f"judge-{j:02d}" for j in range(n_judges)]
    for call in range(case["calls"]):
        votes, truth, p = simulate(n, n_judges, seed=1000 * n_judges + call)
        t = time.perf_counter()
        if case["sampler"] == "pm.sample(nutpie)":
            r = fit_pm_nutpie(votes, judges, call)
        else:
            res = dawid_skene(votes, judges, seed=call, sampler=case["sampler"])
            r = {
                "seconds": res.seconds,
                "rhat": res.rhat,
                "ess_bulk": res.ess_bulk,
                "ok": res.ok,
                "mean": float(res.draws.mean()),
                "low": res.estimate and res.estimate.low,
                "high": res.estimate and res.estimate.high,
            }
        r["call_wall_seconds"] = time.perf_counter() - t
        t = time.perf_counter()
        em = em_dawid_skene(votes, judges)
        r["em_seconds"] = time.perf_counter() - t
        r["em_win_rate"] = em.win_rate
        r["p"], r["sample_p"] = p, float((truth == 0).mean())
        r["covers_p"] = None if r["low"] is None else bool(r["low"] <= p <= r["high"])
        out["calls"].append({k: round(v, 4) if isinstance(v, float) else v for k, v in r.items()})
    return out


def child(case: dict, compiledir: Path) -> dict:
    """Run a case in a fresh interpreter with pytensor's cache in ``compiledir``; JSON on the last stdout line."""
    busy0 = C.machine_cpu()
    result = C.run_child(__file__, case, {"PYTHONUNBUFFERED": "1", "PYTENSOR_FLAGS": f"base_compiledir={compiledir}"})
    wall = result["process_wall_seconds"]
    busy1 = C.machine_cpu()
    result["machine_cores_busy"] = round((busy1[0] - busy0[0]) / wall, 2)
    result["machine_steal_cores"] = round((busy1[1] - busy0[1]) / wall, 2)
    return result


def summary(r: dict) -> dict:
    calls = r["calls"]
    later = calls[1:]
    return {
        "sampler": r["case"]["sampler"],
        "size": f"{r['case']['pairs']}x{r['case']['judges']}",
        "cache": r["case"]["cache"],
        "first_call_s": round(calls[0]["call_wall_seconds"], 1),
        "later_call_s": round(sum(c["call_wall_seconds"] for c in later) / len(later), 2) if later else None,
        "all_converged": all(c["ok"] for c in calls),
        "max_rhat": round(max(c["rhat"] for c in calls), 4),
        "min_ess_bulk": round(min(c["ess_bulk"] for c in calls)),
        "em_s": round(sum(c["em_seconds"] for c in calls) / len(calls), 3),
        "machine_cores_busy": r["machine_cores_busy"],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one size, nutpie only, to check the script")
    ap.add_argument("--calls", type=int, default=3, help="dawid_skene calls per process (first + later)")
    ap.add_argument("--samplers", default=",".join(SAMPLERS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run_case(json.loads(args.child))))
        return

    sizes = SIZES[1:2] if args.quick else SIZES
    samplers = ["nutpie"] if args.quick else args.samplers.split(",")
    started, t0, results = C.now(), time.time(), []
    for pairs, judges in sizes:
        for sampler in samplers:
            calls = 2 if sampler == "pm.sample(nutpie)" else args.calls
            with tempfile.TemporaryDirectory(prefix="pairank-ds-pytensor-") as compiledir:
                for cache in ("cold", "warm"):
                    case = {"sampler": sampler, "pairs": pairs, "judges": judges, "cache": cache, "calls": calls}
                    print(f"case {case} ...", flush=True)
                    C.wait_quiet(max_wait_s=120)
                    r = child(case, Path(compiledir))
                    r["summary"] = summary(r)
                    print(f"  {r['summary']}", flush=True)
                    results.append(r)
    rows = [
        [
            s[k]
            for k in (
                "sampler",
                "size",
                "cache",
                "first_call_s",
                "later_call_s",
                "all_converged",
                "max_rhat",
                "min_ess_bulk",
                "em_s",
                "machine_cores_busy",
            )
        ]
        for s in (r["summary"] for r in results)
    ]
    print()
    print(
        C.table(rows, ["sampler", "size", "cache", "first s", "later s", "ok", "max r_hat", "min ESS", "EM s", "busy"])
    )
    path = C.write_result(
        NAME + ("-quick" if args.quick else ""),
        {
            "benchmark": NAME,
            "votes": LABEL,
            "started_at": started,
            "finished_at": C.now(),
            "wall_seconds": round(time.time() - t0, 1),
            "machine": {**C.machine(), "versions": versions()},
            "settings": {**FIT, **SIMULATION, "calls_per_process": args.calls},
            "summary": [r["summary"] for r in results],
            "cases": results,
        },
    )
    print(f"\nwrote {path}")


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    out = {}
    for p in ("pymc", "pytensor", "nutpie", "numba", "arviz", "crowd-kit", "numpy"):
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            out[p] = None
    return out


if __name__ == "__main__":
    main()
