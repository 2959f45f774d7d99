"""Job specs: typed, validated configuration; YAML only fills it in.

Every field has a description; an unknown key is an error that lists the keys
allowed at that place. Relative paths in a spec (input, output, prompts, a replay
source, a model folder) are relative to the spec file (see :func:`load_spec`).
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from pydantic import (
    BaseModel,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_validator,
)

from pairank.jobs.schedulers import REGISTRY, FullSettings, PairsAnchorsSettings, SchedulerSpec
from pairank.jobs.specs.overrides import SpecError, override, unions
from pairank.jobs.specs.pool import PoolSpec
from pairank.judges import ENGINES, engine_of, judge_paths, parse_judge
from pairank.judges.engine import JudgeSettings, JudgingMode
from pairank.operators.scores import DECISIVE_WEIGHT
from pairank.operators.settings import Strict
from pairank.storage.bounded_yaml import load_yaml
from pairank.storage.fs import check_uri

log = logging.getLogger(__name__)


class JudgingSpec(Strict):
    mode: JudgingMode = Field(
        "logprob",
        description="logprob: p_a from the label-token probabilities (one token). generate: a reasoning, then a "
        "verdict [[A]], [[B]] or [[C]] (tie) (or five levels, see verdict_scale), parsed; unparseable answers are "
        "error rows. sample: `samples` "
        "generations, p_a = the fraction choosing A (ties half). prepair: an independent analysis of each output "
        "(cached per output), then the pairwise verdict sees both analyses. prepair_pairwise: the PRePair^ "
        "ablation (each analysis written while seeing both outputs). pointwise: a Likert score per output "
        "(probability-weighted mean of the score tokens); pairs compared by score difference.",
    )
    variants: list[str] | None = Field(
        None,
        min_length=1,
        description="Prompt variants (<templates>/<kind>/<variant>.txt) to judge with; each is its own judge and "
        "adaptive schedulers average them. Unset: logprob uses <prompts>/<aspect>.txt, other modes [v1].",
    )
    templates: str | None = Field(
        None,
        description="Folder holding modes/<kind>/<variant>.txt (unset: the parent of the prompts folder, e.g. "
        "configs/prompts).",
    )
    verdict: Literal["logprob", "generate"] = Field(
        "logprob", description="prepair modes: read the final verdict from label probabilities, or generate it."
    )
    max_tokens: int = Field(256, ge=1, description="generate, sample: most tokens of a reasoning and verdict.")
    temperature: float = Field(0.0, ge=0, description="generate: sampling temperature of the first answer.")
    retries: int = Field(
        1, ge=0, description="generate: re-ask an unparseable answer at most this many times (never guess)."
    )
    retry_temperature: float = Field(
        0.7, ge=0, description="generate: temperature of a retry (a new seed each time; 0 would repeat the answer)."
    )
    samples: int = Field(5, ge=1, description="sample: generations per comparison.")
    sample_temperature: float = Field(1.0, gt=0, description="sample: sampling temperature.")
    allow_ties: bool = Field(
        True, description="generate, sample: [[C]] is a tie; false makes it an unparseable answer."
    )
    verdict_scale: Literal[3, 5] = Field(
        3,
        description="generate: 3 levels ([[A]], [[B]], [[C]]) or Arena-Hard's 5 ([[A>>B]], [[A>B]], [[A=B]], "
        "[[B>A]], [[B>>A]]: label A, A, tie, B, B and p_a 1, 0.75, 0.5, 0.25, 0; templates modes/generate5/).",
    )
    decisive_weight: float = Field(
        DECISIVE_WEIGHT,
        ge=1,
        description="verdict_scale 5: a decisive verdict ([[A>>B]], [[B>>A]]) counts this "
        "many times in the run's win ratios (Arena-Hard: 3); the judgments do not change, so neither do their keys.",
    )
    analysis_max_tokens: int = Field(192, ge=1, description="prepair modes: most tokens of one analysis.")
    scale: tuple[int, int] = Field(
        (1, 5), description="pointwise: lowest and highest score, single digits (each must be one token)."
    )
    tie_margin: float = Field(0.0, ge=0, description="pointwise: scores at most this far apart are a tie (p_a = 0.5).")

    @model_validator(mode="after")
    def _scale(self) -> JudgingSpec:
        low, high = self.scale
        if not 0 <= low < high <= 9:
            raise ValueError(f"judging.scale: expected two digits 0 <= low < high <= 9, found {list(self.scale)}")
        if self.variants is not None and len(set(self.variants)) != len(self.variants):
            raise ValueError(f"judging.variants must be unique, found {self.variants}")
        if self.verdict_scale == 5 and self.mode != "generate":
            raise ValueError(f"judging.verdict_scale 5: only mode generate has five-level verdicts, not {self.mode!r}")
        if self.decisive_weight != DECISIVE_WEIGHT and self.verdict_scale != 5:  # a dumped spec parses again
            raise ValueError("judging.decisive_weight weighs five-level verdicts: set verdict_scale: 5 or remove it")
        return self

    @field_validator("scale", mode="before")
    @classmethod
    def _score_range(cls, v):
        if isinstance(v, int) and not isinstance(v, bool):
            raise ValueError(
                f"judging.scale is the pointwise score range [low, high], found {v}; the verdict levels "
                "of mode generate are judging.verdict_scale (3 or 5)"
            )
        return v

    @property
    def passes(self) -> tuple[str, ...]:
        """The passes of the mode, in order: first passes per output, then the pairwise verdicts."""
        return {
            "prepair": ("analysis", "pairwise"),
            "prepair_pairwise": ("analysis_pairwise", "pairwise"),
            "pointwise": ("score",),
        }.get(self.mode, ("pairwise",))

    @property
    def verdict_kind(self) -> str:
        """How the pairwise pass reads a verdict: logprob, generate or sample."""
        if self.mode in ("prepair", "prepair_pairwise"):
            return self.verdict
        return self.mode if self.mode in ("generate", "sample") else "logprob"


class SubsetSpec(Strict):
    contexts: int | None = Field(None, ge=1, description="Use only this many contexts (the first by id).")
    candidates: int | None = Field(
        None, ge=2, description="Use only this many candidates per context (the first by id)."
    )


class QuantileSpec(Strict):
    percentages: dict[float, float] | None = Field(
        None, description="Target distribution {score: share}, shares summing to 1, e.g. {1: 0.1, 2: 0.2, ...}."
    )
    reference: Literal["human"] | None = Field(
        None, description="'human': the empirical distribution of the input's human scores for the aspect."
    )

    @model_validator(mode="after")
    def _one_target(self) -> QuantileSpec:
        if (self.percentages is None) == (self.reference is None):
            raise ValueError("scoring.quantile: give exactly one of 'percentages' or 'reference'")
        return self


class ScoringSpec(Strict):
    calibration: Literal["none", "batch"] = Field(
        "none",
        description="batch: Batch Calibration with a uniform prior; estimate the judge's P(A) prior from each round's "
        "own comparisons (per aspect) and divide it out before scheduling and scoring. Stored p_a stays raw.",
    )
    quantile: QuantileSpec | None = Field(
        None, description="Also turn each ranking into scores on a target distribution (quantile matching)."
    )
    verdicts: list[Literal["hard", "soft"]] = Field(
        ["hard", "soft"],
        min_length=1,
        description="Win-ratio methods to rank by: hard (a win is p_a > 0.5, 0.5 counts half), soft (p_a itself).",
    )


class DawidSkeneSpec(Strict):
    draws: int = Field(
        4000, ge=10, description="Posterior draws per chain (4000 x 2 chains keeps bulk ESS above 1000)."
    )
    tune: int = Field(1000, ge=10, description="Tuning steps per chain.")
    chains: int = Field(2, ge=1, description="Chains (r_hat needs at least 2).")
    cores: int = Field(2, ge=1, description="Processes sampling chains in parallel.")
    rhat_max: float = Field(1.01, gt=1, description="Refuse to report when any split R-hat exceeds this.")
    ess_min: float = Field(1000, gt=0, description="Refuse to report when any bulk ESS is below this.")
    sampler: Literal["nutpie", "pymc"] = Field("nutpie", description="NUTS implementation.")


class WinRateSpec(Strict):
    baseline: str | None = Field(None, description="Baseline system (unset: scheduler.baseline).")
    systems: list[str] | None = Field(None, description="Systems to estimate (unset: every other system).")
    methods: list[Literal["human", "observed", "bwrs", "dawid_skene", "dawid_skene_em"]] = Field(
        ["human", "observed", "bwrs", "dawid_skene"],
        min_length=1,
        description="human (win rate over the human-labelled pairs, the reference), observed (each judge's raw win "
        "rate), bwrs (Bayesian Win Rate Sampling; needs prior in_dist or ood), dawid_skene (Bayesian, PyMC), "
        "dawid_skene_em (crowd-kit's EM, a cross-check; pip install crowd-kit).",
    )
    prior: Literal["none", "in_dist", "ood"] = Field(
        "none",
        description="Judge-accuracy prior: none (no human labels), in_dist (reveal gold_fraction of the input's "
        "labelled pairs), ood (accuracies measured on the labelled set in `ood`).",
    )
    gold_fraction: float = Field(0.1, gt=0, le=1, description="in_dist: fraction of labelled pairs revealed (seeded).")
    ood: str | None = Field(
        None,
        description="ood: folder with candidates.parquet, pairwise_labels.parquet and the same judges' judgments "
        "(judgments.parquet or a judgments/ cache folder); accuracies are matched by judge name.",
    )
    draws: int = Field(10000, ge=100, description="BWRS draws per judge.")
    seed: int = Field(0, description="Seed of the gold choice, the tie coin and the samplers.")
    mass: float = Field(0.95, gt=0, lt=1, description="Credible interval mass.")
    dawid_skene: DawidSkeneSpec = Field(default_factory=DawidSkeneSpec, description="Dawid-Skene sampler settings.")

    @model_validator(mode="after")
    def _ood_source(self) -> WinRateSpec:
        if self.prior == "ood" and not self.ood:
            raise ValueError("winrate.prior ood needs `ood` (a labelled set judged by the same judges)")
        return self


COMPAT_TEXT = (
    "statistics as a peer tool computes them (docs/leaderboards.md): lmarena (style-controlled Bradley-Terry as "
    "LMArena's arena-rank, and a leaderboard's strengths and Elo as its plain Bradley-Terry), alpaca-eval (LC win "
    "rates as AlpacaEval's GLM). Empty: pairank's own."
)


class ReportSpec(Strict):
    bootstrap: int = Field(1000, ge=0, description="Bootstrap resamples for the sample-level Spearman interval.")
    seed: int = Field(0, description="Bootstrap seed.")
    compat: list[Literal["lmarena", "alpaca-eval"]] = Field([], description="The report's " + COMPAT_TEXT)


class ClusterSpec(Strict):
    address: str | None = Field(
        None, description="Ray address to join ('auto' or ray://host:port); unset starts a local Ray on 127.0.0.1."
    )
    ship: bool = Field(
        True,
        description="Joining a cluster (address set): the job ships the running pairank package and the S3 and "
        "Hugging Face variables set here in its runtime environment, for nodes that have neither. false: the "
        "nodes run the pairank they have (the same version: a cluster of pairank's image, or Ray on this machine "
        "and venv) with their own environment; the job then has no runtime environment, and each Ray worker "
        "starts without the setup step one needs (about 0.4 CPU s).",
    )
    num_cpus: int | None = Field(None, ge=1, description="CPUs of the local Ray (unset: all).")
    metrics_export_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="Port of the local Ray's Prometheus endpoint (http://127.0.0.1:PORT/metrics; unset: a free "
        "port Ray picks). A cluster's nodes have theirs from `ray start --metrics-export-port`.",
    )


#: Requests the HTTP ingress of ``pairank serve`` takes at once (its ``max_ongoing_requests``; more wait in Serve's
#: proxy); slow bodies may hold at most half of them.
SERVE_REQUESTS_AT_ONCE = 256


class ServeSpec(Strict):
    """The limits ``pairank serve`` puts on a request's body (docs/serving.md)."""

    body_timeout_s: float = Field(
        10.0,
        gt=0,
        description="The most seconds a request's whole body may take to arrive, counted from when the server starts "
        "to read it (once its headers are in); a body not complete by then is answered 408 and its connection closed.",
    )
    slow_bodies: int = Field(
        64,
        ge=1,
        le=SERVE_REQUESTS_AT_ONCE // 2,
        description="The most bodies per token still arriving at once after their first piece (a body that arrives "
        "all at once is never one of them); one more is answered 429 at once. At most "
        f"{SERVE_REQUESTS_AT_ONCE // 2}, half the {SERVE_REQUESTS_AT_ONCE} requests the server takes at once, so "
        "slow bodies leave room for the rest.",
    )


