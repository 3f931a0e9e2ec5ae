"""`quorumctl quorum describe`: what `kafka-metadata-quorum.sh describe` shows.

`--status` is the quorum in one screen (leader, epoch, high watermark, worst
follower lag); `--replication` is one row per voter and observer with its log
end offset, lag in records, and when it last fetched and was last caught up.
Both need a leader; without one, `--status` shows each reachable controller's
own view instead (as `endpoint status --cluster`) and exits 1, since that is
exactly when an operator runs it.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.cli.bootstrap import (
    RequestFailed,
    cli_tls,
    command_timeout,
    connection_options,
    parse_bootstrap,
    render_json,
    render_table,
)
from quorum.cli.endpoints import (
    NodeView,
    no_leader_summary,
    print_node_views,
    probe_all,
    refuse_foreign_cluster,
)
from quorum.common.tls import TlsSettings
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as pb


@click.group("quorum")
def quorum_group() -> None:
    """Inspect the Raft quorum of controllers.

    \b
    Example:
      quorumctl quorum describe --status
      quorumctl quorum describe --replication --output json
    """


@quorum_group.command("describe")
@click.option("--status", is_flag=True, help="Leader and lag (the default).")
@click.option("--replication", is_flag=True, help="One row per replica (with --status: both).")
@click.option("--human-readable", is_flag=True, help="Timestamps as 'N ms ago'.")
@connection_options
def describe(
    status: bool,
    replication: bool,
    human_readable: bool,
    bootstrap: str | None,
    cluster_id: str,
    output: str,
) -> None:
    """Describe the quorum as its leader sees it; the brokers, which follow the
    metadata log through MetadataFetch, are its observers (as in Kafka).

    \b
    Example:
      quorumctl quorum describe --replication --bootstrap-controller 127.0.0.1:9093
      quorumctl quorum describe --status --replication --output json
    """
    addresses = parse_bootstrap(bootstrap)
    show_status = status or not replication
    timeout = command_timeout(5.0)
    tls = cli_tls()
    reply, leader_address, views = asyncio.run(_describe(addresses, cluster_id, timeout, tls))
    if reply is None:
        _no_leader("status" if show_status else "replication", views, output)
        return
    brokers = asyncio.run(_brokers(leader_address, cluster_id, timeout, tls))
    now_ms = int(time.time() * 1000)
    directories = {v.reply.node_id: v.reply.directory_id for v in views if v.reply is not None}
    rows = replication_rows(reply, now_ms, brokers, directories)
    summary = status_view(reply, rows)
    if output == "json":
        if show_status and replication:
            click.echo(render_json({"Status": summary, "Replication": rows}))
        else:
            click.echo(render_json(summary if show_status else rows))
        return
    if show_status:
        width = max(len(k) for k in summary) + 2
        click.echo("\n".join(f"{k + ':':<{width}}{_plain(v)}" for k, v in summary.items()))
    if replication:
        if show_status:
            click.echo("")
        headers = list(rows[0]) if rows else ["NodeId"]
        table = [[_timestamp(k, v, now_ms, human_readable) for k, v in r.items()] for r in rows]
        click.echo(render_table(headers, table))


async def _brokers(
    address: str, cluster_id: str, timeout_s: float, tls: TlsSettings | None
) -> list[api.BrokerDescription]:
    """The registered brokers from the active controller (which alone knows their
    sessions); none when it does not answer, since the quorum view stands alone."""
    client = AdminClient([address], cluster_id, tls=tls)
    try:
        reply = await client.admin(
            "DescribeCluster", api.DescribeClusterRequest(), deadline_s=min(timeout_s, 2.0)
        )
    except (AdminError, NoControllerError):
        return []
    finally:
        await client.close()
    return list(reply.brokers)


async def _describe(
    addresses: list[str], cluster_id: str, timeout_s: float, tls: TlsSettings | None
) -> tuple[pb.DescribeQuorumResponse | None, str, list[NodeView]]:
    """(the leader's view, its address); else (None, "", every controller's own view)."""
    views = await probe_all(addresses, cluster_id, timeout_s, cluster=True, tls=tls)
    refuse_foreign_cluster(views)
    for v in views:
        if v.reply is not None and v.reply.role == "leader":
            return v.reply, v.address, views
    named = {
        v.reply.leader_address for v in views if v.reply is not None and v.reply.leader_address
    } - {v.address for v in views}
    probes = (probe_all([a], cluster_id, timeout_s, tls=tls) for a in named)
    for extra in await asyncio.gather(*probes):
        if extra[0].reply is not None and extra[0].reply.role == "leader":
            return extra[0].reply, extra[0].address, views
    return None, "", views


def _no_leader(view: str, views: list[NodeView], output: str) -> None:
    """Each controller's own view, and the summary on stderr; exit 1."""
    if not any(v.reply is not None for v in views):
        raise RequestFailed(
            "no controller reachable: "
            + "; ".join(v.error for v in views)
            + " (set --bootstrap-controller or $QUORUMCTL_BOOTSTRAP)"
        )
    if view == "status" or output == "table":
        print_node_views(views, output)
    else:
        click.echo(render_json([]))
    raise RequestFailed(no_leader_summary(views))


