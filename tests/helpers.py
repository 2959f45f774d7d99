"""Helpers the tests share: paths, the S3 server's settings, processes and ports, input folders, specs,
scheduler checks, judgment rows.

Test modules and ``conftest.py`` import from here (and from ``tests/browser.py`` for
the headless browser, ``tests/operators/rows.py`` for judgment rows); no test imports
another test module or ``conftest.py``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import json
import math
import os
import random
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from statistics import NormalDist

import pyarrow as pa

from pairank.jobs.schedulers import AdaptiveScheduler, run_lockstep
from pairank.storage.fs import Location
from pairank.storage.layout import RunLayout
from pairank.storage.schemas import JUDGMENTS
from pairank.storage.store.cache import JudgmentCache

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT.parent / "shared" / "data"
#: The imported sets that ship with pairank (data/README.md).
SHIPPED_DATA = ROOT / "data"


#: Where the tests' own servers listen: below the OS's ephemeral ports (32768-60999 on Linux), which it hands to
#: any process's socket unasked, and above Ray's worker ports (10002-19999). A port the OS picked as free at start
#: was once taken by some other socket in the minutes before the S3 server started on it, and every S3 test of that
#: worker failed. Each pytest-xdist worker draws from a block of its own.
PORT_BLOCKS, PORT_BLOCK = range(20000, 32000, 1500), 1500


def free_ports(n: int) -> list[int]:
    """``n`` distinct ports free on 127.0.0.1 now, drawn at random from this process's block of ``PORT_BLOCKS``
    (by its pytest-xdist worker: ``gw0`` the second block, the first outside xdist)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    start = PORT_BLOCKS[(int(worker[2:]) + 1 if worker.startswith("gw") else 0) % len(PORT_BLOCKS)]
    found: list[int] = []
    for port in random.Random().sample(range(start, start + PORT_BLOCK), PORT_BLOCK):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        found.append(port)
        if len(found) == n:
            return found
    raise RuntimeError(f"fewer than {n} free ports in 127.0.0.1:{start}-{start + PORT_BLOCK - 1}")


#: The test S3 server's ports, chosen per test session so that sessions (and helpers' sessions) can run side by
#: side: S3, then master, volume, filer and admin, each with its gRPC port.
WEED_PORTS = free_ports(10)
S3_PORT = WEED_PORTS[0]
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "pairank-test",
    "AWS_SECRET_ACCESS_KEY": "pairank-test-secret",
    "AWS_ENDPOINT_URL": f"http://127.0.0.1:{S3_PORT}",
    "AWS_REGION": "us-east-1",
}
#: The test engines' vLLM CPU settings: a 1 GiB KV cache, the engine core in its actor's process, and ONE engine
#: thread, bound to no core. The tests run in two workers on two cores, so an engine always shares the machine: with
#: its threads bound to both cores (the judge's default, which a judge alone on its cores wants) every OpenMP step
#: waits for the thread whose core another process holds, and the waiting thread spins. Measured with one busy
#: process beside a run whose CPU engine was SIGKILLed (a test since folded into test_run_engine.py): 171 s bound to
#: both cores, 180 s bound to core 0, 92 s unbound with one thread (80 s alone, bound to both). test_judges_engine
#: checks the default binding itself.
CPU_ENGINE_ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
    "VLLM_CPU_OMP_THREADS_BIND": "nobind",
    "OMP_NUM_THREADS": "1",
}
#: What a judge's env holds to choose its threads (left out where a test checks the judge's own choice).
THREAD_SETTINGS = ("VLLM_CPU_OMP_THREADS_BIND", "OMP_NUM_THREADS")