class NightlySpec(Strict):
    night: str | None = Field(
        None,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$",
        description="Label of this night (letters, digits, '.', '_', '-'); unset: today's UTC date, YYYY-MM-DD. "
        "A label already committed is refused.",
    )
    n_boot: int = Field(200, ge=0, description="Leaderboard bootstrap resamples of contexts.")
    seed: int = Field(0, description="Leaderboard bootstrap seed.")
    baseline: str | None = Field(
        None, description="System the leaderboard carries win rates against (unset: winrate.baseline, if any)."
    )
    compat: list[Literal["lmarena", "alpaca-eval"]] = Field([], description="The leaderboard's " + COMPAT_TEXT)

    @field_validator("night", mode="before")
    @classmethod
    def _date_label(cls, v):
        """YAML reads ``2026-11-21`` (in a spec or a --set) as a date: it is the label ``2026-11-21``."""
        return v.isoformat() if isinstance(v, dt.date) else v


#: A name that becomes one path segment under the output root.
SAFE_NAME = r"^(?!\.{1,2}$)[A-Za-z0-9._-]{1,128}$"


def safe_segment(value: str) -> str:
    """``value`` if it is one safe path segment, else an error saying what is allowed.

    >>> safe_segment("demo-2026.11_a")
    'demo-2026.11_a'
    >>> safe_segment("../x")
    Traceback (most recent call last):
    ...
    ValueError: expected one path segment (1 to 128 letters, digits, '.', '_' or '-'; not '.' or '..'), found '../x'
    >>> safe_segment("x" * 10_000)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: expected one path segment (...), found 'xxxxxxxx...xxxx... (10000 characters)
    """
    if not re.match(SAFE_NAME, value):
        found = (
            repr(value) if len(value) <= 60 else f"{value[:45]!r}... ({len(value)} characters)".replace("'...", "...")
        )
        raise ValueError(
            f"expected one path segment (1 to 128 letters, digits, '.', '_' or '-'; not '.' or '..'), found {found}"
        )
    return value


