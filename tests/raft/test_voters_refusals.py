"""A follower at kraft.version 1 refuses a fetch answer whose VotersRecord does
not decode: nothing of it is appended, the refusal is reported (the driver logs
and counts it), and the node keeps its role and fetches again."""

from __future__ import annotations

import random

import pytest

from quorum.raft.config import QuorumStateData, RaftConfig
from quorum.raft.effects import AppendBatches, RequestRefused, Role, SendMessage
from quorum.raft.messages import FetchRequest, FetchResponse
from quorum.raft.node import RaftNode
from quorum.raft.records import Batch
from quorum.raft.voters import Voter, VoterSet, encode_voters, malformed_voters_record

GOOD = encode_voters(VoterSet((Voter(1, "d1"), Voter(2, "d2"), Voter(3, "d3"))))


def follower() -> RaftNode:
    config = RaftConfig(2, frozenset({1, 2, 3}), kraft_version=1)
    node = RaftNode(config, random.Random(0), 0, QuorumStateData(1, None, 1))
    node.poll(0)
    return node


@pytest.mark.parametrize(
    "payload",
    [b"VR1", b"VR1[", b'VR1[{"id":"x"}]', b"VR1" + b"[" * 5000 + b"]" * 5000, b"VR1\xff\xfe"],
)
def test_a_malformed_voters_record_from_the_leader_is_refused_and_the_node_keeps_fetching(
    payload: bytes,
) -> None:
    node = follower()
    batches = (
        Batch(0, 1, (b"data",), 0),
        Batch(1, 1, (payload,), 0, control=True),
    )
    node.on_message(1, FetchResponse(1, 1, 2, 0, batches), 10)
    effects = node.poll(10)
    refused = [e for e in effects if isinstance(e, RequestRefused)]
    assert len(refused) == 1 and refused[0].kind == "malformed_record", effects
    assert "VotersRecord at offset 1" in refused[0].reason
    assert not any(isinstance(e, AppendBatches) for e in effects)
    assert node.log.end_offset == 0 and node.high_watermark == 0
    assert node.role is Role.FOLLOWER and node.voters == frozenset({1, 2, 3})

    # The fetch is asked again once the request timeout passes, and a good
    # answer is then taken as usual.
    later = 10 + node.config.request_timeout_ms
    node.on_tick(later)
    sent = [e for e in node.poll(later) if isinstance(e, SendMessage)]
    assert [type(e.message) for e in sent] == [FetchRequest]
    good = (Batch(0, 1, (GOOD,), later, control=True),)
    node.on_message(1, FetchResponse(1, 1, 1, 0, good), later)
    assert node.log.end_offset == 1
    assert any(isinstance(e, AppendBatches) for e in node.poll(later))


def test_well_formed_and_data_batches_pass_the_check() -> None:
    batches = (Batch(0, 1, (b"VR1 not control",), 0), Batch(1, 1, (GOOD,), 0, control=True))
    assert malformed_voters_record(batches) is None
