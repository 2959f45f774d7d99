"""What pairank asks of a Ray it starts: idle task workers are kept, not ended a second after their tasks
(``cluster.runtime.KEPT_WORKERS``)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import psutil


def test_a_local_ray_keeps_the_workers_of_more_zero_cpu_tasks_than_it_has_cpus(ray_local, tmp_path):
    """The session's Ray (2 CPUs and Ray Data's 1). Zero-CPU tasks (pairank's planning and rendering) run more at once
    than it has CPUs, each in a worker process. By Ray's default, the workers beyond one per CPU are ended a second
    after their tasks, and the next round starts new ones; here they stay."""
    import ray

    @ray.remote(num_cpus=0)
    def pid_once_all_run(folder: str, tasks: int) -> int:
        # Each task holds its worker until every task has started, so the tasks run at once however slowly Ray
        # starts workers on a loaded machine (a fixed sleep let a late task reuse a finished task's worker).
        (Path(folder) / str(os.getpid())).touch()
        deadline = time.monotonic() + 120
        while len(os.listdir(folder)) < tasks and time.monotonic() < deadline:
            time.sleep(0.05)  # a poll of the barrier, not a window
        return os.getpid()

    cpus = int(ray.cluster_resources()["CPU"])
    tasks = cpus + 2
    workers = set(ray.get([pid_once_all_run.remote(str(tmp_path), tasks) for _ in range(tasks)]))
    assert len(workers) == tasks, f"{len(workers)} workers ran {tasks} tasks that wait for each other"
    # time is the subject (an idle worker is kept, not ended after Ray's 1 s idle threshold): 10 s allows Ray's
    # check a factor of 10 under load
    time.sleep(10)  # time is the subject: see above
    ended = [p for p in workers if not psutil.pid_exists(p) or psutil.Process(p).status() == psutil.STATUS_ZOMBIE]
    assert not ended, f"{len(ended)} of {len(workers)} idle workers ended"
