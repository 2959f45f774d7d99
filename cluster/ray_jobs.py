"""Submitting a job to a Ray cluster through the Ray Jobs API, and following it.

What is sent for a job spec (validation, paths, the entrypoint) is decided by
:mod:`pairank.jobs.submit`; this module uploads it: the working directory,
plus the ``pairank`` package this command runs as a Ray ``py_modules`` entry
(:func:`staged_package`), so the cluster runs the code you submit from, whatever
version its image has installed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import secrets
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from pairank import SUBPACKAGES

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

#: Left out of the uploaded working directory (gitignore patterns, relative to it;
#: no trailing slash, so that Ray skips a whole folder instead of walking it).
#: Ray also leaves out what the folder's ``.gitignore`` lists.
EXCLUDES = (
    "/pairank",  # the package travels as a py_module (the checkout's pairank/ alone is not importable)
    "/.venv",
    "/.git",
    "/runs",
    "/bench/results",
    "__pycache__",
    "/.pytest_cache",
    "/.hypothesis",
    "/.ruff_cache",
)
#: Forwarded into the job's environment when set here: what pairank's S3 filesystem
#: (``storage/fs.py``) and boto3 read, and a Hugging Face token for gated models.
#: Variables naming local files (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE) are not:
#: the files are not on the cluster.
FORWARDED_ENV = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "HF_TOKEN",
)
#: The interpreter the job's entrypoint calls on the cluster (the vLLM image has
#: ``python3`` and no ``python``).
PYTHON = "python3"
#: Where a spec from outside the working directory is put in the upload.
STAGED_SPECS = ".pairank-submit"
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")


class SubmitError(ValueError):
    """A submission or job query that cannot go ahead; the message says why and where."""


class JobsApiLost(SubmitError):
    """The Jobs API that answered before no longer does: the cluster's head (and the job's driver) is gone."""


def repository_root() -> Path:
    """The pairank checkout this module runs from (the default working directory)."""
    root = Path(__file__).resolve().parents[1]
    if not (root / "pyproject.toml").is_file() or not (root / "jobs" / "cli" / "main.py").is_file():
        raise SubmitError(
            f"pairank is not running from a checkout ({root} has no pyproject.toml and jobs/cli/main.py): "
            "pass --working-dir"
        )
    return root


def package_folders() -> dict[str, Path]:
    """Where the running ``pairank`` lives: ``{"__init__.py": file, "jobs": folder, ...}``."""
    import importlib

    import pairank

    found = {"__init__.py": Path(pairank.__file__).resolve()}
    for name in SUBPACKAGES:
        init = importlib.import_module(f"pairank.{name}").__file__
        assert init is not None  # a package with an __init__.py
        found[name] = Path(init).resolve().parent
    return found


def staged_package(into: Path) -> Path:
    """``into/pairank``: the running package as one folder (entries linked; Ray follows the links)."""
    package = into / "pairank"
    package.mkdir(parents=True, exist_ok=True)
    for name, source in package_folders().items():
        (package / name).symlink_to(source, target_is_directory=source.is_dir())
    return package


def excluded(relative: Path) -> bool:
    """Whether ``relative`` (a path in the working directory) is under one of :data:`EXCLUDES`.

    Those are all folder names, anchored (``/runs``) or anywhere (``__pycache__``).

    >>> excluded(Path("runs/data/summeval")), excluded(Path("configs/demo.yaml")), excluded(Path("a/__pycache__"))
    (True, False, True)
    """
    text, parts = relative.as_posix(), relative.parts
    return any(text == p[1:] or text.startswith(p[1:] + "/") if p.startswith("/") else p in parts for p in EXCLUDES)


@dataclass(frozen=True)
class Submission:
    """What ``pairank submit`` sends."""

    name: str  # the spec's run name
    spec: str  # the spec's path as given
    working_dir: Path  # the local folder uploaded as the job's working directory
    entrypoint: str  # the shell command the cluster's head runs
    env_vars: dict[str, str]  # forwarded environment (values never printed)
    staged: tuple[str, str] | None = None  # (path in the upload, YAML) of a spec from outside the working dir
    notes: tuple[str, ...] = ()  # warnings about paths that may not exist on the cluster

    def runtime_env(self, upload: Path | None = None, package: Path | None = None) -> dict:
        """Ray's runtime environment: the working directory (or ``upload``), and ``package`` as a py_module."""
        env: dict = {"working_dir": str(upload or self.working_dir), "excludes": list(EXCLUDES)}
        if package is not None:
            env["py_modules"] = [str(package)]
        if self.env_vars:
            env["env_vars"] = dict(self.env_vars)
        return env