def shell_env(**extra: str) -> dict[str, str]:
    """This process's environment as a user's shell hands it to a ``pairank`` command, with ``extra``: without
    RAY_ADDRESS (the command is told where to go) and without RAY_AUTH_MODE (Ray sets it in this process when it
    starts a Ray with token authentication on; pairank sends Ray's token of this machine by itself)."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_AUTH_MODE")}
    return {**env, **extra}


def joining(address: str) -> list[str]:
    """``pairank run`` options that join the session's Ray at ``address`` (the ``ray_address`` fixture) without
    shipping anything (``cluster.ship`` false): its workers import this checkout's pairank and have the session's
    environment already, and each starts without Ray's setup step for a runtime environment. Shipping, the default,
    is the multi-node tests' claim (tests/cluster/test_multinode.py)."""
    return [f"--set=cluster.address={address}", "--set=cluster.ship=false"]


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for_port(port: int, timeout: float, proc: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if port_open(port):
            return
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before port {port} opened")
        time.sleep(0.2)  # a poll of the port, not a window
    raise TimeoutError(f"nothing listening on 127.0.0.1:{port} after {timeout} s")


class Gate:
    """The SIMULATED judge's ``hold`` gate (``judge.hold``), from the test's side: a run's engines hold every batch
    from the ``hold_from``-th on until the test releases them, so a test acts "during" a run at a known point instead
    of in a window of time. ``wait_for`` waits for a state (a number of batches at the gate), its timeout only a
    bound on a hang."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def judge(self, hold_from: int = 0) -> dict:
        """The judge settings that send a run's batches through this gate."""
        return {"hold": str(self.folder), "hold_from": hold_from}

    def arrived(self) -> int:
        """Batches that have reached the gate so far (judged, or held)."""
        return len(list(self.folder.glob("batch-*.json")))

    def records(self) -> dict[int, dict]:
        """Every batch that reached the gate, by its number: its ``keys``, and the ``pid`` of the engine's process
        (a judge actor's, for the SIMULATED judge) that holds or held it."""
        return {int(f.stem[6:]): json.loads(f.read_text()) for f in self.folder.glob("batch-*.json")}

    def keys(self) -> list[str]:
        """The keys of every batch that reached the gate."""
        return [k for _, r in sorted(self.records().items()) for k in r["keys"]]

    def pids(self) -> set[int]:
        """The engine processes whose batches reached the gate."""
        return {r["pid"] for r in self.records().values()}

    def wait_for(self, batches: int, timeout: float = 600, proc: subprocess.Popen | None = None) -> None:
        """Until ``batches`` batches have reached the gate; a ``proc`` that exits first is an error."""
        deadline = time.monotonic() + timeout
        while self.arrived() < batches:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"the run exited with {proc.returncode} before {batches} batches reached the gate")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.arrived()} batches of {batches} reached {self.folder} in {timeout} s")
            time.sleep(0.05)  # a poll of the state waited for, not a window

    def release(self) -> None:
        (self.folder / "release").touch()

    def open_to(self, batches: int) -> None:
        """Let the batches numbered below ``batches`` through; the later ones stay held (until ``release``, or a
        larger ``open_to``)."""
        (self.folder / f"open-{batches}").touch()


class Feed:
    """Lets a run held at its gate (``hold_from: 0``) go on in steps until a state holds, for a test that must act
    at a point that only the run's own course reaches (a pool's new actor taking a call, a part stored since a
    kill): each step lets every batch held by a live engine through, then waits for the next batch to come to the
    gate (a state, not a time). Batches held by an engine that was killed (``dead``) are not waited for: their
    calls come again. ``most`` steps at most, so that a state that never comes fails instead of judging the whole
    run."""

    def __init__(self, gate: Gate, proc: subprocess.Popen | None = None, most: int = 40):
        self.gate, self.proc, self.most = gate, proc, most
        self.opened = 0  # the batches numbered below it are let through
        self.dead: set[int] = set()

    def held(self) -> dict[int, dict]:
        """The batches the gate holds in live engines, by number."""
        return {n: r for n, r in self.gate.records().items() if n >= self.opened and r["pid"] not in self.dead}

    def held_pids(self) -> set[int]:
        """The live engines that hold a batch at the gate."""
        return {r["pid"] for r in self.held().values()}

    def step(self, state=lambda: False) -> None:
        """Every batch held by a live engine let through; then a wait until the next batch comes, or ``state()``."""
        came = self.gate.arrived()
        held = self.held()
        if held:
            self.opened = max(held) + 1
            self.gate.open_to(self.opened)
        self.wait("the next batch at the gate", lambda: self.gate.arrived() > came or state())

    def until(self, what: str, state) -> None:
        """Steps until ``state()`` is true."""
        for _ in range(self.most):
            if state():
                return
            self.step(state)
        if not state():
            raise AssertionError(f"{what}: not after {self.most} steps of the run")

    def wait(self, what: str, state, timeout: float = 600) -> None:
        """Until ``state()`` is true, letting nothing through (``timeout``: a bound on a hang)."""
        deadline = time.monotonic() + timeout
        while not state():
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"{what}: the run exited with {self.proc.returncode} first")
            if time.monotonic() > deadline:
                raise TimeoutError(f"{what}: not after {timeout} s")
            time.sleep(0.05)  # a poll of the state waited for, not a window


