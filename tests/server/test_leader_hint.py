"""The not-leader hint names node 0 (a valid id); only an unknown leader is -1."""

from __future__ import annotations

from typing import Any

from quorum.server.leader_hint import leader_hint


class View:
    epoch = 7


def test_node_zero_is_named_as_the_leader() -> None:
    view: Any = View()
    hint = leader_hint(view, {0: "127.0.0.1:9093"}, 0)
    assert hint == {"epoch": "7", "leader_id": "0", "leader_address": "127.0.0.1:9093"}


def test_an_unknown_leader_is_minus_one() -> None:
    view: Any = View()
    assert leader_hint(view, {0: "127.0.0.1:9093"}, None) == {"epoch": "7", "leader_id": "-1"}