def replication_rows(
    reply: pb.DescribeQuorumResponse,
    now_ms: int,
    brokers: list[api.BrokerDescription] | None = None,
    directories: dict[int, str] | None = None,
) -> list[dict[str, Any]]:
    """Kafka's columns; lag is in records behind the leader's log end offset, and a
    replica that never fetched shows -1 (as Kafka's tool), not a log end of 0.
    DirectoryId is each controller's own (asked of it; "" when it did not answer
    or has none), as Kafka's tool shows since KIP-853, and for a broker the
    directory id of its metadata.log.dir, which it registered (KIP-858)."""
    directories = directories or {}
    leader_end = max((r.log_end_offset for r in reply.current_voters), default=0)
    rows = []
    for kind, replicas in (("Voter", reply.current_voters), ("Observer", reply.observers)):
        for r in replicas:
            if r.replica_id == reply.leader_id:
                status = "Leader"
            else:
                status = "Follower" if kind == "Voter" else "Observer"
            fetched = status == "Leader" or r.last_fetch_timestamp_ms >= 0
            rows.append(
                {
                    "NodeId": r.replica_id,
                    # The voter set in force says (kraft.version 1), else the node.
                    "DirectoryId": r.directory_id or directories.get(r.replica_id, ""),
                    "LogEndOffset": r.log_end_offset if fetched else -1,
                    "Lag": max(0, leader_end - r.log_end_offset) if fetched else -1,
                    "LastFetchTimestamp": r.last_fetch_timestamp_ms,
                    "LastCaughtUpTimestamp": r.last_caught_up_timestamp_ms,
                    "Status": status,
                }
            )
    for b in brokers or []:
        # A broker follows the committed log (MetadataFetch): its "log end" is the
        # next offset it asked for, bounded by the high watermark, not the leader's end.
        known = bool(b.reported_state)
        rows.append(
            {
                "NodeId": b.broker_id,
                "DirectoryId": b.log_dirs[0] if b.log_dirs else "",
                "LogEndOffset": b.metadata_offset if known else -1,
                "Lag": max(0, reply.high_watermark - b.metadata_offset) if known else -1,
                "LastFetchTimestamp": now_ms - b.last_heartbeat_age_ms if known else -1,
                "LastCaughtUpTimestamp": (
                    now_ms - b.last_heartbeat_age_ms
                    if known and b.metadata_offset >= reply.high_watermark
                    else -1
                ),
                "Status": "Observer",
            }
        )
    return rows


def status_view(reply: pb.DescribeQuorumResponse, rows: list[dict[str, Any]]) -> dict[str, Any]:
    followers = [r for r in rows if r["Status"] == "Follower" and r["Lag"] >= 0]
    caught_up = [r["LastCaughtUpTimestamp"] for r in followers]
    leader_time = max((r["LastCaughtUpTimestamp"] for r in rows), default=0)
    lag_ms = [max(0, leader_time - t) if t >= 0 else -1 for t in caught_up]
    return {
        "ClusterId": reply.cluster_id,
        "LeaderId": reply.leader_id,
        "LeaderEpoch": reply.leader_epoch,
        "HighWatermark": reply.high_watermark,
        "MaxFollowerLag": max((r["Lag"] for r in followers), default=0),
        "MaxFollowerLagTimeMs": max(lag_ms, default=0),
        "CurrentVoters": sorted(r.replica_id for r in reply.current_voters),
        "CurrentObservers": sorted(r["NodeId"] for r in rows if r["Status"] == "Observer"),
    }


def _timestamp(key: str, value: Any, now_ms: int, human: bool) -> Any:
    if key == "DirectoryId" and not value:
        return "-"
    if not human or not key.endswith("Timestamp"):
        return value
    return "never" if value < 0 else f"{max(0, now_ms - value)} ms ago"


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