def stop_process(proc: subprocess.Popen, timeout: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def run_and_kill(spec: dict, tmp_path: Path, victim, gate: Gate, after_kill=None, finish_s: float = 600) -> int:
    """``pairank run`` on ``spec``, its judge held at ``gate`` (``gate.judge()``), in a process of its own: the run
    is let through in steps (:class:`Feed`) until its first judgment part is in the store, then ``victim(run_pid)``
    (a pid, which holds calls at the gate) is SIGKILLed; once ``after_kill(feed)`` is true (a state waited for,
    nothing let through meanwhile), the run is released, and must exit 0. Returns the pid killed."""
    import signal
    import sys

    import yaml

    path = tmp_path / f"{spec['name']}.yaml"
    path.write_text(yaml.safe_dump(spec))
    log_path = tmp_path / "run.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(path)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        parts = Path(spec["output"]) / "tables" / "judgments"
        feed = Feed(gate, proc)
        try:
            try:
                feed.until("a judgment part stored", lambda: parts.is_dir() and bool(list(parts.glob("**/*.parquet"))))
                killed = victim(proc.pid)
                os.kill(killed, signal.SIGKILL)
                feed.dead.add(killed)
                if after_kill is not None:
                    feed.wait("the state after the kill", lambda: after_kill(feed))
            except (AssertionError, RuntimeError, TimeoutError) as exc:
                raise AssertionError(f"{exc}\n{log_path.read_text()[-3000:]}") from exc
            finally:
                gate.release()
            assert proc.wait(timeout=finish_s) == 0, log_path.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
    return killed


def judge_actor_pids(under: int | None = None) -> list[int]:
    """PIDs of the judge actors' processes on this machine (Ray titles them ``ray::JudgeActor...``); with
    ``under``, only those descended from that process (a run's own local Ray, not another one's on the machine)."""
    return titled_pids(b"ray::JudgeActor", under)


def titled_pids(title: bytes, under: int | None = None) -> list[int]:
    """PIDs of the processes whose title (first word of the command line) starts with ``title``; with ``under``,
    only those descended from that process."""
    return sorted(pid for pid, first in process_titles(under).items() if first.startswith(title))


def process_titles(under: int | None = None) -> dict[int, bytes]:
    """The first word of each process's command line by PID; with ``under``, only the processes descended from
    that one (what a failed search for a process shows). Only their command lines are read: a watcher that calls
    this several times a second beside a test run's 600 processes costs little."""
    parents = {}
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])

    def descends(pid: int) -> bool:
        while pid > 1:
            if pid == under:
                return True
            pid = parents.get(pid, 0)
        return False

    titles = {}
    for pid in parents:
        if under is None or descends(pid):
            with contextlib.suppress(OSError):
                titles[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0]
    return titles


#: Words the engine tests cut each SummEval article and summary to (:func:`cut_words`), where the claim is what happens
#: around the engine (a kill, a rerun, a night, a judging mode's path), not what it reads: a SummEval prompt of about
#: 700 tokens costs the CPU judge about 0.45 CPU s; cut to 40 words of each, about a third of that.
SHORT_TEXT_WORDS = 40


def write_input(folder: Path, tables, contexts: int, per_context: int, words: int | None = None):
    """An input folder with the first ``contexts`` articles x ``per_context`` summaries and their human scores.

    ``words``: each article and summary cut to its first ``words`` words (:data:`SHORT_TEXT_WORDS`)."""
    import pyarrow.compute as pc

    from pairank.jobs.judging.requests import subset

    candidates, human = tables
    small = subset(candidates, contexts, per_context)
    if words is not None:
        small = cut_words(small, words)
    human = human.filter(pc.is_in(human.column("candidate_id"), small.column("candidate_id")))
    out = Location.of(str(folder))
    out.join("candidates.parquet").write_parquet(small)
    out.join("human_scores.parquet").write_parquet(human)
    return out


