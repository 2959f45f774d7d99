"""``pairank serve``: online comparisons and the latest leaderboard over HTTP.

What each endpoint does is here, free of Ray; :mod:`pairank.cluster.serve.deployments` holds the Ray
Serve deployments that carry it (an HTTP ingress, and judge replicas that each
hold one engine for the life of the server).

* ``POST /compare`` judges one ordered pair with the batch runs' judge code
  (:class:`pairank.judges.modes.ModeRunner` on the engine its registered
  builder makes, :func:`pairank.jobs.judging.pool_wiring.judge_factory`), keyed by
  :class:`pairank.jobs.judging.requests.RequestMaker` exactly as a batch run of the same spec keys it.
  A key with a verdict in the spec's judgment cache is answered from there (no engine call; the cache is looked
  at once for all the requests that came while it was last looked at, :class:`SingleFlight`). Otherwise the
  judge replica gathers it with concurrent requests into one engine batch, and answers it once the batch is
  committed to that cache (a group commit: one commit for all the batches judged while the last one was being
  written; :class:`CacheAppend` writes it, and compacts the table as its small files pile up). Batch runs
  reuse online judgments and the other way round.
* ``GET /leaderboard`` and ``GET /leaderboard.html``: the files ``pairank
  leaderboard`` last wrote under ``<output>/leaderboard/`` (local or ``s3://``),
  read on each request; read-only.
* ``GET /``: what the server judges with (judge identity, mode, aspects, variants).

With a token, every request must carry ``Authorization: Bearer <token>``. Only a
SHA-256 digest of the token reaches the server's processes, and the token is never
logged. What the headers decide (the token, the route, the method, a declared
length over :data:`pairank.jobs.serve_body.MAX_BODY`) is answered before a byte of
the body is read; the body's limits (its size, the time it may take, how many may
arrive slowly at once: the spec's ``serve`` section) and checks are in
:mod:`pairank.jobs.serve_body`.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import threading
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace

import pyarrow as pa

from pairank.cluster.serve.batching import NotStored
from pairank.jobs.cli.console import console
from pairank.jobs.judging.requests import RequestMaker
from pairank.jobs.serve_body import MAX_BODY, Body, BodyLimits, CompareRequest, HttpError, RequestBody, parse_compare
from pairank.jobs.specs.job import SERVE_REQUESTS_AT_ONCE, JobSpec
from pairank.storage.errors import StorageError
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import REQUESTS
from pairank.storage.store.cache import JudgmentCache, context_bucket
from pairank.storage.store.cache_index import CacheIndex

log = logging.getLogger(__name__)

#: Modes answered online: a single pairwise pass on the engine.
ONLINE_MODES = ("logprob", "generate", "sample")
ROUTES = {
    "/": ("GET", "what this server judges with"),
    "/compare": ("POST", "judge one ordered pair (answered from the judgment cache when known)"),
    "/leaderboard": ("GET", "the latest leaderboard.json under the storage root"),
    "/leaderboard.html": ("GET", "the latest leaderboard page (index.html)"),
}


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


class SingleFlight:
    """``await flight()``: ``fn()`` on a thread, one run for all the callers that asked while the last one ran.

    A caller always gets a run that started after it asked, so it sees what was there
    when it asked; callers that ask while a run goes on share the next run. With
    many requests at once, the cache is looked at once or twice, not once per request.

    >>> import asyncio
    >>> runs = []
    >>> async def demo():
    ...     flight = SingleFlight(lambda: runs.append(len(runs)))
    ...     await asyncio.gather(*(flight() for _ in range(50)))
    ...     await flight()
    >>> asyncio.run(demo()); runs
    [0, 1]
    """

    def __init__(self, fn: Callable[[], object]):
        self.fn = fn
        self._next: asyncio.Future | None = None  # the run the latest callers wait for, not started yet
        self._runner: asyncio.Task | None = None

    async def __call__(self) -> None:
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = loop.create_future()
        run = self._next
        if self._runner is None or self._runner.done():
            self._runner = loop.create_task(self._run())
        await asyncio.shield(run)

    async def _run(self) -> None:
        while self._next is not None:
            run, self._next = self._next, None
            try:
                run.set_result(await asyncio.to_thread(self.fn))
            except Exception as exc:
                run.set_exception(exc)


Judge = Callable[[dict], Awaitable[dict]]


class OnlineJudging:
    """Everything ``pairank serve`` answers, given an async ``judge(request_row) -> judgment_row``.

    Built on the driver from the spec (prompts read, judge identity computed
    there, as ``pairank run`` does), then shipped to the HTTP ingress. Holds no
    token, only its digest, and the body limits of the spec's ``serve`` section
    (:class:`BodyLimits`, which counts the slow bodies being read).
    """

    def __init__(self, spec: JobSpec, token_sha256: str | None = None):
        from pairank.jobs.pipeline.setup import mode_prompts
        from pairank.judges import judge_identity
        from pairank.judges.modes import judging_identity

        self.output, self.aspects = spec.output, list(spec.aspects)
        self.mode = spec.judging.mode
        self.engine_identity = judge_identity(spec.placed_judge)
        self.identity = judging_identity(self.engine_identity, spec.judging)
        self.prompts = mode_prompts(spec.judging, spec.prompts, spec.aspects)
        if spec.judging.variants:
            self.variants = list(spec.judging.variants)
        else:
            self.variants = [] if self.mode == "logprob" else ["v1"]
        self.token_sha256 = token_sha256
        self.body_limits = BodyLimits(spec.serve.body_timeout_s, spec.serve.slow_bodies)
        self._index: CacheIndex | None = None
        self._refreshes: SingleFlight | None = None
        self._inflight: dict[str, asyncio.Future] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_index": None, "_refreshes": None, "_inflight": {}}

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
            "bodies": {
                "max_bytes": MAX_BODY,
                "timeout_s": self.body_limits.timeout_s,
                "slow_at_once": self.body_limits.slow_bodies,
                "slow_now": self.body_limits.arriving,
            },
        }

    async def handle(
        self, method: str, path: str, headers: Mapping[str, str], body: Body, judge: Judge | None
    ) -> Reply:
        """One HTTP request: authorise, route, answer; every error is JSON ``{"error": ...}``.

        ``body`` is the whole body, or the ASGI ``receive`` its pieces come from as they arrive.
        What the headers decide (the token, the route, the method, a declared length) is
        answered before a byte of it is read, and only ``POST /compare`` reads it, within
        :attr:`body_limits` (:class:`RequestBody`). A reply given while the client still
        sends (a refusal, or a body that took too long) closes the connection, so the rest
        is not read either.
        """
        request_body = RequestBody(body, headers, self.body_limits)
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
        except StorageError as exc:  # the store did not answer (after its retries): say so, ask again later
            log.warning("pairank serve: %s %s: %s", method, path, exc)
            return Reply.json({"error": f"the storage is unavailable: {exc}"}, 503)
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
        row = self.index.get(key)  # a verdict, once known, is the answer: no need to look for a newer one
        if row is None and key not in self._inflight:
            await self._refresh()  # the cache as it was when this request came, or later
            row = self.index.get(key)
        cached = row is not None
        if row is None:
            pending = self._inflight.get(key)  # the same request twice at once: one engine call
            if pending is None:
                request = maker.row(req.aspect, req.context_id, a, b, req.variant, key=key)
                pending = asyncio.ensure_future(judge(request))
                self._inflight[key] = pending
                pending.add_done_callback(lambda _: self._inflight.pop(key, None))
            try:
                row = dict(await asyncio.shield(pending))
            except Exception as exc:
                if isinstance(exc, NotStored) or isinstance(getattr(exc, "cause", None), NotStored):
                    raise HttpError(503, f"{exc}; nothing was answered: ask again") from exc
                raise HttpError(502, f"the judge failed: {type(exc).__name__}: {exc}") from exc
        return {**row, "variant": req.variant_name, "cached": cached}

    async def _refresh(self) -> None:
        if self._refreshes is None:
            self._refreshes = SingleFlight(lambda: self.index.refresh())
        await self._refreshes()

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
    from pairank.cluster.serve.deployments import start
    from pairank.jobs.judging.pool_wiring import join_cluster, judge_factory, pool_resources

    service = OnlineJudging(spec, token_sha256)
    if service.online:  # a store whose log or files are damaged is named now, not in every answer
        JudgmentCache(service.layout.judgments).check()
    join_cluster(spec)
    judge = None
    if service.online:
        append = CacheAppend(service.layout.judgments.uri)
        judge = (judge_factory(spec), append, REQUESTS, pool_resources(spec))
    local = not spec.cluster.address
    return start(service, judge, host=host, port=port, name=name, local=local, requests_at_once=SERVE_REQUESTS_AT_ONCE)


#: The server compacts the judgment table once its own commits have added this many data files since it last did
#: (each commit writes one small file per aspect and context bucket it touches).
COMPACT_AFTER_FILES = 256


class CacheAppend:
    """What a judge replica does with the batches it judged: one commit of them all to the judgment cache.

    Called by the replica's group commit with the tables of every batch judged while the
    previous commit ran. Once its own commits have added :data:`COMPACT_AFTER_FILES` files
    since the last compaction, it compacts the table on a thread of its own (appends go on
    meanwhile; a compaction that fails is logged and tried again after as many files more).
    Picklable (it holds the cache's URI), so it travels to the replica; returns its counters
    for the replica's ``info()``: ``commits``, ``rows_committed``, ``files_written``,
    ``compactions`` and ``failed_compactions``.
    """

    def __init__(self, cache_uri: str, compact_after_files: int = COMPACT_AFTER_FILES):
        self.cache_uri, self.compact_after_files = cache_uri, compact_after_files
        self._cache: JudgmentCache | None = None
        self._counters: dict[str, int] = {}
        self._since_compaction = 0
        self._compaction: threading.Thread | None = None
        self._lock = threading.Lock()

    def __getstate__(self) -> dict:
        return {"cache_uri": self.cache_uri, "compact_after_files": self.compact_after_files}

    def __setstate__(self, state: dict) -> None:
        type(self).__init__(self, state["cache_uri"], state["compact_after_files"])

    @property
    def cache(self) -> JudgmentCache:
        if self._cache is None:
            self._cache = JudgmentCache(Location.of(self.cache_uri), writer="serve")
        return self._cache

    def __call__(self, tables: list[pa.Table]) -> dict:
        table = pa.concat_tables(tables)
        version = self.cache.append(table)
        files = len(set(zip(table.column("aspect").to_pylist(), map(context_bucket, table["context_id"].to_pylist()))))
        with self._lock:
            if version is not None:
                self._count(commits=1, rows_committed=table.num_rows, files_written=files)
                self._since_compaction += files
            if self._since_compaction >= self.compact_after_files and not (
                self._compaction and self._compaction.is_alive()
            ):
                self._since_compaction = 0
                self._compaction = threading.Thread(target=self._compact, name="pairank-compact", daemon=True)
                self._compaction.start()
            return dict(self._counters)

    def _count(self, **add: int) -> None:
        for name, n in add.items():
            self._counters[name] = self._counters.get(name, 0) + n

    def _compact(self) -> None:
        from pairank.storage.store.maintenance import compact_table

        try:
            done = compact_table(self.cache)
        except Exception:
            log.warning("pairank serve: compacting %s failed; trying again later", self.cache_uri, exc_info=True)
            with self._lock:
                self._count(failed_compactions=1)
            return
        with self._lock:
            self._count(compactions=1, files_compacted=done["files_removed"])

    def wait_for_compaction(self, timeout: float | None = None) -> None:
        """Wait until a compaction that is running ends (tests, and a clean stop)."""
        if self._compaction is not None:
            self._compaction.join(timeout)


def serve_until_stopped(
    spec: JobSpec, host: str, port: int, token_sha256: str | None, progress: Callable[[str], None]
) -> int:
    """``pairank serve``: start, wait for Ctrl-C or SIGTERM, then stop Serve (``token_sha256``: as in start_server)."""
    import signal
    import threading

    from pairank.cluster.serve.deployments import stop

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
