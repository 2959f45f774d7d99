"""Claims: which run is judging which comparisons right now, so that runs sharing keys on one store pay once.

::

    <output>/claims/<bucket>/000042.json   {"run", "lease", "holder", "pass", "created_at", "id", "count", "keys"}

Two runs of **different** names on one root that want the same comparisons each
hold their own lease (:mod:`pairank.storage.store.lease`), and each found nothing cached
when it started, so both would ask every shared comparison. Before a run asks a
comparison it **claims** its key in the log of the key's context bucket
(:func:`pairank.storage.store.cache.context_bucket`): a numbered record made with
:meth:`~pairank.storage.fs.Location.create_exclusive`, so of two runs claiming at
once one gets the next number and the other reads that record and tries again. A
record belongs to the run's lease (``run``, ``lease``: its record number,
``holder``): it is **live** while that lease is held, and nothing else has to be
renewed or released. A key claimed by a live record of another run is not asked:
the run comes back for it later and finds its verdict in the judgment cache, or,
once the claimer's lease was released or expired without a verdict for it (a run
that was killed; a judge error), claims it itself. A lease expires ``ttl_s``
seconds after its last renewal (``PAIRANK_LEASE_TTL_S``, default 60), so that is
how long a crashed run's keys wait at most.

``keys`` holds the first 8 bytes of each claimed key (sorted, base64): two keys
that share them make a run wait for the other's verdict, never skip one.

Records of runs that ended more than :data:`FORGET_AFTER_S` seconds ago are
deleted by the next claimer (never the newest of a log, so numbers only grow).
A claimer that read the cache before another run's lease ended, and claims
after, reads the cache again for what it claimed (``Claimed.recheck``).

The clocks of the machines sharing a root are assumed to agree to well within
the leases' ``ttl_s`` (NTP), as for leases.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np

from pairank.storage.fs import Location
from pairank.storage.store.lease import alive_for, lease_folder

log = logging.getLogger(__name__)

_RECORD = re.compile(r"^(\d{6,})\.json$")
#: A record of a run whose lease ended this long ago is deleted by the next claimer of its log.
FORGET_AFTER_S = 600.0
#: A claimer whose cache read is older than this when it claims reads the cache again for its keys (records of
#: runs that ended are kept FORGET_AFTER_S, so a run that ended after that read is still in the log).
RECHECK_AFTER_S = FORGET_AFTER_S / 2
#: Attempts to add a record when other runs keep taking the next number first.
ATTEMPTS = 50


_HEX = re.compile(r"^[0-9a-f]{16}")


def key_prefix(key: str) -> int:
    """The first 8 bytes of a key (a hex digest, as :func:`pairank.storage.keys.judgment_key` makes); of any
    other key, the first 8 bytes of its hash.

    >>> key_prefix("00000000000000ffabc"), key_prefix("ctx|coherence|a|b") == key_prefix("ctx|coherence|b|a")
    (255, False)
    """
    if _HEX.match(key):
        return int(key[:16], 16)
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "big")


def key_prefixes(keys: Iterable[str]) -> np.ndarray:
    """:func:`key_prefix` of each key, as sorted unique unsigned integers.

    >>> key_prefixes(["00000000000000ffabc", "0000000000000001"]).tolist()
    [1, 255]
    """
    return np.unique(np.array([key_prefix(k) for k in keys], dtype=np.uint64))


def encode_prefixes(prefixes: np.ndarray) -> str:
    return base64.b64encode(prefixes.astype(">u8").tobytes()).decode("ascii")


def decode_prefixes(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype=">u8").astype(np.uint64)


@dataclass(frozen=True)
class Holder:
    """Whose claims: a run's name and the record number and holder id of its lease."""

    run: str
    lease: int
    holder: str

    @classmethod
    def of(cls, lease) -> Holder:
        """The holder of a :class:`pairank.storage.store.lease.Lease`."""
        return cls(lease.folder.uri.rstrip("/").rsplit("/", 1)[-1], lease.seq, lease.record["holder"])


@dataclass
class Claimed:
    """What a claim gave: ``mine`` to ask now, ``others`` being asked by another run (come back for them), and
    ``recheck``: the cache read before the claim may miss verdicts of a run that ended since (read it again)."""

    mine: set[str] = field(default_factory=set)
    others: set[str] = field(default_factory=set)
    earlier: set[str] = field(default_factory=set)  # claimed by this run in an earlier pass (asked already)
    again: set[str] = field(
        default_factory=set
    )  # of ``mine``: claimed by this run in this pass before (a task run twice)
    recheck: bool = False
    records_read: int = 0
    added: int = 0


def _seconds(iso: str) -> float:
    return dt.datetime.fromisoformat(iso).timestamp()