def cut_words(candidates, words: int):
    """``candidates`` with each article and output cut to its first ``words`` words (:data:`SHORT_TEXT_WORDS`)."""
    for name in ("context", "text"):
        cut = [" ".join(t.split()[:words]) for t in candidates.column(name).to_pylist()]
        field = candidates.schema.field(name)
        candidates = candidates.set_column(candidates.schema.get_field_index(name), field, pa.array(cut, field.type))
    return candidates


def cands(n: int) -> list[str]:
    """Candidate ids; ``c00`` is the best under :func:`rank_scores`."""
    return [f"c{i:02d}" for i in range(n)]


def rank_scores(ids: list[str]) -> dict[str, float]:
    return {x: float(len(ids) - i) for i, x in enumerate(ids)}


def _unit(*key) -> float:
    """A uniform number in (0, 1), a pure function of ``key``."""
    digest = hashlib.sha256(repr(key).encode()).digest()
    return (int.from_bytes(digest[:8], "little") + 0.5) / 2.0**64


def _sigmoid(z: float) -> float:
    return 1.0 / (1.0 + math.exp(-z)) if z >= 0 else math.exp(z) / (1.0 + math.exp(z))


def logit_judge(scores: dict[str, float], k: float, bias: float = 0.0, sigma: float = 0.0, seed: int = 0):
    """p = sigmoid(k (s_a - s_b) + bias + sigma z), z ~ N(0, 1) fixed per (seed, ctx, a, b)."""

    def p(ctx: str, a: str, b: str) -> float:
        z = NormalDist().inv_cdf(_unit("z", seed, ctx, a, b)) if sigma else 0.0
        return _sigmoid(k * (scores[a] - scores[b]) + bias + sigma * z)

    return p


def hard_judge(scores: dict[str, float]):
    return lambda ctx, a, b: 1.0 if scores[a] > scores[b] else 0.0


def random_judge(seed: int):
    """Arbitrary (intransitive) p in [0.01, 0.99] per ordered pair."""
    return lambda ctx, a, b: 0.01 + 0.98 * _unit("p", seed, ctx, a, b)


class Tracker:
    """A lockstep judge that records every round and fails on a repeated request."""

    def __init__(self, p_fn) -> None:
        self.p_fn = p_fn
        self.rounds: list[list[tuple[str, str, str]]] = []
        self.seen: set[tuple[str, str, str]] = set()

    def __call__(self, requests):
        self.rounds.append(list(requests))
        for req in requests:
            assert req not in self.seen, f"asked twice: {req}"
            assert req[1] != req[2]
            self.seen.add(req)
        return [self.p_fn(*req) for req in requests]

    def of(self, ctx: str) -> list[list[tuple[str, str]]]:
        """The rounds of one context (its non-empty requests, in order)."""
        rounds = [[(a, b) for c, a, b in r if c == ctx] for r in self.rounds]
        return [r for r in rounds if r]


def run_config(factory, ids: list[str], seed: int, p_fn, ctx: str = "ctx"):
    """One machine of ``factory`` run to the end on its own; (machine, tracker, stats)."""
    m = factory(ctx, ids, seed)
    judge = Tracker(p_fn)
    stats = run_lockstep([m], judge)
    assert m.done and stats["done"]
    return m, judge, stats


def check_invariants(m, judge: Tracker, stats: dict, ids: list[str], symmetric: bool) -> None:
    """A permutation of its candidates, every pair asked once and answered, nothing left to ask."""
    assert sorted(m.ranking()) == ids
    assert sorted(m.order) == ids
    assert m.asked == len(judge.seen) == stats["comparisons"]
    assert not m.pending
    assert m.next_requests() == []
    assert isinstance(m, AdaptiveScheduler)
    if symmetric:  # both orders of each comparison, in the same round
        for r in judge.rounds:
            assert {(a, b) for _, b, a in r} == {(a, b) for _, a, b in r}


