"""The driver's forwarders (:func:`pairank.cluster.pools.forwarding.forward_all`): how many batches are out at once,
when the next one is taken, the order results come back in, and an error. ``forward`` itself (the actors, a lost
engine) is what the pool tests run on Ray (tests/cluster/test_pools.py); here it is replaced by a stand-in whose
calls the test holds and lets go."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from pairank.cluster.pools import forwarding


class Held:
    """A stand-in for ``forward``: each call waits until the test lets its batch go, and says what it was given."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.started: list[int] = []
        self.go: dict[int, threading.Event] = {}
        self.fail: set[int] = set()
        self.running = self.most = 0

    def __call__(self, batch: pa.Table, **kwargs) -> pa.Table:
        n = batch.column("n")[0].as_py()
        with self.lock:
            self.started.append(n)
            self.running += 1
            self.most = max(self.most, self.running)
            event = self.go.setdefault(n, threading.Event())
        assert event.wait(10), f"batch {n} was never let go"
        with self.lock:
            self.running -= 1
        if n in self.fail:
            raise RuntimeError(f"judge pool: batch {n} failed")
        return batch.append_column("judged", pa.array([kwargs["judging_pass"]] * batch.num_rows))

    def let_go(self, n: int) -> None:
        with self.lock:
            self.go.setdefault(n, threading.Event()).set()

    def wait_started(self, count: int) -> None:
        for _ in range(1000):
            with self.lock:
                if len(self.started) >= count:
                    return
            threading.Event().wait(0.01)
        raise AssertionError(f"{count} batches expected out, {self.started} are")


def batches(n: int, taken: list[int]):
    for i in range(n):
        taken.append(i)
        yield pa.table({"n": [i, i]})


def test_at_most_at_once_batches_are_out_and_results_come_back_as_they_are_done(monkeypatch):
    held = Held()
    monkeypatch.setattr(forwarding, "forward", held)
    taken: list[int] = []
    out = forwarding.forward_all(batches(5, taken), 2, judging_pass="pairwise")

    got = []
    results = threading.Thread(target=lambda: got.extend(out))
    results.start()
    held.wait_started(2)
    assert taken == [0, 1]  # the next batch is taken only when a forwarder is free
    held.let_go(1)  # the second back first
    held.wait_started(3)
    assert taken == [0, 1, 2]
    for n in (0, 2, 3, 4):
        held.let_go(n)
    results.join(10)
    assert [t.column("n")[0].as_py() for t in got][0] == 1  # in the order they came back
    assert sorted(t.column("n")[0].as_py() for t in got) == [0, 1, 2, 3, 4]
    assert all(t.column("judged").to_pylist() == ["pairwise"] * 2 for t in got)
    assert held.most == 2


def test_a_forwarders_error_is_raised_in_the_driver_and_no_more_batches_are_taken(monkeypatch):
    held = Held()
    held.fail.add(0)
    monkeypatch.setattr(forwarding, "forward", held)
    taken: list[int] = []
    held.let_go(0)
    with pytest.raises(RuntimeError, match="judge pool: batch 0 failed"):
        list(forwarding.forward_all(batches(4, taken), 1, judging_pass="pairwise"))
    assert taken == [0]


def test_empty_batches_are_not_sent(monkeypatch):
    held = Held()
    monkeypatch.setattr(forwarding, "forward", held)
    held.let_go(7)
    tables = [pa.table({"n": pa.array([], pa.int64())}), pa.table({"n": [7]})]
    assert [t.num_rows for t in forwarding.forward_all(tables, 3, judging_pass="p")] == [1]
    assert held.started == [7]
