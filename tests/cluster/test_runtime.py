"""What pairank asks of a Ray it starts: idle task workers are kept, not ended a second after their tasks
(``cluster.runtime.KEPT_WORKERS``)."""

from __future__ import annotations

import os
import time

import psutil


def test_a_local_ray_keeps_the_workers_of_more_zero_cpu_tasks_than_it_has_cpus(ray_local):
    """The session's Ray (2 CPUs and Ray Data's 1). Zero-CPU tasks (pairank's planning and rendering) run more at once
    than it has CPUs, each in a worker process. By Ray's default, the workers beyond one per CPU are ended a second
    after their tasks, and the next round starts new ones; here they stay."""
    import ray

    @ray.remote(num_cpus=0)
    def pid_after(seconds: float) -> int:
        time.sleep(seconds)
        return os.getpid()

    cpus = int(ray.cluster_resources()["CPU"])
    workers = set(ray.get([pid_after.remote(2.0) for _ in range(cpus + 2)]))
    assert len(workers) > cpus, f"{len(workers)} workers ran {cpus + 2} tasks at once"
    time.sleep(3)  # Ray ends an idle worker beyond its limit after 1 s
    ended = [p for p in workers if not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE]
    assert not ended, f"{len(ended)} of {len(workers)} idle workers ended"