def check_late_and_partial_answers(factory, n: int) -> None:
    """observe may carry a subset of what was asked; the rest can come later."""
    ids = cands(n)
    p_fn = random_judge(1)
    full, full_judge, _ = run_config(factory, ids, 5, p_fn)
    m = factory("ctx", ids, 5)
    asked: list[tuple[str, str]] = []
    step = 0
    while not m.done:
        new = m.next_requests()
        assert not set(new) & set(asked), "a pair was asked again"
        asked += new
        pending = sorted(m.pending)
        assert set(new) <= set(pending)
        assert pending, "not done, nothing pending and nothing new"
        # Answer about a third of what is pending, chosen by a fixed rule.
        step += 1
        part = [pair for k, pair in enumerate(pending) if (k + step) % 3 == 0] or pending[:1]
        m.observe({pair: p_fn("ctx", *pair) for pair in part})
    assert m.ranking() == full.ranking()
    assert set(asked) == {(a, b) for r in full_judge.rounds for _, a, b in r}


def check_known_judgments_reused(factory, n: int) -> None:
    """A machine given every judgment up front asks for nothing and ranks as a fresh run does."""
    ids = cands(n)
    p_fn = random_judge(2)
    full, judge, _ = run_config(factory, ids, 3, p_fn)
    warm = factory("ctx", ids, 3)
    warm.observe({(a, b): p_fn("ctx", a, b) for r in judge.rounds for _, a, b in r})
    assert warm.done and warm.asked == 0 and warm.next_requests() == []
    assert warm.ranking() == full.ranking()


def check_reproducible(factory, contexts: dict[str, list[str]]) -> None:
    """Same seed, same requests round by round, alone or with other contexts, ids in any order."""
    p_fn = random_judge(3)
    together = [factory(ctx, ids, 7) for ctx, ids in contexts.items()]
    judge = Tracker(p_fn)
    run_lockstep(together, judge)
    again = Tracker(p_fn)
    run_lockstep([factory(ctx, ids, 7) for ctx, ids in contexts.items()], again)
    assert again.rounds == judge.rounds
    for m in together:
        # Alone, and with its ids in another order: the same requests, round by round.
        alone = factory(m.context_id, list(reversed(contexts[m.context_id])), 7)
        solo = Tracker(p_fn)
        run_lockstep([alone], solo)
        assert alone.ranking() == m.ranking()
        assert solo.of(m.context_id) == judge.of(m.context_id)
    # Lockstep rounds are the longest context's rounds: contexts never wait on each other.
    assert len(judge.rounds) == max(len(judge.of(ctx)) for ctx in contexts)


def spearman(ranking: list[str], scores: dict[str, float]) -> float:
    n = len(ranking)
    truth = sorted(ranking, key=lambda x: -scores[x])
    pos = {x: i for i, x in enumerate(truth)}
    d2 = sum((i - pos[x]) ** 2 for i, x in enumerate(ranking))
    return 1.0 - 6.0 * d2 / (n * (n * n - 1))


def n_log_n(n: int) -> int:
    return n * math.ceil(math.log2(n)) if n > 1 else 0


PROMPTS = str(ROOT / "configs/prompts/summarization")


TOKEN = "pairank-test-" + uuid.uuid4().hex


def free_port() -> int:
    """One port of :func:`free_ports`."""
    return free_ports(1)[0]


def request(url: str, body=None, token: str | None = TOKEN, method: str | None = None) -> tuple[int, dict | str, dict]:
    """(status, JSON or text, headers) of one real HTTP request."""
    data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, data=data, headers=headers, method=method or ("POST" if data else "GET"))
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            status, raw, hdrs = resp.status, resp.read(), resp.headers
    except urllib.error.HTTPError as exc:
        status, raw, hdrs = exc.code, exc.read(), exc.headers
    hdrs = {k.lower(): v for k, v in hdrs.items()}
    text = raw.decode("utf-8")
    return status, json.loads(text) if hdrs.get("content-type", "").startswith("application/json") else text, hdrs


def spec_dict(input_uri: str, output: str, **over) -> dict:
    spec = {
        "name": "online",
        "input": input_uri,
        "output": output,
        "aspects": ["coherence", "fluency"],
        "prompts": PROMPTS,
        "judge": {"engine": "simulated", "seed": 3, "noise": 0.5, "position_bias": 0.3},
        "scheduler": {"name": "full"},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 8},
        "report": {"bootstrap": 20},
        "flush_rows": 64,
    }
    spec.update(over)
    return spec


