"""A run's lease on its name under a storage root: one run of a name at a time.

::

    <output>/leases/<name>/000001.json    {"holder", "host", "pid", "taken_at", "renewed_at", "ttl_s", "released"}

Two runs of one name on one root would judge the same comparisons and pay for
them twice. :func:`take` reads the newest record: if it is held (not released,
and renewed less than ``ttl_s`` seconds ago) the second run is **refused** with
:class:`LeaseHeld` (exit 4, nothing judged); otherwise it creates the next record
with :meth:`pairank.storage.fs.Location.create_exclusive`, so of two runs starting
together exactly one gets the name. While the run goes, a thread renews the
record every ``ttl_s / 4`` seconds; at the end it is marked released. A run that
was killed holds its name until ``ttl_s`` seconds after its last renewal
(``PAIRANK_LEASE_TTL_S``, default 60), then the next run takes it over.

The clocks of the machines sharing a root are assumed to agree to well within
``ttl_s`` (NTP).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Self

from pairank.storage.fs import Location

log = logging.getLogger(__name__)

_RECORD = re.compile(r"^(\d{6,})\.json$")


def lease_ttl() -> float:
    """Seconds a lease outlives its last renewal (``PAIRANK_LEASE_TTL_S``, default 60)."""
    raw = os.environ.get("PAIRANK_LEASE_TTL_S", "60")
    try:
        ttl = float(raw)
    except ValueError:
        ttl = -1.0
    if not ttl > 0:
        raise ValueError(f"PAIRANK_LEASE_TTL_S={raw!r}: expected a positive number of seconds")
    return ttl


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaseHeld(RuntimeError):
    """Another run holds the name: this one is refused before it judges anything."""

    def __init__(self, name: str, root: str, record: dict, age: float):
        who = f"{record.get('host', '?')} pid {record.get('pid', '?')}"
        ttl = record.get("ttl_s")
        left = max(0.0, float(ttl) - age) if isinstance(ttl, (int, float)) else None
        retry = ""
        if left is not None:
            at = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=left)).strftime("%H:%M:%S UTC")
            retry = f": if that run is dead (killed, its machine lost), run again in {left:.0f} s, after {at}"
        super().__init__(
            f"run {name!r} under {root} is already running ({who}, started {record.get('taken_at')}, "
            f"alive {age:.0f} s ago). Two runs of one name would pay for the same comparisons twice: wait for it "
            f"to finish, or give this run another name. A run that was killed gives its name up "
            f"{ttl} s after it was last alive{retry}."
        )
        self.record = record


@dataclass
class Lease:
    """A held lease; :meth:`release` (or leaving the ``with`` block) gives it up."""

    folder: Location
    seq: int
    record: dict
    _stop: threading.Event = field(default_factory=threading.Event, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def file(self) -> Location:
        return self.folder.join(f"{self.seq:06d}.json")

    def _write(self) -> None:
        self.file.write_bytes(_encode(self.record))

    def _renew_loop(self) -> None:
        interval = float(self.record["ttl_s"]) / 4
        while not self._stop.wait(interval):
            try:
                if newest(self.folder)[0] != self.seq:
                    log.error("%s: the lease was taken over by another run (this one was silent too long)", self.file)
                    return
                self.record["renewed_at"] = _now().isoformat()
                self._write()
            except Exception as exc:
                log.warning("%s: could not renew the lease: %s", self.file, exc)

    def start(self) -> Lease:
        self._thread = threading.Thread(target=self._renew_loop, name="pairank-lease", daemon=True)
        self._thread.start()
        return self

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if newest(self.folder)[0] == self.seq:
            self.record.update(released=True, renewed_at=_now().isoformat())
            self._write()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def _encode(record: dict) -> bytes:
    return (json.dumps(record, indent=2, sort_keys=True) + "\n").encode("utf-8")


def lease_folder(root: Location, name: str) -> Location:
    return root.join("leases", name)


def newest(folder: Location) -> tuple[int, dict | None]:
    """The highest record number under ``folder`` and its record (0 and None when there is none)."""
    seqs = [int(m.group(1)) for f in folder.files(".json") if (m := _RECORD.match(f.uri.rsplit("/", 1)[-1]))]
    if not seqs:
        return 0, None
    seq = max(seqs)
    return seq, folder.join(f"{seq:06d}.json").read_json()


def alive_for(record: dict | None, now: dt.datetime | None = None) -> float | None:
    """Seconds since the holder was last alive, if the lease is held; None when free (released or expired)."""
    if record is None or record.get("released"):
        return None
    age = ((now or _now()) - dt.datetime.fromisoformat(record["renewed_at"])).total_seconds()
    return age if age < float(record["ttl_s"]) else None


def is_held(root: Location, name: str) -> bool:
    """Whether a run of ``name`` holds its lease under ``root`` now."""
    return alive_for(newest(lease_folder(root, name))[1]) is not None


#: The id of the process the user started for the run, when another one runs its driver (``pairank run`` joining a
#: cluster runs it in a watched child, jobs/cli/supervise.py): the pid a lease names is the one to stop.
RUN_PID_ENV = "PAIRANK_RUN_PID"


def run_pid() -> int:
    """The process that holds a run's name, as the user knows it (:data:`RUN_PID_ENV`, else this one)."""
    given = os.environ.get(RUN_PID_ENV, "")
    return int(given) if given.isdigit() else os.getpid()


def release_left(root: Location, name: str, pid: int, host: str | None = None) -> bool:
    """Give up the lease of ``name`` that process ``pid`` of ``host`` (this one by default) holds and can no longer
    release: a driver ended from outside (``pairank run``'s watcher releases its child's, jobs/cli/supervise.py).
    False when the newest record is another holder's, or free already."""
    folder = lease_folder(root, name)
    seq, record = newest(folder)
    if record is None or record.get("released") or record.get("pid") != pid:
        return False
    if record.get("host") != (host or socket.gethostname()):
        return False
    record.update(released=True, renewed_at=_now().isoformat())
    folder.join(f"{seq:06d}.json").write_bytes(_encode(record))
    return True


def take(root: Location, name: str, ttl: float | None = None) -> Lease:
    """Take the lease of ``name`` under ``root`` (renewed in the background), or raise :class:`LeaseHeld`."""
    folder = lease_folder(root, name)
    seq, record = newest(folder)
    age = alive_for(record)
    if record is not None and age is not None:
        raise LeaseHeld(name, root.uri, record, age)
    now = _now().isoformat()
    mine = {
        "holder": uuid.uuid4().hex,
        "host": socket.gethostname(),
        "pid": run_pid(),
        "taken_at": now,
        "renewed_at": now,
        "ttl_s": ttl or lease_ttl(),
        "released": False,
    }
    if not folder.join(f"{seq + 1:06d}.json").create_exclusive(_encode(mine)):
        _, record2 = newest(folder)
        raise LeaseHeld(name, root.uri, record2 or {}, alive_for(record2) or 0.0)
    return Lease(folder, seq + 1, mine).start()
