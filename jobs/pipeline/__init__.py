"""The judging runtime: a job's steps, and the pipeline stages that judge in the cluster.

A run is made of steps, each a function from dataclasses to dataclasses::

    read_inputs -> prepare_judging -> judge_static | judge_adaptive -> score -> win_rates -> report -> write_run

(:mod:`.inputs`, :mod:`.setup`, :mod:`.judge`, :mod:`.score`, :mod:`.winrates`, :mod:`.report`).
:func:`pairank.jobs.run.run_job` composes them in that order.
:func:`pairank.jobs.nightly.run_nightly` composes the same steps and differs only
where a night differs: its input is a prefix of drops, its machines are planned
from the placements of the last committed night, its judgments are every verdict
of its judge between the prefix's outputs, and what it writes is committed under a
fresh attempt folder before the run's report is written.

Judging itself: requests keyed on the driver (:mod:`.requests`) or made in the
cluster block by block (:mod:`.static_stream`, scored where they are by
:mod:`.block_scores`), prompts rendered in the cluster (:mod:`.render`), the passes
of a judging mode (:mod:`.passes`) and the adaptive driver's lockstep rounds
(:mod:`.driver`). Where the judging runs is the pool's business
(:mod:`pairank.cluster.pools`): :mod:`.pool` hands it what to run (a picklable
factory of the engine and its judging mode) and where
(:class:`~pairank.cluster.pools.PoolResources`).
"""
