"""`pairank serve` against slow bodies, over real HTTP: Ray Serve on a local Ray (127.0.0.1).

A slow client here sends the headers of a ``POST /compare`` with the token, a declared 100-byte body and its first
byte, then holds. Without bounds, 300 of them held every request the ingress takes at once (256), and every other
request waited in Serve's proxy until one of them ended. Now at most ``serve.slow_bodies`` of them are read at
once (the others are answered 429 at once), a concurrent client is answered while they are held, and each
held one is answered 408 once ``serve.body_timeout_s`` has passed, its connection closed.

Every claim is about state: which answer each socket got, whether a socket is still open (no answer, no end), and
the server's own count of the slow bodies it reads (``GET /``, ``bodies.slow_now``).
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import time
from collections.abc import Iterator

import pytest

from pairank.jobs.serve import start_server, token_digest
from pairank.jobs.specs.job import SERVE_REQUESTS_AT_ONCE, SpecError, parse_spec
from tests.helpers import TOKEN, compare_body, free_port, request, spec_dict, write_input

#: How long the test waits for an answer that must come (a bound on a hang, not a window).
HANG_S = 60
#: The body a slow client declares; it sends the first byte of it.
DECLARED = 100


@contextlib.contextmanager
def serving(tmp_path, summeval_tables, **serve) -> Iterator[dict]:
    """The app on 127.0.0.1:<free port> with a bearer token, the SIMULATED judge, a local storage root, and the
    spec's ``serve`` section set to ``serve``."""
    from pairank.cluster.serve.deployments import stop

    folder = write_input(tmp_path / "input", summeval_tables, 2, 3)
    spec = parse_spec({**spec_dict(folder.uri, str(tmp_path / "store")), "serve": serve}, "test")
    port = free_port()
    try:
        yield {"url": start_server(spec, "127.0.0.1", port, token_digest(TOKEN)), "port": port}
    finally:
        stop()


def slow_client(port: int) -> socket.socket:
    """A connection that has sent a POST /compare's headers (the token, Content-Length 100) and 1 byte of its body."""
    s = socket.create_connection(("127.0.0.1", port), timeout=HANG_S)
    head = [
        "POST /compare HTTP/1.1",
        "Host: 127.0.0.1",
        "Content-Type: application/json",
        f"Authorization: Bearer {TOKEN}",
        f"Content-Length: {DECLARED}",
    ]
    s.sendall(("\r\n".join(head) + "\r\n\r\n{").encode())
    return s


def is_open(s: socket.socket) -> bool:
    """Whether the server has neither answered on ``s`` nor closed it (nothing to read, no end)."""
    return not select.select([s], [], [], 0)[0]


def answer(s: socket.socket) -> dict:
    """The answer on ``s`` (status, JSON, headers), and whether the server then closed the connection."""
    raw = b""
    while b"\r\n\r\n" not in raw or len(raw.partition(b"\r\n\r\n")[2]) < _length(raw):
        data = s.recv(65536)  # the socket's timeout (HANG_S) bounds a hang
        assert data, f"the connection closed before a whole answer: {raw!r}"
        raw += data
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    try:
        closed = s.recv(1) == b""
    except ConnectionResetError:
        closed = True
    return {"status": int(lines[0].split()[1]), "answer": json.loads(body), "headers": headers, "closed": closed}


def _length(raw: bytes) -> int:
    head = raw.partition(b"\r\n\r\n")[0].decode().lower()
    found = [line.split(":", 1)[1] for line in head.split("\r\n") if line.startswith("content-length:")]
    return int(found[0]) if found else 0


def answered(socks: list[socket.socket], n: int) -> dict[socket.socket, dict]:
    """The first ``n`` answers among ``socks``, in the order they come (each socket's answer read whole)."""
    got: dict[socket.socket, dict] = {}
    deadline = time.monotonic() + HANG_S
    while len(got) < n:
        waiting = [s for s in socks if s not in got]
        assert time.monotonic() < deadline, f"{len(got)} of {n} answers came; {len(waiting)} sockets still wait"
        for s in select.select(waiting, [], [], 1)[0]:  # a poll of the sockets for their answers, not a window
            got[s] = answer(s)
    return got


def slow_now(url: str) -> int:
    """The server's own count of the slow bodies it is reading (GET /)."""
    status, info, _ = request(f"{url}/")
    assert status == 200, info
    return info["bodies"]["slow_now"]


