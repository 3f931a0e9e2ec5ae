"""The not-leader hint names node 0 (a valid id); only an unknown leader is -1;
with kraft.version 1 the address is the voter set's (a voter moved at runtime),
also over the static entry controller.quorum.voters still gives it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from quorum.raft.voters import Endpoint, Voter, VoterSet
from quorum.server.leader_hint import leader_hint
from quorum.server.voter_addresses import VoterAddresses


class View:
    epoch = 7
    core = SimpleNamespace(kraft_version=0)


def test_node_zero_is_named_as_the_leader() -> None:
    view: Any = View()
    hint = leader_hint(view, {0: "127.0.0.1:9093"}, 0)
    assert hint == {"epoch": "7", "leader_id": "0", "leader_address": "127.0.0.1:9093"}


def test_an_unknown_leader_is_minus_one() -> None:
    view: Any = View()
    assert leader_hint(view, {0: "127.0.0.1:9093"}, None) == {"epoch": "7", "leader_id": "-1"}


def test_the_voter_set_names_where_a_voter_listens_now() -> None:
    moved = VoterSet((Voter(0, "d0", (Endpoint("CONTROLLER", "10.0.0.9", 9999),)), Voter(1, "d1")))
    view: Any = View()
    view.core = SimpleNamespace(kraft_version=1, current_voter_set=lambda: moved)
    static = {0: "127.0.0.1:9093", 1: "127.0.0.1:9094"}
    assert leader_hint(view, static, 0)["leader_address"] == "10.0.0.9:9999"
    assert leader_hint(view, static, 1)["leader_address"] == "127.0.0.1:9094"
    assert dict(VoterAddresses(static, view.core.current_voter_set)) == {
        0: "10.0.0.9:9999",
        1: "127.0.0.1:9094",
    }
    # The servicers' hints go through VoterAddresses alone: the move wins there too.
    view.core.kraft_version = 0  # the voter_address shortcut off
    assert leader_hint(view, VoterAddresses(static, lambda: moved), 0)["leader_address"] == (
        "10.0.0.9:9999"
    )
