"""The last steps: the report, and the run's tables written under ``runs/<name>/``."""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from pairank.jobs.pipeline.score import Scored
from pairank.jobs.pipeline.winrates import WinRates
from pairank.judges import ENGINES
from pairank.operators.reports import (
    build_report,
    render_markdown,
)
from pairank.storage.layout import RunLayout


def report(
    spec: dict[str, Any],
    identity: dict[str, Any],
    totals: dict[str, Any],
    scored: Scored,
    winrates: WinRates | None,
    counts: dict[str, Any],
    started: float,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The report (Markdown and JSON are rendered from it); ``totals``: the judgments' (``Judged.totals``);
    ``started`` is the job's ``perf_counter``."""
    extra = {**extra, **scored.extra}
    if winrates is not None:
        extra["winrates"], extra["winrate_judges"] = winrates.rates.to_pylist(), winrates.judges.to_pylist()
    return build_report(
        spec,
        identity,
        totals,
        scored.spearman,
        scored.bias,
        counts=counts,
        wall_seconds=time.perf_counter() - started,
        extra=extra,
    )


def write_run(
    layout: RunLayout, scored: Scored, winrates: WinRates | None, report: dict[str, Any], manifest: dict[str, Any]
) -> None:
    """The run's tables and report under ``runs/<name>/``; the (finished) manifest last."""
    if winrates is not None:
        layout.winrates.write_parquet(winrates.rates)
        layout.winrate_judges.write_parquet(winrates.judges)
    layout.rankings.write_parquet(scored.rankings)
    layout.spearman.write_parquet(scored.spearman)
    layout.position_bias.write_parquet(scored.bias)
    layout.report_json.write_json(report)
    engine = ENGINES.get(report["settings"]["judge"]["engine"])
    layout.report_md.write_text(render_markdown(report, engine.notice if engine is not None else None))
    layout.manifest.write_json(manifest)


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
