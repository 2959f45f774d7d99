"""The body of a ``pairank serve`` request: read within its limits, and a ``POST /compare`` body checked.

A body is read up to :data:`MAX_BODY` bytes (a declared larger one is refused
before a byte is read) and within ``serve.body_timeout_s`` (then 408), and at most
``serve.slow_bodies`` bodies are read at once that did not come whole in their
first piece (one more is 429 at once: :class:`BodyLimits`). JSON nested deeper
than :data:`MAX_DEPTH` is refused before it is parsed, and a compare body that is
not what :data:`COMPARE_FIELDS` says is a 400 whose message names the field and
what was expected. No field of a
compare body is a number: numbers are kept as the text they were written in
(:class:`JsonNumber`), so none (100,000 digits, ``1e999``, ``NaN``) can fail the
parse, and the field it was sent in is named in the 400.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass

from pairank.storage.keys import text_hash

#: Fields of a ``POST /compare`` body.
COMPARE_FIELDS = {
    "context": "the input both candidates answer (string)",
    "candidate_a": 'the candidate shown in slot A: {"id": string, "text": string}',
    "candidate_b": 'the candidate shown in slot B: {"id": string, "text": string}',
    "aspect": "an aspect of the served spec",
    "context_id": "optional: the input's id (default: ctx- and a hash of the context); it is part of the key",
    "variant": "optional: a prompt variant of the spec (judging.variants; default: the first)",
}
#: Largest request body accepted (bytes).
MAX_BODY = 4 * 1024 * 1024
#: Deepest nesting of JSON arrays and objects accepted in a body (a compare body has 2 levels).
MAX_DEPTH = 32


class HttpError(Exception):
    """A request the server answers with ``status`` and a JSON ``{"error": message}``."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, dict(headers or {})


# -- the body ------------------------------------------------------------------------------------------------------


#: An ASGI ``receive``: a request's messages (``http.request`` with ``body`` and ``more_body``, ``http.disconnect``).
Receive = Callable[[], Awaitable[Mapping]]
#: A request's body: whole, or the ASGI ``receive`` its pieces come from as they arrive.
Body = bytes | Receive


class BodyLimits:
    """How long a body may take to arrive, and how many may be arriving in pieces at once; one per server.

    ``timeout_s`` (``serve.body_timeout_s``) bounds the whole body, from when it starts to be read. A body that did
    not come whole in its first piece is *slow* while the rest arrives; at most ``slow_bodies``
    (``serve.slow_bodies``) are at once, and one more is answered 429 at once, so that slow clients cannot take
    every request the server takes at once. A server has one token (or none), so this is the bound per token;
    ``arriving`` is how many slow bodies are being read now.

    >>> limits = BodyLimits(timeout_s=10, slow_bodies=1)
    >>> with limits.slow():
    ...     try:
    ...         with limits.slow():
    ...             pass
    ...     except HttpError as e:
    ...         print(e.status, e.headers, limits.arriving)
    429 {'Retry-After': '10'} 1
    >>> limits.arriving
    0
    """

    def __init__(self, timeout_s: float, slow_bodies: int):
        self.timeout_s, self.slow_bodies = timeout_s, slow_bodies
        self.arriving = 0

    @contextlib.contextmanager
    def slow(self) -> Iterator[None]:
        """Count one slow body while the block reads it; a 429 when ``slow_bodies`` are already being read."""
        if self.arriving >= self.slow_bodies:
            raise HttpError(
                429,
                f"body: still arriving after its first piece while {self.arriving} other bodies are, the most the "
                f"server reads at once per token (serve.slow_bodies: {self.slow_bodies}); send it all at once, or "
                f"again in {self.timeout_s:g} s, by when each of those is in or timed out (serve.body_timeout_s)",
                {"Retry-After": str(math.ceil(self.timeout_s))},
            )
        self.arriving += 1
        try:
            yield
        finally:
            self.arriving -= 1


