"""The voter set in the log (KIP-853): VotersRecord, its history, and the core's rules."""

from __future__ import annotations

import random

import pytest
from dynamic_voters import committed, dynamic_cluster, voter

from quorum.raft.config import QuorumStateData, RaftConfig
from quorum.raft.effects import FetchSnapshot, Role
from quorum.raft.log import RaftLog
from quorum.raft.messages import ErrorCode, FetchResponse, VoteResponse
from quorum.raft.node import NotLeaderError, RaftNode
from quorum.raft.records import Batch, SnapshotId
from quorum.raft.voters import (
    Voter,
    VoterChangeRefused,
    VoterSet,
    VoterSetHistory,
    decode_voters,
    encode_voters,
    is_voters_record,
)
from quorum.sim.instant import InstantCluster

THREE = VoterSet((Voter(1, "d1"), Voter(2, "d2"), Voter(3, "d3")))


# ----------------------------------------------------------------- the record


def test_a_voters_record_round_trips_and_encodes_canonically() -> None:
    voters = VoterSet((voter(2), Voter(1, "x", (), 0, 1)))
    payload = encode_voters(voters)
    assert is_voters_record(payload)
    decoded = decode_voters(payload)
    assert decoded.ids == {1, 2}
    assert [v.voter_id for v in decoded.voters] == [1, 2]
    assert decoded.voter(2) == voter(2)
    assert encode_voters(decoded) == encode_voters(VoterSet(decoded.voters))


@pytest.mark.parametrize(
    "payload",
    [b"LC1whatever", b"VR1", b"VR1[]", b"VR1{}", b'VR1[{"id":1}]', b"VR1[1,2]"],
)
def test_a_malformed_voters_record_is_refused(payload: bytes) -> None:
    with pytest.raises(ValueError):
        decode_voters(payload)


def test_a_voters_record_with_a_duplicate_id_is_refused() -> None:
    twice = encode_voters(VoterSet((Voter(1, "a"), Voter(1, "b"))))
    with pytest.raises(ValueError, match="distinct"):
        decode_voters(twice)


def test_the_history_follows_the_log() -> None:
    history = VoterSetHistory()
    small = THREE.without_voter(3)
    history.add(5, THREE)
    history.add(9, small)
    assert history.latest() == (9, small)
    assert history.before(9) == (5, THREE)
    assert history.before(5) is None
    history.truncate(9)  # the uncommitted change is cut: back to the set before it
    assert history.latest() == (5, THREE)
    history.add(12, small)
    history.prune_below(20)  # a snapshot at 20 keeps the newest set below it
    assert len(history) == 1 and history.latest() == (12, small)
    with pytest.raises(ValueError):
        history.add(12, THREE)


# ------------------------------------------------------------- kraft.version 0


def test_with_kraft_version_0_the_voters_stay_static() -> None:
    cluster = InstantCluster(voters=3, observers=1)
    leader = cluster.elect()
    cluster.advance(200)
    end = leader.log.end_offset
    with pytest.raises(VoterChangeRefused) as refused:
        leader.add_voter(voter(4), cluster.now)
    assert refused.value.error is ErrorCode.UNSUPPORTED_VERSION
    assert leader.log.end_offset == end
    # A VotersRecord in the log means nothing at kraft.version 0.
    log = RaftLog()
    log.append(Batch(0, 1, (encode_voters(THREE.without_voter(3)),), 0, control=True))
    node = RaftNode(RaftConfig(3, frozenset({1, 2, 3})), random.Random(0), 0, log=log)
    assert node.voters == {1, 2, 3} and node.is_voter


# ------------------------------------------------------------- kraft.version 1


def test_adding_a_caught_up_observer_makes_it_a_voter_everywhere() -> None:
    cluster, leader = dynamic_cluster()
    result = leader.add_voter(voter(4), cluster.now)
    assert leader.voters == {1, 2, 3, 4}  # uncommitted, already in force on the leader
    assert leader.voter_change_pending()
    cluster.settle()
    assert committed(leader, result.last_offset)
    assert not leader.voter_change_pending()
    for node in cluster.nodes.values():
        assert node.voters == {1, 2, 3, 4}
    assert cluster.nodes[4].is_voter
    # The new voter takes part in elections: cut the leader, one of the rest wins.
    cluster.cut = {leader.node_id}
    cluster.advance(6000)
    successor = cluster.leader()
    assert successor is not None and successor.epoch > leader.epoch


