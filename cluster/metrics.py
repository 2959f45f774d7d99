"""pairank's Prometheus metrics, exported through Ray's metrics agent (``ray.util.metrics``).

Every metric is defined once here (:data:`METRICS`: its name, kind, description and tags) and is tagged by
``run`` (the spec's ``name``) and ``judge`` (engine and model); some also by ``judging_pass`` (``pairwise``, or a first
pass: ``analysis``, ``analysis_pairwise``, ``score``). Ray's agent on each node serves them at
``http://<node>:<metrics_export_port>/metrics`` with the prefix ``ray_`` (``ray_pairank_comparisons_judged_total``);
``cluster/grafana-pairank.json`` is a dashboard of them.

Where each is counted, so that none restarts at 0 when an engine does:

- comparisons judged, errored and cached: by the driver, as it stores what the pool returned (each key once) and
  as it finds verdicts in the store;
- engine prompts, tokens, batches and batch seconds: by the pool's monitor (an actor on the driver's node that
  lives as long as the pool), from each batch a forwarder got back; engines lost and restarted, the pool's actors
  and its backlog: by the same monitor, as it learns of them. A judge actor itself counts nothing that outlives it.

The rest of pairank calls :class:`Meter`, which needs no Ray: in a process without Ray it records nothing.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

#: The tags of every metric.
RUN_TAGS = ("run", "judge")
#: The tags of the metrics counted per judging pass.
PASS_TAGS = (*RUN_TAGS, "judging_pass")
#: Upper bounds (seconds) of the batch-latency histogram's buckets.
BATCH_SECONDS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)
#: The prefix Ray's agent gives every name it exports.
PREFIX = "ray_"


@dataclass(frozen=True)
class Metric:
    """One metric: its name (as recorded; exported with :data:`PREFIX`), kind, description and tags."""

    name: str
    kind: str  # counter, gauge or histogram
    description: str
    tags: tuple[str, ...] = RUN_TAGS
    boundaries: tuple[float, ...] = ()

    @property
    def exported(self) -> tuple[str, ...]:
        """The series names Prometheus sees (a histogram's buckets, sum and count).

        >>> METRICS["pairank_batch_seconds"].exported[0], METRICS["pairank_pool_actors"].exported
        ('ray_pairank_batch_seconds_bucket', ('ray_pairank_pool_actors',))
        """
        name = PREFIX + self.name
        if self.kind == "histogram":
            return (f"{name}_bucket", f"{name}_sum", f"{name}_count")
        return (name,)


METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        Metric(
            "pairank_comparisons_judged_total",
            "counter",
            "Requests judged by an engine and stored (each key once), errors included.",
            PASS_TAGS,
        ),
        Metric(
            "pairank_comparisons_errored_total",
            "counter",
            "Requests judged and stored as error rows (asked again on the next run).",
            PASS_TAGS,
        ),
        Metric(
            "pairank_comparisons_cached_total",
            "counter",
            "Comparisons a run found answered in the judgment store and did not ask again.",
        ),
        Metric(
            "pairank_engine_prompts_total",
            "counter",
            "Prompts the engines answered, in batches returned to the pool (a batch sent again after a lost "
            "engine counts again).",
            PASS_TAGS,
        ),
        Metric("pairank_engine_batches_total", "counter", "Batches the engines returned to the pool.", PASS_TAGS),
        Metric("pairank_engine_input_tokens_total", "counter", "Prompt tokens of the batches returned.", PASS_TAGS),
        Metric("pairank_engine_output_tokens_total", "counter", "Generated tokens of the batches returned.", PASS_TAGS),
        Metric(
            "pairank_batch_seconds",
            "histogram",
            "Seconds an engine took to judge one batch.",
            PASS_TAGS,
            BATCH_SECONDS,
        ),
        Metric(
            "pairank_engines_lost_total",
            "counter",
            "Judge engines lost (a killed process, a lost node, an engine that ended its process): restarted or dead.",
        ),
        Metric("pairank_engines_restarted_total", "counter", "Judge engines Ray restarted after a loss."),
        Metric("pairank_batches_retried_total", "counter", "Batches sent again because their engine died under them."),
        Metric("pairank_pool_actors", "gauge", "Judge actors of the pool taking calls."),
        Metric("pairank_pool_running", "gauge", "Calls running in the pool's engines."),
        Metric("pairank_pool_backlog", "gauge", "Calls sent to the pool's actors that wait for their engine."),
    )
}

#: vLLM's own engine metrics that the dashboard reads, as Ray exports them (``vllm:NAME`` becomes ``ray_vllm_NAME``;
#: a counter gets ``_total``, a histogram ``_bucket``): a judge actor's async engine records them
#: (:func:`pairank.judges.engines.vllm_async.ray_stat_loggers`). Their tags are vLLM's (``model_name``,
#: ``engine``), not the run's.
VLLM_METRICS = (
    "ray_vllm_num_requests_running",
    "ray_vllm_num_requests_waiting",
    "ray_vllm_kv_cache_usage_perc",
    "ray_vllm_prompt_tokens_total",
    "ray_vllm_generation_tokens_total",
    "ray_vllm_prefix_cache_queries_total",
    "ray_vllm_prefix_cache_hits_total",
    "ray_vllm_time_to_first_token_seconds_bucket",
)

_made: dict[str, Any] = {}  # this process's Ray metric objects, by name


def _ray_metric(name: str) -> Any:
    """This process's Ray metric of ``name``, made once; None without a Ray in this process."""
    if "ray" not in sys.modules:
        return None
    import ray

    if not ray.is_initialized():
        return None
    if name not in _made:
        from ray.util import metrics

        m = METRICS[name]
        if m.kind == "counter":
            _made[name] = metrics.Counter(m.name, m.description, tag_keys=m.tags)
        elif m.kind == "gauge":
            _made[name] = metrics.Gauge(m.name, m.description, tag_keys=m.tags)
        else:
            _made[name] = metrics.Histogram(m.name, m.description, boundaries=list(m.boundaries), tag_keys=m.tags)
    return _made[name]


@dataclass(frozen=True)
class Meter:
    """Records the metrics of one run and judge, in whatever process holds it (it pickles; it needs no Ray, and
    records nothing in a process without one).

    >>> meter = Meter("nightly", "simulated:simulated")
    >>> meter.add("pairank_comparisons_cached_total", 3)  # no Ray here: nothing recorded, nothing raised
    >>> try:
    ...     meter.add("pairank_comparisons_cashed_total", 3)
    ... except KeyError as exc:
    ...     said = exc.args[0]
    >>> said.split(";")[0], "pairank_comparisons_cached_total" in said
    ("unknown metric 'pairank_comparisons_cashed_total'", True)
    """

    run: str
    judge: str

    def _metric(self, name: str, kind: str, tags: dict[str, str]) -> tuple[Any, dict[str, str]]:
        m = METRICS.get(name)
        if m is None:
            raise KeyError(f"unknown metric {name!r}; the metrics are {', '.join(sorted(METRICS))}")
        if m.kind != kind:
            raise ValueError(f"metric {name} is a {m.kind}, not a {kind}")
        return _ray_metric(name), {"run": self.run, "judge": self.judge, **tags}

    def add(self, name: str, value: float = 1, **tags: str) -> None:
        """Add ``value`` to the counter ``name`` (nothing for 0)."""
        metric, all_tags = self._metric(name, "counter", tags)
        if metric is not None and value:
            metric.inc(value, tags=all_tags)

    def set(self, name: str, value: float, **tags: str) -> None:
        """Set the gauge ``name``."""
        metric, all_tags = self._metric(name, "gauge", tags)
        if metric is not None:
            metric.set(value, tags=all_tags)

    def observe(self, name: str, value: float, **tags: str) -> None:
        """One observation of the histogram ``name``."""
        metric, all_tags = self._metric(name, "histogram", tags)
        if metric is not None:
            metric.observe(value, tags=all_tags)


def judge_label(identity: dict[str, Any]) -> str:
    """The ``judge`` tag of a judge identity: engine and model.

    >>> judge_label({"engine": "vllm", "model": "google/gemma-3-270m", "revision": "r"})
    'vllm:google/gemma-3-270m'
    """
    return f"{identity.get('engine', '?')}:{identity.get('model', '?')}"
