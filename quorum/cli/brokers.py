"""`quorumctl brokers`: the registered brokers as the active controller sees them."""

from __future__ import annotations

from typing import Any

import click

from quorum.cli.admin_calls import call_admin
from quorum.cli.bootstrap import (
    connection_options,
    parse_bootstrap,
    print_rows,
    render_json,
)
from quorum.cli.params import BROKER_ID
from quorum.gen import admin_pb2 as api


@click.group("brokers")
def brokers_group() -> None:
    """List and unregister brokers.

    \b
    Example:
      quorumctl brokers list
      quorumctl brokers unregister --id 104
    """


def broker_rows(reply: api.DescribeClusterResponse) -> list[dict[str, Any]]:
    """Session columns (heartbeat age, offset, lag) come from the active controller."""
    rows = []
    for b in reply.brokers:
        known = bool(b.reported_state)
        rows.append(
            {
                "Id": b.broker_id,
                "State": b.state,
                "AgentState": b.reported_state or "unknown",
                "Epoch": b.broker_epoch,
                "Rack": b.rack or "-",
                "Fenced": b.fenced,
                "Endpoint": f"{b.host}:{b.port}",
                "LastHeartbeatMs": b.last_heartbeat_age_ms if known else -1,
                "MetadataOffset": b.metadata_offset if known else -1,
                "Lag": max(0, reply.metadata_offset - b.metadata_offset) if known else -1,
            }
        )
    return rows


def describe_from_active(addresses: list[str], cluster_id: str) -> api.DescribeClusterResponse:
    """Any controller answers DescribeCluster, but only the active one knows the
    brokers' sessions: ask it when the first answer came from another."""
    reply: api.DescribeClusterResponse = call_admin(
        addresses, cluster_id, "DescribeCluster", api.DescribeClusterRequest()
    )
    stale = reply.brokers and not any(b.reported_state for b in reply.brokers)
    if stale and reply.controller_address:
        reply = call_admin(
            [reply.controller_address], cluster_id, "DescribeCluster", api.DescribeClusterRequest()
        )
    return reply


@brokers_group.command("list")
@connection_options
def list_brokers(bootstrap: str | None, cluster_id: str, output: str) -> None:
    """Every registered broker: state, epoch, rack, fencing, heartbeat age, metadata lag.

    \b
    Example:
      quorumctl brokers list --output json
    """
    reply = describe_from_active(parse_bootstrap(bootstrap), cluster_id)
    rows = broker_rows(reply)
    print_rows(rows, output)


@brokers_group.command("unregister")
@click.option("--id", "broker_id", type=BROKER_ID, required=True, help="The broker id.")
@connection_options
def unregister(broker_id: int, bootstrap: str | None, cluster_id: str, output: str) -> None:
    """Forget a broker (KIP-919): it is fenced first, its leaderships moved.

    \b
    Example:
      quorumctl brokers unregister --id 104
    """
    call_admin(
        parse_bootstrap(bootstrap),
        cluster_id,
        "UnregisterBroker",
        api.UnregisterBrokerRequest(broker_id=broker_id),
    )
    result = {"Id": broker_id, "Result": "unregistered"}
    click.echo(render_json(result) if output == "json" else f"broker {broker_id} unregistered")
