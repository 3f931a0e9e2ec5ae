"""KIP-853's replica keys (voter id and directory id) in the core, and
UpdateRaftVoter: a replaced disk under a voter's id is not that voter, and only
a voter itself, on its own directory, may change its entry."""

from __future__ import annotations

import pytest
from dynamic_voters import committed, dynamic_cluster, voter

from quorum.raft.messages import ErrorCode, FetchRequest
from quorum.raft.node import RaftNode
from quorum.raft.voters import Endpoint, Voter, VoterChangeRefused
from quorum.sim.instant import InstantCluster


def with_directory(cluster: InstantCluster, leader: RaftNode) -> int:
    """A follower whose entry names its directory (`d<id>`): removed and added
    back with it (the static set names none). Returns its id."""
    node = min(i for i in (1, 2, 3) if i != leader.node_id)
    leader.remove_voter(node, None, cluster.now)
    cluster.settle()
    cluster.advance(200)
    leader.add_voter(voter(node), cluster.now)
    cluster.settle()
    assert leader.current_voter_set().voter(node) == voter(node)
    return node


def fetch_from(leader: RaftNode, node: int, directory: str, now: int) -> None:
    end = leader.log.end_offset_and_epoch()
    request = FetchRequest(node, leader.epoch, end.offset, end.epoch, 0, directory)
    leader.on_message(node, request, now)
    leader.poll(now)


def test_a_fetch_from_another_directory_does_not_count_for_the_voter() -> None:
    cluster, leader = dynamic_cluster(observers=0)
    node = with_directory(cluster, leader)
    third = next(i for i in (1, 2, 3) if i not in (leader.node_id, node))
    assert leader.is_voter_key(node, f"d{node}") and leader.is_voter_key(node, "")
    assert not leader.is_voter_key(node, "a-new-disk")
    cluster.cut = {node, third}
    result = leader.propose([b"x"], cluster.now)
    cluster.advance(100)
    fetch_from(leader, node, "a-new-disk", cluster.now)  # holds the whole log
    assert not committed(leader, result.last_offset)
    fetch_from(leader, node, f"d{node}", cluster.now)
    assert committed(leader, result.last_offset)


def test_a_voter_updates_its_endpoint_and_only_its_own_entry() -> None:
    cluster, leader = dynamic_cluster(observers=0)
    node = with_directory(cluster, leader)
    moved = Voter(node, f"d{node}", (Endpoint("CONTROLLER", "10.0.0.7", 19093),))
    end = leader.log.end_offset
    for bad, error in (
        (Voter(node, "another-disk", moved.endpoints), ErrorCode.VOTER_NOT_FOUND),
        (Voter(9, "d9", moved.endpoints), ErrorCode.VOTER_NOT_FOUND),
        (Voter(node, f"d{node}", moved.endpoints, 0, 0), ErrorCode.INVALID_REQUEST),
    ):
        with pytest.raises(VoterChangeRefused) as refused:
            leader.update_voter(bad, cluster.now)
        assert refused.value.error is error
    assert leader.log.end_offset == end
    assert leader.update_voter(voter(node), cluster.now) is None  # nothing to change
    result = leader.update_voter(moved, cluster.now)
    assert result is not None
    with pytest.raises(VoterChangeRefused) as pending:
        leader.update_voter(voter(node), cluster.now)
    assert pending.value.error is ErrorCode.REQUEST_TIMED_OUT
    cluster.settle()
    assert committed(leader, result.last_offset)
    for replica in cluster.nodes.values():
        assert replica.current_voter_set().voter(node) == moved
        assert replica.voters == {1, 2, 3}