def compare_body(ctx: str, a: tuple[str, str], b: tuple[str, str], aspect: str = "coherence", **extra) -> dict:
    return {
        "context": ctx,
        "candidate_a": {"id": a[0], "text": a[1]},
        "candidate_b": {"id": b[0], "text": b[1]},
        "aspect": aspect,
        **extra,
    }


def rows_with_key(output: str, key: str) -> int:
    """Rows of ``key`` in the cache (every committed row, not de-duplicated)."""
    cache = JudgmentCache(RunLayout.of(output, "").judgments)
    return cache.rows().column("key").to_pylist().count(key)


KAPPAS = ("kappa_False", "kappa_True", "kappa_average", "kappa_agreement")


def published(root: Path) -> dict[tuple[str, str, str], dict]:
    """(subset, LLM, mode) -> statistics.json of every evaluator folder with a result.json."""
    return {
        (str(r.parents[3].relative_to(root)), r.parent.parent.name, r.parent.name): json.loads(
            (r.parent / "statistics.json").read_text()
        )
        for r in sorted(root.glob("**/evaluators/*/*/result.json"))
    }


def by_evaluator(table: pa.Table) -> dict[tuple[str, str, str], dict]:
    return {(r["subset"], r["model"], json.loads(r["sampling"])["mode"]): r for r in table.to_pylist()}


def mismatches(want: dict, got: dict) -> dict:
    """The published fields that differ: strings exactly, kappas as floats (to 1e-12)."""
    return {
        k: (v, got[k])
        for k, v in want.items()
        if not (got[k] == v or (k in KAPPAS and got[k] is not None and abs(got[k] - v) <= 1e-12))
    }


def spec_for(input_folder, output, **over) -> dict:
    spec = {
        "name": "adaptive",
        "input": input_folder.uri,
        "output": str(output),
        "aspects": ["coherence"],
        "prompts": PROMPTS,
        "judge": {"engine": "simulated", "noise": 0.0, "seed": 3, "scale": 30.0},  # p near 0 or 1
        "scheduler": {"name": "pairs_greedy", "seed": 1},
        "pool": {"size": 1, "num_cpus": 1, "batch_size": 8},
        "report": {"bootstrap": 0},
        "flush_rows": 8,
    }
    return overlaid(spec, over)


#: The killed runs' lease time (storage/store/lease.py): a re-run of the name waits it out.
LEASE_TTL_S = 2


def write_spec(tmp_path: Path, input_folder, output: Path, **over) -> Path:
    """A spec file ``<output name>.yaml`` in ``tmp_path``: :func:`spec_for` with ``over``."""
    import yaml

    path = tmp_path / f"{output.name}.yaml"
    path.write_text(yaml.safe_dump(spec_for(input_folder, output, **over)))
    return path


def run_killed_at_gate(spec: Path, ray_address: str, gate: Gate, batches: int, log_path: Path) -> str:
    """``pairank run spec`` (joining the session's Ray) in a process group of its own, killed (SIGKILL, the whole
    group) once ``batches`` batches have reached ``gate``; returns what it printed until then."""
    import signal
    import sys

    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(spec), *joining(ray_address)],
            cwd=ROOT,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "PAIRANK_LEASE_TTL_S": str(LEASE_TTL_S)},
        )
        try:
            gate.wait_for(batches, proc=proc)
            said = log_path.read_text()
            assert proc.poll() is None, said[-3000:]
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    return said


def wait_for_free(root: Location, name: str, timeout: float = 120) -> None:
    """Until the lease of ``name`` under ``root`` is free (a killed run's runs out ``LEASE_TTL_S`` after its last
    renewal); ``timeout`` only bounds a hang."""
    from pairank.storage.store.lease import is_held

    deadline = time.monotonic() + timeout
    while is_held(root, name):
        assert time.monotonic() < deadline, f"the lease of {name!r} under {root.uri} was still held after {timeout} s"
        time.sleep(0.1)  # a poll of the lease, not a window


