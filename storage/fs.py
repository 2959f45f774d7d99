"""One filesystem layer for local paths and ``s3://`` URIs.

Everything pairank reads or writes goes through :class:`Location`, a
``pyarrow.fs`` filesystem plus a path. S3 settings come from the usual AWS
sources only (``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``, ``AWS_REGION`` /
``AWS_DEFAULT_REGION``, the credential chain); none is ever written to an output.

Writes are atomic: a reader sees a whole file or none. Locally a file is written
under a hidden temporary name that says which process writes it
(:func:`temporary_path`) and renamed; on S3 an object appears only when its
upload completes.

:meth:`Location.create_exclusive` is the one conditional write: it creates a
file only if no file of that name exists, and of several writers racing for one
name exactly one wins. Locally that is a hard link of the written temporary file
(``link`` fails when the name exists); on S3 a PUT with ``If-None-Match: *``
(AWS since 2024; SeaweedFS, MinIO). The nightly commit log is built on it.

Every operation of a :class:`Location` goes through :func:`pairank.storage.errors.with_retries`: transient
errors of an object store are retried, and every failure is raised as an error naming the path.
"""

from __future__ import annotations

import io
import json
import logging
import os
import posixpath
import re
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from pairank.storage.errors import CorruptFile, with_retries

log = logging.getLogger(__name__)