class JobSpec(Strict):
    name: str = Field(
        ...,
        description="Run name; outputs go under <output>/runs/<name>/, so it is one path segment: 1 to 128 "
        "letters, digits, '.', '_' or '-' (not '.' or '..').",
    )
    input: str = Field(
        ..., description="Folder (local or s3://) with candidates.parquet and optionally human_scores.parquet."
    )
    output: str = Field(..., description="Storage root (local or s3://): the judgment cache and the runs live here.")
    aspects: list[str] = Field(..., min_length=1, description="Aspects to compare; each needs <prompts>/<aspect>.txt.")
    prompts: str = Field(..., description="Folder of prompt templates, one <aspect>.txt each.")
    judge: SerializeAsAny[JudgeSettings] = Field(
        ...,
        description="The judge engine and its settings: `engine` names one of the registered engines "
        "(pairank.judges.ENGINES), the other keys are that engine's settings.",
    )
    judging: JudgingSpec = Field(
        default_factory=JudgingSpec, description="How the judge is asked: the mode, its prompts and settings."
    )
    scheduler: SchedulerSpec = Field(
        default_factory=FullSettings,
        description="Which comparisons to ask for: `name` picks the scheduler (see pairank.jobs.schedulers; "
        f"one of {', '.join(REGISTRY)}; default full), the other keys are that scheduler's settings.",
    )
    subset: SubsetSpec = Field(default_factory=SubsetSpec, description="Restrict the input (for demos and smoke runs).")
    pool: PoolSpec = Field(default_factory=PoolSpec, description="The judge actor pool.")
    scoring: ScoringSpec = Field(default_factory=ScoringSpec, description="How verdicts become scores.")
    winrate: WinRateSpec | None = Field(
        None, description="Also estimate each system's win rate against a baseline (observed, BWRS, Dawid-Skene)."
    )
    report: ReportSpec = Field(default_factory=ReportSpec, description="Report settings.")
    cluster: ClusterSpec = Field(default_factory=ClusterSpec, description="Where Ray runs.")
    serve: ServeSpec = Field(
        default_factory=ServeSpec,
        description="`pairank serve`'s limits on request bodies (the other commands ignore it).",
    )
    flush_rows: int = Field(64, ge=1, description="Judgments written per cache part (smaller: less lost if killed).")
    nightly: NightlySpec | None = Field(
        None,
        description="Make this a nightly, incremental job: `input` is a prefix of input folders (itself and/or its "
        "sub-folders, each with candidates.parquet) that grows night by night; outputs already ranked keep their "
        "places and only new ones are inserted among each context's sorted anchors (scheduler pairs_anchors); the "
        "leaderboard is rewritten and a dated snapshot appended to its history (see jobs/nightly.py).",
    )

    @property
    def placed_judge(self) -> JudgeSettings:
        """The judge settings as the pool's actors run them: the engine's ``placed`` hook, given the GPUs each actor
        reserves (a vLLM judge's ``async_engine: auto`` and ``dtype: auto`` are decided there); what keys a
        judgment is their identity."""
        return engine_of(self.judge).placed(self.judge, self.pool.num_gpus)

    @property
    def judge_choices(self) -> list[str]:
        """What the engine's ``placed`` hook decided that the spec left to it, and why (``dtype float32 (...)``)."""
        return engine_of(self.judge).choices(self.judge, self.pool.num_gpus)

    @property
    def baseline(self) -> str | None:
        """The win-rate baseline: ``winrate.baseline``, else the one_vs_n scheduler's."""
        return (self.winrate.baseline if self.winrate else None) or getattr(self.scheduler, "baseline", None)

    @model_validator(mode="after")
    def _winrate_baseline(self) -> JobSpec:
        if self.winrate is not None and not self.baseline:
            raise ValueError("winrate needs a baseline: set winrate.baseline or scheduler.baseline")
        return self

    @field_validator("judge", mode="before")
    @classmethod
    def _engine(cls, v: object) -> JudgeSettings:
        """The settings model of the engine ``engine`` names (see :func:`pairank.judges.parse_judge`)."""
        return parse_judge(v)

    @model_validator(mode="after")
    def _judging(self) -> JobSpec:
        mode = self.judging.mode
        engine = engine_of(self.judge)
        if mode not in engine.modes:
            able = [e.name for e in ENGINES.values() if mode in e.modes]
            raise ValueError(
                f"judging.mode {mode!r} needs an engine that generates (judge.engine: {' or '.join(able)}); "
                f"the {engine.name} engine answers pairwise requests in {' or '.join(engine.modes)} mode only"
            )
        if (
            self.scoring.calibration == "batch"
            and self.judging.verdict_kind in ("generate", "sample")
            or (self.scoring.calibration == "batch" and mode == "pointwise")
        ):
            raise ValueError(
                f"scoring.calibration batch divides out a positional prior of label probabilities; judging.mode "
                f"{mode!r} gives categorical or score-difference verdicts: use calibration none"
            )
        return self

    @property
    def engine_ranks(self) -> int:
        """The processes one engine spans (the engine's ``ranks`` hook: tensor x pipeline parallel size)."""
        return engine_of(self.judge).ranks(self.judge)

    @model_validator(mode="after")
    def _parallel_gpus(self) -> JobSpec:
        ranks, gpus = self.engine_ranks, self.pool.num_gpus
        if ranks > 1 and gpus not in (0, 1):
            raise ValueError(
                f"pool.num_gpus {gpus:g} with an engine of {ranks} ranks (judge.tensor_parallel_size x "
                "pipeline_parallel_size): each rank holds one whole GPU, so set pool.num_gpus: 1 (or 0 for vLLM's "
                "CPU build, whose ranks are processes of the actor)"
            )
        return self

    @model_validator(mode="after")
    def _batches_in_flight(self) -> JobSpec:
        n = self.pool.max_batches_in_flight
        if n is not None:
            engine_of(self.judge).check_batches_in_flight(self.judge, n)
        return self

    @model_validator(mode="after")
    def _nightly(self) -> JobSpec:
        if self.nightly is None:
            return self
        s = self.scheduler
        if not isinstance(s, PairsAnchorsSettings):  # the scheduler named pairs_anchors
            raise ValueError(
                f"nightly jobs insert new outputs by anchor binary insertion: set scheduler.name: pairs_anchors "
                f"(found {s.name!r})"
            )
        if s.repeats != 1 or s.budget is not None:
            raise ValueError(
                "nightly jobs keep one placement per context: scheduler.repeats must be 1 and scheduler.budget unset"
            )
        if self.subset.contexts is not None or self.subset.candidates is not None:
            raise ValueError("nightly jobs rank every candidate of the input prefix: remove subset")
        return self

    @field_validator("name")
    @classmethod
    def _safe_name(cls, v: str) -> str:
        return safe_segment(v)

    @field_validator("aspects")
    @classmethod
    def _unique_aspects(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError(f"aspects must be unique, found {v}")
        return v


def _walk(loc: tuple) -> tuple[str, list[str], str | None]:
    """An error location as a user writes it (union tags left out), the keys allowed at its last
    step, and the union member it is in (``"scheduler 'random'"``), if any.

    >>> _walk(("scheduler", "random", "rounds"))[0], _walk(("scheduler", "random", "rounds"))[2]
    ('scheduler.rounds', "scheduler 'random'")
    """
    if not loc:
        return "", sorted(JobSpec.model_fields), None
    tagged = unions()
    model: type[BaseModel] | None = JobSpec
    shown: list[str] = []
    member = None
    previous: str | None = None
    for part in loc[:-1]:
        if isinstance(part, int):
            shown.append(str(part))
            continue
        if previous is not None and previous in tagged and part in tagged[previous]:
            model, member, previous = tagged[previous][part], f"{previous} {part!r}", None
            continue
        field = model.model_fields.get(part) if model is not None else None
        shown.append(str(part))
        previous = part
        ann = field.annotation if field is not None else None
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if field is not None and part in tagged:
            model = None  # the member comes next in the location
    shown.append(str(loc[-1]))
    return ".".join(shown), sorted(model.model_fields) if model is not None else [], member


def parse_spec(data: dict, source: str) -> JobSpec:
    """Validate ``data`` as a :class:`JobSpec`; errors name ``source`` and each bad key."""
    try:
        return JobSpec.model_validate(data)
    except ValidationError as exc:
        tagged = unions()
        lines = []
        for err in exc.errors():
            if err["type"] == "union_tag_invalid" and err["loc"] and err["loc"][-1] in tagged:
                field = err["loc"][-1]
                key = "engine" if field == "judge" else "name"
                tag = err.get("ctx", {}).get("tag")
                lines.append(f"  {field}.{key}: unknown {field} {tag!r}; available: {', '.join(tagged[field])}")
                continue
            loc, allowed, member = _walk(tuple(err["loc"]))
            if err["type"] == "extra_forbidden":
                where = f" for {member}" if member else ""
                lines.append(f"  {loc}: unknown key{where}; allowed keys here: {', '.join(allowed)}")
            else:
                lines.append(f"  {loc}: {err['msg']}")
        raise SpecError(f"{source}: invalid job spec\n" + "\n".join(lines)) from None


def _resolve(base: Path, value: str, key: str, source: Path) -> str:
    """The path ``value`` of ``key``, a relative one under ``base``; a URI without a bucket is a :class:`SpecError`."""
    try:
        check_uri(value)
    except ValueError as exc:
        raise SpecError(f"{source}: invalid job spec\n  {key}: {exc}") from None
    if "://" in value or Path(value).is_absolute():
        return value
    return str((base / value).resolve())


#: The spec's paths besides the judge's (its engine names those): local, or a storage URI; a relative local one is
#: relative to the spec file.
PATH_KEYS = ("input", "output", "prompts", "judging.templates", "winrate.ood")


def load_spec(path: str | Path, overrides: Sequence[str] = (), note: Callable[[str], None] | None = None) -> JobSpec:
    """Read a YAML spec, apply overrides, resolve relative paths, validate.

    An override that switches ``scheduler.name`` or ``judge.engine`` drops the file's keys of the former member
    (:func:`~pairank.jobs.specs.overrides.switch_members`); ``note`` (default: a logged warning) gets one line
    naming them.

    Relative :data:`PATH_KEYS` are relative to the spec file's folder (``configs/demo.yaml`` works from any working
    directory). The YAML is read within :mod:`~pairank.storage.bounded_yaml`'s limits (expanded size, nesting).
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"{path}: no such spec file")
    try:
        data = load_yaml(path.read_bytes(), str(path)) or {}
    except ValueError as exc:  # not UTF-8, not YAML, or past a limit: the message names the file and where
        raise SpecError(str(exc)) from None
    if not isinstance(data, dict):
        raise SpecError(f"{path}: expected a mapping at the top level, found {type(data).__name__}")
    data, notes = override(data, list(overrides))
    for line in notes:
        (note or log.warning)(line)
    base = path.resolve().parent
    for name in PATH_KEYS:  # the YAML was read here: its mappings are this function's own
        section, _, key = name.rpartition(".")
        node = data.get(section) if section else data
        if isinstance(node, dict) and isinstance(node.get(key), str):
            node[key] = _resolve(base, node[key], name, path)
    judge = data.get("judge")
    if isinstance(judge, dict):  # the engine names its own paths
        data["judge"] = {**judge, **{k: _resolve(base, judge[k], f"judge.{k}", path) for k in judge_paths(judge)}}
    return parse_spec(data, str(path))
