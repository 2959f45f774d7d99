"""`pairank serve` over real HTTP: Ray Serve on a local Ray (127.0.0.1), the SIMULATED judge,
the judgment cache and the leaderboard on a SeaweedFS S3 root, and the batch runs' keys."""

from __future__ import annotations

import asyncio
import json
import socket
import uuid

import psutil
import pytest

from pairank.jobs.cli.main import main
from pairank.jobs.judging.requests import RequestMaker
from pairank.jobs.leaderboard import build_leaderboard
from pairank.jobs.pipeline.setup import mode_prompts
from pairank.jobs.run import run_job
from pairank.jobs.serve import OnlineJudging, start_server, token_digest
from pairank.jobs.specs.job import parse_spec
from pairank.judges import judge_identity
from pairank.judges.modes import judging_identity
from pairank.storage.layout import RunLayout
from tests.helpers import TOKEN, compare_body, free_port, request, rows_with_key, spec_dict


@pytest.fixture(scope="module")
def server(tmp_path_factory, summeval_tables, ray_local):
    """The app on 127.0.0.1:<free port>, with a bearer token, over an S3 storage root."""
    from pairank.cluster.serve.deployments import stop
    from tests.helpers import write_input

    folder = write_input(tmp_path_factory.mktemp("serve") / "input", summeval_tables, 3, 4)
    output = f"s3://pairank/serve-{uuid.uuid4().hex[:8]}"
    spec = parse_spec(spec_dict(folder.uri, output), "test")
    port = free_port()
    try:
        url = start_server(spec, "127.0.0.1", port, token_digest(TOKEN))
        yield {"url": url, "spec": spec, "port": port, "input": folder}
    finally:
        stop()


def candidates_of(folder):
    table = folder.join("candidates.parquet").read_parquet()
    return table, table.to_pylist()


def test_compare_then_cached(server):
    url, output = server["url"], server["spec"].output
    body = compare_body("An article about owls.", ("owl-1", "Owls hunt at night."), ("owl-2", "Owls are birds."))
    status, first, _ = request(f"{url}/compare", body)
    assert status == 200, first
    assert first["cached"] is False and first["error"] is None
    assert first["label"] in ("A", "B", "tie") and 0 <= first["p_a"] <= 1
    assert first["engine"] == "simulated" and first["candidate_a"] == "owl-1"
    assert first["context_id"].startswith("ctx-")  # default: a hash of the context

    status, again, _ = request(f"{url}/compare", body)
    assert status == 200 and again["cached"] is True
    assert (again["key"], again["p_a"], again["label"]) == (first["key"], first["p_a"], first["label"])
    assert rows_with_key(output, first["key"]) == 1

    from pairank.cluster.serve.deployments import judge_info

    info = judge_info()[0]
    assert info["rows"] == 1 and info["calls"]["pairwise"] == 1  # the second answer cost no engine call
    assert info["forbidden_modules"] == []  # no PyMC/llvmlite in the engine's process


def test_keys_shared_with_batch_runs(server):
    """An online key is the batch key; a batch run reuses an online judgment and the other way round."""
    url, spec, folder = server["url"], server["spec"], server["input"]
    table, rows = candidates_of(folder)
    ctx = rows[0]["context_id"]
    a, b, c = [r for r in rows if r["context_id"] == ctx][:3]
    maker = RequestMaker(
        table,
        mode_prompts(spec.judging, spec.prompts, spec.aspects),
        judging_identity(judge_identity(spec.judge), spec.judging),
    )

    body = compare_body(
        a["context"], (a["candidate_id"], a["text"]), (b["candidate_id"], b["text"]), aspect="fluency", context_id=ctx
    )
    status, online, _ = request(f"{url}/compare", body)
    assert status == 200 and online["cached"] is False
    assert online["key"] == maker.key("fluency", ctx, a["candidate_id"], b["candidate_id"])

    result = run_job(spec, progress=lambda m: None)  # the full matrix of every context, both aspects
    assert result.cached >= 1 and result.errors == 0
    assert rows_with_key(spec.output, online["key"]) == 1  # the batch run reused the online judgment

    body = compare_body(a["context"], (c["candidate_id"], c["text"]), (a["candidate_id"], a["text"]), context_id=ctx)
    status, from_batch, _ = request(f"{url}/compare", body)
    assert status == 200 and from_batch["cached"] is True
    assert from_batch["key"] == maker.key("coherence", ctx, c["candidate_id"], a["candidate_id"])
    assert rows_with_key(spec.output, from_batch["key"]) == 1


def with_raw(field: bytes) -> bytes:
    """A compare body with one more field written as raw JSON text (what json.dumps would not write)."""
    return json.dumps(compare_body("x", ("a", "ta"), ("b", "tb")))[:-1].encode() + b", " + field + b"}"


