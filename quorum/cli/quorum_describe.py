"""`quorumctl quorum describe`: what `kafka-metadata-quorum.sh describe` shows.

`--status` is the quorum in one screen (leader, epoch, high watermark, worst
follower lag); `--replication` is one row per voter and observer with its log
end offset, lag in records, and when it last fetched and was last caught up.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import click

from quorum.cli.bootstrap import (
    RequestFailed,
    cli_tls,
    connection_options,
    parse_bootstrap,
    render_json,
    render_table,
)
from quorum.client import QuorumClient, QuorumClientError, QuorumUnavailableError
from quorum.common.tls import TlsSettings
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
@click.option("--status", "view", flag_value="status", default=True, help="Leader and lag.")
@click.option("--replication", "view", flag_value="replication", help="One row per replica.")
@click.option("--human-readable", is_flag=True, help="Timestamps as 'N ms ago'.")
@connection_options
def describe(
    view: str, human_readable: bool, bootstrap: str | None, cluster_id: str, output: str
) -> None:
    """Describe the quorum as its leader sees it.

    \b
    Example:
      quorumctl quorum describe --replication --bootstrap-controller 127.0.0.1:9093
    """
    addresses = parse_bootstrap(bootstrap)
    reply = asyncio.run(_describe(addresses, cluster_id, cli_tls()))
    now_ms = int(time.time() * 1000)
    rows = replication_rows(reply, now_ms)
    if view == "status":
        status = status_view(reply, rows)
        if output == "json":
            click.echo(render_json(status))
        else:
            width = max(len(k) for k in status) + 2
            click.echo("\n".join(f"{k + ':':<{width}}{_plain(v)}" for k, v in status.items()))
        return
    if output == "json":
        click.echo(render_json(rows))
        return
    headers = list(rows[0]) if rows else ["NodeId"]
    table = [[_timestamp(k, v, now_ms, human_readable) for k, v in r.items()] for r in rows]
    click.echo(render_table(headers, table))


async def _describe(
    addresses: list[str], cluster_id: str, tls: TlsSettings | None
) -> pb.DescribeQuorumResponse:
    client = QuorumClient(addresses, cluster_id, tls=tls)
    try:
        return await client.describe_quorum(timeout_s=2)
    except QuorumClientError as err:
        raise RequestFailed(str(err)) from err
    except QuorumUnavailableError as err:
        raise RequestFailed(
            f"no controller answered with a leader (tried {', '.join(addresses)}): {err}"
        ) from err
    finally:
        await client.close()


def replication_rows(reply: pb.DescribeQuorumResponse, now_ms: int) -> list[dict[str, Any]]:
    """Kafka's columns; lag is in records behind the leader's log end offset."""
    leader_end = max((r.log_end_offset for r in reply.current_voters), default=0)
    rows = []
    for kind, replicas in (("Voter", reply.current_voters), ("Observer", reply.observers)):
        for r in replicas:
            if r.replica_id == reply.leader_id:
                status = "Leader"
            else:
                status = "Follower" if kind == "Voter" else "Observer"
            rows.append(
                {
                    "NodeId": r.replica_id,
                    "LogEndOffset": r.log_end_offset,
                    "Lag": max(0, leader_end - r.log_end_offset),
                    "LastFetchTimestamp": r.last_fetch_timestamp_ms,
                    "LastCaughtUpTimestamp": r.last_caught_up_timestamp_ms,
                    "Status": status,
                }
            )
    return rows


def status_view(reply: pb.DescribeQuorumResponse, rows: list[dict[str, Any]]) -> dict[str, Any]:
    followers = [r for r in rows if r["Status"] != "Leader"]
    caught_up = [r["LastCaughtUpTimestamp"] for r in followers]
    leader_time = max((r["LastCaughtUpTimestamp"] for r in rows), default=0)
    lag_ms = [max(0, leader_time - t) if t >= 0 else -1 for t in caught_up]
    return {
        "LeaderId": reply.leader_id,
        "LeaderEpoch": reply.leader_epoch,
        "HighWatermark": reply.high_watermark,
        "MaxFollowerLag": max((r["Lag"] for r in followers), default=0),
        "MaxFollowerLagTimeMs": max(lag_ms, default=0),
        "CurrentVoters": sorted(r.replica_id for r in reply.current_voters),
        "CurrentObservers": sorted(r.replica_id for r in reply.observers),
    }


def _timestamp(key: str, value: Any, now_ms: int, human: bool) -> Any:
    if not human or not key.endswith("Timestamp"):
        return value
    return "never" if value < 0 else f"{max(0, now_ms - value)} ms ago"


def _plain(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)
