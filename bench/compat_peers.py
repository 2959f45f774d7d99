"""The peers' side of bench/compat.py: arena-rank 0.1.1 and alpaca-eval 0.6.6 on the sets bench/compat.py sends.

The peers need their own environment (arena-rank pins numpy 2.3.3 exactly), so this script imports neither
pairank nor anything the peers lack: it reads one JSON object on stdin (``battles``: the LMArena-style battles
table as columns; ``annotations``: the AlpacaEval-style rows; ``difficulty``: each instruction's difficulty as
pairank's compat computes it, index -> logit) and writes the peers' boards as JSON on stdout. bench/compat.py
starts it with the interpreter given by ``--peers``, or calls :func:`boards` in its own process when the peers
are installed there.

Run by hand:  PEERS_PYTHON bench/compat_peers.py < payload.json
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

import numpy as np

FEATURES = ["length", "headers", "bold", "lists"]
CONVERGED = {"ftol": 1e-15, "gtol": 1e-12, "max_iter": 20000}
BT_CONVERGED = {"ftol": 1e-15, "gtol": 1e-13, "max_iter": 100000}


def boards(payload: dict) -> dict[str, dict[str, float]]:
    """The peers' boards, by label: Elo for Bradley-Terry and style control, points for LC win rates."""
    import pandas as pd
    from arena_rank.models.bradley_terry import BradleyTerry
    from arena_rank.models.contextual_bradley_terry import ContextualBradleyTerry
    from arena_rank.utils.data_utils import ContextualPairDataset, PairDataset

    out: dict[str, dict[str, float]] = {}
    df = pd.DataFrame(payload["battles"])
    pairs = PairDataset.from_pandas(df[["model_a", "model_b", "winner"]])
    for label, kw in (("BT: arena-rank 0.1.1, defaults", {}), ("BT: arena-rank 0.1.1, converged", BT_CONVERGED)):
        res = BradleyTerry(len(pairs.competitors), **kw).compute_ratings_and_cis(pairs, ci_method="sandwich")
        out[label] = dict(zip(res["competitors"], np.asarray(res["ratings"]).tolist()))
    for f in FEATURES:  # LMArena's own preprocessing (its example notebook's): the normalised difference
        df[f] = (df[f + "_a"] - df[f + "_b"]) / (df[f + "_a"] + df[f + "_b"]).replace(0, 1)
    ds = ContextualPairDataset.from_pandas(df[["model_a", "model_b", "winner", *FEATURES]], FEATURES)
    for label, kw in (("style: arena-rank 0.1.1, defaults", {}), ("style: arena-rank 0.1.1, converged", CONVERGED)):
        res = ContextualBradleyTerry(len(ds.competitors), len(FEATURES), **kw).compute_ratings_and_cis(ds)
        out[label] = dict(zip(res["competitors"], np.asarray(res["ratings"]).tolist()))
    out["LC: alpaca-eval 0.6.6"] = alpaca_lc(payload["annotations"], payload["difficulty"])
    return out


def alpaca_lc(rows: list[dict], difficulty: dict[str, float]) -> dict[str, float]:
    """alpaca-eval's ``length_controlled_noreg`` GLM per system, fed ``difficulty`` through a local copy of the
    file it would download."""
    import alpaca_eval.metrics.glm_winrate as glm
    import pandas as pd

    n = max(r["index"] for r in rows) + 1
    path = Path(tempfile.mkdtemp()) / "df_gamed.csv"
    pd.DataFrame(
        {"model": "x", "index": range(n), "instruction_difficulty": [difficulty[str(i)] for i in range(n)]}
    ).to_csv(path, index=False)
    glm.hf_hub_download = lambda **kw: str(path)
    return {
        s: float(
            glm.get_length_controlled_winrate(
                sub.reset_index(drop=True), glm_name="length_controlled_noreg", save_weights_dir=None
            )["length_controlled_winrate"]
        )
        for s, sub in pd.DataFrame(rows).groupby("generator_2")
    }


if __name__ == "__main__":
    json.dump(boards(json.load(sys.stdin)), sys.stdout)
