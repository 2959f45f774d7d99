"""What a node of the local cluster (:mod:`pairank.cluster.local.nodes`) is given before its ``ray start``: a Python
environment without pairank, a Ray temp dir whose socket paths fit, Ray's token, and an environment of a few
variables only. Nothing here starts a node."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import venv
from pathlib import Path

#: Environment variables a node keeps from the command that starts it (nothing else of it reaches the node).
KEPT_ENV = ("LANG", "LC_ALL", "TZ")
#: The longest Ray temp dir kept in the node's folder: Ray's socket paths below it must fit in 107 bytes.
RAY_DIR_MAX = 40


class ClusterError(ValueError):
    """The local cluster cannot start (or be found); the message says why."""


def site_folders() -> list[str]:
    """The site-packages folders of this interpreter (Ray and the other dependencies are in one of them)."""
    return [p for p in sys.path if p.rstrip("/").endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]


def node_venv(folder: Path) -> Path:
    """A Python environment at ``folder`` that sees this interpreter's dependencies but not an editable pairank:
    a venv without pip whose one ``.pth`` line names each of :func:`site_folders`. Returns its python."""
    python = folder / "bin" / "python"
    if not python.exists():
        venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        site = folder / "lib" / version / "site-packages"
        (site / "pairank_cluster_deps.pth").write_text("\n".join(site_folders()) + "\n", encoding="utf-8")
    return python


def ray_dir(folder: Path) -> Path:
    """Ray's temp dir for the node of ``folder``: ``folder/ray``, or a short folder under /tmp when that path is too
    long for Ray's sockets (then linked from ``folder/ray``)."""
    inside = folder / "ray"
    if inside.is_symlink():
        return inside.resolve()
    if len(str(inside)) <= RAY_DIR_MAX:
        inside.mkdir(parents=True, exist_ok=True)
        return inside
    short = Path(tempfile.mkdtemp(prefix="prk-", dir="/tmp"))
    inside.symlink_to(short, target_is_directory=True)
    return short


def imports_pairank(python: Path, cwd: Path, env: dict[str, str]) -> bool:
    """Whether ``python`` (in ``cwd``, with ``env``) can import pairank's subpackages on its own."""
    out = subprocess.run(
        [str(python), "-c", "import pairank.cluster"], cwd=cwd, env=env, capture_output=True, timeout=120
    )
    return out.returncode == 0


def auth_token() -> str | None:
    """Ray's token of this machine, given to every node, from where Ray's own clients read it: ``RAY_AUTH_TOKEN``,
    else the file ``RAY_AUTH_TOKEN_PATH`` names, else ``~/.ray/auth_token``. A ``RAY_AUTH_TOKEN_PATH`` whose file is
    missing or empty is a :class:`ClusterError` naming it (nodes started without the token would refuse the clients
    that send it). Read here, not through Ray's ``AuthenticationTokenLoader``: resetting that loader's cache in a
    process whose Ray runs with token authentication ended the process at exit (a failed check in Ray's C++, which
    took a pytest worker with it)."""
    if token := os.environ.get("RAY_AUTH_TOKEN", "").strip():
        return token
    if named := os.environ.get("RAY_AUTH_TOKEN_PATH"):
        try:
            token = Path(named).expanduser().read_text(encoding="utf-8").strip()
        except OSError:
            token = ""
        if not token:
            raise ClusterError(f"Ray's token: RAY_AUTH_TOKEN_PATH names {named}, which holds none; put it there")
        return token
    path = Path.home() / ".ray" / "auth_token"
    return (path.read_text(encoding="utf-8").strip() if path.is_file() else "") or None


def ensure_auth_token() -> str | None:
    """:func:`auth_token`, made first where there is none as ``ray.init`` makes one (``ray get-auth-token --generate``,
    in ``~/.ray``): ``ray start`` and clients with ``RAY_AUTH_MODE=token`` need it.
    A token that cannot be made is a :class:`ClusterError` naming the command and its last line of output."""
    if (token := auth_token()) is not None:
        return token
    generate = [str(Path(sys.executable).parent / "ray"), "get-auth-token", "--generate"]
    try:
        out = subprocess.run(generate, capture_output=True, text=True, timeout=120)
        said = (out.stderr.strip() or out.stdout.strip() or f"exit {out.returncode}").splitlines()[-1]
    except (OSError, subprocess.TimeoutExpired) as exc:
        said = str(exc)
    if (token := auth_token()) is None:
        raise ClusterError(
            f"Ray's token: `{' '.join(generate)}` made none in {Path.home() / '.ray'} ({said.strip()}); "
            "give one as RAY_AUTH_TOKEN or make that folder writable"
        )
    return token


def node_env(python: Path, home: Path, token: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    """A node's whole environment: its interpreter first on PATH, its own HOME, Ray's settings, nothing else of
    the caller's but :data:`KEPT_ENV` and ``extra``."""
    env = {k: os.environ[k] for k in KEPT_ENV if k in os.environ}
    env.update(
        PATH=f"{python.parent}{os.pathsep}/usr/local/bin{os.pathsep}/usr/bin{os.pathsep}/bin",
        HOME=str(home),
        RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="1",  # several nodes on one machine (they register its address)
        RAY_USAGE_STATS_ENABLED="0",
        RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S="0",  # on SIGTERM, stop at once
    )
    if token:
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token)
    env.update(extra or {})
    return env
