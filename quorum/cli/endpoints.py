"""Each controller's own view, asked one by one: what an operator needs when the
quorum has no leader and no single node can describe it.

`quorumctl endpoint status` and `endpoint health` follow `etcdctl endpoint status`
and `endpoint health` (`--cluster` asks every voter the answering nodes know of;
`-w table|json`). `quorum describe --status` falls back to the same per-node view
when no reachable node leads. A failed call is always one line naming the
endpoint (`rpc_failure`), never gRPC's debug dump.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import click
import grpc

from quorum.cli.bootstrap import (
    RequestFailed,
    cli_tls,
    command_timeout,
    connection_options,
    parse_bootstrap,
    print_rows,
    render_json,
)
from quorum.common.channels import open_channel
from quorum.common.tls import TlsSettings
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.wire_errors import wire_error

# Roles in which a node's image is the committed state of a live quorum.
SERVING_ROLES = ("leader", "follower")


def rpc_failure(address: str, err: BaseException) -> str:
    """One line naming the endpoint and what the call met."""
    if isinstance(err, grpc.aio.AioRpcError | grpc.RpcError) and hasattr(err, "code"):
        code = err.code()
        details = (err.details() or "") if hasattr(err, "details") else ""
        if code == grpc.StatusCode.DEADLINE_EXCEEDED:
            return f"{address}: no answer in time"
        if code == grpc.StatusCode.UNAVAILABLE:
            lowered = details.lower()
            if "refused" in lowered:
                return f"{address}: unreachable (connection refused)"
            if "reset" in lowered:
                return f"{address}: unreachable (connection reset)"
            if "resolve" in lowered or "dns" in lowered:
                return f"{address}: unreachable (cannot resolve the host)"
            if isinstance(err, grpc.aio.AioRpcError):
                known = wire_error(err)
                if known.error is not None:
                    return f"{address}: {known.error.name}: {known.message}"
            return f"{address}: unreachable"
        if isinstance(err, grpc.aio.AioRpcError):
            known = wire_error(err)
            if known.error is not None:
                return f"{address}: {known.error.name}: {known.message}"
        first_line = details.splitlines()[0] if details else ""
        return f"{address}: {code.name}" + (f": {first_line}" if first_line else "")
    if isinstance(err, TimeoutError):
        return f"{address}: no answer in time"
    return f"{address}: {type(err).__name__}: {err}"


@dataclass(frozen=True)
class NodeView:
    """One endpoint's answer to DescribeQuorum, or why there was none."""

    address: str
    reply: pb.DescribeQuorumResponse | None
    error: str
    took_ms: float

    @property
    def knows_leader(self) -> bool:
        """Knows a leader it can reach (a prospective node keeps naming a dead one)."""
        r = self.reply
        return (
            r is not None
            and r.leader_id >= 0
            and r.leader_id not in {p.node_id for p in r.unreachable_peers}
        )

    @property
    def serving(self) -> bool:
        """Answered, follows or leads a leader it can reach, and has applied all it
        knows to be committed: its reads are the quorum's committed state."""
        r = self.reply
        return (
            r is not None
            and self.knows_leader
            and r.role in SERVING_ROLES
            and (r.applied_offset >= r.high_watermark or r.applied_offset == 0)
        )


def leader_phrase(r: pb.DescribeQuorumResponse) -> str:
    """What a node knows of the leader, in words."""
    if r.leader_id < 0:
        return "knows no leader"
    if r.leader_id in {p.node_id for p in r.unreachable_peers}:
        return f"knows no reachable leader (last leader {r.leader_id} unreachable)"
    return f"names leader {r.leader_id}"