class Claims:
    """The claim logs under a storage root, used by one run (``holder``); picklable, so tasks claim too."""

    def __init__(self, root: Location, holder: Holder):
        self.root, self.holder = root, holder

    def folder(self, bucket: int) -> Location:
        return self.root.join("claims", f"{bucket:02d}")

    def claim(
        self, keys_by_bucket: Mapping[int, Iterable[str]], since: float, pass_no: int = 1, fixed: bool = False
    ) -> Claimed:
        """Claim the keys (by context bucket) that no live run of another lease claimed; ``since``: when
        (``time.time()``) the caller read the cache that these keys were missing from. ``pass_no``: the run's
        pass over its comparisons; keys it claimed in an earlier pass are ``earlier``, not claimed again; keys it
        claimed in this pass are ``mine`` again (and ``again``), so a claim repeated within a pass gives what the
        first gave.

        ``fixed``: the view of a pass that read the cache at ``since``: a record of another lease counts as live
        if that lease was held at any time since then (not only now), so a claim repeated within the pass (a
        planning task run again after its node was lost) leaves to others what the first left to them, although
        their run ended meanwhile; the caller claims those keys in its next pass. (This holds while their records
        are kept: :data:`FORGET_AFTER_S` after their run ended.)"""
        out = Claimed(recheck=time.time() - since > RECHECK_AFTER_S)
        for bucket, keys in sorted(keys_by_bucket.items()):
            keys = list(keys)
            if keys:
                self._claim_bucket(self.folder(bucket), keys, since, pass_no, fixed, out)
        return out

    def _claim_bucket(
        self, folder: Location, keys: list[str], since: float, pass_no: int, fixed: bool, out: Claimed
    ) -> None:
        lives: dict[tuple[str, int, str], tuple[bool, float]] = {}
        for _ in range(ATTEMPTS):
            newest, records = self._read(folder, out)
            now = time.time()
            theirs, ours, before, now_ours = (np.empty(0, np.uint64) for _ in range(4))
            for seq, record in records:
                who = (record["run"], int(record["lease"]), record["holder"])
                if who == (self.holder.run, self.holder.lease, self.holder.holder):
                    ours = np.union1d(ours, decode_prefixes(record["keys"]))
                    if int(record.get("pass", 1)) < pass_no:
                        before = np.union1d(before, decode_prefixes(record["keys"]))
                    else:
                        now_ours = np.union1d(now_ours, decode_prefixes(record["keys"]))
                    continue
                if who not in lives:
                    lives[who] = self._life(*who)
                alive, ended = lives[who]
                if alive or (fixed and ended >= since):
                    theirs = np.union1d(theirs, decode_prefixes(record["keys"]))
                else:
                    out.recheck |= ended >= since
                    if seq != newest and ended < now - FORGET_AFTER_S:
                        self._forget(folder.join(f"{seq:06d}.json"))
            prefixes = np.array([key_prefix(k) for k in keys], dtype=np.uint64)
            taken = np.isin(prefixes, theirs)
            earlier = ~taken & np.isin(prefixes, before)
            new = ~taken & ~np.isin(prefixes, ours)
            if new.any():
                record = {
                    "run": self.holder.run,
                    "lease": self.holder.lease,
                    "holder": self.holder.holder,
                    "pass": pass_no,
                    "created_at": dt.datetime.now(dt.UTC).isoformat(),
                    "id": uuid.uuid4().hex,  # the record's bytes are this attempt's own (create_exclusive)
                    "count": int(new.sum()),
                    "keys": encode_prefixes(np.unique(prefixes[new])),
                }
                data = (json.dumps(record, sort_keys=True) + "\n").encode("utf-8")
                if not folder.join(f"{newest + 1:06d}.json").create_exclusive(data):
                    continue  # another run took that number first: read its record, then try again
                out.added += 1
            again = ~taken & ~earlier & np.isin(prefixes, now_ours)
            for k, t, e, a in zip(keys, taken, earlier, again):
                (out.others if t else out.earlier if e else out.mine).add(k)
                if a:
                    out.again.add(k)
            return
        raise TimeoutError(
            f"{folder.uri}: could not add a claim in {ATTEMPTS} attempts (other runs kept adding theirs)"
        )

    def _read(self, folder: Location, out: Claimed) -> tuple[int, list[tuple[int, dict]]]:
        """The newest record number of ``folder`` and the records there (one deleted meanwhile is skipped)."""
        seqs = sorted(int(m.group(1)) for f in folder.files(".json") if (m := _RECORD.match(f.uri.rsplit("/", 1)[-1])))
        records = []
        for seq in seqs:
            try:
                records.append((seq, folder.join(f"{seq:06d}.json").read_json()))
            except FileNotFoundError:
                continue
            out.records_read += 1
        return (seqs[-1] if seqs else 0), records

    def _life(self, run: str, lease: int, holder: str) -> tuple[bool, float]:
        """Whether that lease is held now, and when it ended (``time.time()``; -inf when its record is gone)."""
        try:
            record = lease_folder(self.root, run).join(f"{lease:06d}.json").read_json()
        except FileNotFoundError:
            return False, float("-inf")
        if record.get("holder") != holder:
            return False, float("-inf")
        if alive_for(record) is not None:
            return True, float("inf")
        renewed = _seconds(record["renewed_at"])
        return False, renewed if record.get("released") else renewed + float(record["ttl_s"])

    def _forget(self, loc: Location) -> None:
        try:
            loc._retrying("delete it", lambda: loc.fs.delete_file(loc.path))
        except Exception as exc:  # best effort: the next claimer tries again
            log.debug("%s: could not delete an old claim: %s", loc.uri, exc)


def by_bucket(requests: Mapping[str, tuple], context_at: int = 1) -> dict[int, list[str]]:
    """Keys of ``{key: (aspect, context_id, ...)}`` by the context bucket of their context.

    >>> by_bucket({"k1": ("coherence", "M11"), "k2": ("fluency", "M11")})
    {3: ['k1', 'k2']}
    """
    from pairank.storage.store.cache import context_bucket

    buckets: dict[str, int] = {}
    out: dict[int, list[str]] = {}
    for key, req in requests.items():
        ctx = req[context_at]
        if ctx not in buckets:
            buckets[ctx] = context_bucket(ctx)
        out.setdefault(buckets[ctx], []).append(key)
    return out
