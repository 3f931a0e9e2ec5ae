"""Scenario tests of the core, driven through a lossless zero-latency cluster."""

import random

import pytest

from quorum.raft.config import QuorumStateData, RaftConfig
from quorum.raft.effects import (
    AppendBatches,
    FlushLog,
    PersistQuorumState,
    Role,
    SendMessage,
    TruncateLog,
)
from quorum.raft.log import RaftLog
from quorum.raft.messages import (
    MAX_EPOCH,
    EndQuorumEpochRequest,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    VoteRequest,
    VoteResponse,
)
from quorum.raft.node import NotLeaderError, RaftNode
from quorum.raft.records import Batch, OffsetAndEpoch, SnapshotId, decode_leader_change
from quorum.sim.instant import InstantCluster

VOTERS = frozenset({1, 2, 3})


def node(
    node_id: int, state: QuorumStateData | None = None, log: RaftLog | None = None
) -> RaftNode:
    return RaftNode(RaftConfig(node_id, VOTERS), random.Random(node_id), 0, state, log)


def sent(effects: list[object], kind: type) -> list[SendMessage]:
    return [e for e in effects if isinstance(e, SendMessage) and isinstance(e.message, kind)]


def test_three_voters_elect_one_leader_and_commit_its_leader_change() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    roles = sorted(n.role.value for n in cluster.nodes.values())
    assert roles == ["follower", "follower", "leader"]
    assert leader.epoch == 1
    first = leader.log.batch_at(0)
    assert first is not None and first.control
    assert decode_leader_change(first.records[0]) == (leader.node_id, VOTERS)
    assert all(n.high_watermark == 1 for n in cluster.nodes.values())


def test_votes_are_persisted_before_they_are_sent() -> None:
    cluster = InstantCluster(voters=3, seed=4)
    cluster.elect()
    granted = 0
    for effects in cluster.effects.values():
        persisted: list[PersistQuorumState] = []
        for effect in effects:
            if isinstance(effect, PersistQuorumState):
                persisted.append(effect)
            elif isinstance(effect, SendMessage) and isinstance(effect.message, VoteResponse):
                response = effect.message
                if response.vote_granted and not response.pre_vote:
                    granted += 1
                    assert persisted, "vote sent before any state was persisted"
                    last = persisted[-1]
                    assert (last.epoch, last.voted_for) == (response.epoch, effect.destination)
    assert granted >= 1


def test_a_voter_grants_one_vote_per_epoch() -> None:
    voter = node(3)
    voter.on_message(1, VoteRequest(1, 1, 0, 0, pre_vote=False), 0)
    voter.on_message(2, VoteRequest(1, 2, 0, 0, pre_vote=False), 0)
    answers = [e.message for e in sent(voter.poll(0), VoteResponse)]
    assert [a.vote_granted for a in answers] == [True, False]
    assert voter.voted_for == 1


def test_a_pre_vote_changes_nothing_on_the_voter() -> None:
    voter = node(3, QuorumStateData(epoch=4))
    voter.poll(0)
    voter.on_message(1, VoteRequest(9, 1, 0, 0, pre_vote=True), 5000)
    effects = voter.poll(5000)
    assert not [e for e in effects if isinstance(e, PersistQuorumState)]
    assert voter.epoch == 4
    assert sent(effects, VoteResponse)[0].message.vote_granted


def test_a_partitioned_voter_does_not_bump_the_epoch_or_disrupt_the_leader() -> None:
    cluster = InstantCluster(voters=3, seed=1)
    leader = cluster.elect()
    epoch = leader.epoch
    isolated = next(i for i in cluster.nodes if i != leader.node_id)
    cluster.cut.add(isolated)
    cluster.advance(10_000)
    assert cluster.nodes[isolated].epoch == epoch
    assert cluster.nodes[isolated].role in (Role.PROSPECTIVE, Role.UNATTACHED, Role.FOLLOWER)
    cluster.cut.clear()
    cluster.advance(3_000)
    assert cluster.leader() is leader and leader.epoch == epoch
    assert cluster.nodes[isolated].role is Role.FOLLOWER