def staged_upload(root: Path, staged: tuple[str, str], into: Path) -> Path:
    """Make ``into`` the upload: ``root`` linked entry by entry (Ray follows the links), plus the spec copy."""
    into.mkdir(parents=True, exist_ok=True)
    for entry in root.iterdir():
        if entry.name != STAGED_SPECS:
            (into / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
    target = into / staged[0]
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(staged[1], encoding="utf-8")
    return into


def submission_id(name: str) -> str:
    """A readable, unique submission id: ``pairank-<name>-<UTC time>-<random>``.

    >>> submission_id("demo run/1").startswith("pairank-demo-run-1-")
    True
    """
    safe = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-") or "job"
    return f"pairank-{safe}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"


@dataclass
class Jobs:
    """The Jobs API of one Ray cluster (its dashboard address), with errors that name it."""

    address: str
    source: str  # where the address came from: --address or RAY_ADDRESS
    client: JobSubmissionClient

    @classmethod
    def connect(cls, address: str | None, environ: Mapping[str, str] = os.environ, quiet: bool = False) -> Jobs:
        """Connect to ``address``, else to ``$RAY_ADDRESS`` (Ray's own convention); nothing else. ``quiet``: Ray's
        client does not log each upload step (nor that it skips .git and .venv itself)."""
        source = "--address"
        if not address:
            address, source = environ.get("RAY_ADDRESS"), "RAY_ADDRESS"
        if not address:
            raise SubmitError(
                "no Ray cluster given: pass --address http://HEAD:8265 (the Jobs API, on the dashboard port) "
                "or set RAY_ADDRESS"
            )
        from ray.exceptions import RayError
        from ray.job_submission import JobSubmissionClient

        if quiet:  # importing Ray configured its loggers
            for name in (
                "dashboard.modules.dashboard_sdk",
                "dashboard.modules.job.sdk",
                "_private.runtime_env.packaging",
            ):
                logging.getLogger(f"ray.{name}").setLevel(logging.WARNING)
            logging.getLogger("ray._private.runtime_env.working_dir").setLevel(logging.ERROR)
        from pairank.cluster.ray_shim import send_token_where_one_exists

        send_token_where_one_exists()  # a head of Ray 2.60 with a token wants it; Ray's client sends it only when told
        try:
            client = JobSubmissionClient(address)
        except RayError as exc:  # AuthenticationError: the cluster wants a token this client did not send
            raise SubmitError(f"the Ray Jobs API at {address} (from {source}) refused the request: {exc}") from None
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise SubmitError(
                f"cannot reach the Ray Jobs API at {address} (from {source}): {exc} "
                "Is a Ray head with its dashboard running there (ray start --head --include-dashboard=true)?"
            ) from None
        return cls(address, source, client)

    def _call(self, what: str, fn: Callable, *args, **kwargs):
        import requests
        from ray.exceptions import RayError

        try:
            return fn(*args, **kwargs)
        except RayError as exc:
            raise SubmitError(f"{what}: the Ray Jobs API at {self.address} refused the request: {exc}") from None
        except requests.exceptions.ConnectionError:
            raise JobsApiLost(
                f"{what}: lost the Ray Jobs API at {self.address} (from {self.source}), which answered before: the "
                "cluster's head node is gone, and a job's driver runs there"
            ) from None
        except RuntimeError as exc:
            if "status code 404" in str(exc):
                raise SubmitError(f"{what}: no such job at {self.address} (from {self.source})") from None
            raise SubmitError(f"{what}: the Ray Jobs API at {self.address} answered: {exc}") from None

    def submit(self, submission: Submission, job_id: str | None = None) -> str:
        """Upload the working directory (plus a staged spec copy) and start the job; returns its id."""
        job_id = job_id or submission_id(submission.name)
        metadata = {"pairank_run": submission.name, "pairank_spec": submission.spec}
        with tempfile.TemporaryDirectory(prefix="pairank-submit-") as tmp:
            upload = submission.working_dir
            if submission.staged:
                upload = staged_upload(submission.working_dir, submission.staged, Path(tmp) / "upload")
            package = staged_package(Path(tmp) / "package")
            return self._call(
                f"submitting {submission.spec}",
                self.client.submit_job,
                entrypoint=submission.entrypoint,
                submission_id=job_id,
                runtime_env=submission.runtime_env(upload, package),
                metadata=metadata,
            )

    def info(self, job_id: str):
        """The job's details (status, message, times); a job the cluster does not know is an error."""
        return self._call(f"job {job_id}", self.client.get_job_info, job_id)

    def status(self, job_id: str) -> tuple[str, str]:
        info = self.info(job_id)
        return info.status.value, info.message or ""

    def logs(self, job_id: str) -> str:
        self.info(job_id)
        return self._call(f"logs of job {job_id}", self.client.get_job_logs, job_id)

    def follow(self, job_id: str, out: TextIO, timeout: float = 60) -> tuple[str, str]:
        """Stream the job's log to ``out`` until it ends; returns its final status and message."""
        self.info(job_id)

        async def tail() -> None:
            async for chunk in self.client.tail_job_logs(job_id):
                out.write(chunk)
                out.flush()

        try:
            self._call(f"logs of job {job_id}", asyncio.run, tail())
        except SubmitError as exc:  # the stream broke (its websocket closed): the head may be gone
            self.info(job_id)  # JobsApiLost if it is
            out.write(f"[pairank] the job's log stream ended early ({exc}); waiting for its end\n")
        return self.wait(job_id, timeout)

    def wait(self, job_id: str, timeout: float) -> tuple[str, str]:
        """Poll until the job is in a terminal state (or ``timeout`` seconds pass); its status and message."""
        deadline = time.monotonic() + timeout
        while True:
            status, message = self.status(job_id)
            if status in TERMINAL or time.monotonic() > deadline:
                return status, message
            time.sleep(0.5)

    def stop(self, job_id: str, timeout: float = 60) -> tuple[str, str]:
        """Ask the job to stop and wait until it has; a finished job is left as it is."""
        status, message = self.status(job_id)
        if status in TERMINAL:
            return status, message
        self._call(f"stopping job {job_id}", self.client.stop_job, job_id)
        return self.wait(job_id, timeout)
