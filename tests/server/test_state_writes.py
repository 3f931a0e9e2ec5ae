"""A vote in a new epoch writes the quorum state once, not twice, and still
before the vote leaves the node."""

import random

from quorum.raft.config import QuorumStateData, RaftConfig
from quorum.raft.effects import (
    AppendBatches,
    FlushLog,
    HighWatermarkChanged,
    PersistQuorumState,
    Role,
    RoleChanged,
    SendMessage,
)
from quorum.raft.messages import VoteRequest, VoteResponse
from quorum.raft.node import RaftNode
from quorum.server.effect_order import commit_last, superseded_state_writes


def test_a_vote_in_a_new_epoch_needs_only_its_last_state_write() -> None:
    voter = RaftNode(
        RaftConfig(2, frozenset({1, 2, 3})), random.Random(2), 0, QuorumStateData(epoch=1)
    )
    voter.poll(0)
    voter.on_message(3, VoteRequest(2, 3, 0, 0, pre_vote=False), 10)
    effects = voter.poll(10)
    writes = [i for i, e in enumerate(effects) if isinstance(e, PersistQuorumState)]
    assert len(writes) == 2  # to the new epoch, then the vote
    kept = [i for i in writes if i not in superseded_state_writes(effects)]
    assert len(kept) == 1
    last = effects[kept[0]]
    assert isinstance(last, PersistQuorumState)
    assert (last.epoch, last.voted_for) == (2, 3)
    reply = next(
        i
        for i, e in enumerate(effects)
        if isinstance(e, SendMessage) and isinstance(e.message, VoteResponse)
    )
    assert kept[0] < reply


def test_a_write_something_left_the_node_after_is_kept() -> None:
    first = PersistQuorumState(2, None, None)
    second = PersistQuorumState(2, 3, None)
    sent = SendMessage(3, VoteResponse(2, True, None, False))
    role = RoleChanged(Role.UNATTACHED, 2, None)
    assert superseded_state_writes([first, role, second, sent]) == {0}
    assert superseded_state_writes([first, sent, second]) == set()
    assert superseded_state_writes([first]) == set()


def test_a_rounds_commit_runs_after_its_messages_at_its_highest_mark() -> None:
    """A leader's round: the high watermark moves (twice), the next batch is
    appended and the followers' fetches answered; the answers go first."""
    answer = SendMessage(2, VoteResponse(3, False, 1, False))  # only its place matters
    effects = [
        HighWatermarkChanged(5),
        AppendBatches(()),
        HighWatermarkChanged(7),
        FlushLog(9, 0),
        answer,
    ]
    assert commit_last(effects) == ({0, 2}, 7)
    assert commit_last([AppendBatches(()), answer]) == (set(), None)


def test_a_round_that_changes_the_role_keeps_the_cores_order() -> None:
    answer = SendMessage(2, VoteResponse(3, False, 1, False))
    effects = [HighWatermarkChanged(5), RoleChanged(Role.RESIGNED, 3, 1), answer]
    assert commit_last(effects) == (set(), None)
