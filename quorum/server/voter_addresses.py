"""Where each controller listens, as the servicers name it in leader hints.

With static voters this is `controller.quorum.voters`. With kraft.version 1 the
voter set in the log is the authority: a voter added later (or every voter,
when the node was given only `controller.quorum.bootstrap.servers`) is known
only from it, and a voter that moved (UpdateRaftVoter) listens where it says,
not where a static file written before the move does. So the mapping is read
live: the endpoints of the voter set in force, then the static entries for
voters it gives none (the static voters carry no endpoints).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from quorum.raft.voters import Endpoint, VoterSet


def endpoint_address(endpoint: Endpoint) -> str:
    """host:port as a gRPC target (an IPv6 host in brackets)."""
    host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
    return f"{host}:{endpoint.port}"


class VoterAddresses(Mapping[int, str]):
    def __init__(self, static: Mapping[int, str], voter_set: Callable[[], VoterSet]) -> None:
        self._static = {node: address for node, address in static.items() if node >= 0}
        self._voter_set = voter_set

    def _current(self) -> dict[int, str]:
        found = dict(self._static)
        for voter in self._voter_set().voters:
            if voter.endpoints:
                found[voter.voter_id] = endpoint_address(voter.endpoints[0])
        return found

    def __getitem__(self, node: int) -> str:
        return self._current()[node]

    def __iter__(self) -> Iterator[int]:
        return iter(self._current())

    def __len__(self) -> int:
        return len(self._current())
