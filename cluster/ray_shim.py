"""Every use pairank makes of Ray's private APIs, in one place, with the Ray version they were checked against.

Ray's public API has no way to say two things pairank needs, so it reaches into
Ray's internals for them:

- a dataset of Arrow blocks whose metadata the driver already has
  (:func:`arrow_dataset`): ``ray.data.from_arrow`` and ``from_arrow_refs`` read
  each block's metadata in a task that asks for a whole CPU (Ray's default), and
  with the judge actors holding a node's CPUs down to half of one each (three runs
  on one cluster did) those tasks, and the runs, waited for ever;
- a local Ray that registers 127.0.0.1 even when Ray was imported before
  (:func:`keep_local_ray_on_loopback`): Ray reads the environment variable into a
  module constant at import.

- a client that sends Ray's token wherever Ray itself would have turned token
  authentication on (:func:`send_token_where_one_exists`): the mode lives in
  Ray's config, read from the environment when Ray is imported;
- which node is the head (:func:`head_node_id`): Ray marks it with a resource of
  its own, ``node:__internal_head__``, that no public call names;
- each node's free resources (:func:`free_per_node`): ``ray.available_resources()``
  sums them over the cluster, and a pool that grows needs one node that holds an
  engine (``ray._private.state.available_resources_per_node``, a developer API that
  vLLM uses too).

When Ray changes, re-check each function here against the new version and
update :data:`RAY_VERSION_CHECKED`; ``tests/cluster/test_ray_shim.py`` fails
until then.
"""

from __future__ import annotations

import os
import sys
from typing import Any

#: The Ray release whose internals the functions below were read against.
RAY_VERSION_CHECKED = "2.60.0"


def ray_version() -> str:
    """The installed Ray's version."""
    import ray

    return str(ray.__version__)


def block_metadata(table: Any) -> Any:
    """What Ray Data knows of an Arrow block (rows, bytes, schema), made here from the table. Ray 2.60:
    ``ray.data._internal.util.get_table_block_metadata_schema``, what ``from_arrow_refs`` runs in its tasks."""
    from ray.data._internal.util import get_table_block_metadata_schema

    return get_table_block_metadata_schema(table)


def arrow_dataset(refs: list[Any], metadata: list[Any]) -> Any:
    """A Ray Data dataset of the Arrow tables behind ``refs`` (object refs), whose :func:`block_metadata` the caller
    gives: ``ray.data.from_arrow_refs`` without its metadata tasks (no task, no CPU, no worker process). Ray 2.60:
    what ``from_arrow_refs`` builds once it has the metadata (a ``FromArrow`` logical plan, materialized)."""
    from ray.data._internal.logical.interfaces import LogicalPlan
    from ray.data._internal.logical.operators.from_operators import FromArrow
    from ray.data._internal.stats import DatasetStats
    from ray.data.context import DataContext
    from ray.data.dataset import MaterializedDataset

    stats = DatasetStats(metadata={"FromArrow": list(metadata)}, parent=None)
    context = DataContext.get_current().copy()
    return MaterializedDataset(LogicalPlan(FromArrow(list(refs), list(metadata)), context), context, stats)


def keep_local_ray_on_loopback() -> None:
    """Make a local Ray register 127.0.0.1 rather than the machine's network address.

    Ray reads ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` into
    ``ray._private.ray_constants.ENABLE_RAY_CLUSTER`` when it is first imported,
    so the constant is set too when Ray was imported before us.
    """
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    constants = sys.modules.get("ray._private.ray_constants")
    if constants is not None:
        constants.ENABLE_RAY_CLUSTER = False  # type: ignore[attr-defined]


def send_token_where_one_exists() -> bool:
    """Make this process send Ray's token when it joins a cluster, where this machine has one (``~/.ray/auth_token``,
    ``RAY_AUTH_TOKEN`` or ``RAY_AUTH_TOKEN_PATH``) and ``RAY_AUTH_MODE`` is unset. Returns whether it now does.

    Ray 2.60's ``ray start``, and a local ``ray.init``, turn token authentication on by themselves where a token
    exists, but a client joining sends the token only with ``RAY_AUTH_MODE=token``: without it, ``ray.init(address=
    ...)`` retried for 20 s and failed with "Failed to connect to Ray cluster" (the cause, InvalidAuthToken, only in
    its log), and the Jobs API answered 401. A cluster without authentication accepted a client that sent a token
    (measured). A mode the user set is kept as it is. Ray 2.60: what
    ``ray._private.authentication.authentication_token_setup.maybe_enable_token_auth_if_token_available`` does for
    ``ray start``, without its warning that speaks of starting a cluster: the variable set, Ray's config read again.
    """
    if os.environ.get("RAY_AUTH_MODE") is not None:
        return False
    from ray._raylet import AuthenticationTokenLoader, Config  # type: ignore[attr-defined]

    if not AuthenticationTokenLoader.instance().has_token(ignore_auth_mode=True):
        return False
    os.environ["RAY_AUTH_MODE"] = "token"
    Config.initialize("")
    return True


#: The resource Ray 2.60 gives the head node only (``ray._common.constants.HEAD_NODE_RESOURCE_NAME``).
HEAD_NODE_RESOURCE = "node:__internal_head__"


def head_node_id(nodes: list[dict[str, Any]]) -> str | None:
    """The id of the head among ``nodes`` (``ray.nodes()`` entries), None when none is it."""
    return next((str(n["NodeID"]) for n in nodes if HEAD_NODE_RESOURCE in n.get("Resources", {})), None)


def free_per_node() -> dict[str, dict[str, float]]:
    """Each live node's free resources, by node id."""
    from ray._private.state import available_resources_per_node

    return dict(available_resources_per_node())  # type: ignore[no-untyped-call]
