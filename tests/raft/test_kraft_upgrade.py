"""kraft.version 0 -> 1 on a running static quorum (`quorumctl features upgrade
--feature kraft.version=1`): the leader appends a KRaftVersionRecord and the
static voters as the first VotersRecord in one control batch; every replica
takes the voter set from the log from then on, a truncated (uncommitted)
upgrade is undone, and a restart reads it back from the log."""

from __future__ import annotations

import random

import pytest

from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role
from quorum.raft.log import RaftLog
from quorum.raft.messages import ErrorCode
from quorum.raft.node import RaftNode
from quorum.raft.records import Batch
from quorum.raft.voters import (
    Endpoint,
    Voter,
    VoterChangeRefused,
    VoterSet,
    decode_kraft_version,
    encode_kraft_version,
    encode_voters,
)
from quorum.sim.instant import InstantCluster


def voter(node_id: int) -> Voter:
    return Voter(node_id, f"d{node_id}", (Endpoint("CONTROLLER", "localhost", 9000 + node_id),))


STATIC = VoterSet((voter(1), voter(2), voter(3)))


def static_cluster() -> tuple[InstantCluster, RaftNode]:
    cluster = InstantCluster(voters=3, observers=1)
    leader = cluster.elect()
    cluster.advance(3000)
    return cluster, leader


def test_the_upgrade_puts_the_static_voters_in_the_log_and_voters_can_then_change() -> None:
    cluster, leader = static_cluster()
    assert leader.kraft_version == 0
    result = leader.upgrade_kraft_version(STATIC, cluster.now)
    assert result.last_offset == result.first_offset + 1
    cluster.settle()
    assert leader.high_watermark > result.last_offset
    for node in cluster.nodes.values():
        assert node.kraft_version == 1
        assert node.current_voter_set() == STATIC
        assert node.voters == {1, 2, 3}
    cluster.advance(3000)  # the observer catches up again
    added = leader.add_voter(voter(4), cluster.now)
    cluster.settle()
    assert leader.high_watermark > added.last_offset
    assert all(node.voters == {1, 2, 3, 4} for node in cluster.nodes.values())


@pytest.mark.parametrize(
    "voters",
    [VoterSet((voter(1), voter(2))), VoterSet((voter(1), voter(2), voter(3), voter(4)))],
)
def test_an_upgrade_naming_other_voters_is_refused_and_changes_nothing(voters: VoterSet) -> None:
    cluster, leader = static_cluster()
    end = leader.log.end_offset
    with pytest.raises(VoterChangeRefused) as refused:
        leader.upgrade_kraft_version(voters, cluster.now)
    assert refused.value.error is ErrorCode.INVALID_REQUEST
    assert leader.log.end_offset == end and leader.kraft_version == 0


def test_an_upgrade_twice_is_refused() -> None:
    cluster, leader = static_cluster()
    leader.upgrade_kraft_version(STATIC, cluster.now)
    cluster.settle()
    with pytest.raises(VoterChangeRefused, match="already 1"):
        leader.upgrade_kraft_version(STATIC, cluster.now)


def test_a_truncated_uncommitted_upgrade_is_undone() -> None:
    cluster, leader = static_cluster()
    old = leader.node_id
    leader.upgrade_kraft_version(STATIC, cluster.now)
    cluster.cut = {n for n in cluster.nodes if n != old}  # nobody else gets the batch
    cluster.advance(100)
    assert leader.kraft_version == 1
    cluster.cut = {old}
    cluster.advance(6000)
    successor = cluster.leader()
    assert successor is not None and successor.kraft_version == 0
    cluster.cut = set()
    cluster.advance(3000)
    stale = cluster.nodes[old]
    assert stale.role is Role.FOLLOWER
    assert stale.kraft_version == 0 and stale.latest_voter_change() is None
    with pytest.raises(VoterChangeRefused) as refused:
        cluster.leader().add_voter(voter(4), cluster.now)  # type: ignore[union-attr]
    assert refused.value.error is ErrorCode.UNSUPPORTED_VERSION


def test_a_restart_reads_the_upgrade_back_from_the_log() -> None:
    log = RaftLog()
    log.append(Batch(0, 1, (b"data",), 0))
    log.append(Batch(1, 1, (encode_kraft_version(1), encode_voters(STATIC)), 0, control=True))
    node = RaftNode(RaftConfig(2, frozenset({1, 2, 3})), random.Random(0), 0, log=log)
    assert node.kraft_version == 1 and node.current_voter_set() == STATIC


@pytest.mark.parametrize("payload", [b"KV1", b"KV12", b"KV1x", b"KV1-1"])
def test_a_malformed_kraft_version_record_is_refused(payload: bytes) -> None:
    with pytest.raises(ValueError):
        decode_kraft_version(payload)