def decode_utf8(data: bytes, source: str) -> str:
    r"""``data`` as UTF-8 text; bytes that are not UTF-8 raise a ``ValueError`` naming ``source``, line and column.

    >>> decode_utf8("café\n".encode(), "a.txt")
    'café\n'
    >>> decode_utf8(b"one\ntw\xffo", "a.txt")
    Traceback (most recent call last):
    ...
    ValueError: a.txt: line 2, column 3: not UTF-8 text (byte 0xff)
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line_start = before.rfind(b"\n") + 1
        line = before.count(b"\n") + 1
        column = len(before[line_start:].decode("utf-8", "replace")) + 1
        raise ValueError(
            f"{source}: line {line}, column {column}: not UTF-8 text (byte 0x{data[exc.start]:02x})"
        ) from None


#: This host's name, in the names of the temporary files its processes write (:func:`temporary_path`).
HOST = socket.gethostname()
#: A temporary file of another host (or of an older pairank, whose names say no writer) is stale once not
#: modified for this long; one of this host is stale as soon as its process is gone.
STALE_TMP_S = 3600.0


def local_cache_dir() -> Path:
    """Where pairank keeps what it prepares on this machine (the embedded model, PyMC's compiled code):
    ``$XDG_CACHE_HOME/pairank``, ``~/.cache/pairank`` when unset."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pairank"


def temporary_path(path: str) -> str:
    """A hidden name beside ``path`` to write it under before it is moved into place: ``.<name>.<host>-<pid>.<random
    hex>.tmp``, which says who writes it, so that a later writer can tell one left by a process that is gone
    (:func:`remove_stale_temporaries`).

    >>> name = posixpath.basename(temporary_path("/data/out/candidates.parquet"))
    >>> name.startswith(f".candidates.parquet.{HOST}-{os.getpid()}.") and name.endswith(".tmp")
    True
    """
    name = f".{posixpath.basename(path)}.{HOST}-{os.getpid()}.{uuid.uuid4().hex}.tmp"
    return posixpath.join(posixpath.dirname(path), name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's: it runs
        return True
    return True


def remove_stale_temporaries(target: Location) -> list[str]:
    """Delete the temporary files of ``target`` (local only; on S3 an upload that did not finish leaves no object)
    whose writers are gone: of a process of this host that no longer runs, or, for another host's or a name
    without its writer, not modified for :data:`STALE_TMP_S`. A killed writer leaves its file behind; the next
    writer of the same file removes it. Returns the paths deleted."""
    if not target.is_local:
        return []
    parent, base = posixpath.split(target.path)
    pattern = re.compile(re.escape(f".{base}.") + r"(?:(?P<host>.+)-(?P<pid>\d+)\.)?[0-9a-f]{32}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(parent))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for entry in entries:
        m = pattern.fullmatch(entry.name)
        if m is None:
            continue
        try:
            if m["host"] == HOST:
                stale = int(m["pid"]) != os.getpid() and not _running(int(m["pid"]))
            else:
                stale = time.time() - entry.stat().st_mtime > STALE_TMP_S
            if stale:
                os.unlink(entry.path)
                removed.append(entry.path)
        except FileNotFoundError:  # its writer finished (or another one removed it) meanwhile
            continue
    if removed:
        log.info("%s: removed %d temporary file(s) left by writers that are gone", target.uri, len(removed))
    return removed


def check_uri(uri: str) -> str:
    """``uri`` when it names a place pairank can read or write: a local path, ``file://...`` or ``s3://bucket``
    (with or without a prefix); otherwise a ``ValueError`` saying what was expected.

    >>> check_uri("s3://bucket/runs"), check_uri("runs/store")
    ('s3://bucket/runs', 'runs/store')
    >>> check_uri("s3:///runs")
    Traceback (most recent call last):
    ...
    ValueError: 's3:///runs' names no bucket; expected s3://bucket or s3://bucket/prefix
    """
    parsed = urlparse(str(uri))
    if parsed.scheme == "s3" and not parsed.netloc:
        raise ValueError(f"{str(uri)!r} names no bucket; expected s3://bucket or s3://bucket/prefix")
    if parsed.scheme not in ("", "file", "s3"):
        raise ValueError(f"{uri}: expected a local path or an s3:// URI, found scheme {parsed.scheme!r}")
    return str(uri)


def s3_filesystem() -> pafs.S3FileSystem:
    """An S3 filesystem configured from the standard AWS environment."""
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    kwargs: dict = {"region": region}
    if endpoint:
        parsed = urlparse(endpoint)
        kwargs["endpoint_override"] = parsed.netloc or parsed.path
        kwargs["scheme"] = parsed.scheme or "https"
        # S3-compatible servers (MinIO, SeaweedFS, Ceph) expect path-style URLs.
        kwargs["force_virtual_addressing"] = False
    return pafs.S3FileSystem(**kwargs)


def s3_client():
    """A boto3 S3 client from the same AWS environment (path-style addressing for S3-compatible servers)."""
    import boto3
    from botocore.config import Config

    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    config = Config(
        s3={"addressing_style": "path"} if endpoint else {},
        retries={"mode": "standard", "max_attempts": 3},  # and Location's own retries around it
        connect_timeout=5,
        read_timeout=20,
    )
    return boto3.client("s3", endpoint_url=endpoint, region_name=region, config=config)


@dataclass(frozen=True)
class Location:
    """A folder or file on a filesystem, addressed by URI."""

    fs: pafs.FileSystem
    path: str
    uri: str

    @classmethod
    def of(cls, uri: str) -> Location:
        """Resolve ``uri`` (``s3://bucket/key``, ``file:///abs``, or a local path; see :func:`check_uri`)."""
        uri = check_uri(uri)
        parsed = urlparse(uri)
        if parsed.scheme == "s3":
            path = (parsed.netloc + parsed.path).rstrip("/")
            return cls(s3_filesystem(), path, f"s3://{path}")
        local = parsed.path if parsed.scheme == "file" else uri
        local = os.path.abspath(os.path.expanduser(local))
        return cls(pafs.LocalFileSystem(), local, local)

    @property
    def is_local(self) -> bool:
        return isinstance(self.fs, pafs.LocalFileSystem)

    def join(self, *parts: str) -> Location:
        path = posixpath.join(self.path, *parts)
        uri = posixpath.join(self.uri, *parts)
        return Location(self.fs, path, uri)

    def _retrying(self, action: str, fn):
        """``fn()`` with :func:`with_retries` (a local filesystem's errors are not transient: no waiting there)."""
        return with_retries(self.uri, action, fn, window=0.0 if self.is_local else None)

    def _type(self) -> pafs.FileType:
        return self._retrying("look it up", lambda: self.fs.get_file_info(self.path).type)

    def exists(self) -> bool:
        return self._type() != pafs.FileType.NotFound

    def not_a_file(self, what: str) -> Location:
        """This location, when it is a folder or nothing yet; a file here raises ``NotADirectoryError`` naming it as
        ``what`` (``output``, ``--root``): a storage root is a folder."""
        if self._type() == pafs.FileType.File:
            raise NotADirectoryError(
                f"{what}: {self.uri} is a file; expected a folder (local or s3://) to hold the runs"
            )
        return self

    def is_dir(self) -> bool:
        return self._type() == pafs.FileType.Directory

    def _listing(self) -> list[pafs.FileInfo]:
        selector = pafs.FileSelector(self.path, recursive=False, allow_not_found=True)

        def listing() -> list[pafs.FileInfo]:
            # Arrow's local listing of a folder that another writer creates while it looks fails although
            # allow_not_found is set: opening the folder finds nothing, then the existence check finds it
            # (seen: 4 of 3,000 races). Looked at again, the folder is there and listed as it is now.
            for _ in range(3):
                try:
                    return self.fs.get_file_info(selector)
                except FileNotFoundError:
                    if not self.is_local:
                        raise
            return self.fs.get_file_info(selector)

        return self._retrying("list it", listing)

    def files(self, suffix: str = "") -> list[Location]:
        """Visible files directly under this folder (names starting '.' or '_' are skipped), sorted."""
        out = []
        for entry in self._listing():
            name = posixpath.basename(entry.path)
            if entry.type != pafs.FileType.File or name.startswith((".", "_")) or not name.endswith(suffix):
                continue
            out.append(self.join(name))
        return sorted(out, key=lambda loc: loc.path)

    def folders(self) -> list[Location]:
        """Visible folders directly under this folder (names starting '.' or '_' are skipped), sorted."""
        names = [posixpath.basename(e.path) for e in self._listing() if e.type == pafs.FileType.Directory]
        return [self.join(n) for n in sorted(names) if not n.startswith((".", "_"))]

    def read_bytes(self) -> bytes:
        def read() -> bytes:
            with self.fs.open_input_stream(self.path) as f:
                return f.read()

        return self._retrying("read it", read)

    def read_text(self) -> str:
        """The file as UTF-8 text; bytes that are not UTF-8 are a ``ValueError`` naming the file, line and column."""
        return decode_utf8(self.read_bytes(), self.uri)

    def write_bytes(self, data: bytes) -> None:
        """Write atomically: readers see the old file, or the whole new one."""
        self._retrying("write it", lambda: self._write_bytes(data))

    def _write_bytes(self, data: bytes) -> None:
        parent = posixpath.dirname(self.path)
        if self.is_local:
            self.fs.create_dir(parent, recursive=True)
            tmp = temporary_path(self.path)
            try:
                with self.fs.open_output_stream(tmp) as f:
                    f.write(data)
                self.fs.move(tmp, self.path)
            finally:
                if self.fs.get_file_info(tmp).type != pafs.FileType.NotFound:
                    self.fs.delete_file(tmp)
        else:
            # An S3 PUT (or completed multipart upload) is atomic.
            with self.fs.open_output_stream(self.path) as f:
                f.write(data)

    def create_exclusive(self, data: bytes) -> bool:
        """Create this file with ``data`` only if it does not exist: True if this call created it.

        The whole file appears at once, and of concurrent callers exactly one gets True. ``data`` must be
        unique to the caller (commit records and leases carry a fresh id): on S3 a PUT retried after a
        stall may find its own first attempt landed, and then the file's bytes say it is ours.
        """

        def create() -> bool:
            if self._create_exclusive(data):
                return True
            if self.is_local:
                return False
            try:
                return self.read_bytes() == data
            except FileNotFoundError:
                return False

        return self._retrying("create it", create)

    def _create_exclusive(self, data: bytes) -> bool:
        parent = posixpath.dirname(self.path)
        if self.is_local:
            self.fs.create_dir(parent, recursive=True)
            tmp = temporary_path(self.path)
            with open(tmp, "wb") as f:
                f.write(data)
            try:
                os.link(tmp, self.path)
                return True
            except FileExistsError:
                return False
            finally:
                os.unlink(tmp)
        bucket, _, key = self.path.partition("/")
        try:
            s3_client().put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except Exception as exc:  # botocore's ClientError; a failed precondition means the name is taken
            code = getattr(exc, "response", {}).get("Error", {}).get("Code")
            if code in ("PreconditionFailed", "ConditionalRequestConflict"):
                return False
            raise

    def move_to(self, target: Location) -> None:
        """Move this file to ``target`` on the same filesystem (on S3: a copy, then a delete)."""

        def move() -> None:
            if self.is_local:
                self.fs.create_dir(posixpath.dirname(target.path), recursive=True)
            self.fs.move(self.path, target.path)

        self._retrying(f"move it to {target.uri}", move)

    def write_text(self, text: str) -> None:
        self.write_bytes(text.encode("utf-8"))

    def write_json(self, obj) -> None:
        self.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")

    def read_json(self):
        return json.loads(self.read_text())

    def write_parquet(self, table: pa.Table) -> None:
        buf = io.BytesIO()
        pq.write_table(table, buf, compression="zstd")
        self.write_bytes(buf.getvalue())

    def read_parquet(self) -> pa.Table:
        """The whole table; a file that is not readable Parquet raises :class:`CorruptFile` naming it.

        The bytes are fetched first and decoded after, so a storage error (an
        ``OSError``) is never mistaken for a corrupt file, nor the other way round.
        """
        data = self.read_bytes()
        try:
            return pq.read_table(pa.BufferReader(data))
        except Exception as exc:  # whatever the decoder says, the file is not readable Parquet
            said = str(exc).replace("Could not open Parquet input source '<Buffer>': ", "")
            raise CorruptFile(self.uri, f"{len(data)} bytes, {said}") from exc

    def read_columns(self, columns: list[str]) -> pa.Table:
        """Only ``columns`` of the Parquet table (a projection: the other columns' pages are never fetched); those the
        file lacks are left out. A file that is not readable Parquet raises :class:`CorruptFile` naming it.

        Read in batches into one compact table, and the memory pool's free pages handed back: decoding a whole
        column chunk at once leaves the process holding about three times the table (measured: 46 MiB for a
        13 MiB table of 320,000 ids; 19 MiB this way)."""

        def read() -> pa.Table:
            with self.fs.open_input_file(self.path) as f:
                try:
                    parquet = pq.ParquetFile(f)
                    names = [c for c in columns if c in parquet.schema_arrow.names]
                    batches = list(parquet.iter_batches(batch_size=65_536, columns=names, use_threads=False))
                    schema = pa.schema([parquet.schema_arrow.field(n) for n in names])
                    table = pa.Table.from_batches(batches, schema).combine_chunks()
                except pa.ArrowInvalid as exc:
                    raise CorruptFile(self.uri, str(exc)) from exc
            del batches
            pa.default_memory_pool().release_unused()
            return table

        return self._retrying("read it", read)

    def iter_parquet(self, rows: int = 8192):
        """The Parquet table in parts of at most ``rows`` rows, in table order, read as they are asked for (a
        large table is never held whole). A file that is not readable Parquet raises :class:`CorruptFile`."""
        f = self._retrying("open it", lambda: self.fs.open_input_file(self.path))
        with f:
            try:
                parquet = pq.ParquetFile(f, pre_buffer=False, buffer_size=1 << 20)
                schema = parquet.schema_arrow
                for batch in parquet.iter_batches(batch_size=rows, use_threads=False):
                    yield pa.Table.from_batches([batch], schema)
            except pa.ArrowInvalid as exc:
                raise CorruptFile(self.uri, str(exc)) from exc

    def __str__(self) -> str:
        return self.uri
