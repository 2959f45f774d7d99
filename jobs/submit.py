"""What ``pairank submit`` sends for a job spec: validated here, paths checked, the entrypoint built.

The spec is validated here (a bad spec fails before anything is sent). The
working directory (the repository root by default) is uploaded with the job, and
the ``pairank`` package this command runs travels as a Ray ``py_modules`` entry
(:func:`pairank.cluster.ray_jobs.staged_package`), so the cluster runs the code you
submit from. The cluster's head runs ``python3 -m pairank.jobs.cli.main run <spec>
--set ... --set cluster.address=auto``: the job's driver joins the cluster it runs on.

Where the spec is on the cluster:

- a spec inside the working directory is uploaded with it and run from the same
  relative path, so its relative paths (prompts, ...) mean there what they mean
  here; the ``--set`` overrides travel on the job's command line;
- a spec outside it is uploaded as a copy, ``.pairank-submit/<file>``, with the
  overrides applied and its relative paths made absolute, as ``pairank run``
  resolves them on this machine.

Input and output should be ``s3://`` (or paths every node sees); local paths are
reported before submission. Environment variables the job needs (AWS credentials
and endpoint, ``HF_TOKEN``, the http judge's ``api_key_env``) are forwarded in the
runtime environment when set here; their names are printed, never their values.
How it is sent and followed is :mod:`pairank.cluster.ray_jobs`.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

import yaml

from pairank.cluster.ray_jobs import (
    FORWARDED_ENV,
    PYTHON,
    STAGED_SPECS,
    Submission,
    SubmitError,
    excluded,
    repository_root,
)
from pairank.jobs.specs.job import load_spec
from pairank.jobs.specs.overrides import override
from pairank.judges import judge_paths
from pairank.storage.bounded_yaml import load_yaml

#: A submitted job joins the cluster it runs on instead of starting a Ray of its own.
JOIN_CLUSTER = "cluster.address=auto"


def _raw_spec(path: Path, overrides: list[str]) -> dict:
    data = load_yaml(path.read_bytes(), str(path)) or {}
    return override(data, overrides)[0]


def _path_notes(raw: dict, spec_dir: Path, working_dir: Path) -> list[str]:
    """Warnings for input, output and prompts that may not mean on the cluster what they mean here.

    ``spec_dir`` is the spec's folder relative to the working directory.
    """
    notes = []
    for key in ("input", "output", "prompts"):
        value = raw.get(key)
        if not isinstance(value, str) or "://" in value:
            continue
        if Path(value).is_absolute():
            notes.append(
                f"{key} is a local path ({value}): every node of the cluster must see it at that path "
                f"(true of a cluster on this machine; use s3:// for a remote one)"
            )
            continue
        inside = Path(os.path.normpath(spec_dir / value))
        if inside.parts and inside.parts[0] == "..":
            notes.append(f"{key} ({value}) points outside the uploaded working directory {working_dir}")
        elif excluded(inside):
            notes.append(f"{key} ({value} = {inside}) is not uploaded (excluded from the working directory)")
        elif key == "output":
            notes.append(
                f"output ({value}) is inside the uploaded working directory: on the cluster that is the job's "
                f"temporary copy; use s3://"
            )
    return notes


#: The spec fields that hold paths (``load_spec`` resolves them relative to the spec file), besides the judge's.
PATH_FIELDS = (
    ("input",),
    ("output",),
    ("prompts",),
    ("judging", "templates"),
    ("winrate", "ood"),
)


def path_fields(data: dict) -> list[tuple[str, ...]]:
    """The fields of a spec mapping that hold paths: :data:`PATH_FIELDS` and the ones its judge engine names.

    >>> path_fields({"judge": {"engine": "replay", "source": "/j"}})[-1]
    ('judge', 'source')
    """
    return [*PATH_FIELDS, *(("judge", key) for key in judge_paths(data.get("judge")))]


def _relative_to_upload(data: dict, root: Path, staged_dir: Path) -> dict:
    """Rewrite the absolute paths of a spec copy that lie in the uploaded ``root`` relative to ``staged_dir``.

    The copy then finds them on the cluster too (prompts of the checkout, say).

    >>> _relative_to_upload({"prompts": "/r/configs/p", "input": "/r/runs/d", "output": "s3://b/o"},
    ...                     Path("/r"), Path(".pairank-submit"))
    {'prompts': '../configs/p', 'input': '/r/runs/d', 'output': 's3://b/o'}
    """
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    for keys in path_fields(data):
        node = data
        for key in keys[:-1]:
            child = node.get(key)
            node = child if isinstance(child, dict) else {}
        value = node.get(keys[-1])
        if not isinstance(value, str) or not Path(value).is_absolute() or not Path(value).is_relative_to(root):
            continue
        inside = Path(value).relative_to(root)
        if not excluded(inside):
            node[keys[-1]] = os.path.relpath(inside, staged_dir)
    return data


def _forwarded_env(names: list[str], environ: Mapping[str, str]) -> dict[str, str]:
    return {name: environ[name] for name in dict.fromkeys(names) if name in environ}


def prepare(
    spec_path: str,
    overrides: Sequence[str] = (),
    working_dir: str | Path | None = None,
    extra_env: Sequence[str] = (),
    forward_env: bool = True,
    environ: Mapping[str, str] = os.environ,
) -> Submission:
    """Validate the spec (with ``overrides``) here and build what :meth:`Jobs.submit` sends.

    A bad spec raises :class:`pairank.jobs.specs.job.SpecError` naming the file, before anything
    is sent. ``extra_env`` names more variables to forward; ``forward_env=False``
    forwards only those.
    """
    overrides = list(overrides)
    switched: list[str] = []
    spec = load_spec(spec_path, [*overrides, JOIN_CLUSTER], note=switched.append)
    root = Path(working_dir).resolve() if working_dir else repository_root()
    if not root.is_dir():
        raise SubmitError(f"--working-dir {working_dir}: no such folder")
    missing = [name for name in extra_env if name not in environ]
    if missing:
        raise SubmitError(f"--env {', '.join(missing)}: not set in this environment")
    path = Path(spec_path).resolve()
    relative = path.relative_to(root) if path.is_relative_to(root) else None
    if relative is not None and excluded(relative):
        relative = None  # not uploaded with the working directory: send a copy
    if relative is not None:
        spec_in_upload = relative.as_posix()
        run_args = [spec_in_upload, *(arg for o in overrides for arg in ("--set", o))]
        staged = None
        notes = _path_notes(_raw_spec(path, overrides), relative.parent, root)
    else:
        spec_in_upload = f"{STAGED_SPECS}/{path.name}"
        copy = _relative_to_upload(spec.model_dump(mode="json", exclude_unset=True), root, Path(STAGED_SPECS))
        staged = (spec_in_upload, yaml.safe_dump(copy, sort_keys=False))
        run_args = [spec_in_upload]
        notes = _path_notes(copy, Path(STAGED_SPECS), root)
    entrypoint = shlex.join([PYTHON, "-m", "pairank.jobs.cli.main", "run", *run_args, "--set", JOIN_CLUSTER])
    api_key_env = getattr(spec.judge, "api_key_env", None)  # the http judge's token variable
    names = [*FORWARDED_ENV, *([api_key_env] if api_key_env else [])] if forward_env else []
    return Submission(
        name=spec.name,
        spec=str(spec_path),
        working_dir=root,
        entrypoint=entrypoint,
        env_vars=_forwarded_env([*names, *extra_env], environ),
        staged=staged,
        notes=(*switched, *notes),
    )