class RequestBody:
    """A request's body, whole (bytes) or as its pieces arrive (an ASGI ``receive``): read once, within its limits.

    At most :data:`MAX_BODY` bytes: a declared ``Content-Length`` over it is refused (413) before a byte is read, and
    a body of undeclared length (chunked) is read until it passes it, then refused. Pieces are read within
    ``limits.timeout_s`` (then 408), and a body that does not come whole in its first piece is a slow one
    (:meth:`BodyLimits.slow`: 429 when too many are being read).

    >>> import asyncio
    >>> def pieces(n, size=1024 * 1024):
    ...     messages = iter([{"type": "http.request", "body": b"x" * size, "more_body": i < n - 1} for i in range(n)])
    ...     async def receive():
    ...         return next(messages)
    ...     return receive
    >>> limits = BodyLimits(timeout_s=10, slow_bodies=4)
    >>> asyncio.run(RequestBody(pieces(2), {"transfer-encoding": "chunked"}, limits).read()) == b"x" * 2 * 1024 * 1024
    True
    >>> body = RequestBody(pieces(8), {"transfer-encoding": "chunked"}, limits)
    >>> try:
    ...     asyncio.run(body.read())
    ... except HttpError as e:
    ...     print(e.status, e.message, body.left_unread, limits.arriving)
    413 body: more than 4194304 bytes; at most 4194304 accepted True 0
    >>> def held():  # one byte, then nothing
    ...     sent = []
    ...     async def receive():
    ...         if sent:
    ...             await asyncio.Event().wait()
    ...         sent.append(1)
    ...         return {"type": "http.request", "body": b"{", "more_body": True}
    ...     return receive
    >>> async def two_slow(limits):
    ...     bodies = [RequestBody(held(), {"content-length": "100"}, limits) for _ in range(2)]
    ...     return await asyncio.gather(*(b.read() for b in bodies), return_exceptions=True)
    >>> [(e.status, e.message[:40]) for e in asyncio.run(two_slow(BodyLimits(timeout_s=0.05, slow_bodies=1)))]
    [(408, 'body: 1 of 100 declared bytes came withi'), (429, 'body: still arriving after its first pie')]
    """

    def __init__(self, body: Body, headers: Mapping[str, str], limits: BodyLimits):
        self._body = body
        self.limits = limits
        length = (headers.get("content-length") or "").strip()
        self.declared = int(length) if length.isdigit() else None
        self.sent = bool(self.declared) or "transfer-encoding" in headers
        self.complete = isinstance(body, bytes)
        self.received = 0

    @property
    def left_unread(self) -> bool:
        """Whether the client sends a body that was not read to its end (the reply then closes the connection)."""
        return self.sent and not self.complete

    async def read(self) -> bytes:
        if self.declared is not None and self.declared > MAX_BODY:
            raise HttpError(413, f"body: {self.declared} bytes declared (Content-Length); at most {MAX_BODY} accepted")
        if isinstance(self._body, bytes):
            if len(self._body) > MAX_BODY:
                raise HttpError(413, f"body: {len(self._body)} bytes; at most {MAX_BODY} accepted")
            return self._body
        deadline = asyncio.timeout(self.limits.timeout_s)
        try:
            async with deadline:
                return await self._pieces(self._body, self.limits)
        except TimeoutError:
            if not deadline.expired():
                raise
            of = f"{self.received} of {self.declared} declared" if self.declared is not None else f"{self.received}"
            raise HttpError(
                408,
                f"body: {of} bytes came within {self.limits.timeout_s:g} s, the most a body may take "
                "(serve.body_timeout_s); send the whole body within that time",
            ) from None

    async def _pieces(self, receive: Receive, limits: BodyLimits) -> bytes:
        parts: list[bytes] = []
        with contextlib.ExitStack() as slow:
            while True:
                message = await receive()
                if message["type"] != "http.request":  # http.disconnect: nobody reads the answer
                    raise HttpError(400, f"body: the client closed the connection after {self.received} bytes")
                chunk = message.get("body", b"")
                self.received += len(chunk)
                if self.received > MAX_BODY:
                    raise HttpError(413, f"body: more than {MAX_BODY} bytes; at most {MAX_BODY} accepted")
                parts.append(chunk)
                if not message.get("more_body", False):
                    break
                if len(parts) == 1:  # not whole in its first piece: a slow body while the rest arrives
                    slow.enter_context(limits.slow())
        self.complete = True
        return b"".join(parts)


#: A JSON string, or an unterminated one up to the end. A match from a quote never fails, so the scan is one pass
#: (a pattern that can fail there restarts at each later quote: quadratic on ``"\`` repeated).
_JSON_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+"?', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(data: bytes) -> int:
    r"""How deep arrays and objects nest in JSON text (brackets in strings do not count); no recursion, no parse.

    Linear in the length of ``data``, whatever the bytes (invalid JSON too).

    >>> json_depth(b'{"a": [1, {"b": "[[{"}], "c": "\\"]"}'), json_depth(rb'["\"[", 1]'), json_depth(b"42")
    (3, 1, 0)
    >>> json_depth(b"[" * 100_000), json_depth(b"[" + b'"\\' * 100_000)
    (100000, 1)
    """
    brackets = _JSON_STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0)


# -- the compare body ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CompareRequest:
    context: str
    context_id: str
    candidate_a: tuple[str, str]  # (id, text)
    candidate_b: tuple[str, str]
    aspect: str
    variant: int
    variant_name: str | None


class JsonNumber:
    """A number of a body, as the text it was written in (see the module docstring).

    >>> import json
    >>> [JsonNumber(t).described() for t in ("3", "-2.5e3", "NaN")]
    ['int 3', 'float -2.5e3', 'NaN (not a JSON number)']
    >>> JsonNumber("9" * 100_000).described()
    'int of 100000 digits (99999999999999999999...)'
    """

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text

    def __str__(self) -> str:
        return self.text

    @property
    def kind(self) -> str:
        if self.text in ("NaN", "Infinity", "-Infinity"):
            return self.text
        return "int" if self.text.lstrip("-").isdigit() else "float"

    def described(self) -> str:
        kind, text = self.kind, self.text
        if kind not in ("int", "float"):
            return f"{kind} (not a JSON number)"
        if len(text) > 40:
            return f"{kind} of {len(text.lstrip('-'))} {'digits' if kind == 'int' else 'characters'} ({text[:20]}...)"
        return f"{kind} {text}"


