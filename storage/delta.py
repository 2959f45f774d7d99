"""Delta Lake tables on a :class:`~pairank.storage.fs.Location`: open, create, append, scan.

pairank's stores (judgments, first passes) are Delta tables written with the
``deltalake`` package (delta-rs: no JVM, no catalog service). Every append is one
Delta commit: it appears whole or not at all, and concurrent writers each get
their own version.

**Committing safely on S3.** A Delta commit creates ``_delta_log/<version>.json``
and must fail if another writer created that version first. delta-rs does that
with a conditional PUT (``If-None-Match: *``), which it uses when the storage
option ``conditional_put`` is ``etag``: AWS S3 (since 2024), SeaweedFS and MinIO
support it, so no lock service (DynamoDB) is needed. :func:`storage_options`
sets it, with the endpoint and region of pairank's own S3 settings
(``AWS_ENDPOINT_URL[_S3]``, ``AWS_REGION``); credentials come from the usual
AWS environment. On a local disk delta-rs commits by an atomic rename that fails
when the name exists.

**Conflicts.** Blind appends never conflict in Delta; delta-rs re-reads the log and
tries the next version when it lost a race. Under heavy contention it gives up
after its own retries (``CommitFailedError``); :func:`append` then tries again,
with jittered backoff, for up to :data:`COMMIT_RETRY_S` seconds. A commit that
failed wrote no log entry, so trying again cannot add the rows twice (its data
files are unreferenced and ``vacuum`` removes them).
"""

from __future__ import annotations

import json
import logging
import os
import posixpath
import random
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from pairank.storage.errors import StorageError, delta_said
from pairank.storage.fs import Location
from pairank.storage.store.damage import damaged_commit

log = logging.getLogger(__name__)

#: How long an append keeps retrying commits lost to other writers.
COMMIT_RETRY_S = 120.0


def storage_options(loc: Location) -> dict[str, str] | None:
    """delta-rs storage options for ``loc``: None locally; on S3 the endpoint, region and conditional commits."""
    if loc.is_local:
        return None
    opts = {
        "AWS_REGION": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1",
        "conditional_put": "etag",
        # delta-rs retries a failed request itself, 10 times over up to 3 min by default: a few times here, so
        # that pairank's own retries (storage/fs.py), within PAIRANK_STORAGE_RETRY_S, say how long to wait.
        "max_retries": "3",
        "retry_timeout": "10s",
    }
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    if endpoint:
        opts["AWS_ENDPOINT_URL"] = endpoint
        if endpoint.startswith("http://"):
            opts["AWS_ALLOW_HTTP"] = "true"
    return opts


def table_uri(loc: Location) -> str:
    return loc.path if loc.is_local else loc.uri


def is_table(loc: Location) -> bool:
    """Whether ``loc`` holds a Delta table (its ``_delta_log`` has a commit)."""
    from deltalake import DeltaTable

    if not loc.join("_delta_log").is_dir():  # also: a file, or nothing, at ``loc``
        return False
    return bool(
        loc._retrying("look up its Delta log", lambda: DeltaTable.is_deltatable(table_uri(loc), storage_options(loc)))
    )