async def _probe(
    address: str, cluster_id: str, timeout_s: float, tls: TlsSettings | None
) -> NodeView:
    channel = open_channel(address, tls=tls)
    start = time.monotonic()
    try:
        stub = pb_grpc.RaftQuorumStub(channel)
        reply = await stub.DescribeQuorum(
            pb.DescribeQuorumRequest(cluster_id=cluster_id), timeout=timeout_s
        )
        return NodeView(address, reply, "", (time.monotonic() - start) * 1000)
    except (grpc.aio.AioRpcError, TimeoutError) as err:
        return NodeView(address, None, rpc_failure(address, err), (time.monotonic() - start) * 1000)
    finally:
        await channel.close()


async def probe_all(
    addresses: Sequence[str],
    cluster_id: str,
    timeout_s: float,
    cluster: bool = False,
    tls: TlsSettings | None = None,
) -> list[NodeView]:
    """Every address's own view, asked in parallel; with `cluster`, also every voter
    the answers name (etcdctl's `--cluster`), keyed by node id where known."""
    views = list(await asyncio.gather(*(_probe(a, cluster_id, timeout_s, tls) for a in addresses)))
    if cluster:
        known = {v.address for v in views}
        more = sorted(
            {
                address
                for v in views
                if v.reply is not None
                for address in v.reply.voter_addresses.values()
                if address not in known
            }
        )
        views += await asyncio.gather(*(_probe(a, cluster_id, timeout_s, tls) for a in more))
    return sorted(views, key=_order)


def _order(view: NodeView) -> tuple[int, str]:
    return (view.reply.node_id if view.reply is not None else 1 << 31, view.address)


def voter_ids_by_address(views: Sequence[NodeView]) -> dict[str, int]:
    """Node ids the answering nodes' configs give each address."""
    ids: dict[str, int] = {}
    for v in views:
        if v.reply is not None:
            ids[v.address] = v.reply.node_id
            for node, address in v.reply.voter_addresses.items():
                ids.setdefault(address, node)
    return ids


def node_row(view: NodeView) -> dict[str, Any]:
    """etcdctl's endpoint status columns in Raft's (KIP-595's) words."""
    r = view.reply
    if r is None:
        return {
            "Endpoint": view.address,
            "NodeId": -1,
            "Role": "unreachable",
            "Epoch": -1,
            "LeaderId": -1,
            "VotedFor": -1,
            "LogEndOffset": -1,
            "HighWatermark": -1,
            "AppliedOffset": -1,
            "CannotReach": [],
            "Error": view.error,
        }
    return {
        "Endpoint": view.address,
        "NodeId": r.node_id,
        "Role": r.role,
        "Epoch": r.leader_epoch,
        "LeaderId": r.leader_id,
        "VotedFor": r.voted_for,
        "LogEndOffset": r.log_end_offset,
        "HighWatermark": r.high_watermark,
        "AppliedOffset": r.applied_offset,
        "CannotReach": [p.node_id for p in r.unreachable_peers],
        "Error": "",
    }


def _table_row(row: dict[str, Any]) -> dict[str, Any]:
    """Table cells: -1 reads as 'none', an empty list as '-'."""
    out = dict(row)
    for key in ("LeaderId", "VotedFor", "NodeId", "Epoch"):
        if out[key] == -1:
            out[key] = "none" if key in ("LeaderId", "VotedFor") else "-"
    for key in ("LogEndOffset", "HighWatermark", "AppliedOffset"):
        if out[key] == -1:
            out[key] = "-"
    out["CannotReach"] = ",".join(str(n) for n in out["CannotReach"]) or "-"
    out["Error"] = out["Error"] or "-"
    return out


def print_node_views(views: Sequence[NodeView], output: str) -> None:
    rows = [node_row(v) for v in views]
    if output == "json":
        click.echo(render_json(rows))
    else:
        print_rows([_table_row(r) for r in rows], "table")