def test_slow_bodies_beyond_the_bound_are_refused_and_another_client_is_answered(tmp_path, summeval_tables, ray_local):
    """More slow clients than the ingress takes requests at once: all but ``serve.slow_bodies`` of them are
    answered 429 at once, and a normal compare is answered while the others are held (their timeout is far away)."""
    at_most, clients = 8, SERVE_REQUESTS_AT_ONCE + 44
    with serving(tmp_path, summeval_tables, body_timeout_s=600, slow_bodies=at_most) as server:
        url = server["url"]
        socks = [slow_client(server["port"]) for _ in range(clients)]
        try:
            refused = answered(socks, clients - at_most)
            for got in refused.values():
                assert got["status"] == 429, got
                assert f"(serve.slow_bodies: {at_most})" in got["answer"]["error"], got
                assert got["headers"].get("connection") == "close" and got["headers"].get("retry-after") == "600"
                assert got["closed"], got
            held = [s for s in socks if s not in refused]
            assert len(held) == at_most and all(map(is_open, held))
            assert slow_now(url) == at_most

            body = compare_body("An article about owls.", ("owl-1", "Owls hunt at night."), ("owl-2", "Owls fly."))
            status, judged, _ = request(f"{url}/compare", body)
            assert status == 200 and judged["error"] is None and judged["cached"] is False, judged

            # answered while the held ones were being read: the server still reads them, and they are still open
            assert slow_now(url) == at_most
            assert all(map(is_open, held))
        finally:
            for s in socks:
                s.close()
        # a slow client that goes away frees its place (a poll for the server to see the connections end)
        deadline = time.monotonic() + HANG_S
        while slow_now(url):
            assert time.monotonic() < deadline, "the server still counts slow bodies of closed connections"
            time.sleep(0.05)  # a poll of the server's count, not a window


def test_a_body_that_takes_too_long_is_answered_408_and_its_connection_closed(tmp_path, summeval_tables, ray_local):
    """50 slow clients, ``serve.slow_bodies`` 40 and a 1 s ``serve.body_timeout_s``: the first 40 to arrive (and any
    that arrive once some of those have ended) are read until the timeout, then answered 408, and their connections
    closed; the others are answered 429."""
    at_most, clients = 40, 50
    with serving(tmp_path, summeval_tables, body_timeout_s=1, slow_bodies=at_most) as server:
        socks = [slow_client(server["port"]) for _ in range(clients)]
        try:
            got = answered(socks, clients)
        finally:
            for s in socks:
                s.close()
        statuses = [g["status"] for g in got.values()]
        assert set(statuses) <= {408, 429} and statuses.count(408) >= at_most, statuses
        for g in got.values():
            assert g["headers"].get("connection") == "close" and g["closed"], g
            if g["status"] == 408:
                assert g["answer"]["error"] == (
                    f"body: 1 of {DECLARED} declared bytes came within 1 s, the most a body may take "
                    "(serve.body_timeout_s); send the whole body within that time"
                )
        assert slow_now(server["url"]) == 0

        body = compare_body("An article about owls.", ("owl-1", "Owls hunt at night."), ("owl-2", "Owls fly."))
        status, judged, _ = request(f"{server['url']}/compare", body)
        assert status == 200 and judged["error"] is None, judged


@pytest.mark.parametrize(
    "serve, expected",
    [
        ({"slow_bodies": SERVE_REQUESTS_AT_ONCE}, "serve.slow_bodies: Input should be less than or equal to 128"),
        ({"body_timeout_s": 0}, "serve.body_timeout_s: Input should be greater than 0"),
        ({"read_timeout": 5}, "serve.read_timeout: unknown key; allowed keys here: body_timeout_s, slow_bodies"),
    ],
    ids=["too-many-slow-bodies", "no-time", "unknown-key"],
)
def test_bad_serve_settings_are_refused_naming_the_key(tmp_path, serve, expected):
    with pytest.raises(SpecError) as exc:
        parse_spec({**spec_dict(str(tmp_path / "in"), str(tmp_path / "store")), "serve": serve}, "test")
    assert expected in str(exc.value)


def test_serve_settings_are_set_from_the_command_line(tmp_path):
    """`pairank serve spec.yaml --set serve.body_timeout_s=2.5`: the override reaches the server's limits."""
    from pairank.jobs.serve import OnlineJudging
    from pairank.jobs.specs.job import load_spec

    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec_dict(str(tmp_path / "in"), str(tmp_path / "store"))))
    spec = load_spec(str(path), ["serve.body_timeout_s=2.5", "serve.slow_bodies=3"])
    limits = OnlineJudging(spec).body_limits
    assert (limits.timeout_s, limits.slow_bodies) == (2.5, 3)
    default = OnlineJudging(load_spec(str(path), [])).body_limits
    assert (default.timeout_s, default.slow_bodies) == (10.0, 64)