def test_group_commit_makes_one_batch_and_one_flush() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    for i in range(5):
        leader.propose([b"a%d" % i, b"b%d" % i], cluster.now)
    effects = leader.poll(cluster.now)
    appends = [e for e in effects if isinstance(e, AppendBatches)]
    assert len(appends) == 1 and len(appends[0].batches) == 1
    assert len(appends[0].batches[0].records) == 10
    assert len([e for e in effects if isinstance(e, FlushLog)]) == 1


def test_a_proposal_is_never_split_across_batches() -> None:
    """A batch is what survives or dies whole in a crash, so each proposal (one
    atomic metadata change) must sit inside one batch, however large."""
    cluster = InstantCluster(voters=3, max_batch_records=4)
    leader = cluster.elect()
    sizes = [3, 2, 6, 1, 1, 1, 1]
    results = [leader.propose([b"r"] * n, cluster.now) for n in sizes]
    effects = leader.poll(cluster.now)
    batches = [b for e in effects if isinstance(e, AppendBatches) for b in e.batches]
    assert [len(b.records) for b in batches] == [3, 2, 6, 4]
    for result in results:
        first = leader.log.batch_at(result.first_offset)
        last = leader.log.batch_at(result.last_offset)
        assert first is not None and first is last
    assert len([e for e in effects if isinstance(e, FlushLog)]) == 1


def test_proposals_wait_while_a_batch_is_uncommitted_then_leave_together() -> None:
    """Group commit across the replication round trip: with nothing in flight a
    proposal is sealed at once; while a batch is uncommitted, later proposals
    wait and leave as one batch when it commits, or as soon as they fill one."""
    cluster = InstantCluster(voters=3, max_batch_records=4)
    leader = cluster.elect()
    me = leader.node_id

    def sealed() -> list[int]:
        effects, cluster.effects[me] = cluster.effects[me], []
        return [len(b.records) for e in effects if isinstance(e, AppendBatches) for b in e.batches]

    sealed()
    first = leader.propose([b"a"], cluster.now)
    cluster.process(me)
    assert sealed() == [1]
    waiting = [leader.propose([b"b%d" % i], cluster.now) for i in range(3)]
    for _ in waiting:
        cluster.process(me)
    assert sealed() == [] and leader.high_watermark <= first.last_offset
    cluster.settle()
    assert sealed() == [3]
    assert leader.high_watermark > waiting[-1].last_offset
    leader.propose([b"c"], cluster.now)
    cluster.process(me)
    leader.propose([b"d"] * 4, cluster.now)
    cluster.process(me)
    assert sealed() == [1, 4]  # a full batch does not wait


def test_proposals_commit_on_every_voter() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    result = leader.propose([b"x", b"y"], cluster.now)
    cluster.settle()
    # Followers learn a high watermark with no new records after the linger.
    cluster.advance(leader.config.high_watermark_linger_ms)
    for n in cluster.nodes.values():
        assert n.high_watermark == result.last_offset + 1
        batch = n.log.batch_at(result.first_offset)
        assert batch is not None and batch.records == (b"x", b"y")


def test_followers_refuse_proposals() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    with pytest.raises(NotLeaderError) as err:
        follower.propose([b"x"], cluster.now)
    assert err.value.leader_id == leader.node_id


def test_high_watermark_waits_for_a_majority() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    before = leader.high_watermark
    for i in cluster.nodes:
        if i != leader.node_id:
            cluster.cut.add(i)
    leader.propose([b"x"], cluster.now)
    cluster.settle()
    assert leader.high_watermark == before


def test_graceful_resignation_elects_the_successor_without_waiting() -> None:
    cluster = InstantCluster(voters=3, seed=2)
    leader = cluster.elect()
    epoch = leader.epoch
    leader.resign(cluster.now)
    effects = leader.poll(cluster.now)
    ends = sent(effects, EndQuorumEpochRequest)
    assert len(ends) == 2 and ends[0].message.preferred_successors
    for e in ends:
        cluster.nodes[e.destination].on_message(leader.node_id, e.message, cluster.now)
        cluster.process(e.destination)
    cluster.settle()
    new = cluster.leader()
    assert new is not None and new is not leader and new.epoch == epoch + 1
    assert new.node_id == ends[0].message.preferred_successors[0]


def test_check_quorum_makes_an_isolated_leader_resign() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    for i in cluster.nodes:
        if i != leader.node_id:
            cluster.cut.add(i)
    cluster.advance(3_000)
    assert leader.role is not Role.LEADER


