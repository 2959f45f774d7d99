"""How a run judges: the paths the judge step (:mod:`pairank.jobs.pipeline.judge`) chooses among, and what they share.

- a static schedule: requests made in the cluster block by block and streamed through the pool
  (:mod:`.streamed`), scored where they are (:mod:`.block_scoring`), its counts kept by :mod:`.plan_counter`;
- a judging mode of several passes: requests keyed on the driver (:mod:`.requests`), each pass after the one
  it reads (:mod:`.passes`);
- an adaptive scheduler: the driver's lockstep rounds over every context (:mod:`.adaptive`).

Shared by all three: prompts rendered in the cluster (:mod:`.render`), comparisons another run has claimed waited
for instead of asked (:mod:`.under_claims`), the console's progress (:mod:`.progress`), and what the pool is
handed (:mod:`.pool_wiring`: a picklable factory of the engine and its judging mode, and where it runs,
:class:`~pairank.cluster.pools.judge_pool.PoolResources`). Where the judging runs is the pool's business
(:mod:`pairank.cluster.pools.judge_pool`).
"""
