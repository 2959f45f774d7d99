"""Actor-pool sizing for judge stages.

A judge engine is slow to start, so its pool is fixed-size (min = max): every
actor starts its engine once and keeps it for the whole job. Only this module
turns a pool spec into Ray Data's ``map_batches`` arguments.
"""

from __future__ import annotations


def judge_pool_args(pool) -> dict:
    """``map_batches`` keyword arguments for a fixed pool of ``pool.size`` judge actors.

    >>> from types import SimpleNamespace as S
    >>> strategy = judge_pool_args(S(size=2, num_cpus=1, num_gpus=0, batch_size=32))["compute"]
    >>> (strategy.min_size, strategy.max_size)
    (2, 2)
    """
    from ray.data import ActorPoolStrategy

    args = {
        "compute": ActorPoolStrategy(min_size=pool.size, max_size=pool.size),
        "num_cpus": pool.num_cpus,
        "batch_size": pool.batch_size,
        "batch_format": "pyarrow",
        "zero_copy_batch": True,
    }
    if pool.num_gpus:
        args["num_gpus"] = pool.num_gpus
    return args
