"""Storage's errors and how they are retried: which failures are transient, the retry loop with its shared
outage windows, the errors pairank raises (they name the path; they pickle whole, as Ray sends a task's error to
the driver), a full disk told with the space left there, and delta-rs' messages without their Rust backtrace.

Object stores fail for a while and come back (a throttled bucket, a restarted gateway, a stalled connection).
:func:`with_retries` retries such transient errors with capped exponential backoff until
``PAIRANK_STORAGE_RETRY_S`` seconds (default 120) after the store began failing, then raises
:class:`StorageUnavailable`. The window is a deadline for the outage, shared by every operation of the process
(:class:`Outages`), not one per step. Other failures (no such path, a file where a folder should be, access
denied) are not retried: they raise :class:`StorageError` naming the path, or ``FileNotFoundError``; a full disk
raises :class:`DiskFull`, naming the path and the space left there.
"""

from __future__ import annotations

import errno
import logging
import os
import pickle
import random
import re
import shutil
import threading
import time
from urllib.parse import urlparse

log = logging.getLogger(__name__)

#: Words of pyarrow's (AWS SDK's) and botocore's messages for errors worth retrying.
TRANSIENT_MARKERS = (
    "NETWORK_CONNECTION",
    "curlCode",
    "SLOW_DOWN",
    "SERVICE_UNAVAILABLE",
    "INTERNAL_FAILURE",
    "REQUEST_TIMEOUT",
    "THROTTLING",
    "Timeout was reached",
    "timed out",
    "Connection reset",
    "Connection refused",
    "Broken pipe",
    "HTTP status 5",
    "HTTP response code: 5",
)
#: botocore's exceptions for a connection that failed or stalled.
TRANSIENT_BOTOCORE = {
    "EndpointConnectionError",
    "ConnectionClosedError",
    "ReadTimeoutError",
    "ConnectTimeoutError",
    "ConnectionError",
    "HTTPClientError",
    "ResponseStreamingError",
}
TRANSIENT_CODES = {"SlowDown", "ServiceUnavailable", "InternalError", "RequestTimeout", "Throttling", "503", "500"}


def retry_window() -> float:
    """Seconds an S3 operation keeps retrying transient errors (``PAIRANK_STORAGE_RETRY_S``, default 120)."""
    raw = os.environ.get("PAIRANK_STORAGE_RETRY_S", "120")
    try:
        return max(0.0, float(raw))
    except ValueError:
        raise ValueError(f"PAIRANK_STORAGE_RETRY_S={raw!r}: expected a number of seconds") from None