def test_a_change_is_committed_by_a_majority_of_the_new_set() -> None:
    cluster, leader = dynamic_cluster()
    others = sorted(set(cluster.nodes) - {leader.node_id, 4})
    result = leader.add_voter(voter(4), cluster.now)
    # The leader and one old voter are a majority of {1,2,3}, not of {1,2,3,4}.
    cluster.cut = {4, others[1]}
    cluster.advance(100)
    assert not committed(leader, result.last_offset)
    cluster.cut = set()
    cluster.advance(1500)  # their lost fetches are sent again after the request timeout
    assert committed(leader, result.last_offset)


def test_a_second_change_while_one_is_uncommitted_is_refused() -> None:
    cluster, leader = dynamic_cluster(observers=2)
    follower = next(i for i in (1, 2, 3) if i != leader.node_id)
    leader.add_voter(voter(4), cluster.now)
    end = leader.log.end_offset
    for attempt in (
        lambda: leader.add_voter(voter(5), cluster.now),
        lambda: leader.remove_voter(follower, None, cluster.now),
    ):
        with pytest.raises(VoterChangeRefused) as refused:
            attempt()
        assert refused.value.error is ErrorCode.REQUEST_TIMED_OUT
    assert leader.log.end_offset == end and leader.voters == {1, 2, 3, 4}
    cluster.settle()
    leader.add_voter(voter(5), cluster.now)  # once committed, the next one may go
    cluster.settle()
    assert all(n.voters == {1, 2, 3, 4, 5} for n in cluster.nodes.values())


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda leader, now: leader.add_voter(voter(2), now), ErrorCode.DUPLICATE_VOTER),
        (lambda leader, now: leader.remove_voter(9, None, now), ErrorCode.VOTER_NOT_FOUND),
        (
            lambda leader, now: leader.add_voter(Voter(4, "d4", (), 2, 3), now),
            ErrorCode.INVALID_REQUEST,
        ),
        (lambda leader, now: leader.add_voter(voter(7), now), ErrorCode.REQUEST_TIMED_OUT),
    ],
    ids=["duplicate id", "unknown voter", "kraft.version range", "not caught up"],
)
def test_bad_voter_changes_are_refused_and_change_nothing(change: object, error: ErrorCode) -> None:
    cluster, leader = dynamic_cluster()
    end = leader.log.end_offset
    with pytest.raises(VoterChangeRefused) as refused:
        change(leader, cluster.now)  # type: ignore[operator]
    assert refused.value.error is error
    assert leader.log.end_offset == end and leader.voters == {1, 2, 3}


def test_removing_with_the_wrong_directory_id_or_the_last_voter_is_refused() -> None:
    cluster, leader = dynamic_cluster(voters=2, observers=0)
    other = next(i for i in (1, 2) if i != leader.node_id)
    # The static set knows no directory ids: remove the other voter, then add it
    # back with its directory id.
    leader.remove_voter(other, None, cluster.now)
    cluster.settle()
    with pytest.raises(VoterChangeRefused) as last:
        leader.remove_voter(leader.node_id, None, cluster.now)
    assert last.value.error is ErrorCode.INVALID_REQUEST
    cluster.advance(200)
    leader.add_voter(voter(other), cluster.now)
    cluster.settle()
    with pytest.raises(VoterChangeRefused) as wrong:
        leader.remove_voter(other, "another-disk", cluster.now)
    assert wrong.value.error is ErrorCode.VOTER_NOT_FOUND
    leader.remove_voter(other, f"d{other}", cluster.now)


def test_only_the_leader_changes_voters() -> None:
    cluster, leader = dynamic_cluster()
    follower = cluster.nodes[next(i for i in (1, 2, 3) if i != leader.node_id)]
    with pytest.raises(NotLeaderError) as refused:
        follower.add_voter(voter(4), cluster.now)
    assert refused.value.leader_id == leader.node_id


def test_a_removed_leader_leads_until_the_change_commits_then_resigns() -> None:
    cluster, leader = dynamic_cluster(observers=0)
    me = leader.node_id
    result = leader.remove_voter(me, None, cluster.now)
    assert leader.role is Role.LEADER and not leader.is_voter
    assert not committed(leader, result.last_offset)
    cluster.settle()
    # Committed by the two remaining voters, not counting the leader itself.
    assert leader.high_watermark > result.last_offset
    assert leader.role is Role.RESIGNED
    cluster.advance(6000)
    successor = cluster.leader()
    assert successor is not None and successor.node_id != me
    assert successor.voters == frozenset({1, 2, 3}) - {me}
    # The old leader now follows as an observer.
    assert cluster.nodes[me].role is Role.FOLLOWER and not cluster.nodes[me].is_voter
    before = successor.high_watermark
    successor.propose([b"after"], cluster.now)
    cluster.settle()
    assert successor.high_watermark > before
    cluster.advance(100)  # the observer learns the high watermark on its next fetch
    assert cluster.nodes[me].high_watermark == successor.high_watermark