def test_observers_replicate_but_never_vote_or_count() -> None:
    cluster = InstantCluster(voters=3, observers=1)
    leader = cluster.elect()
    cluster.advance(500)
    observer = cluster.nodes[4]
    assert observer.role is Role.FOLLOWER and observer.leader_id == leader.node_id
    result = leader.propose([b"x"], cluster.now)
    cluster.settle()
    cluster.advance(leader.config.high_watermark_linger_ms)
    assert observer.high_watermark == result.last_offset + 1
    assert not any(
        isinstance(e, SendMessage) and isinstance(e.message, VoteRequest)
        for e in cluster.effects[4]
    )
    # Without the observer a majority of voters still commits.
    cluster.cut.add(4)
    result = leader.propose([b"y"], cluster.now)
    cluster.settle()
    assert leader.high_watermark == result.last_offset + 1


def test_follower_truncates_to_the_diverging_epoch_then_fetches_from_there() -> None:
    log = RaftLog()
    log.append(Batch(0, 1, (b"a", b"b"), 0))
    log.append(Batch(2, 1, (b"stale",), 0))
    follower = node(2, QuorumStateData(epoch=2, leader_id=1), log)
    fetch = sent(follower.poll(0), FetchRequest)[0].message
    assert (fetch.fetch_offset, fetch.last_fetched_epoch) == (3, 1)
    follower.on_message(1, FetchResponse(2, 1, 0, 0, diverging_epoch=OffsetAndEpoch(2, 1)), 1)
    effects = follower.poll(1)
    assert TruncateLog(2) in effects
    refetch = sent(effects, FetchRequest)[0].message
    assert (refetch.fetch_offset, refetch.last_fetched_epoch) == (2, 1)


def test_leader_answers_diverging_epoch_and_snapshot_id() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    for i in range(3):
        leader.propose([b"x%d" % i], cluster.now)
        cluster.settle()
    me, epoch = leader.node_id, leader.epoch
    follower = next(i for i in cluster.nodes if i != me)
    # A follower claiming entries of an epoch the leader never had beyond offset 1.
    leader.on_message(follower, FetchRequest(follower, epoch, 3, epoch - 1 or 0, 0), cluster.now)
    answer = sent(leader.poll(cluster.now), FetchResponse)[0].message
    assert answer.diverging_epoch == OffsetAndEpoch(0, 0)
    # Below the log start, the leader names its snapshot.
    leader.on_snapshot_taken(SnapshotId(2, epoch))
    leader.on_message(follower, FetchRequest(follower, epoch, 0, 0, 0), cluster.now)
    answer = sent(leader.poll(cluster.now), FetchResponse)[0].message
    assert answer.snapshot_id == SnapshotId(2, epoch)


def test_stale_epoch_fetch_is_fenced() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    leader.on_message(2, FetchRequest(2, leader.epoch - 1, 0, 0, 0), cluster.now)
    answer = sent(leader.poll(cluster.now), FetchResponse)[0].message
    assert answer.error is ErrorCode.FENCED_LEADER_EPOCH
    assert answer.epoch == leader.epoch and answer.leader_id == leader.node_id


def test_restarted_leader_resumes_as_resigned() -> None:
    restarted = node(1, QuorumStateData(epoch=3, voted_for=1, leader_id=1))
    assert restarted.role is Role.RESIGNED
    with pytest.raises(NotLeaderError) as refused:
        restarted.propose([b"x"], 0)
    assert refused.value.leader_id is None  # it may not name itself: it cannot lead


def test_a_high_watermark_alone_lingers_so_the_next_records_travel_with_it() -> None:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    linger = leader.config.high_watermark_linger_ms
    first = leader.propose([b"a"], cluster.now)
    cluster.settle()
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    assert leader.high_watermark == first.last_offset + 1
    assert follower.high_watermark <= first.last_offset  # not told yet
    second = leader.propose([b"b"], cluster.now)  # arrives within the linger
    cluster.settle()
    cluster.advance(linger)
    assert follower.high_watermark == second.last_offset + 1
    assert follower.log.batch_at(second.first_offset) is not None


