"""Who leads, as the wire says it: in rich-status metadata and in answers."""

from __future__ import annotations

from collections.abc import Mapping

from quorum.server.driver import RaftDriver


def wire_leader(leader_id: int | None) -> int:
    """No leader is -1 on the wire; node 0 is a valid leader (`x or -1` lost it)."""
    return -1 if leader_id is None else leader_id


def leader_hint(
    driver: RaftDriver, addresses: Mapping[int, str], leader_id: int | None
) -> dict[str, str]:
    """The rich-status metadata naming the epoch and the leader, if known."""
    hint = {"epoch": str(driver.epoch), "leader_id": str(wire_leader(leader_id))}
    if leader_id is not None and leader_id in addresses:
        hint["leader_address"] = addresses[leader_id]
    return hint
