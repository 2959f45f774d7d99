"""Benchmark: the compatibility settings (operators/compat.py) against pairank's defaults and the peers' own code.

On the synthetic set of tests/operators/compat_world.py (12 systems of known strength, a judge that prefers length
and markdown, ties): 3,000 LMArena-style battles with style counts, and 11 systems x 200 instructions of
AlpacaEval-style annotations against one baseline. For each statistic (plain Bradley-Terry, style control, LC
win rate): pairank's default, the compat setting, the peer's own computation (bench/compat_peers.py, run by the
interpreter of a separate environment given with `--peers`, or in this one when the peers are installed here),
each compat difference switched off one at a time, and each board's Spearman with the true strengths.

Then the LC sweep (bench/lc_accuracy.py): the default against compat alpaca-eval over seeded sets with known
truth.

Run from the repository root:  .venv/bin/python bench/compat.py [--peers /path/to/peers-venv/bin/python] [--seeds 20]
Writes bench/results/compat.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import numpy as np  # noqa: E402
from scipy.special import expit  # noqa: E402
from scipy.stats import spearmanr  # noqa: E402

from pairank.operators import compat as C  # noqa: E402
from pairank.operators.battles import (  # noqa: E402
    bradley_terry,
    feature_matrix,
    length_controlled,
    parse_battles,
    style_controlled,
)
from tests.operators import compat_world as W  # noqa: E402

ELO = 400 / np.log(10)


def _rho(board: dict, truth: dict) -> float:
    names = sorted(board)
    return float(spearmanr([board[s] for s in names], [truth[s] for s in names]).statistic)


def bt(peers: dict) -> dict:
    t = W.battles()
    boards = {
        "pairank default": {r["system"]: r["elo"] for r in bradley_terry(t, n_boot=0).table.to_pylist()},
        "compat lmarena": {
            r["system"]: r["elo"] for r in bradley_terry(t, n_boot=0, compat="lmarena").table.to_pylist()
        },
    }
    boards |= {k.removeprefix("BT: "): v for k, v in peers.items() if k.startswith("BT: ")}
    return _table(boards, "compat lmarena", dict(W.STRENGTH), "Elo")


def style(peers: dict) -> dict:
    t = W.battles()
    _, systems, first, second, y, _ = parse_battles(t)
    fa, fb = feature_matrix(t)
    n = len(systems)
    x = C._design(first, second, C.lmarena_features(fa, fb), n)
    w = C.pair_weights(first, second)
    boards = {
        "pairank default": {r["system"]: r["elo"] for r in style_controlled(t, n_boot=0).table.to_pylist()},
        "compat lmarena": {
            r["system"]: r["elo"] for r in style_controlled(t, n_boot=0, compat="lmarena").table.to_pylist()
        },
        "lmarena, no penalty": dict(zip(systems, 1000 + ELO * C.lmarena_fit(x, y, w, n, reg=0.0)[:n])),
        "lmarena, no pair weights": dict(zip(systems, 1000 + ELO * C.lmarena_fit(x, y, np.ones_like(w), n)[:n])),
    }
    boards |= {k.removeprefix("style: "): v for k, v in peers.items() if k.startswith("style: ")}
    return _table(boards, "compat lmarena", {s: W.STRENGTH[s] for s in systems}, "Elo")


def peer_boards(python: str | None) -> dict:
    """The peers' boards (bench/compat_peers.py) on this bench's sets: in ``python`` (a separate environment's
    interpreter), else in this process if the peers are installed here, else none."""
    rows = W.annotations()
    y = np.array([r["preference"] - 1 for r in rows])
    payload = {
        "battles": {k: [v.item() if hasattr(v, "item") else v for v in col] for k, col in W.battles().items()},
        "annotations": rows,
        "difficulty": C.instruction_difficulty([str(r["index"]) for r in rows], y),
    }
    if python:
        script = ROOT / "bench" / "compat_peers.py"
        done = subprocess.run([python, str(script)], input=json.dumps(payload), capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"the peers' script failed in {python}:\n{done.stderr}")
        return json.loads(done.stdout)
    try:
        from compat_peers import boards

        return boards(payload)
    except ImportError:
        return {}


def _variant_lc(rows, *, c=None, difficulty=True, pooled=False) -> dict:
    """The alpaca-eval GLM with one of its parts switched off."""
    y_all = np.array([r["preference"] - 1 for r in rows])
    diff = C.instruction_difficulty([r["index"] for r in rows], y_all)
    d_all = np.array([len(r["output_1"]) - len(r["output_2"]) for r in rows], dtype=float)
    out = {}
    for system in sorted({r["generator_2"] for r in rows}):
        keep = np.array([r["generator_2"] == system for r in rows])
        mine = [r for r in rows if r["generator_2"] == system]
        y, d = y_all[keep], d_all[keep]
        sd = d_all.std(ddof=1) if pooled else d.std(ddof=1)
        dif = np.array([diff[r["index"]] for r in mine]) if difficulty else np.zeros(len(mine))
        if c is None:
            out[system] = 100 * C.alpaca_glm(d, y, dif, scale=sd)["lc"]
            continue
        x = np.column_stack([np.tanh(d / sd), dif, np.ones(len(y))])
        coef = C.l1_logistic(x, y, c)
        out[system] = 100 * float(expit(np.column_stack([np.zeros(len(y)), dif, np.ones(len(y))]) @ coef).mean())
    return out


def lc(peers: dict) -> dict:
    rows = W.annotations()
    t = W.annotations_as_battles(rows)
    boards = {
        "pairank default": {r["system"]: 100 * r["lc_win_rate"] for r in length_controlled(t, "m05").to_pylist()},
        "compat alpaca-eval": {
            r["system"]: 100 * r["lc_win_rate"] for r in length_controlled(t, "m05", compat="alpaca-eval").to_pylist()
        },
        "alpaca-eval, no L1 penalty (C 1e6)": _variant_lc(rows, c=1e6),
        "alpaca-eval, no difficulty term": _variant_lc(rows, difficulty=False),
        "alpaca-eval, pooled length scale": _variant_lc(rows, pooled=True),
        "raw win rate": {r["system"]: 100 * r["win_rate"] for r in length_controlled(t, "m05").to_pylist()},
    }
    boards |= {k.removeprefix("LC: "): v for k, v in peers.items() if k.startswith("LC: ")}
    truth = {s: W.STRENGTH[s] for s in boards["compat alpaca-eval"]}
    return _table(boards, "compat alpaca-eval", truth, "points")


def _table(boards: dict, ref: str, truth: dict, unit: str) -> dict:
    out = {}
    for label, board in boards.items():
        common = sorted(set(board) & set(boards[ref]))
        out[label] = {
            f"max |diff| from {ref} ({unit})": max(abs(board[s] - boards[ref][s]) for s in common),
            f"Spearman with {ref}": _rho({s: board[s] for s in common}, boards[ref]),
            "Spearman with the true strengths": _rho(board, truth),
        }
    return out


def main() -> None:
    from lc_accuracy import sweep, sweep_lines

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peers", help="the python of an environment with arena-rank 0.1.1 and alpaca-eval 0.6.6")
    parser.add_argument("--seeds", type=int, default=20, help="seeds per setting of the LC sweep (default 20)")
    args = parser.parse_args()
    peers = peer_boards(args.peers)
    results: dict = {
        "plain Bradley-Terry (3,000 battles)": bt(peers),
        "style control (3,000 battles)": style(peers),
        "LC win rate (11 x 200 annotations)": lc(peers),
    }
    for name, rows in results.items():
        cols = list(next(iter(rows.values())))
        print(f"\n{name}\n\n| board | " + " | ".join(cols) + " |\n|---|" + "---|" * len(cols))
        for label, r in rows.items():
            print(
                f"| {label} | " + " | ".join(f"{v:.3f}" if abs(v) >= 0.001 else f"{v:.1e}" for v in r.values()) + " |"
            )
    results["LC against the truth (seeded sweep)"] = sweep(args.seeds)
    print("\n" + "\n".join(sweep_lines(results["LC against the truth (seeded sweep)"])))
    (ROOT / "bench" / "results").mkdir(exist_ok=True)
    (ROOT / "bench" / "results" / "compat.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
