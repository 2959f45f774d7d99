"""A run's lease on its name under a root (issue 14, item 7): one holder at a time, given up on release or
when its holder stops renewing it; of runs racing for a name exactly one gets it, locally and on S3."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from pairank.storage.fs import Location
from pairank.storage.lease import LeaseHeld, is_held, lease_folder, newest, take


def test_a_held_name_is_refused_and_a_released_one_taken_again(tmp_path):
    root = Location.of(str(tmp_path))
    with take(root, "demo", ttl=30) as first:
        assert is_held(root, "demo") and not is_held(root, "other")
        with pytest.raises(LeaseHeld) as info:
            take(root, "demo", ttl=30)
        assert f"pid {first.record['pid']}" in str(info.value) and "already running" in str(info.value)
    assert not is_held(root, "demo") and newest(lease_folder(root, "demo"))[1]["released"] is True
    with take(root, "demo", ttl=30) as second:
        assert second.seq == first.seq + 1


def test_a_lease_is_renewed_while_held_and_expires_when_its_holder_stops(tmp_path):
    root = Location.of(str(tmp_path))
    lease = take(root, "night", ttl=0.8)
    time.sleep(2.0)  # 2.5 ttls: only renewals keep it
    assert is_held(root, "night")
    renewed = newest(lease_folder(root, "night"))[1]["renewed_at"]
    assert renewed > lease.record["taken_at"]
    lease._stop.set()  # the holder is killed: no renewal, no release
    lease._thread.join()
    assert is_held(root, "night")
    time.sleep(1.0)
    assert not is_held(root, "night")
    with take(root, "night", ttl=5) as taken_over:
        assert taken_over.seq == lease.seq + 1


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.s3)])
def test_of_runs_racing_for_a_name_exactly_one_gets_it(tmp_path, where, request):
    if where == "s3":
        request.getfixturevalue("s3_server")
        root = Location.of(f"s3://pairank/lease-race-{uuid.uuid4().hex[:8]}")
    else:
        root = Location.of(str(tmp_path))
    won, refused, barrier = [], [], threading.Barrier(6)

    def racer() -> None:
        barrier.wait()
        try:
            won.append(take(root, "race", ttl=30))
        except LeaseHeld:
            refused.append(1)

    threads = [threading.Thread(target=racer) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 1 and len(refused) == 5
    won[0].release()