def open_table(loc: Location, version: int | None = None):
    """The :class:`deltalake.DeltaTable` at ``loc`` (at ``version``, else the newest); FileNotFoundError if none,
    :class:`~pairank.storage.store.damage.CorruptLog` naming the commit of its log that does not read."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return loc._retrying(
            "open the Delta table",
            lambda: DeltaTable(table_uri(loc), version=version, storage_options=storage_options(loc)),
        )
    except TableNotFoundError:
        raise FileNotFoundError(f"{loc.uri}: no Delta table here") from None
    except Exception as exc:  # delta-rs' DeltaError for a version that does not exist, a bad log
        damaged = damaged_commit(loc)  # read only now, after a failure
        if damaged is not None and (version is None or damaged.version <= version):
            raise damaged from exc
        at = f" at version {version}" if version is not None else ""
        raise StorageError(loc.uri, f"open the Delta table{at}", RuntimeError(delta_said(exc))) from exc


def ensure_table(loc: Location, schema: pa.Schema, partition_by: Sequence[str], wait_s: float = 30.0) -> None:
    """Create the table at ``loc`` if there is none. Of writers racing to create it, the one that creates the
    marker ``.<name>.creating`` beside it (a conditional create) commits the CREATE TABLE and the others wait for
    it: delta-rs alone would let two of them commit one (versions 0 and 1), and the second would fail the
    first writers' commits on top of version 0. A creator that died leaves the marker: after ``wait_s`` the
    others create the table themselves."""
    from deltalake import DeltaTable
    from deltalake.exceptions import CommitFailedError

    if is_table(loc):
        return
    path, uri = loc.path.rstrip("/"), loc.uri.rstrip("/")
    parent = Location(loc.fs, posixpath.dirname(path), posixpath.dirname(uri))
    marker = parent.join(f".{posixpath.basename(path)}.creating")
    if not marker.create_exclusive(f"{uuid.uuid4().hex}\n".encode()):
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if is_table(loc):
                return
            time.sleep(0.05)
    try:
        loc._retrying(
            "create the Delta table",
            lambda: DeltaTable.create(
                table_uri(loc),
                schema=schema,
                partition_by=list(partition_by),
                mode="ignore",
                storage_options=storage_options(loc),
            ),
        )
    except CommitFailedError:  # another writer created it first
        if not is_table(loc):
            raise


def append(loc: Location, table: pa.Table, metadata: dict[str, str] | None = None) -> int:
    """Append ``table`` to the Delta table at ``loc`` as one commit; returns the version it became."""
    from deltalake import CommitProperties, WriterProperties, write_deltalake
    from deltalake.exceptions import CommitFailedError

    props = CommitProperties(custom_metadata=metadata or {})
    start, delay = time.monotonic(), 0.05
    while True:
        dt = open_table(loc)
        try:
            loc._retrying(
                "append to the Delta table",
                lambda dt=dt: write_deltalake(
                    dt,
                    table,
                    mode="append",
                    writer_properties=WriterProperties(compression="ZSTD"),
                    commit_properties=props,
                ),
            )
            return dt.version()  # the table object moved to the version its own commit made
        except CommitFailedError as exc:
            if time.monotonic() - start > COMMIT_RETRY_S:
                raise StorageError(loc.uri, "commit an append (other writers kept winning)", exc) from exc
            time.sleep(random.uniform(delay / 2, delay))
            delay = min(delay * 2, 2.0)


def dataset(loc: Location, version: int | None = None) -> pads.Dataset:
    """The table's data files as a pyarrow dataset read through ``loc``'s own filesystem (partition columns filled)."""
    dt = open_table(loc, version)
    fs = pafs.SubTreeFileSystem(loc.path, loc.fs)
    return dt.to_pyarrow_dataset(filesystem=fs)


def scan(loc: Location, expression: pads.Expression | None, version: int | None = None) -> pa.Table:
    """The rows of the table that satisfy ``expression`` (partition filters prune files, the rest filters rows)."""
    data = dataset(loc, version)
    return loc._retrying("read the Delta table", lambda: data.to_table(filter=expression))


@dataclass(frozen=True)
class Commit:
    """What one version of a table did to its data files (from its log entry)."""

    version: int
    operation: str
    #: Data files added and removed, as paths relative to the table (decoded, as :func:`dataset` names them).
    added: tuple[str, ...]
    removed: tuple[str, ...]
    #: Whether the rows changed (an append, a delete); False for a rewrite of the same rows (OPTIMIZE).
    data_change: bool


def commit_at(loc: Location, version: int) -> Commit | None:
    """The log entry of ``version`` (``_delta_log/<version>.json``), or None when there is none: not written
    yet, or removed with the log's older entries after a checkpoint (:func:`last_checkpoint` tells which)."""
    try:
        text = loc.join("_delta_log", f"{version:020d}.json").read_text()
    except FileNotFoundError:
        return None
    operation, changed = "", False
    added: list[str] = []
    removed: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        if "commitInfo" in action:
            operation = action["commitInfo"].get("operation") or ""
        for kind, paths in (("add", added), ("remove", removed)):
            if kind in action:
                paths.append(unquote(action[kind]["path"]))
                changed = changed or bool(action[kind].get("dataChange", True))
    return Commit(version, operation, tuple(added), tuple(removed), changed)


def last_checkpoint(loc: Location) -> int | None:
    """The version of the table's newest checkpoint (``_delta_log/_last_checkpoint``), None before the first."""
    try:
        return int(json.loads(loc.join("_delta_log", "_last_checkpoint").read_text())["version"])
    except FileNotFoundError:
        return None
