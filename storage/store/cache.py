"""The judgment cache: a Delta Lake table of judgments, keyed.

The same store, with the PASSES schema, keeps the first passes of multi-pass
judging modes (PRePair analyses, pointwise scores), so an output is analysed
once however often it is compared.

Each flush is one Delta commit (:func:`pairank.storage.delta.append`): a run killed
midway keeps every flush it committed and a reader never sees a half-written
one; concurrent writers each add their own commit. Reading merges the rows of a
key: a verdict beats an error row, and a newer row beats an older one of the
same kind.

**Partitioning** (how runs read). The table is partitioned by ``aspect`` and by
``bucket``, one of :data:`BUCKETS` buckets of the context id (a hash). A run
knows its aspects and contexts before it reads, so it reads only the files of its
own partitions, then keeps the rows of its own keys. The judge identity is not a
partition: it is part of every key, and a replayed judgment carries the source
judge's model, so the key filter is what selects a judge's rows. The bucket
count is fixed for a table's life (the readers compute the same hash).
"""

from __future__ import annotations

import getpass
import hashlib
import os
import posixpath
import socket
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from pairank.storage import delta
from pairank.storage.errors import CorruptFile, StorageError, StorageUnavailable, is_transient
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.damage import MissingFile, verify_hint
from pairank.storage.validation import TableError, validate

#: Context buckets of a store (a partition column): enough that a run of a few contexts reads a small share of
#: a large store, few enough that a flush writes a handful of files per aspect.
BUCKETS = 16
PARTITIONS = ("aspect", "bucket")


def context_bucket(context_id: str) -> int:
    """The partition bucket of a context (stable across processes and versions).

    >>> context_bucket("M11"), context_bucket("M11") == context_bucket("M12")
    (3, False)
    """
    return int(hashlib.sha256(context_id.encode("utf-8")).hexdigest()[:8], 16) % BUCKETS


def with_buckets(table: pa.Table) -> pa.Table:
    """``table`` with its ``bucket`` column (from ``context_id``)."""
    contexts = table.column("context_id").to_pylist()
    bucket_of = {c: context_bucket(c) for c in set(contexts)}  # each context hashed once
    buckets = [bucket_of[c] for c in contexts]
    return table.append_column(pa.field("bucket", pa.int32(), nullable=False), pa.array(buckets, pa.int32()))


