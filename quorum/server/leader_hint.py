"""Who leads, as the wire says it: in rich-status metadata and in answers."""

from __future__ import annotations

from collections.abc import Mapping

from quorum.server.driver import RaftDriver
from quorum.server.voter_addresses import endpoint_address


def wire_leader(leader_id: int | None) -> int:
    """No leader is -1 on the wire; node 0 is a valid leader (`x or -1` lost it)."""
    return -1 if leader_id is None else leader_id


def leader_hint(
    driver: RaftDriver, addresses: Mapping[int, str], leader_id: int | None
) -> dict[str, str]:
    """The rich-status metadata naming the epoch and the leader, if known."""
    hint = {"epoch": str(driver.epoch), "leader_id": str(wire_leader(leader_id))}
    if leader_id is not None:
        address = voter_address(driver, leader_id) or addresses.get(leader_id)
        if address:
            hint["leader_address"] = address
    return hint


def voter_address(driver: RaftDriver, node_id: int) -> str | None:
    """kraft.version 1 (formatted, or upgraded at runtime): where the voter set
    in force says `node_id` listens (it may have been added or moved at
    runtime, which no static file knows)."""
    if not driver.core.kraft_version:
        return None
    voter = driver.core.current_voter_set().voter(node_id)
    if voter is None or not voter.endpoints:
        return None
    return endpoint_address(voter.endpoints[0])