def test_truncating_an_uncommitted_change_reverts_to_the_previous_set() -> None:
    cluster, leader = dynamic_cluster()
    old = leader.node_id
    leader.add_voter(voter(4), cluster.now)
    cluster.cut = {n for n in cluster.nodes if n != old}  # nobody else gets the record
    cluster.advance(100)
    assert leader.voters == {1, 2, 3, 4}
    cluster.cut = {old}
    cluster.advance(6000)
    successor = cluster.leader()
    assert successor is not None and successor.voters == {1, 2, 3}
    cluster.cut = set()
    cluster.advance(3000)
    stale = cluster.nodes[old]
    assert stale.role is Role.FOLLOWER
    assert stale.voters == {1, 2, 3}  # the record was cut from its log
    assert stale.latest_voter_change() is None


def test_a_snapshot_carries_the_voter_set() -> None:
    cluster, leader = dynamic_cluster()
    result = leader.add_voter(voter(4), cluster.now)
    cluster.settle()
    leader.propose([b"x"], cluster.now)
    cluster.settle()
    end = leader.high_watermark
    epoch = leader.log.epoch_at(end - 1)
    assert epoch is not None
    snapshot = SnapshotId(end, epoch)
    voters = leader.voter_set_at(end)
    assert voters is not None and voters.ids == {1, 2, 3, 4}
    assert leader.voter_set_at(result.last_offset) is None  # below the record: static
    leader.on_snapshot_taken(snapshot)
    assert leader.voters == {1, 2, 3, 4}
    # A restart from the snapshot alone (empty log after it) keeps the set.
    config = RaftConfig(4, frozenset({1, 2, 3}), kraft_version=1)
    restarted = RaftNode(config, random.Random(0), 0, None, RaftLog(snapshot), voters)
    assert restarted.voters == {1, 2, 3, 4} and restarted.is_voter
    # And a follower that installs it from the leader does too.
    fresh = RaftNode(config, random.Random(0), 0)
    assert not fresh.is_voter
    fresh.on_snapshot_installed(snapshot, 0, voters)
    assert fresh.voters == {1, 2, 3, 4} and fresh.is_voter


def test_a_node_whose_own_removal_is_uncommitted_still_runs_and_finishes_it() -> None:
    """The removing leader may be the only node holding its removal: the other
    voter's log is behind, so only the removed node can win, counting the votes
    of its new set alone (without this the quorum wedged in the simulator)."""
    cluster, leader = dynamic_cluster(voters=2, observers=0)
    me, other = leader.node_id, 3 - leader.node_id
    cluster.cut = {other}
    result = leader.remove_voter(me, None, cluster.now)
    cluster.advance(5000)  # check-quorum: the leader resigns, the removal uncommitted
    removed = cluster.nodes[me]
    assert removed.role is not Role.LEADER and not committed(removed, result.last_offset)
    assert not removed.is_voter and removed.may_campaign
    cluster.cut = set()
    cluster.advance(10_000)
    successor = cluster.leader()
    assert successor is not None and successor.node_id == other
    assert successor.voters == {other} and committed(successor, result.last_offset)
    assert not removed.may_campaign and removed.role is Role.FOLLOWER


def test_a_snapshot_that_removes_a_running_node_ends_its_election() -> None:
    """A snapshot download outlives role changes: one that arrives while the node
    runs for election, carrying a voter set without it, ends the election."""
    config = RaftConfig(3, frozenset({1, 2, 3}), kraft_version=1)
    node = RaftNode(config, random.Random(0), 0, QuorumStateData(1, None, 1))
    node.on_message(1, FetchResponse(1, 1, 10, 10, snapshot_id=SnapshotId(10, 1)), 1)
    assert any(isinstance(e, FetchSnapshot) for e in node.poll(1))
    node.on_tick(node.next_deadline())  # the leader went silent: pre-vote
    assert node.role is Role.PROSPECTIVE
    now = node.next_deadline() - 1
    node.on_snapshot_installed(SnapshotId(10, 1), now, THREE.without_voter(3))
    assert not node.is_voter and not node.may_campaign
    node.on_message(1, VoteResponse(1, True, None, pre_vote=True), now)
    node.on_message(2, VoteResponse(1, True, None, pre_vote=True), now)
    assert node.role is Role.PROSPECTIVE  # won nothing
    node.on_tick(node.next_deadline())
    assert node.role is Role.UNATTACHED and node.epoch == 1