def writer_name() -> str:
    """Who appends: user@host:pid, recorded in every commit (``pairank store history``)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in a container
        user = str(os.getuid())
    return f"{user}@{socket.gethostname()}:{os.getpid()}"


class FormerStore(ValueError):
    """The root holds a store in the former part-folder format that was not migrated."""


class JudgmentCache:
    """Judgments (or first passes) in one Delta table, read by scope and looked up by key."""

    def __init__(self, folder: Location, schema: pa.Schema = JUDGMENTS, writer: str = ""):
        self.folder, self.schema, self.writer = folder, schema, writer

    @property
    def table_schema(self) -> pa.Schema:
        return self.schema.append(pa.field("bucket", pa.int32(), nullable=False))

    @property
    def root(self) -> Location:
        """The storage root of a store at ``<root>/tables/<name>``."""
        return Location.of(self.folder.uri.rsplit("/", 2)[0])

    def exists(self) -> bool:
        return delta.is_table(self.folder)

    def rows(
        self,
        aspects: Iterable[str] | None = None,
        contexts: Iterable[str] | None = None,
        keys: Iterable[str] | None = None,
        version: int | None = None,
    ) -> pa.Table:
        """Every committed row in scope (none merged), validated against the cache's schema."""
        if not self.exists():
            self._check_not_former()
            return self.schema.empty_table()
        expression = scope(aspects, contexts, keys)
        data = delta.dataset(self.folder, version)
        try:
            table = self.folder._retrying("read the Delta table", lambda: data.to_table(filter=expression))
        except StorageUnavailable:
            raise
        except (OSError, pa.ArrowInvalid) as exc:  # a data file that is gone (FileNotFoundError) or does not decode
            if is_transient(exc):
                raise
            raise self._corrupt(expression, version, exc) from exc
        try:
            return validate(table.select(self.schema.names), self.schema, self.folder.uri)
        except TableError as exc:
            raise self._corrupt(expression, version, exc) from exc

    def read(
        self,
        aspects: Iterable[str] | None = None,
        contexts: Iterable[str] | None = None,
        keys: Iterable[str] | None = None,
        version: int | None = None,
    ) -> pa.Table:
        """One row per key in scope (all of the store when no scope is given); see :func:`latest_per_key`."""
        return latest_per_key(self.rows(aspects, contexts, keys, version))

    def answered(self, table: pa.Table | None = None, **scope_) -> pa.Table:
        """Rows with a verdict (no error): these are never asked again. ``scope_``: as :meth:`read`'s."""
        table = self.read(**scope_) if table is None else table
        return table.filter(pc.is_null(table.column("error")))

    def append(self, table: pa.Table) -> int | None:
        """Commit ``table`` as one new version; returns it (None for an empty table)."""
        if table.num_rows == 0:
            return None
        table = validate(table, self.schema, f"rows to append to {self.folder.uri}")
        if not self.exists():  # looked up once per append: the table, once made, stays
            self._check_not_former()
            delta.ensure_table(self.folder, self.table_schema, PARTITIONS)
        metadata = {"pairank.writer": writer_name(), "pairank.rows": str(table.num_rows)}
        if self.writer:
            metadata["pairank.job"] = self.writer
        return delta.append(self.folder, with_buckets(table), metadata)

    def _check_not_former(self) -> None:
        """No table yet: if the root holds this store in the former part-folder format, say how to migrate it."""
        if posixpath.basename(posixpath.dirname(self.folder.path)) != "tables":
            return
        root = self.root
        former = root.join(posixpath.basename(self.folder.path))
        if former.files(suffix=".parquet"):
            raise FormerStore(
                f"{former.uri} holds this store in its former format (Parquet parts) and {self.folder.uri} has no "
                f"Delta table yet: `pairank store migrate --root {root.uri}` copies it there (the parts are left "
                "as they are); runs and leaderboards then read the table"
            )

    def version(self) -> int | None:
        """The newest version (None before the first append)."""
        return delta.open_table(self.folder).version() if self.exists() else None

    def files(self, version: int | None = None) -> list[str]:
        """The data files of ``version`` (default: the newest), relative to the table's folder, sorted."""
        if not self.exists():
            return []
        return sorted(frag.path for frag in delta.dataset(self.folder, version).get_fragments())

    def stored_files(self) -> set[str]:
        """The Parquet files under the table's folder, listed by its newest version or not (relative paths)."""
        selector = pafs.FileSelector(self.folder.path, recursive=True, allow_not_found=True)
        found = self.folder._retrying("list it", lambda: self.folder.fs.get_file_info(selector))
        prefix = self.folder.path.rstrip("/") + "/"
        paths = (e.path.removeprefix(prefix) for e in found if e.is_file and e.path.endswith(".parquet"))
        return {p for p in paths if not p.startswith(("_", "."))}  # not _delta_log's checkpoints

    def check(self) -> None:
        """The table opens, and every data file of its newest version is there (not read): otherwise the
        :class:`~pairank.storage.store.damage.CorruptLog` or :class:`~pairank.storage.store.damage.MissingFile`
        naming it."""
        listed = self.files()
        if not listed:
            return
        stored = self.stored_files()
        for path in listed:
            if path not in stored:
                raise MissingFile(self.folder.join(path).uri, self._hint("commits a version without it"))

    def read_files(self, paths: Iterable[str], version: int | None = None) -> pa.Table:
        """The rows of the given data files of ``version`` (default: the newest; paths as :meth:`files` gives
        them), validated; a corrupt one is named."""
        wanted = set(paths)
        data = delta.dataset(self.folder, version)
        tables = [self._read_fragment(frag, data.schema) for frag in data.get_fragments() if frag.path in wanted]
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def _read_fragment(self, frag, schema: pa.Schema) -> pa.Table:
        """One data file, validated: a file that does not decode is a :class:`CorruptFile`, bad rows a
        :class:`TableError`, each naming the file."""
        loc = self.folder.join(frag.path)
        try:
            table = self.folder._retrying("read a data file", lambda: frag.to_table(schema=schema))
        except (OSError, pa.ArrowInvalid) as exc:
            if is_transient(exc):
                raise
            if not loc.exists():
                raise MissingFile(loc.uri, self._hint("commits a version without it")) from exc
            size = loc.fs.get_file_info(loc.path).size
            said = str(exc).replace(f"Could not open Parquet input source '{frag.path}': ", "")
            raise CorruptFile(loc.uri, f"{size} bytes, {said}", self._hint("moves it aside")) from exc
        return validate(table.select(self.schema.names), self.schema, loc.uri)

    def _corrupt(self, expression, version, exc: BaseException) -> BaseException:
        """The error of a scan that failed: the file it met that is gone, does not read or does not validate,
        found by reading the scanned files one by one (only after a failure)."""
        data = delta.dataset(self.folder, version)
        for frag in data.get_fragments(filter=expression):
            try:
                self._read_fragment(frag, data.schema)
            except (CorruptFile, TableError) as found:
                return found
        if isinstance(exc, (TableError, StorageError)):
            return exc
        return StorageError(self.folder.uri, "read the Delta table", exc)

    def _hint(self, does: str) -> str:
        """How to repair the store, for a data file of it that is gone or does not read."""
        hint = verify_hint(self.folder, does)
        return f"{hint} and its comparisons are asked again" if hint else ""


