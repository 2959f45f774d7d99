"""The judgment store's former format, a folder of Parquet parts: read for ``pairank store migrate`` and replay.

Until the stores became Delta tables (:mod:`pairank.storage.store.cache`), each flush
wrote one ``part-<utc time>-<uuid>.parquet`` under ``<root>/judgments/`` (and
``<root>/passes/``). Such a folder is still read here, never written: ``pairank
store migrate`` copies it into the Delta tables, and a replay judge or a
win-rate cross-check may name one as its source.
"""

from __future__ import annotations

import posixpath

import pyarrow as pa

from pairank.storage.errors import CorruptFile
from pairank.storage.fs import Location
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import latest_per_key
from pairank.storage.validation import validate


class PartFolder:
    """A folder of Parquet parts of one schema (the former judgment cache)."""

    def __init__(self, folder: Location, schema: pa.Schema = JUDGMENTS):
        self.folder, self.schema = folder, schema

    def parts(self) -> list[Location]:
        return self.folder.files(suffix=".parquet")

    def read_part(self, part: Location) -> pa.Table:
        """One part, validated; a corrupt part is named."""
        try:
            return validate(part.read_parquet(), self.schema, part.uri)
        except CorruptFile as exc:
            root = posixpath.dirname(self.folder.uri.rstrip("/"))
            raise CorruptFile(
                exc.uri, exc.reason, f"`pairank store verify --root {root} --quarantine` moves it aside"
            ) from exc

    def rows(self) -> pa.Table:
        """Every row of every part, none merged."""
        tables = [self.read_part(part) for part in self.parts()]
        return pa.concat_tables(tables) if tables else self.schema.empty_table()

    def read(self) -> pa.Table:
        """One row per key (as the Delta store merges)."""
        return latest_per_key(self.rows())
