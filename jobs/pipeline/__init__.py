"""A run's steps, each a function from dataclasses to dataclasses; how it judges is :mod:`pairank.jobs.judging`.

The steps, in order::

    read_inputs -> prepare_judging -> judge -> score -> win_rates -> report -> write_run

(:mod:`.inputs`, :mod:`.setup`, :mod:`.judge`, :mod:`.score`, :mod:`.winrates`, :mod:`.report`).
:func:`pairank.jobs.run.run_job` composes them in that order.
:func:`pairank.jobs.nightly.run_nightly` composes the same steps and differs only
where a night differs: its input is a prefix of drops, its machines are planned
from the placements of the last committed night, its judgments are every verdict
of its judge between the prefix's outputs, and what it writes is committed under a
fresh attempt folder before the run's report is written.

Judging itself is :mod:`pairank.jobs.judging`'s; :mod:`.judge` is the one place that chooses its path.
"""
