"""pairank's own errors raised in Ray tasks reach the driver as themselves, naming what failed; Ray's and foreign
errors stay Ray's (issue 30, 2: a corrupt data file met in a task was `UnserializableException`, exit 5)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pairank.cluster.runtime import raised_in_task
from pairank.jobs.cli.errors import explain
from pairank.storage.errors import CorruptFile, StorageError
from pairank.storage.store.damage import CorruptLog, MissingFile
from pairank.storage.validation import TableError

ERRORS = {
    "corrupt": lambda: CorruptFile("/s/t/part-0.parquet", "10 bytes, not Parquet", "a hint"),
    "missing": lambda: MissingFile("/s/t/part-1.parquet", "a hint"),
    "log": lambda: CorruptLog("/s/t/_delta_log/00000000000000000002.json", 2, 3, "line 1: not JSON"),
    "rows": lambda: TableError("/s/c.parquet", 3, "p_a", "a float in [0, 1]", "1.7"),
    "storage": lambda: StorageError("/s/t", "open the Delta table", RuntimeError("Kernel error")),
}


def fail(which: str):
    raise ERRORS[which]()


def fail_batch(batch: pa.Table, which: str) -> pa.Table:
    raise ERRORS[which]()


@pytest.mark.parametrize("which", sorted(ERRORS))
def test_an_error_of_pairank_raised_in_a_task_or_a_ray_data_stream_reaches_the_driver_whole(ray_local, which):
    import ray

    expected = ERRORS[which]()
    with pytest.raises(ray.exceptions.RayTaskError) as task:
        ray.get(ray.remote(fail).options(num_cpus=0).remote(which))
    with pytest.raises(ray.exceptions.RayTaskError) as stream:
        data = ray.data.from_arrow(pa.table({"x": [1]})).map_batches(
            fail_batch, fn_kwargs={"which": which}, batch_format="pyarrow", num_cpus=0
        )
        data.take_all()
    for raised in (task.value, stream.value):
        own = raised_in_task(raised)
        assert type(own) is type(expected) and str(own) == str(expected)  # Ray Data's retry note taken off
        assert explain(raised) == (2, str(expected))


def test_a_foreign_error_in_a_task_stays_rays(ray_local):
    import ray

    with pytest.raises(ray.exceptions.RayTaskError) as info:
        ray.get(ray.remote(lambda: 1 / 0).options(num_cpus=0).remote())
    code, message = explain(info.value)
    assert raised_in_task(info.value) is info.value and code == 5
    assert message.startswith("the Ray cluster or a judge engine failed (RayTaskError")  # its head answers