def scope(
    aspects: Iterable[str] | None, contexts: Iterable[str] | None, keys: Iterable[str] | None
) -> pads.Expression | None:
    """The filter of a read: partitions of the aspects and the contexts' buckets, then contexts and keys by row."""
    parts = []
    if aspects is not None:
        parts.append(pads.field("aspect").isin(pa.array(sorted(set(aspects)), pa.string())))
    if contexts is not None:
        contexts = sorted(set(contexts))
        buckets = sorted({context_bucket(c) for c in contexts})
        parts.append(pads.field("bucket").isin(pa.array(buckets, pa.int32())))
        parts.append(pads.field("context_id").isin(pa.array(contexts, pa.string())))
    if keys is not None:
        parts.append(pads.field("key").isin(pa.array(sorted(set(keys)), pa.string())))
    if not parts:
        return None
    out = parts[0]
    for p in parts[1:]:
        out = out & p
    return out


def latest_per_key(table: pa.Table) -> pa.Table:
    """One row per key: verdicts over errors, then the newest.

    >>> import datetime as dt
    >>> t0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)
    >>> rows = [dict(key="k", error="boom", created_at=t0 + dt.timedelta(1)),
    ...         dict(key="k", error=None, created_at=t0)]
    >>> latest_per_key(pa.Table.from_pylist(rows)).column("error").to_pylist()
    [None]
    """
    if table.num_rows == 0:
        return table
    ok = pc.is_null(table.column("error")).cast(pa.int8())
    order = pc.sort_indices(
        pa.table({"key": table.column("key"), "ok": ok, "t": table.column("created_at")}),
        sort_keys=[("key", "ascending"), ("ok", "descending"), ("t", "descending")],
    )
    table = table.take(order)
    keys = table.column("key").to_pylist()
    first = [i for i, k in enumerate(keys) if i == 0 or keys[i - 1] != k]
    return table.take(pa.array(first, type=pa.int64()))
