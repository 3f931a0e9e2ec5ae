"""A kraft.version 1 cluster on the instant simulator, with a leader and caught-up
observers: the set-up the voter-set tests share."""

from __future__ import annotations

from quorum.raft.node import RaftNode
from quorum.raft.voters import Endpoint, Voter
from quorum.sim.instant import InstantCluster


def voter(node_id: int) -> Voter:
    return Voter(node_id, f"d{node_id}", (Endpoint("CONTROLLER", "localhost", 9000 + node_id),))


def dynamic_cluster(voters: int = 3, observers: int = 1) -> tuple[InstantCluster, RaftNode]:
    cluster = InstantCluster(voters=voters, observers=observers, kraft_version=1)
    leader = cluster.elect()
    cluster.advance(3000)  # observers find the leader and catch up
    return cluster, leader


def committed(node: RaftNode, offset: int) -> bool:
    return node.high_watermark > offset
