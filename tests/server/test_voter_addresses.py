"""Leader hints name addresses from the static voters and, with kraft.version 1,
from the voter set in force, read at each use (a voter added later is found; a
voter that moved is named where it listens now, not where the static file says)."""

from __future__ import annotations

from quorum.raft.voters import Endpoint, Voter, VoterSet
from quorum.server.voter_addresses import VoterAddresses


def test_the_voter_set_in_force_read_live_wins_over_static_entries() -> None:
    current = [VoterSet((Voter(1, "d1", (Endpoint("CONTROLLER", "other", 1),)),))]
    addresses = VoterAddresses({1: "h1:9093", -2: "boot:9093"}, lambda: current[0])
    assert dict(addresses) == {1: "other:1"}  # bootstrap ids are no controller's address
    current[0] = VoterSet(
        (
            Voter(1, "d1", (Endpoint("CONTROLLER", "other", 1),)),
            Voter(4, "d4", (Endpoint("CONTROLLER", "::1", 9096),)),
            Voter(5, "d5"),  # no endpoint known
        )
    )
    assert dict(addresses) == {1: "other:1", 4: "[::1]:9096"}
    assert addresses.get(5) is None and 4 in addresses and len(addresses) == 2
    current[0] = VoterSet.of_static(frozenset({1}))  # static voters carry no endpoints
    assert dict(addresses) == {1: "h1:9093"}
