"""One admin call from the CLI: find the active controller, turn refusals into exit 1.

Errors come out as Kafka's error name, code and the server's message on stderr
(exit code 1). When no active controller answers, the CLI asks each controller
for its own view and says what it found ("no active controller: node 1
(127.0.0.1:9093) reachable, candidate in epoch 7, knows no leader; 127.0.0.1:9094:
unreachable (connection refused)"), never only "not reachable". Reads answered by
a controller that knows no leader or has not applied what it knows is committed
are marked stale (stderr, and `StaleRead` in JSON); `--require-leader` sends them
to the active controller or refuses. Per-item errors in batch answers are
reported the same way by `fail_on_item_errors`.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from typing import Any

import click

from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.cli.bootstrap import (
    RequestFailed,
    cli_tls,
    command_timeout,
    mark_stale,
    require_leader,
)
from quorum.cli.endpoints import NodeView, leader_phrase, no_leader_summary, probe_all
from quorum.common.tls import TlsSettings
from quorum.gen import admin_pb2 as api

# Calls answered from the answering controller's committed image.
READ_METHODS = frozenset(
    {"ListTopics", "DescribeTopics", "DescribeCluster", "DescribeConfigs", "DescribeAcls"}
)
PROBE_TIMEOUT_S = 2.0
# After this long without an answer, say on stderr what the call is waiting for.
PATIENCE_S = 2.0


def call_admin(
    addresses: list[str],
    cluster_id: str,
    method: str,
    request: Any,
    deadline_s: float | None = None,
) -> Any:
    """The call's reply; `deadline_s` defaults to the command's `--timeout`."""
    deadline = deadline_s if deadline_s is not None else command_timeout()
    read = method in READ_METHODS
    tls = cli_tls()
    return asyncio.run(_call(addresses, cluster_id, method, request, deadline, read, tls))


async def _call(
    addresses: list[str],
    cluster_id: str,
    method: str,
    request: Any,
    deadline_s: float,
    read: bool,
    tls: TlsSettings | None,
) -> Any:
    if read and require_leader():
        addresses = [await _leader_address(addresses, cluster_id, tls)]
    client = AdminClient(addresses, cluster_id, tls=tls)
    try:
        task = asyncio.ensure_future(client.admin(method, request, deadline_s=deadline_s))
        done, _ = await asyncio.wait({task}, timeout=min(PATIENCE_S, deadline_s))
        if not done:
            click.echo(
                f"waiting for an active controller to answer {method} "
                f"(up to {deadline_s:g}s; --timeout changes it)...",
                err=True,
            )
        reply = await task
        answered_by = client.active_address
    except AdminError as err:
        code = err.error.error.value if err.error.error is not None else -1
        raise RequestFailed(f"{err.name} (error code {code}): {err.error.message}") from err
    except NoControllerError as err:
        views = await probe_all(addresses, cluster_id, PROBE_TIMEOUT_S, cluster=True, tls=tls)
        raise RequestFailed(
            _no_controller(views, deadline_s)
            + " (set --bootstrap-controller or $QUORUMCTL_BOOTSTRAP, or wait for an election)"
        ) from err
    finally:
        await client.close()
    if read and answered_by is not None:
        await _check_fresh(answered_by, cluster_id, tls)
    return reply


def _no_controller(views: list[NodeView], deadline_s: float) -> str:
    summary = no_leader_summary(views).removeprefix("no active leader: ")
    if all(v.reply is None for v in views):
        return f"no controller reachable within {deadline_s:g}s: {summary}"
    if any(v.knows_leader for v in views):
        # A leader is known but did not answer in time (frozen, or just elected).
        return f"no active controller answered within {deadline_s:g}s: {summary}"
    return f"no active controller: {summary}"


async def _leader_address(addresses: list[str], cluster_id: str, tls: TlsSettings | None) -> str:
    """The active controller's address, as the controllers themselves report it."""
    views = await probe_all(addresses, cluster_id, PROBE_TIMEOUT_S, cluster=True, tls=tls)
    for v in views:
        if v.reply is not None and v.reply.role == "leader":
            return v.address
    raise RequestFailed(
        "refusing a read without an active controller (--require-leader): "
        + no_leader_summary(views).removeprefix("no active leader: ")
    )


async def _check_fresh(address: str, cluster_id: str, tls: TlsSettings | None) -> None:
    """Mark the read stale when the controller that answered knows no leader or
    lags; with `--require-leader`, refuse it."""
    [view] = await probe_all([address], cluster_id, PROBE_TIMEOUT_S, tls=tls)
    if view.serving:
        return
    r = view.reply
    if r is None:
        # It answered the read but not this question (it stopped since, or this
        # principal may not describe the quorum): nothing known to warn about.
        if require_leader():
            raise RequestFailed(
                f"cannot confirm the read is current (--require-leader): {view.error}"
            )
        return
    if not view.knows_leader or r.role not in ("leader", "follower"):
        reason = (
            f"answered by controller {r.node_id} ({address}), which {leader_phrase(r)} "
            f"({r.role} in epoch {r.leader_epoch}); it shows the metadata as of offset "
            f"{r.applied_offset}"
        )
    else:
        reason = (
            f"answered by controller {r.node_id} ({address}), which has applied up to "
            f"offset {r.applied_offset} of its high watermark {r.high_watermark}"
        )
    if require_leader():
        raise RequestFailed(f"refusing a possibly stale read (--require-leader): {reason}")
    mark_stale(reason)


def item_error(error: api.ApiError) -> str | None:
    """`NAME (error code N): message` for a failed item, None for success."""
    if error.error_code == 0:
        return None
    return f"{error.error_name} (error code {error.error_code}): {error.message}"


def fail_on_item_errors(failures: Iterable[tuple[str, str]]) -> None:
    """Print every failed item on stderr, then exit 1 if there was any."""
    failed = list(failures)
    for what, message in failed:
        click.echo(f"{what}: {message}", err=True)
    if failed:
        sys.exit(1)