@pytest.mark.parametrize("seed", range(20))
def test_survivors_of_a_dead_leader_elect_one_successor_without_splitting(seed: int) -> None:
    """Both followers see the connection refused at the same moment; their pre-votes
    are staggered by rank so one of them wins at the first try (epoch + 1), long
    before the fetch timeout or even one election timeout."""
    cluster = InstantCluster(voters=3, seed=seed)
    old = cluster.elect()
    epoch = old.epoch
    cluster.cut.add(old.node_id)
    survivors = [n for i, n in cluster.nodes.items() if i != old.node_id]
    for survivor in survivors:
        survivor.on_leader_unreachable(cluster.now)
    cluster.advance(old.config.election_timeout_ms // 5, step=1)
    successor = cluster.leader()
    assert successor is not None and successor is not old
    assert successor.epoch == epoch + 1
    assert all(n.leader_id == successor.node_id for n in survivors)


@pytest.mark.parametrize("seed", range(10))
def test_a_silent_leader_is_replaced_before_the_fetch_timeout(seed: int) -> None:
    """Partitioned, not refused: nothing tells the followers. Each suspects the
    leader once a fetch stays unanswered for the request timeout (longer than a
    live leader parks a fetch), so they elect a successor about a second after
    the cut, not after the whole fetch timeout."""
    cluster = InstantCluster(voters=3, seed=seed)
    old = cluster.elect()
    epoch, config = old.epoch, old.config
    cluster.cut.add(old.node_id)
    cut_at = cluster.now
    while cluster.leader() in (None, old) and cluster.now - cut_at < config.fetch_timeout_ms:
        cluster.advance(1, step=1)
    successor = cluster.leader()
    assert successor is not None and successor is not old and successor.epoch == epoch + 1
    assert cluster.now - cut_at <= config.request_timeout_ms + config.election_timeout_ms // 5


def test_a_leader_that_answers_is_never_suspected() -> None:
    """An idle leader parks each voter's fetch for `voter_fetch_wait_ms`, well
    inside the followers' request timeout: a minute of idling elects nobody."""
    cluster = InstantCluster(voters=3, seed=4)
    leader = cluster.elect()
    epoch = leader.epoch
    cluster.advance(60_000, step=5)
    assert cluster.leader() is leader and leader.epoch == epoch
    assert all(n.role is Role.FOLLOWER for n in cluster.nodes.values() if n is not leader)


def pre_vote_answer(voter: RaftNode, candidate: int, last_offset: int, now: int) -> bool:
    voter.on_message(
        candidate,
        VoteRequest(2, candidate, 1 if last_offset else 0, last_offset, pre_vote=True),
        now,
    )
    (answer,) = sent(voter.poll(now), VoteResponse)
    return answer.message.vote_granted


def test_a_follower_grants_pre_votes_only_once_its_own_fetch_is_nearly_overdue() -> None:
    """Its fetch (sent at 0) times out at `request_timeout_ms`; within one park
    of that it will suspect the leader itself, so it grants a peer that did."""
    follower = node(3, QuorumStateData(1, None, 1))
    config = follower.config
    overdue = config.request_timeout_ms - config.voter_fetch_wait_ms
    assert not pre_vote_answer(follower, 2, 0, overdue - 1)
    assert pre_vote_answer(follower, 2, 0, overdue)


def test_two_voters_pre_voting_at_once_do_not_both_win() -> None:
    """Both lost the leader at the same moment and pre-vote together: between
    equal logs only the lower id gets the other's pre-vote, so they cannot both
    become candidates and split the vote."""
    two, three = node(2, QuorumStateData(1, None, 1)), node(3, QuorumStateData(1, None, 1))
    now = 0
    for voter in (two, three):
        while voter.role is not Role.PROSPECTIVE:
            now = max(now, voter.next_deadline())
            voter.on_tick(voter.next_deadline())
        voter.poll(now)
    assert now < min(two.next_deadline(), three.next_deadline())  # both still prospective
    assert pre_vote_answer(three, 2, 0, now)
    assert not pre_vote_answer(two, 3, 0, now)


def test_a_voter_asked_by_one_behind_it_runs_at_once() -> None:
    """A pre-vote from a voter whose log is behind is refused; if this follower
    too has stopped hearing the leader, it pre-votes now (it can win the other's
    vote) instead of after its stagger."""
    log = RaftLog()
    log.append(Batch(0, 1, (b"x",), 0))
    follower = node(3, QuorumStateData(1, None, 1), log)
    config = follower.config
    assert not pre_vote_answer(follower, 2, 0, 10)
    assert follower.next_deadline() > 10  # hears its leader: no hurry
    overdue = config.request_timeout_ms - config.voter_fetch_wait_ms
    assert not pre_vote_answer(follower, 2, 0, overdue)
    assert follower.next_deadline() <= overdue
    follower.on_tick(overdue)
    assert follower.role is Role.PROSPECTIVE


def test_a_vote_cast_on_a_forged_request_does_not_carry_a_stale_candidate() -> None:
    """A forged Vote claims voter 2's name and a log as good as ours: the vote
    binds for the epoch. The real voter 2, behind us, asking in that epoch does
    not get it (the simulator's forger found seeds where it was elected and cut
    committed entries)."""
    log = RaftLog()
    log.append(Batch(0, 1, (b"x",), 0))
    voter = node(3, QuorumStateData(1, None, None), log)
    voter.on_message(2, VoteRequest(2, 2, 1, 1, pre_vote=False), 3000)
    assert voter.voted_for == 2
    voter.poll(3000)
    voter.on_message(2, VoteRequest(2, 2, 0, 0, pre_vote=False), 3001)
    (answer,) = sent(voter.poll(3001), VoteResponse)
    assert not answer.message.vote_granted
    voter.on_message(2, VoteRequest(2, 2, 1, 1, pre_vote=False), 3002)
    (answer,) = sent(voter.poll(3002), VoteResponse)
    assert answer.message.vote_granted


def test_an_unreachable_report_alone_does_not_unseat_a_leader_others_still_hear() -> None:
    cluster = InstantCluster(voters=3, seed=2)
    leader = cluster.elect()
    epoch = leader.epoch
    follower = next(n for i, n in cluster.nodes.items() if i != leader.node_id)
    follower.on_leader_unreachable(cluster.now)
    cluster.advance(3_000)
    assert cluster.leader() is leader and leader.epoch == epoch
    assert follower.role is Role.FOLLOWER and follower.leader_id == leader.node_id


def test_a_far_future_fetch_is_answered_and_moves_no_epoch() -> None:
    """Fetch is leader-only: any client can send one, so a higher epoch in it is
    UNKNOWN_LEADER_EPOCH and nothing more (issue 17: one Fetch wedged the quorum)."""
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    follower = next(n for n in cluster.nodes.values() if n is not leader)
    for target in (leader, follower):
        before = (target.role, target.epoch, target.leader_id)
        target.on_message(4242, FetchRequest(4242, 10**9, 0, 0, 0), 0)
        effects = target.poll(0)
        answers = [e.message for e in sent(effects, FetchResponse)]
        assert [a.error for a in answers] == [ErrorCode.UNKNOWN_LEADER_EPOCH]
        assert not [e for e in effects if isinstance(e, PersistQuorumState)]
        assert (target.role, target.epoch, target.leader_id) == before


def test_no_election_starts_at_the_last_epoch_that_fits_the_wire() -> None:
    voter = node(1, QuorumStateData(MAX_EPOCH, None, None))
    for now in (0, 5_000, 50_000):
        voter.on_tick(now)
        effects = voter.poll(now)
        assert voter.epoch == MAX_EPOCH
        assert voter.role is Role.UNATTACHED
        assert not sent(effects, VoteRequest)
    with pytest.raises(AssertionError, match="MAX_EPOCH"):
        voter.on_message(2, VoteRequest(MAX_EPOCH + 1, 2, 0, 0, pre_vote=False), 0)


def test_a_vote_survives_learning_of_a_leader_in_the_same_epoch() -> None:
    """A FetchResponse naming a leader in the epoch this node voted in (even a
    forged one naming the node itself) must not clear the vote: it would let the
    node vote twice in one epoch."""
    voter = node(3)
    voter.on_message(1, VoteRequest(1, 1, 0, 0, pre_vote=False), 0)
    voter.poll(0)
    assert voter.voted_for == 1
    voter.on_message(2, FetchResponse(1, 3, 0, 0), 0)
    voter.poll(0)
    assert (voter.epoch, voter.voted_for) == (1, 1)
    voter.on_message(2, VoteRequest(1, 2, 0, 0, pre_vote=False), 0)
    answers = [e.message for e in sent(voter.poll(0), VoteResponse)]
    assert [a.vote_granted for a in answers] == [False]