@pytest.mark.parametrize(
    "body, field",
    [
        (b"not json", "body: expected a JSON object"),
        ([1, 2], "body: expected a JSON object"),
        ({"context": "x", "candidate_b": {"id": "b", "text": "t"}, "aspect": "coherence"}, "candidate_a: expected"),
        (compare_body("x", ("a", "ta"), ("b", 3)), "candidate_b.text: expected a non-empty string, found int"),
        (compare_body("x", ("a", "ta"), ("b", "tb"), aspect="humour"), "aspect: expected one of"),
        (compare_body("x", ("a", "ta"), ("a", "tb")), "candidate_b.id: expected an id other than"),
        ({**compare_body("x", ("a", "ta"), ("b", "tb")), "temperature": 1}, "body: unknown fields ['temperature']"),
        (compare_body("x", ("a", "ta"), ("b", "tb"), variant="v2"), "variant: not accepted"),
        (
            with_raw(b'"context_id": 1' + b"0" * 99_999),
            "context_id: expected a non-empty string, found int of 100000 digits",
        ),
        (with_raw(b'"context_id": -Infinity'), "context_id: expected a non-empty string, found -Infinity (not a JSON"),
        (with_raw(b'"variant": 1e99999'), "variant: expected a non-empty string, found float 1e99999"),
        (with_raw(b'"context_id": "\\ud800x"'), "context_id: expected Unicode text, found a lone surrogate \\ud800"),
    ],
)
def test_bad_bodies_are_400_naming_the_field(server, body, field):
    status, answer, _ = request(
        f"{server['url']}/compare", body if isinstance(body, bytes) else json.dumps(body).encode()
    )
    assert status == 400, answer
    assert field in answer["error"], answer


def test_bearer_token(server):
    url = server["url"]
    status, answer, headers = request(f"{url}/", token=None)
    assert status == 401 and "Authorization: Bearer" in answer["error"]
    assert headers.get("www-authenticate", "").startswith("Bearer")
    assert request(f"{url}/", token="wrong")[0] == 401
    assert request(f"{url}/compare", compare_body("x", ("a", "ta"), ("b", "tb")), token="wrong")[0] == 401
    status, info, _ = request(f"{url}/")
    assert status == 200 and info["aspects"] == ["coherence", "fluency"] and info["token"] is True
    assert TOKEN not in json.dumps(info)


def test_routes_and_methods(server):
    url = server["url"]
    status, answer, _ = request(f"{url}/nowhere")
    assert status == 404 and "POST /compare" in answer["error"]
    status, answer, headers = request(f"{url}/compare")
    assert status == 405 and headers.get("allow") == "POST"


def test_leaderboard_404_then_the_latest(server):
    url, spec = server["url"], server["spec"]
    layout = RunLayout.of(spec.output, "")
    if not layout.leaderboard_json.exists():
        status, answer, _ = request(f"{url}/leaderboard")
        assert status == 404 and "pairank leaderboard --root s3://pairank/serve-" in answer["error"]
        assert request(f"{url}/leaderboard.html")[0] == 404
    if not layout.manifest.exists():
        run_job(spec, progress=lambda m: None)
    build_leaderboard(spec.output, n_boot=20)
    status, board, _ = request(f"{url}/leaderboard")
    assert status == 200 and board == layout.leaderboard_json.read_json()
    systems = set(server["input"].join("candidates.parquet").read_parquet().column("system").to_pylist())
    assert board["runs"] == ["online"] and {r["system"] for r in board["rows"]} == systems
    status, page, headers = request(f"{url}/leaderboard.html")
    assert status == 200 and headers["content-type"].startswith("text/html") and "<html" in page.lower()


def test_binds_loopback_only(server):
    port = server["port"]
    listening = [c for c in psutil.net_connections("inet") if c.status == psutil.CONN_LISTEN and c.laddr.port == port]
    assert listening and {c.laddr.ip for c in listening} == {"127.0.0.1"}
    others = [
        a.address
        for addrs in psutil.net_if_addrs().values()
        for a in addrs
        if a.family == socket.AF_INET and not a.address.startswith("127.")
    ]
    for address in others:
        with socket.socket() as s:
            s.settimeout(2)
            assert s.connect_ex((address, port)) != 0, f"{address}:{port} accepts connections"


def test_multi_pass_mode_is_refused_clearly(tmp_path):
    """PRePair needs a first pass per output: POST /compare says so (501); no engine is needed to say it."""
    spec = parse_spec(
        spec_dict(
            str(tmp_path / "in"),
            str(tmp_path / "store"),
            judging={"mode": "prepair"},
            judge={"engine": "http", "base_url": "http://127.0.0.1:9/v1", "model": "m"},
        ),
        "test",
    )
    service = OnlineJudging(spec)
    body = json.dumps(compare_body("x", ("a", "ta"), ("b", "tb"))).encode()
    reply = asyncio.run(service.handle("POST", "/compare", {}, body, None))
    assert reply.status == 501
    assert "judging.mode 'prepair' is not supported online" in json.loads(reply.body)["error"]


def test_cli_refuses_an_unset_token_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("PAIRANK_TEST_NO_SUCH_TOKEN", raising=False)
    path = tmp_path / "spec.yaml"
    path.write_text(json.dumps(spec_dict(str(tmp_path / "in"), str(tmp_path / "store"))))
    assert main(["serve", str(path), "--token-env", "PAIRANK_TEST_NO_SUCH_TOKEN"]) == 2
    assert "--token-env PAIRANK_TEST_NO_SUCH_TOKEN" in capsys.readouterr().err
