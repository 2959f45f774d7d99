"""Ray Serve deployments of ``pairank serve`` (what the endpoints do is in :mod:`pairank.jobs.serve`).

Two deployments:

* :class:`JudgeReplica`, ``resources.min_size`` replicas (up to ``max_size`` by
  Serve's autoscaling for a range ``pool.size``), each holding what
  ``factory()`` builds (the batch pools' factory, :func:`pairank.jobs.judging.pool_wiring.judge_factory`)
  for the life of the server. Concurrent requests are judged in batches of at most
  ``resources.batch_size``: what came while the engine judged the last batch, or
  after an idle spell what comes within :data:`BATCH_WAIT_S` (:class:`pairank.cluster.serve.batching.Batches`;
  not ``serve.batch``, which cuts batches by time and queues them behind a busy
  engine). A judged batch is committed to the judgment cache by a group commit
  (:class:`pairank.cluster.serve.batching.GroupCommit`; the append is
  :class:`pairank.jobs.serve.CacheAppend`) before its requests are answered. Every
  engine call, and the engine's start, run on one dedicated thread, so a
  thread-bound engine always sees the same thread; commits run on another.
* :class:`Ingress`: a plain ``__call__(starlette Request)`` deployment (no
  FastAPI) that hands each request to :meth:`pairank.jobs.serve.OnlineJudging.handle`
  with its body unread, as the request's ASGI ``receive``: ``handle`` decides what
  the headers decide before it reads a byte, and reads at most its limit, within
  its time.

Serve's proxy does not wait for the body: it forwards the request once the headers
are in, and queues the body's chunks as they arrive, without bound, until the reply
is sent; the replica fetches them from that queue while the request runs (Ray 2.60).
A request refused on its headers is answered before much of its body is queued (a
1 GB upload without the token: under 10 MB more in the proxy and the ingress), and
the reply's ``Connection: close`` makes the proxy stop reading the rest.

The ingress takes ``requests_at_once`` requests at once (its ``max_ongoing_requests``); more wait in the proxy.
A request whose body is still arriving holds one of them, so ``handle`` bounds the time a body may take and the
number arriving slowly at once (:class:`pairank.jobs.serve_body.BodyLimits`); without those bounds, 300 slow bodies
hold all 256, and every other request waits in the proxy until one of them ends.

Serve's HTTP proxy binds ``host`` (127.0.0.1 unless told otherwise), on the head
node only. The judge replicas import only the judge code: vLLM's CPU kernel
dispatcher fails in a process that has loaded PyMC/llvmlite, so nothing here (or
in what a replica imports) may pull in the win-rate operators.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pyarrow as pa
from ray import serve
from ray.exceptions import TaskCancelledError

from pairank.cluster.serve.batching import Batches, Forwarding, GroupCommit, NotStored

if TYPE_CHECKING:
    from pairank.cluster.pools.judge_actor import Runner

#: Modules a judge replica must never load (see the module docstring); its ``info()`` reports any that are.
FORBIDDEN_IN_ENGINE = ("pymc", "llvmlite", "numba", "pytensor", "nutpie")


#: How long an idle judge replica waits for more requests to come with a first one (seconds).
BATCH_WAIT_S = 0.01
#: The ingress sends the requests that come within this many seconds to a judge replica in one call.
FORWARD_WAIT_S = 0.005


@serve.deployment(name="judge")
class JudgeReplica:
    """One engine; ``judge(request_rows)`` answers each request row with its result row, once it is stored.

    Requests are judged in :class:`Batches` of at most ``batch_size`` (what came while the engine
    judged the last batch; after an idle spell, what comes within ``batch_wait_s``), one engine
    call each. Each judged batch goes to a :class:`GroupCommit` of ``commit`` (the judgment
    cache's append, from :class:`pairank.jobs.serve.CacheAppend`: it gets the tables of every
    batch judged while the previous commit ran and stores them in one commit); the engine goes
    on with the next batch while a commit runs, and a request is answered once its batch is
    committed.
    """

    def __init__(
        self,
        factory: Callable[[], Runner],
        commit: Callable[[list[pa.Table]], dict],
        request_schema: pa.Schema,
        batch_size: int,
        batch_wait_s: float = BATCH_WAIT_S,
    ):
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="pairank-judge")
        self.runner = self._thread.submit(factory).result()
        self.engine: Batches[dict, tuple[dict, asyncio.Future]] = Batches(self._judge_batch, batch_size, batch_wait_s)
        self.commits: GroupCommit[pa.Table] = GroupCommit(commit)
        self.request_schema = request_schema
        self.stats: Counter = Counter({"pid": os.getpid(), "batches": 0, "rows": 0})

    async def judge(self, requests: list[dict]) -> list:
        """The result row of each request, once stored; a request that failed has its error in its place."""
        out = await asyncio.gather(*(self._judge_one(r) for r in requests), return_exceptions=True)
        return [x if isinstance(x, dict | NotStored) else RuntimeError(f"{type(x).__name__}: {x}") for x in out]

    async def _judge_one(self, request: dict) -> dict:
        row, committed = await self.engine.submit(request)
        await asyncio.shield(committed)  # a client gone does not cancel the commit of its batch
        return row

    async def _judge_batch(self, requests: list[dict]) -> list[tuple[dict, asyncio.Future]]:
        loop = asyncio.get_running_loop()
        table = await loop.run_in_executor(self._thread, self._judge, requests)
        committed = self.commits.submit(table)
        return [(row, committed) for row in table.to_pylist()]

    def _judge(self, requests: list[dict]) -> pa.Table:
        table = self.runner.run("pairwise", pa.Table.from_pylist(requests, schema=self.request_schema))
        self.stats["batches"] += 1
        self.stats["rows"] += table.num_rows
        return table

    def info(self) -> dict:
        """pid, engine batches and rows so far, the commits (``commits``, ``batches_committed``,
        ``failed_commits``, and the store's own counters as of the last commit), engine prompts per judging pass,
        and any forbidden module loaded."""
        loaded = sorted({m.split(".")[0] for m in sys.modules} & set(FORBIDDEN_IN_ENGINE))
        return {
            **self.stats,
            **self.commits.stats,
            **self.commits.store,
            **self.runner.info(),
            "forbidden_modules": loaded,
        }


@serve.deployment(name="ingress")
class Ingress:
    """HTTP in, :meth:`pairank.jobs.serve.OnlineJudging.handle`, HTTP out.

    The requests to judge that come within :data:`FORWARD_WAIT_S` of the first of them (at
    most ``forward_size``) go to a judge replica in one call (:class:`Forwarding`, many calls
    in flight): one Ray call per few milliseconds of requests instead of one per request.
    """

    def __init__(self, service, judge=None, forward_size: int = 64):
        self.service, self.judge_handle = service, judge
        self.forwarding: Forwarding[dict, dict] = Forwarding(self._send, forward_size, FORWARD_WAIT_S)

    async def _send(self, rows: list[dict]) -> list:
        return await self.judge_handle.judge.remote(rows)

    async def __call__(self, request):
        from starlette.responses import Response

        judge = self.forwarding.submit if self.judge_handle is not None else None
        reply = await self.service.handle(request.method, request.url.path, request.headers, _receive(request), judge)
        return Response(reply.body, status_code=reply.status, media_type=reply.content_type, headers=reply.headers)


def _receive(request):
    """The request's ASGI ``receive``, where a client gone mid-body is the ASGI ``http.disconnect`` it means (Serve's
    proxy cancels the fetch of the body's next piece: ``TaskCancelledError``)."""

    async def receive() -> dict:
        try:
            return await request.receive()
        except TaskCancelledError:
            return {"type": "http.disconnect"}

    return receive


def check_port_free(host: str, port: int) -> None:
    """Fail now, naming the address, when something already listens there (Serve would only log it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ValueError(
                f"--host {host} --port {port}: cannot listen there ({exc.strerror}); choose another port"
            ) from None


def start(
    service,
    judge,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "pairank",
    local: bool = True,
    *,
    requests_at_once: int,
) -> str:
    """Start Serve's proxy on ``host:port`` and deploy the application; returns its URL once it is running.

    ``judge`` is ``(factory, commit, request_schema, resources)`` (see :class:`JudgeReplica`;
    ``resources`` a :class:`pairank.cluster.pools.judge_pool.PoolResources`), or None to deploy no
    engine (a mode that is not served online). Ray must already be up
    (:func:`pairank.cluster.runtime.ensure_ray`); ``local``: the head node is this machine,
    so the port is checked here first. ``requests_at_once``: the HTTP requests the ingress
    takes at once (more wait in Serve's proxy).
    """
    if local:
        check_port_free(host, port)
    serve.start(http_options={"host": host, "port": port}, proxy_location="HeadOnly")
    handle = None
    if judge is not None:
        factory, commit, request_schema, pool = judge
        actor = {"num_cpus": pool.num_cpus, **({"num_gpus": pool.num_gpus} if pool.num_gpus else {})}
        # a range pool.size: Serve's autoscaling, a replica being busy with one batch
        replicas = (
            {"num_replicas": pool.min_size}
            if pool.fixed
            else {
                "autoscaling_config": {
                    "min_replicas": pool.min_size,
                    "max_replicas": pool.max_size,
                    "initial_replicas": pool.min_size,
                    "target_ongoing_requests": pool.batch_size,
                    "downscale_delay_s": pool.idle_seconds,
                }
            }
        )
        # a batch being committed, one on the engine and a full one waiting: the engine never waits for a commit
        # no access log line per internal call (the ingress logs each HTTP request)
        # (@serve.deployment made the class a Deployment; mypy keeps a decorated class's type as it was)
        handle = JudgeReplica.options(  # type: ignore[attr-defined]
            **replicas,
            ray_actor_options=actor,
            max_ongoing_requests=3 * pool.batch_size,
            logging_config={"enable_access_log": False},
        ).bind(factory, commit, request_schema, pool.batch_size)
    forward_size = judge[3].batch_size if judge is not None else 1
    app = Ingress.options(  # type: ignore[attr-defined]  # a Deployment, as JudgeReplica
        ray_actor_options={"num_cpus": 0}, max_ongoing_requests=requests_at_once
    ).bind(service, handle, forward_size)
    serve.run(app, name=name, route_prefix="/", blocking=False)
    return f"http://{host}:{port}"


def judge_info(name: str = "pairank") -> list[dict]:
    """:meth:`JudgeReplica.info` of one judge replica of the running application (tests, diagnostics)."""
    handle = serve.get_deployment_handle("judge", app_name=name)
    return [handle.info.remote().result()]


def stop(name: str = "pairank", shutdown: bool = True) -> None:
    """Delete the application; with ``shutdown``, stop Serve (its controller and proxy) too."""
    try:
        serve.delete(name)
    finally:
        if shutdown:
            serve.shutdown()