def no_leader_summary(views: Sequence[NodeView]) -> str:
    """'no active leader: node 1 (127.0.0.1:9093) reachable, candidate in epoch 7,
    knows no leader, cannot reach nodes 2, 3; 127.0.0.1:9094 unreachable (...)'."""
    parts = []
    for v in views:
        r = v.reply
        if r is None:
            parts.append(v.error)
            continue
        what = f"node {r.node_id} ({v.address}) reachable, {r.role} in epoch {r.leader_epoch}"
        what += ", " + leader_phrase(r)
        down = [p.node_id for p in r.unreachable_peers]
        if down:
            what += ", cannot reach " + _nodes(down)
        parts.append(what)
    return "no active leader: " + "; ".join(parts)


def _nodes(ids: Sequence[int]) -> str:
    return ("node " if len(ids) == 1 else "nodes ") + ", ".join(str(i) for i in sorted(ids))


def run_probe(
    addresses: Sequence[str], cluster_id: str, timeout_s: float, cluster: bool
) -> list[NodeView]:
    return asyncio.run(probe_all(addresses, cluster_id, timeout_s, cluster, cli_tls()))


def refuse_foreign_cluster(views: Sequence[NodeView]) -> None:
    """A wrong `--cluster-id` is the operator's mistake, not an unhealthy node."""
    foreign = [v.error for v in views if "INCONSISTENT_CLUSTER_ID" in v.error]
    if foreign and len(foreign) == len(views):
        raise RequestFailed(foreign[0])


@click.group("endpoint")
def endpoint_group() -> None:
    """Each controller's own view (etcdctl endpoint status / health).

    \b
    Example:
      quorumctl endpoint status --cluster -w table
      quorumctl endpoint health --cluster
    """


def _endpoint_options(command: Any) -> Any:
    command = click.option(
        "--cluster",
        is_flag=True,
        help="Ask every voter the answering controllers know of, not only the bootstrap list.",
    )(command)
    return connection_options(command)


@endpoint_group.command("status")
@_endpoint_options
def status(cluster: bool, bootstrap: str | None, cluster_id: str, output: str) -> None:
    """Role, epoch, voted-for, log end, high watermark and unreachable peers, per node.

    Exits 1 when any endpoint did not answer.

    \b
    Example:
      quorumctl endpoint status --cluster -w json
    """
    views = run_probe(parse_bootstrap(bootstrap), cluster_id, command_timeout(5.0), cluster)
    refuse_foreign_cluster(views)
    print_node_views(views, output)
    failed = [v.error for v in views if v.reply is None]
    for line in failed:
        click.echo(line, err=True)
    if failed:
        raise SystemExit(1)


@endpoint_group.command("health")
@_endpoint_options
def health(cluster: bool, bootstrap: str | None, cluster_id: str, output: str) -> None:
    """Healthy: answers, knows a leader and has applied what it knows is committed.

    Exits 1 when any endpoint is unhealthy.

    \b
    Example:
      quorumctl endpoint health --cluster
    """
    views = run_probe(parse_bootstrap(bootstrap), cluster_id, command_timeout(5.0), cluster)
    refuse_foreign_cluster(views)
    rows = []
    for v in views:
        reason = "" if v.serving else _why_unhealthy(v)
        rows.append(
            {
                "Endpoint": v.address,
                "Health": not reason,
                "Took": f"{v.took_ms:.1f}ms",
                "Error": reason,
            }
        )
    if output == "json":
        click.echo(render_json(rows))
    else:
        for row in rows:
            if row["Health"]:
                click.echo(f"{row['Endpoint']} is healthy: took = {row['Took']}")
            else:
                click.echo(f"{row['Endpoint']} is unhealthy: {row['Error']}", err=True)
    if not all(row["Health"] for row in rows):
        raise SystemExit(1)


def _why_unhealthy(view: NodeView) -> str:
    r = view.reply
    if r is None:
        return view.error.removeprefix(f"{view.address}: ")
    if not view.knows_leader or r.role not in SERVING_ROLES:
        return f"{leader_phrase(r)} ({r.role} in epoch {r.leader_epoch})"
    return f"applied offset {r.applied_offset} behind its high watermark {r.high_watermark}"