def _kind(value) -> str:
    if isinstance(value, JsonNumber):
        return value.kind
    return "null" if value is None else type(value).__name__


def _found(value) -> str:
    """``found <kind> <value>`` for an error message (at most about 60 characters of the value)."""
    if isinstance(value, JsonNumber):
        return f"found {value.described()}"
    return f"found {_kind(value)} {json.dumps(value, default=str)[:60]}"


def _string(body: dict, name: str, where: str, allow_empty: bool = False) -> str:
    value = body.get(name)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        expected = "a string" if allow_empty else "a non-empty string"
        raise HttpError(400, f"{where}: expected {expected}, {'missing' if name not in body else _found(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:  # "\ud800" in JSON: a lone surrogate, which no UTF-8 text holds
        bad = value[exc.start].encode("unicode_escape").decode("ascii")
        raise HttpError(
            400, f"{where}: expected Unicode text, found a lone surrogate {bad} at character {exc.start}"
        ) from None
    return value


def _candidate(body: dict, name: str) -> tuple[str, str]:
    value = body.get(name)
    if not isinstance(value, dict):
        shown = "missing" if name not in body else _found(value)
        raise HttpError(400, f'{name}: expected an object {{"id": string, "text": string}}, {shown}')
    extra = sorted(set(value) - {"id", "text"})
    if extra:
        raise HttpError(400, f"{name}: unknown keys {extra}; allowed keys: id, text")
    return _string(value, "id", f"{name}.id"), _string(value, "text", f"{name}.text")


def parse_compare(body: bytes, aspects: list[str], variants: list[str]) -> CompareRequest:
    """A ``POST /compare`` body, checked; a bad one is a 400 naming the field and what was expected.

    >>> body = b'{"context": "doc", "candidate_a": {"id": "x", "text": "tx"}, "candidate_b": {"id": "y", "text": "ty"},'
    >>> parse_compare(body + b' "aspect": "coherence"}', ["coherence"], []).context_id
    'ctx-139d544b821b13eb'
    >>> try:
    ...     parse_compare(body + b' "aspect": 3}', ["coherence"], [])
    ... except HttpError as e:
    ...     print(e.status, e.message)
    400 aspect: expected a non-empty string, found int 3
    >>> try:
    ...     parse_compare(body + b' "aspect": "coherence", "variant": ' + b"7" * 100_000 + b"}", ["coherence"], ["v1"])
    ... except HttpError as e:
    ...     print(e.status, e.message)
    400 variant: expected a non-empty string, found int of 100000 digits (77777777777777777777...)
    """
    depth = json_depth(body)
    if depth > MAX_DEPTH:
        raise HttpError(400, f"body: expected JSON nested at most {MAX_DEPTH} levels deep, found {depth} levels")
    try:
        text = body.decode("utf-8")
        data = (
            json.loads(text, parse_int=JsonNumber, parse_float=JsonNumber, parse_constant=JsonNumber) if body else None
        )
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError, JSONDecodeError (both ValueErrors)
        raise HttpError(400, f"body: expected a JSON object, found invalid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HttpError(
            400, f"body: expected a JSON object with fields {', '.join(COMPARE_FIELDS)}; found {_kind(data)}"
        )
    extra = sorted(set(data) - set(COMPARE_FIELDS))
    if extra:
        raise HttpError(400, f"body: unknown fields {extra}; allowed fields: {', '.join(COMPARE_FIELDS)}")
    context = _string(data, "context", "context", allow_empty=True)
    a, b = _candidate(data, "candidate_a"), _candidate(data, "candidate_b")
    if a[0] == b[0]:
        raise HttpError(400, f"candidate_b.id: expected an id other than candidate_a.id, found {a[0]!r} twice")
    aspect = _string(data, "aspect", "aspect")
    if aspect not in aspects:
        raise HttpError(400, f"aspect: expected one of the spec's aspects {aspects}, found {aspect!r}")
    context_id = (
        _string(data, "context_id", "context_id") if data.get("context_id") is not None else f"ctx-{text_hash(context)}"
    )
    variant, name = 0, (variants[0] if variants else None)
    if data.get("variant") is not None:
        name = _string(data, "variant", "variant")
        if not variants:
            raise HttpError(400, "variant: not accepted: the spec has one prompt per aspect (judging.variants unset)")
        if name not in variants:
            raise HttpError(400, f"variant: expected one of the spec's judging.variants {variants}, found {name!r}")
        variant = variants.index(name)
    return CompareRequest(context, context_id, a, b, aspect, variant, name)
