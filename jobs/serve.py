"""``pairank serve``: online comparisons and the latest leaderboard over HTTP.

What each endpoint does is here, free of Ray; :mod:`pairank.cluster.deployments` holds the Ray
Serve deployments that carry it (an HTTP ingress, and judge replicas that each
hold one engine for the life of the server).

* ``POST /compare`` judges one ordered pair with the batch runs' judge code
  (:class:`pairank.operators.judges.modes.ModeRunner` on the engine its registered
  builder makes, :func:`pairank.jobs.pipeline.pool.judge_factory`), keyed by
  :class:`pairank.jobs.pipeline.requests.RequestMaker` exactly as a batch run of the same spec keys it.
  A key with a verdict in the spec's judgment cache is answered from there (no engine call); otherwise the
  judgment is appended to that cache (one atomic part per engine batch), so batch
  runs reuse online judgments and the other way round.
* ``GET /leaderboard`` and ``GET /leaderboard.html``: the files ``pairank
  leaderboard`` last wrote under ``<output>/leaderboard/`` (local or ``s3://``),
  read on each request; read-only.
* ``GET /``: what the server judges with (judge identity, mode, aspects, variants).

With a token, every request must carry ``Authorization: Bearer <token>``. Only a
SHA-256 digest of the token reaches the server's processes, and the token is never
logged. What the headers decide (the token, the route, the method, a declared
length over :data:`MAX_BODY`) is answered before a byte of the body is read; a
body is read up to :data:`MAX_BODY` bytes, and JSON nested deeper than
:data:`MAX_DEPTH` is refused before it is parsed.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import itertools
import json
import logging
import re
from collections.abc import AsyncIterable, Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa

from pairank.jobs.cli.console import console
from pairank.jobs.pipeline.requests import RequestMaker
from pairank.jobs.specs.job import JobSpec
from pairank.storage.cache import JudgmentCache
from pairank.storage.cache_index import CacheIndex
from pairank.storage.fs import Location
from pairank.storage.keys import text_hash
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import REQUESTS

log = logging.getLogger(__name__)

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
#: Modes answered online: a single pairwise stage on the engine.
ONLINE_MODES = ("logprob", "generate", "sample")
ROUTES = {
    "/": ("GET", "what this server judges with"),
    "/compare": ("POST", "judge one ordered pair (answered from the judgment cache when known)"),
    "/leaderboard": ("GET", "the latest leaderboard.json under the storage root"),
    "/leaderboard.html": ("GET", "the latest leaderboard page (index.html)"),
}


class HttpError(Exception):
    """A request the server answers with ``status`` and a JSON ``{"error": message}``."""

    def __init__(self, status: int, message: str, headers: Mapping[str, str] | None = None):
        super().__init__(message)
        self.status, self.message, self.headers = status, message, dict(headers or {})


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)

    @classmethod
    def json(cls, obj, status: int = 200, headers: Mapping[str, str] | None = None) -> Reply:
        return cls(
            status, (json.dumps(obj, default=_jsonable, indent=None) + "\n").encode(), headers=dict(headers or {})
        )


def _jsonable(value):
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


# -- the body ------------------------------------------------------------------------------------------------------


#: A request's body: whole, or its chunks as they arrive.
Body = bytes | AsyncIterable[bytes]


class RequestBody:
    """A request's body, whole (bytes) or as its chunks arrive: read once, and at most :data:`MAX_BODY` bytes of it.

    A declared ``Content-Length`` over the limit is refused before a byte is read; a
    body of undeclared length (chunked) is read until it passes the limit, then refused.

    >>> import asyncio
    >>> async def chunks(n):
    ...     for _ in range(n):
    ...         yield b"x" * 1024 * 1024
    >>> asyncio.run(RequestBody(chunks(2), {"transfer-encoding": "chunked"}).read()) == b"x" * 2 * 1024 * 1024
    True
    >>> body = RequestBody(chunks(8), {"transfer-encoding": "chunked"})
    >>> try:
    ...     asyncio.run(body.read())
    ... except HttpError as e:
    ...     print(e.status, e.message, body.left_unread)
    413 body: more than 4194304 bytes; at most 4194304 accepted True
    """

    def __init__(self, body: Body, headers: Mapping[str, str]):
        self._body = body
        length = (headers.get("content-length") or "").strip()
        self.declared = int(length) if length.isdigit() else None
        self.sent = bool(self.declared) or "transfer-encoding" in headers
        self.complete = isinstance(body, bytes)

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
        parts, size = [], 0
        async for chunk in self._body:
            size += len(chunk)
            if size > MAX_BODY:
                raise HttpError(413, f"body: more than {MAX_BODY} bytes; at most {MAX_BODY} accepted")
            parts.append(chunk)
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


def _kind(value) -> str:
    return "null" if value is None else type(value).__name__


def _string(body: dict, name: str, where: str, allow_empty: bool = False) -> str:
    value = body.get(name)
    if not isinstance(value, str) or (not allow_empty and not value.strip()):
        expected = "a string" if allow_empty else "a non-empty string"
        shown = "missing" if name not in body else f"found {_kind(value)} {json.dumps(value, default=str)[:60]}"
        raise HttpError(400, f"{where}: expected {expected}, {shown}")
    return value


def _candidate(body: dict, name: str) -> tuple[str, str]:
    value = body.get(name)
    if not isinstance(value, dict):
        shown = "missing" if name not in body else f"found {_kind(value)}"
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
    """
    depth = json_depth(body)
    if depth > MAX_DEPTH:
        raise HttpError(400, f"body: expected JSON nested at most {MAX_DEPTH} levels deep, found {depth} levels")
    try:
        data = json.loads(body.decode("utf-8")) if body else None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
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