def overlaid(spec: dict, over: dict) -> dict:
    """``spec`` with ``over``'s values: a section (a dict) merged key by key into the spec's, anything else replaced."""
    for key, value in over.items():
        spec[key] = {**spec.get(key, {}), **value} if isinstance(value, dict) else value
    return spec


def full_matrix_spec(
    input_folder, output, *, name: str, seconds_per_comparison: float, pool: dict, flush_rows: int, **over
) -> dict:
    """A full matrix judged by the SIMULATED judge at ``seconds_per_comparison`` on ``pool``'s actors in a 2-CPU
    Ray, a part stored every ``flush_rows`` rows: a run long enough to kill its actors or read its metrics while
    it judges. ``over`` as :func:`spec_for`'s, over these."""
    spec = spec_for(
        input_folder,
        output,
        name=name,
        scheduler={"name": "full"},
        judge={"seconds_per_comparison": seconds_per_comparison},
        pool=pool,
        cluster={"num_cpus": 2},
        flush_rows=flush_rows,
    )
    return overlaid(spec, over)


def write_json(path: Path, obj) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))
    return path


def topicalchat_rows() -> list[dict]:
    aspects = ("understandability", "naturalness", "coherence", "engagingness", "groundedness", "overall")
    return [
        {
            "source": f"hi \n hello dialogue {d} \n",
            "context": f"fact {d}",
            "system_id": f"sys{k}",
            "system_output": f"reply {d}.{k}",
            "scores": dict.fromkeys(aspects, 1.0),
        }
        for d in range(2)
        for k in range(2)
    ]


T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


LEADERBOARD_JUDGE = {"engine": "simulated", "model": "simulated", "revision": "r", "prompt_hash": "p", "sampling": "{}"}


def leaderboard_candidates(contexts, systems):
    """Candidates ``<context>/<system>`` of every system on every context (short texts)."""
    import pyarrow as pa

    return pa.Table.from_pylist(
        [
            {"context_id": c, "context": "doc", "candidate_id": f"{c}/{s}", "system": s, "text": "t"}
            for c in contexts
            for s in systems
        ]
    )


def leaderboard_judgment(ctx, aspect, a, b, label, *, error=None, judge=LEADERBOARD_JUDGE, i=0) -> dict:
    """A judgment row whose verdict is ``label`` (A, B, tie, or None for an error row)."""
    p = {"A": 0.9, "B": 0.1, "tie": 0.5, None: None}[label]
    return {
        "key": f"{ctx}|{aspect}|{a}|{b}|{i}|{judge['model']}",
        **judge,
        "context_id": ctx,
        "aspect": aspect,
        "candidate_a": a,
        "candidate_b": b,
        "p_a": p,
        "logprob_a": None,
        "logprob_b": None,
        "label": label,
        "raw_text": None,
        "input_tokens": 1,
        "output_tokens": 1,
        "seconds": 0.0,
        "error": error,
        "created_at": T0,
    }


def leaderboard_table(rows) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=JUDGMENTS)


def reply_json(handler: BaseHTTPRequestHandler, obj) -> None:
    """Answer 200 with ``obj`` as JSON from an ``http.server`` handler."""
    data = json.dumps(obj).encode()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


@contextmanager
def completions_endpoint(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A scripted OpenAI-compatible endpoint on 127.0.0.1 (a free port) while the block runs; its /v1 base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


#: A ``pairank store verify --quarantine`` in a process of its own that SIGKILLs itself right after its
#: ``argv[2]``-th step (``verify_store``'s ``on_step``): a repair stopped at a known point, for real.
REPAIR_KILLED_AT = """
import os, signal, sys
from pairank.storage.store.verify import verify_store
steps = []
def on_step(step):
    steps.append(step)
    if len(steps) == int(sys.argv[2]):
        os.kill(os.getpid(), signal.SIGKILL)
verify_store(sys.argv[1], quarantine=True, on_step=on_step)
"""


def kill_repair_at(root_uri: str, step: int) -> None:
    """The repair of ``root_uri`` killed (SIGKILL) right after its ``step``-th step."""
    import signal
    import sys

    killed = subprocess.run(
        [sys.executable, "-c", REPAIR_KILLED_AT, root_uri, str(step)], cwd=ROOT, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()[-2000:]
