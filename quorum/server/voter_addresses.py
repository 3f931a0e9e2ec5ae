"""Where each controller listens, as the servicers name it in leader hints.

With static voters this is `controller.quorum.voters`. With kraft.version 1 a
voter added later (or every voter, when the node was given only
`controller.quorum.bootstrap.servers`) is known only from the voter set in the
log, so the mapping is read live: the static entries first, then the endpoints
of the voter set in force.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from quorum.raft.voters import VoterSet


class VoterAddresses(Mapping[int, str]):
    def __init__(self, static: Mapping[int, str], voter_set: Callable[[], VoterSet]) -> None:
        self._static = {node: address for node, address in static.items() if node >= 0}
        self._voter_set = voter_set

    def _dynamic(self) -> dict[int, str]:
        found = {}
        for voter in self._voter_set().voters:
            if voter.endpoints and voter.voter_id not in self._static:
                endpoint = voter.endpoints[0]
                host = f"[{endpoint.host}]" if ":" in endpoint.host else endpoint.host
                found[voter.voter_id] = f"{host}:{endpoint.port}"
        return found

    def __getitem__(self, node: int) -> str:
        if node in self._static:
            return self._static[node]
        return self._dynamic()[node]

    def __iter__(self) -> Iterator[int]:
        return iter({**self._static, **self._dynamic()})

    def __len__(self) -> int:
        return len({**self._static, **self._dynamic()})