# -- the token -----------------------------------------------------------------------------------------------------


def token_digest(token: str) -> str:
    """What the server keeps of a bearer token: its SHA-256, hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def authorized(header: str | None, digest: str | None) -> bool:
    """Whether an ``Authorization`` header carries the token of ``digest`` (always, without a token).

    >>> d = token_digest("s3cret")
    >>> authorized("Bearer s3cret", d), authorized("Bearer nope", d), authorized(None, d), authorized(None, None)
    (True, False, False, True)
    """
    if digest is None:
        return True
    scheme, _, given = (header or "").partition(" ")
    if scheme.lower() != "bearer" or not given:
        return False
    return hmac.compare_digest(token_digest(given.strip()), digest)


# -- the service ---------------------------------------------------------------------------------------------------

Judge = Callable[[dict], Awaitable[dict]]


class OnlineJudging:
    """Everything ``pairank serve`` answers, given an async ``judge(request_row) -> judgment_row``.

    Built on the driver from the spec (prompts read, judge identity computed
    there, as ``pairank run`` does), then shipped to the HTTP ingress. Holds no
    token, only its digest.
    """

    def __init__(self, spec: JobSpec, token_sha256: str | None = None):
        from pairank.jobs.pipeline.setup import mode_prompts
        from pairank.operators.judges import judge_identity
        from pairank.operators.judges.modes import judging_identity

        self.output, self.aspects = spec.output, list(spec.aspects)
        self.mode = spec.judging.mode
        self.engine_identity = judge_identity(spec.judge)
        self.identity = judging_identity(self.engine_identity, spec.judging)
        self.prompts = mode_prompts(spec.judging, spec.prompts, spec.aspects)
        if spec.judging.variants:
            self.variants = list(spec.judging.variants)
        else:
            self.variants = [] if self.mode == "logprob" else ["v1"]
        self.token_sha256 = token_sha256
        self._index: CacheIndex | None = None
        self._inflight: dict[str, asyncio.Future] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_index": None, "_inflight": {}}

    @property
    def online(self) -> bool:
        return self.mode in ONLINE_MODES

    @property
    def layout(self) -> RunLayout:
        return RunLayout(Location.of(self.output), "")

    @property
    def index(self) -> CacheIndex:
        if self._index is None:
            self._index = CacheIndex(JudgmentCache(self.layout.judgments))
        return self._index

    def maker(self, req: CompareRequest) -> RequestMaker:
        """The batch runs' request maker over the request's two candidates."""
        ids = [req.candidate_a[0], req.candidate_b[0]]
        candidates = pa.table(
            {
                "context_id": [req.context_id] * 2,
                "context": [req.context] * 2,
                "candidate_id": ids,
                "text": [req.candidate_a[1], req.candidate_b[1]],
            }
        )
        return RequestMaker(candidates, self.prompts, self.identity)

    def info(self) -> dict:
        return {
            "routes": {path: f"{method}: {what}" for path, (method, what) in ROUTES.items()},
            "judge": self.identity,
            "mode": self.mode,
            "online_compare": self.online,
            "aspects": self.aspects,
            "variants": self.variants,
            "output": self.output,
            "token": self.token_sha256 is not None,
        }

    async def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: Body, judge: Judge | None
    ) -> Reply:
        """One HTTP request: authorise, route, answer; every error is JSON ``{"error": ...}``.

        ``body`` is the whole body, or its chunks as they arrive. What the headers decide
        (the token, the route, the method, a declared length) is answered before a byte
        of it is read, and only ``POST /compare`` reads it (:class:`RequestBody`). A reply
        given while the client still sends closes the connection, so the rest is not read either.
        """
        request_body = RequestBody(body, headers)
        reply = await self._answer(method, path, headers, request_body, judge)
        if request_body.left_unread:
            return replace(reply, headers={**reply.headers, "Connection": "close"})
        return reply

    async def _answer(
        self, method: str, path: str, headers: Mapping[str, str], body: RequestBody, judge: Judge | None
    ) -> Reply:
        try:
            if not authorized(headers.get("authorization"), self.token_sha256):
                raise HttpError(
                    401,
                    "expected the header `Authorization: Bearer <token>` with this server's token",
                    {"WWW-Authenticate": 'Bearer realm="pairank"'},
                )
            route = ROUTES.get(path.rstrip("/") or "/")
            if route is None:
                raise HttpError(
                    404, f"no route {path!r}; routes: {', '.join(f'{m} {p}' for p, (m, _) in ROUTES.items())}"
                )
            if method != route[0] and not (method == "HEAD" and route[0] == "GET"):
                raise HttpError(405, f"{path}: expected {route[0]}, found {method}", {"Allow": route[0]})
            path = path.rstrip("/") or "/"
            if path == "/compare":
                return Reply.json(await self.compare(body, judge))
            if path == "/":
                return Reply.json(self.info())
            return await self.leaderboard(html=path.endswith(".html"))
        except HttpError as exc:
            return Reply.json({"error": exc.message}, exc.status, exc.headers)
        except Exception as exc:  # a failure is answered, and logged without the request's headers
            log.exception("pairank serve: %s %s failed", method, path)
            return Reply.json({"error": f"{type(exc).__name__}: {exc}"}, 500)

    async def compare(self, body: RequestBody, judge: Judge | None) -> dict:
        """The judgment row of one request (see the module docstring), with ``cached``."""
        if not self.online or judge is None:
            raise HttpError(
                501,
                f"judging.mode {self.mode!r} is not supported online: it needs a first pass over each output "
                f"before the verdict; online modes are {', '.join(ONLINE_MODES)}. Judge these pairs with "
                "`pairank run`, or serve a spec with an online mode",
            )
        req = parse_compare(await body.read(), self.aspects, self.variants)
        maker = self.maker(req)
        (a, _), (b, _) = req.candidate_a, req.candidate_b
        key = maker.key(req.aspect, req.context_id, a, b, req.variant)
        await asyncio.to_thread(self.index.refresh)
        row = self.index.get(key)
        cached = row is not None
        if not cached:
            pending = self._inflight.get(key)  # the same request twice at once: one engine call
            if pending is None:
                request = maker.row(req.aspect, req.context_id, a, b, req.variant, key=key)
                pending = asyncio.ensure_future(judge(request))
                self._inflight[key] = pending
                pending.add_done_callback(lambda _: self._inflight.pop(key, None))
            try:
                row = dict(await asyncio.shield(pending))
            except Exception as exc:
                raise HttpError(502, f"the judge failed: {type(exc).__name__}: {exc}") from exc
        return {**row, "variant": req.variant_name, "cached": cached}

    async def leaderboard(self, html: bool) -> Reply:
        layout = self.layout
        loc = layout.leaderboard_html if html else layout.leaderboard_json
        data = await asyncio.to_thread(_read_if_present, loc)
        if data is None:
            raise HttpError(
                404,
                f"no leaderboard at {loc.uri}: `pairank leaderboard --root {layout.root.uri}` writes one "
                "from the runs under that storage root",
            )
        return Reply(200, data, "text/html; charset=utf-8" if html else "application/json")


def _read_if_present(loc: Location) -> bytes | None:
    try:
        return loc.read_bytes()
    except FileNotFoundError:
        return None


# -- starting and stopping -----------------------------------------------------------------------------------------


def start_server(
    spec: JobSpec, host: str = "127.0.0.1", port: int = 8000, token_sha256: str | None = None, name: str = "pairank"
) -> str:
    """Start the application on the spec's Ray (a local Ray on 127.0.0.1 when unset); returns its URL.

    ``token_sha256``: :func:`token_digest` of the bearer token (None: no token asked for).
    """
    from pairank.cluster.deployments import start
    from pairank.cluster.runtime import ensure_ray
    from pairank.jobs.pipeline.pool import judge_factory, pool_resources

    service = OnlineJudging(spec, token_sha256)
    if service.online:  # a store whose log or files are damaged is named now, not in every answer
        JudgmentCache(service.layout.judgments).check()
    ensure_ray(spec.cluster.address, spec.cluster.num_cpus)
    judge = None
    if service.online:
        append = CacheAppend(service.layout.judgments.uri)
        judge = (judge_factory(spec), append, REQUESTS, pool_resources(spec))
    local = not spec.cluster.address
    return start(service, judge, host=host, port=port, name=name, local=local)


class CacheAppend:
    """What a judge replica does with each batch it judged: one atomic part in the judgment cache.

    Picklable (it holds the cache's URI), so it travels to the replica; returns the
    counter it adds to the replica's ``info()`` (``parts``).
    """

    def __init__(self, cache_uri: str):
        self.cache_uri = cache_uri
        self._cache: JudgmentCache | None = None

    def __getstate__(self) -> dict:
        return {"cache_uri": self.cache_uri, "_cache": None}

    def __call__(self, table: pa.Table) -> dict:
        if self._cache is None:
            self._cache = JudgmentCache(Location.of(self.cache_uri), writer="serve")
        return {"parts": 1 if self._cache.append(table) is not None else 0}


def serve_until_stopped(
    spec: JobSpec, host: str, port: int, token_sha256: str | None, progress: Callable[[str], None]
) -> int:
    """``pairank serve``: start, wait for Ctrl-C or SIGTERM, then stop Serve (``token_sha256``: as in start_server)."""
    import signal
    import threading

    from pairank.cluster.deployments import stop

    stopped = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopped.set())
    try:
        url = start_server(spec, host, port, token_sha256)
        service_mode = spec.judging.mode
        if service_mode not in ONLINE_MODES:
            progress(f"judging.mode {service_mode!r} is not supported online: POST /compare answers 501")
        progress(
            f"serving {spec.name} on {url} (POST /compare, GET /leaderboard, GET /leaderboard.html)"
            + ("; bearer token required" if token_sha256 else "")
        )
        print(url, file=console.out, flush=True)
        stopped.wait()
        progress("stopping")
    finally:
        stop(shutdown=not spec.cluster.address)
    return 0