def is_transient(exc: BaseException) -> bool:
    """Whether a storage error may go away by itself (network, timeouts, throttling, 5xx)."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, FileExistsError)):
        return False
    if type(exc).__module__.startswith("botocore"):
        if type(exc).__name__ in TRANSIENT_BOTOCORE:
            return True
        return str(getattr(exc, "response", {}).get("Error", {}).get("Code")) in TRANSIENT_CODES
    return isinstance(exc, OSError) and any(m in str(exc) for m in TRANSIENT_MARKERS)


def rebuilt(cls: type[BaseException], message: str, state: dict) -> BaseException:
    """An error of pairank's as it was pickled: its class, its message and its attributes.

    Ray sends the error a task raised to the driver pickled. An error whose constructor takes other arguments
    than its message does not unpickle by itself (Ray then says only ``UnserializableException``), so pairank's
    errors pickle as this call (their ``__reduce__``), and an error among their attributes that does not pickle
    (delta-rs' do not) goes as its text.

    >>> import pickle
    >>> exc = pickle.loads(pickle.dumps(StorageError("s3://b/t", "read it", TimeoutError("slow"))))
    >>> type(exc).__name__, str(exc), exc.uri
    ('StorageError', 's3://b/t: could not read it: slow', 's3://b/t')
    """
    exc = cls.__new__(cls)
    BaseException.__init__(exc, message)
    exc.__dict__.update(state)
    return exc


def _sendable(value):
    if not isinstance(value, BaseException):
        return value
    try:
        pickle.loads(pickle.dumps(value))
        return value
    except Exception:
        return RuntimeError(str(value))


def reduced(exc: BaseException) -> tuple:
    """``exc.__reduce__()`` for pairank's errors (see :func:`rebuilt`)."""
    return rebuilt, (type(exc), str(exc), {k: _sendable(v) for k, v in exc.__dict__.items()})


class StorageError(OSError):
    """A storage operation failed for a reason retrying will not fix (a file where a folder should be, no access)."""

    def __init__(self, uri: str, action: str, cause: BaseException):
        super().__init__(f"{uri}: could not {action}: {cause}")
        self.uri, self.action, self.cause = uri, action, cause

    __reduce__ = reduced


class StorageUnavailable(StorageError):
    """The object store kept failing with transient errors for the whole retry window."""

    def __init__(self, uri: str, action: str, cause: BaseException, waited: float, attempts: int):
        OSError.__init__(
            self,
            f"{uri}: could not {action}: the storage kept failing for {waited:.0f} s "
            f"({attempts} attempt{'s' if attempts != 1 else ''}); "
            f"last error: {cause}. Check that the object store is up and reachable (AWS_ENDPOINT_URL="
            f"{os.environ.get('AWS_ENDPOINT_URL_S3') or os.environ.get('AWS_ENDPOINT_URL') or 'unset'}); "
            "PAIRANK_STORAGE_RETRY_S sets how long to keep trying",
        )
        self.uri, self.action, self.cause, self.waited, self.attempts = uri, action, cause, waited, attempts


#: How a full disk is told: ENOSPC's text, and delta-rs' (Rust's own, "... (os error 28)").
DISK_FULL_MARKERS = ("No space left on device", "(os error 28)")


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc``, or an error it was raised from, is a full disk (``ENOSPC``, also inside delta-rs' errors)."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        if (isinstance(at, OSError) and at.errno == errno.ENOSPC) or any(m in str(at) for m in DISK_FULL_MARKERS):
            return True
        at = at.__cause__ or at.__context__
    return False


def free_space(uri: str) -> str:
    """How much room the device holding ``uri`` has now, as told in a message: "12.0 KiB free of 1.0 MiB" (measured
    at the nearest folder of ``uri`` that exists); on an object store, that nothing says.

    >>> free_space("s3://bucket/x")
    'free space unknown (an object store)'
    """
    if urlparse(str(uri)).scheme == "s3":
        return "free space unknown (an object store)"
    path = os.path.abspath(urlparse(str(uri)).path if str(uri).startswith("file:") else str(uri))
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return "free space unknown"
    return f"{_size(usage.free)} free of {_size(usage.total)}"


def _size(n: float) -> str:
    """``n`` bytes, readable.

    >>> _size(512), _size(1536), _size(3 << 30)
    ('512 B', '1.5 KiB', '3.0 GiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    raise AssertionError("unreachable")


class DiskFull(StorageError):
    """A write found the disk full (``ENOSPC``): the message names the path and the free space there now."""

    def __init__(self, uri: str, action: str, cause: BaseException):
        OSError.__init__(
            self,
            f"{uri}: could not {action}: no space left on the device ({free_space(uri)}, too little for the write, "
            f"which failed with: {' '.join(delta_said(cause).split())}). Free some space there, or write elsewhere, "
            "and run again: nothing half-written is kept, and what was written before stays",
        )
        self.uri, self.action, self.cause = uri, action, cause


#: Transient failures of one store further apart than this many seconds belong to two outages, not one.
OUTAGE_GAP_S = 30.0


class Outages:
    """When each object store (endpoint and bucket) began failing, shared by every operation of the process.

    An operation's retry window is counted from there, not from its own first try: when one operation gives
    up, the next ones to fail on the same store (a run's clean-up: its manifest, its lease, its log) give up
    after one try instead of waiting out a window each. An operation that reaches the store (a success, or an
    answer such as "no such file") ends the outage; a failure more than :data:`OUTAGE_GAP_S` seconds after the
    last one starts a new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._failing: dict[str, tuple[float, float]] = {}  # store -> (outage began, last failure)

    def failed(self, store: str, since: float, now: float) -> float:
        """Record a transient failure at ``now`` of an operation that began at ``since``; when the outage began."""
        with self._lock:
            known = self._failing.get(store)
            began = since if known is None or now - known[1] > OUTAGE_GAP_S else min(known[0], since)
            self._failing[store] = (began, now)
            return began

    def reached(self, store: str | None) -> None:
        """An operation reached ``store``: it is not failing (now)."""
        if store is not None:
            with self._lock:
                self._failing.pop(store, None)


#: The outages of this process's object stores.
OUTAGES = Outages()


def store_of(uri: str) -> str | None:
    """The object store ``uri`` is on (endpoint and bucket), or None for a local path.

    >>> store_of("s3://bucket/runs/x").endswith(" bucket"), store_of("/tmp/x")
    (True, None)
    """
    parsed = urlparse(str(uri))
    if parsed.scheme != "s3":
        return None
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or "aws"
    return f"{endpoint} {parsed.netloc}"


def with_retries(uri: str, action: str, fn, window: float | None = None):
    """``fn()``, retried on transient errors with capped exponential backoff (full jitter) until ``window`` seconds
    after its store began failing (:class:`Outages`: for an operation that fails first, its own start)."""
    window = retry_window() if window is None else window
    store = store_of(uri)
    start = time.monotonic()
    delay, attempts = 0.25, 0
    while True:
        attempts += 1
        try:
            result = fn()
        except (FileNotFoundError, CorruptFile):
            OUTAGES.reached(store)
            raise
        except Exception as exc:
            if is_disk_full(exc) and not isinstance(exc, DiskFull):
                OUTAGES.reached(store)
                raise DiskFull(uri, action, exc) from exc
            if not is_transient(exc):
                OUTAGES.reached(store)
                if isinstance(exc, OSError) and not isinstance(exc, StorageError):
                    raise StorageError(uri, action, exc) from exc
                raise
            now = time.monotonic()
            began = OUTAGES.failed(store, start, now) if store is not None else start
            waited = now - began
            if waited >= window:
                raise StorageUnavailable(uri, action, exc, waited, attempts) from exc
            if attempts == 1:
                log.warning("%s: could not %s (%s); retrying for up to %.0f s", uri, action, exc, window - waited)
            time.sleep(min(random.uniform(delay / 2, delay), window - waited))
            delay = min(delay * 2, 8.0)
        else:
            OUTAGES.reached(store)
            return result


class CorruptFile(ValueError):
    """A file that exists but cannot be decoded as what it should be (a truncated or garbage Parquet part)."""

    def __init__(self, uri: str, reason: str, hint: str = ""):
        super().__init__(f"{uri}: not a readable Parquet file ({reason})" + (f"; {hint}" if hint else ""))
        self.uri, self.reason = uri, reason

    __reduce__ = reduced


_BACKTRACE = re.compile(r"\n\s*0: ")


def delta_said(exc: BaseException) -> str:
    r"""What delta-rs said, without the Rust backtrace it appends when ``RUST_BACKTRACE`` is set.

    >>> delta_said(RuntimeError("Kernel error: Json error: bad\n   0: <unknown>\n   1: <unknown>"))
    'Kernel error: Json error: bad'
    """
    return _BACKTRACE.split(str(exc), maxsplit=1)[0].strip()
