"""Who leads, as the wire says it: in rich-status metadata and in answers."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from quorum.server.driver import RaftDriver


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
    """kraft.version 1: where the voter set in force says `node_id` listens (it
    may have been added or moved at runtime, which no static file knows)."""
    if not driver.config.kraft_version:
        return None
    voter = driver.core.current_voter_set().voter(node_id)
    if voter is None or not voter.endpoints:
        return None
    return f"{voter.endpoints[0].host}:{voter.endpoints[0].port}"


class VoterAddresses(Mapping[int, str]):
    """The controllers' addresses as clients should be sent to them:
    controller.quorum.voters, overridden by the voter set in force."""

    def __init__(self, static: Mapping[int, str], driver: RaftDriver) -> None:
        self._static = dict(static)
        self._driver = driver

    def _current(self) -> dict[int, str]:
        current = dict(self._static)
        if self._driver.config.kraft_version:
            for voter in self._driver.core.current_voter_set().voters:
                address = voter_address(self._driver, voter.voter_id)
                if address:
                    current[voter.voter_id] = address
        return current

    def __getitem__(self, node_id: int) -> str:
        address = voter_address(self._driver, node_id)
        return address if address else self._static[node_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())
