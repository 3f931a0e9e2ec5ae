"""An observer that knows no voter (kraft.version 1, formatted without a voter
set, given only `controller.quorum.bootstrap.servers`) asks the bootstrap
servers who leads, then follows the leader they name."""

from __future__ import annotations

import random

from quorum.raft.config import RaftConfig
from quorum.raft.effects import Role, SendMessage
from quorum.raft.messages import ErrorCode, FetchRequest, FetchResponse
from quorum.raft.node import RaftNode

BOOTSTRAP = frozenset({-2, -3, -4})


def observer(bootstrap: frozenset[int] = BOOTSTRAP) -> RaftNode:
    config = RaftConfig(4, frozenset(), kraft_version=1, bootstrap_ids=bootstrap)
    node = RaftNode(config, random.Random(7), 0)
    node.poll(0)
    return node


def sent(node: RaftNode, now: int) -> list[SendMessage]:
    return [e for e in node.poll(now) if isinstance(e, SendMessage)]


def test_an_observer_without_voters_asks_the_bootstrap_servers_then_follows_the_leader() -> None:
    node = observer()
    assert node.voters == frozenset() and not node.may_campaign
    now = node.next_deadline()
    node.on_tick(now)
    asked = sent(node, now)
    assert len(asked) == 1 and asked[0].destination in BOOTSTRAP
    assert isinstance(asked[0].message, FetchRequest)

    # A bootstrap server that does not lead names the leader (epoch 5, node 1).
    answer = FetchResponse(5, 1, 0, 0, error=ErrorCode.NOT_LEADER_OR_FOLLOWER)
    node.on_message(asked[0].destination, answer, now + 1)
    assert (node.role, node.epoch, node.leader_id) == (Role.FOLLOWER, 5, 1)
    fetches = sent(node, now + 1)
    assert [(m.destination, type(m.message)) for m in fetches] == [(1, FetchRequest)]
    assert node.voters == frozenset()  # still no voter: it never votes


def test_every_bootstrap_server_is_asked_in_turn_over_time() -> None:
    node = observer()
    asked: set[int] = set()
    now = 0
    for _ in range(40):
        now = node.next_deadline()
        node.on_tick(now)
        asked |= {m.destination for m in sent(node, now)}
    assert asked == BOOTSTRAP


def test_an_observer_with_nobody_to_ask_waits_without_sending() -> None:
    node = observer(frozenset())
    now = node.next_deadline()
    node.on_tick(now)
    assert sent(node, now) == []
    assert node.next_deadline() > now and node.role is Role.UNATTACHED
