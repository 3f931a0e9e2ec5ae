"""DescribeQuorum (KIP-595): this node's view of the quorum, for operators' tools."""

from __future__ import annotations

import time
from collections.abc import Mapping

from quorum.gen import raft_pb2 as pb
from quorum.raft.effects import Role
from quorum.raft.voters import KRAFT_VERSION_DYNAMIC
from quorum.server.driver import RaftDriver
from quorum.server.leader_hint import wire_leader
from quorum.server.transport import GrpcTransport


def describe_quorum(
    driver: RaftDriver,
    addresses: Mapping[int, str],
    include_image_digest: bool = False,
    directory_id: str = "",
) -> pb.DescribeQuorumResponse:
    """This node's view; the replica lists only when it leads (as Kafka's tool shows)."""
    now_ms = driver.clock()
    wall_ms = int(time.time() * 1000)

    def wall(ts: int | None) -> int:
        return -1 if ts is None else wall_ms - (now_ms - ts)

    voters = driver.core.voters
    voter_set = driver.core.current_voter_set() if driver.core.kraft_version else None
    if voter_set is not None:
        # kraft.version 1: a voter is reached where its record says (added or moved
        # at runtime: AddRaftVoter, UpdateRaftVoter).
        addresses = dict(addresses)
        for voter in voter_set.voters:
            for endpoint in voter.endpoints[:1]:
                addresses[voter.voter_id] = f"{endpoint.host}:{endpoint.port}"

    def directory_of(replica: int) -> str:
        voter = voter_set.voter(replica) if voter_set is not None else None
        return voter.directory_id if voter is not None else ""

    out = pb.DescribeQuorumResponse(
        node_id=driver.config.node_id,
        leader_id=wire_leader(driver.leader_id),
        leader_epoch=driver.epoch,
        voted_for=wire_leader(driver.voted_for),
        directory_id=directory_id,
        kraft_version=driver.core.kraft_version,
        max_kraft_version=KRAFT_VERSION_DYNAMIC,
        voter_addresses={v: addresses[v] for v in voters if v in addresses},
        high_watermark=driver.high_watermark,
        role=driver.role.value,
        log_start_offset=driver.log_start_offset,
        log_end_offset=driver.log_end_offset,
        log_end_epoch=driver.log_end_epoch,
        leader_address=addresses.get(driver.leader_id, "") if driver.leader_id is not None else "",
    )
    transport = driver.transport
    if isinstance(transport, GrpcTransport):
        out.cluster_id = transport.cluster_id
        for peer, down in sorted(transport.unreachable_peers().items()):
            out.unreachable_peers.append(
                pb.UnreachablePeer(
                    node_id=peer,
                    address=transport.peer_address(peer),
                    error=down.error,
                    since_timestamp_ms=down.since_ms,
                )
            )
    if driver.applied_state is not None:
        out.applied_offset = driver.applied_state.applied_offset
        if include_image_digest:
            out.image_digest = driver.applied_state.digest()
    if driver.role is Role.LEADER:
        me = pb.ReplicaState(
            replica_id=driver.config.node_id,
            log_end_offset=driver.flushed_end,
            last_fetch_timestamp_ms=wall_ms,
            last_caught_up_timestamp_ms=wall_ms,
            address=addresses.get(driver.config.node_id, ""),
            directory_id=directory_of(driver.config.node_id),
        )
        (out.current_voters if driver.config.node_id in voters else out.observers).append(me)
        shown = {driver.config.node_id}
        for replica, progress in sorted(driver.replica_progress().items()):
            # A replica fetching under a voter's id from another directory (a
            # replaced disk) is an observer until it is added (KIP-853).
            voter = replica in voters and driver.core.is_voter_key(replica, progress.directory_id)
            state = pb.ReplicaState(
                replica_id=replica,
                log_end_offset=progress.end_offset,
                last_fetch_timestamp_ms=wall(progress.last_fetch_ms),
                last_caught_up_timestamp_ms=wall(progress.last_caught_up_ms),
                address=addresses.get(replica, ""),
                directory_id=directory_of(replica) if voter else progress.directory_id,
            )
            (out.current_voters if voter else out.observers).append(state)
            shown |= {replica} if voter else set()
        for replica in sorted(set(voters) - shown):  # a voter not heard from its directory
            out.current_voters.append(
                pb.ReplicaState(
                    replica_id=replica,
                    log_end_offset=-1,
                    last_fetch_timestamp_ms=-1,
                    last_caught_up_timestamp_ms=-1,
                    address=addresses.get(replica, ""),
                    directory_id=directory_of(replica),
                )
            )
    return out
