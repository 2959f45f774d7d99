"""Claims (issue 30, item 6): a key claimed by a live run of another lease is left to it; runs claiming at once
split the keys, each key to exactly one of them, locally and on S3; a killed run's claims end with its lease."""

from __future__ import annotations

import datetime as dt
import hashlib
import threading
import time
import uuid

import pytest

from pairank.storage.fs import Location
from pairank.storage.store.claims import FORGET_AFTER_S, Claims, Holder, decode_prefixes, encode_prefixes, key_prefixes
from pairank.storage.store.lease import take


def keys(n: int, salt: str = "") -> list[str]:
    return [hashlib.sha256(f"{salt}{i}".encode()).hexdigest()[:32] for i in range(n)]


def root_at(where: str, tmp_path, request) -> Location:
    if where == "s3":
        request.getfixturevalue("s3_server")
        return Location.of(f"s3://pairank/claims-{uuid.uuid4().hex[:8]}")
    return Location.of(str(tmp_path))


WHERE = ["local", pytest.param("s3", marks=pytest.mark.s3)]


@pytest.mark.parametrize("where", WHERE)
def test_a_key_claimed_by_a_live_run_is_left_to_it_and_taken_once_that_run_ends(where, tmp_path, request):
    root = root_at(where, tmp_path, request)
    wanted = keys(40)
    with take(root, "first", ttl=30) as lease_a, take(root, "second", ttl=30) as lease_b:
        a, b = Claims(root, Holder.of(lease_a)), Claims(root, Holder.of(lease_b))
        got_a = a.claim({3: wanted[:30]}, since=time.time())
        assert got_a.mine == set(wanted[:30]) and not got_a.others and got_a.added == 1
        got_b = b.claim({3: wanted}, since=time.time())
        assert got_b.others == set(wanted[:30]) and got_b.mine == set(wanted[30:])
        again = a.claim({3: wanted[:30]}, since=time.time())  # its own keys again: no new record
        assert again.mine == set(wanted[:30]) and again.added == 0
        since = time.time()
    # the first run ended (released): what it claimed goes to whoever asks, and the cache read before the end
    # is read again
    with take(root, "third", ttl=30) as lease_c:
        got_c = Claims(root, Holder.of(lease_c)).claim({3: wanted[:30]}, since=since)
        assert got_c.mine == set(wanted[:30]) and not got_c.others and got_c.recheck


@pytest.mark.parametrize("where", WHERE)
def test_runs_claiming_together_split_the_keys_each_key_to_one(where, tmp_path, request):
    root = root_at(where, tmp_path, request)
    wanted = keys(300)
    leases = [take(root, f"run{i}", ttl=30) for i in range(4)]
    results, barrier = {}, threading.Barrier(len(leases))

    def claimer(i: int) -> None:
        claims = Claims(root, Holder.of(leases[i]))
        barrier.wait()
        mine = set()
        for bucket in range(4):  # each run claims bucket by bucket, as its planning tasks do
            mine |= claims.claim({bucket: wanted[bucket::4]}, since=time.time()).mine
        results[i] = mine

    try:
        threads = [threading.Thread(target=claimer, args=(i,)) for i in range(len(leases))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        for lease in leases:
            lease.release()
    assert len(results) == len(leases)
    owners = [sum(k in mine for mine in results.values()) for k in wanted]
    assert owners == [1] * len(wanted), "every key claimed by exactly one run"


def test_a_killed_runs_claims_end_when_its_lease_expires(tmp_path, monkeypatch):
    root = Location.of(str(tmp_path))
    wanted = keys(10)
    now = [dt.datetime.now(dt.UTC)]  # the leases' clock, moved by the test: the lease's expiry is not raced
    monkeypatch.setattr("pairank.storage.store.lease._now", lambda: now[0])
    killed = take(root, "killed", ttl=1.0)
    Claims(root, Holder.of(killed)).claim({0: wanted}, since=time.time())
    killed._stop.set()  # killed: the lease is neither renewed nor released
    killed._thread.join()
    with take(root, "survivor", ttl=30) as lease:
        claims = Claims(root, Holder.of(lease))
        now[0] += dt.timedelta(seconds=0.9)  # within the killed lease's ttl
        assert claims.claim({0: wanted}, since=time.time()).others == set(wanted)
        now[0] += dt.timedelta(seconds=0.2)  # past it
        assert claims.claim({0: wanted}, since=time.time()).mine == set(wanted)


def test_a_pass_does_not_claim_again_what_the_run_claimed_in_an_earlier_one(tmp_path):
    root = Location.of(str(tmp_path))
    wanted = keys(6)
    with take(root, "run", ttl=30) as lease:
        claims = Claims(root, Holder.of(lease))
        claims.claim({1: wanted[:3]}, since=time.time(), pass_no=1)
        got = claims.claim({1: wanted}, since=time.time(), pass_no=2)
        assert got.earlier == set(wanted[:3]) and got.mine == set(wanted[3:])
        assert claims.claim({1: wanted[3:]}, since=time.time(), pass_no=2).added == 0  # same pass: still mine


def test_a_claim_repeated_within_a_pass_gives_what_the_first_gave(tmp_path):
    """A planning task run again (its node lost) claims as of its pass: its own keys are its own again (``again``,
    no new record), and a run live when the pass began keeps its keys for the pass although it ended since;
    the next pass takes them."""
    root = Location.of(str(tmp_path))
    wanted = keys(8)
    with take(root, "run", ttl=30) as lease:
        claims = Claims(root, Holder.of(lease))
        with take(root, "other", ttl=30) as other:
            Claims(root, Holder.of(other)).claim({2: wanted[:3]}, since=time.time())
            began = time.time()
            first = claims.claim({2: wanted}, since=began, pass_no=1, fixed=True)
        assert first.mine == set(wanted[3:]) and first.others == set(wanted[:3]) and not first.again
        time.sleep(0.05)  # kept: the clock moves past the release, so the next pass's since is after it (an order)
        again = claims.claim({2: wanted}, since=began, pass_no=1, fixed=True)
        assert (again.mine, again.others, again.again, again.added) == (first.mine, first.others, first.mine, 0)
        assert not again.recheck
        later = claims.claim({2: wanted}, since=time.time(), pass_no=2, fixed=True)  # the next pass takes them
        assert later.mine == set(wanted[:3]) and later.earlier == set(wanted[3:]) and not later.others


def test_old_records_of_ended_runs_are_forgotten_but_never_the_newest(tmp_path, monkeypatch):
    root = Location.of(str(tmp_path))
    for i in range(3):
        with take(root, f"old{i}", ttl=30) as lease:
            Claims(root, Holder.of(lease)).claim({5: keys(4, salt=str(i))}, since=time.time())
    folder = Claims(root, None).folder(5)
    assert len(folder.files(".json")) == 3
    later = time.time() + FORGET_AFTER_S + 1
    monkeypatch.setattr("pairank.storage.store.claims.time.time", lambda: later)
    with take(root, "new", ttl=30) as lease:
        Claims(root, Holder.of(lease)).claim({5: keys(4, salt="new")}, since=later)
    names = [f.uri.rsplit("/", 1)[-1] for f in folder.files(".json")]
    assert names == ["000003.json", "000004.json"]


def test_a_record_holds_the_key_prefixes_it_claimed():
    ks = keys(5)
    assert decode_prefixes(encode_prefixes(key_prefixes(ks))).tolist() == sorted(int(k[:16], 16) for k in ks)
