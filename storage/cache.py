"""The judgment cache: an append-only folder of Parquet parts, keyed.

The same store, with the PASSES schema, keeps the first passes of multi-pass
judging modes (PRePair analyses, pointwise scores), so an output is analysed
once however often it is compared.

Each flush writes one new part atomically (``part-<utc time>-<uuid>.parquet``),
so a run killed midway keeps every part it finished and a reader never sees a
half-written one. Parts are never rewritten, so concurrent writers cannot
corrupt each other's work. Reading merges the parts and keeps one row per key:
a verdict beats an error row, and a newer row beats an older one of the same
kind.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import uuid

import pyarrow as pa
import pyarrow.compute as pc

from pairank.storage.fs import CorruptFile, Location
from pairank.storage.schemas import JUDGMENTS, validate


class JudgmentCache:
    """Judgments under one folder, looked up by key."""

    def __init__(self, folder: Location, schema: pa.Schema = JUDGMENTS):
        self.folder, self.schema = folder, schema

    def parts(self) -> list[Location]:
        return self.folder.files(suffix=".parquet")

    def read(self) -> pa.Table:
        """Every part, validated against the cache's schema, one row per key."""
        tables = [self.read_part(part) for part in self.parts()]
        if not tables:
            return self.schema.empty_table()
        return latest_per_key(pa.concat_tables(tables))

    def read_part(self, part: Location) -> pa.Table:
        """One part, validated; a corrupt part is named with the command that moves it aside."""
        try:
            return validate(part.read_parquet(), self.schema, part.uri)
        except CorruptFile as exc:
            root = posixpath.dirname(self.folder.uri.rstrip("/"))
            hint = (
                f"`pairank store verify --root {root} --quarantine` moves it aside and its comparisons are asked again"
            )
            raise CorruptFile(exc.uri, exc.reason, hint) from exc

    def answered(self, table: pa.Table | None = None) -> pa.Table:
        """Rows with a verdict (no error): these are never asked again."""
        table = self.read() if table is None else table
        return table.filter(pc.is_null(table.column("error")))

    def append(self, table: pa.Table) -> Location | None:
        """Write ``table`` as one new part; returns it (None for an empty table)."""
        if table.num_rows == 0:
            return None
        table = validate(table, self.schema, f"rows to append to {self.folder.uri}")
        stamp = dt.datetime.now(dt.timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        part = self.folder.join(f"part-{stamp}-{uuid.uuid4().hex[:8]}.parquet")
        part.write_parquet(table)
        return part


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
