"""AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (KIP-853) on the active controller.

The request is checked at the edge (a voter id, a valid directory id, for an
addition a listener to reach the voter at), then handed to the Raft core's
membership functions through the driver, which answers once the VotersRecord
is committed by the new voter set's majority. The core's refusals keep their
Kafka names (DUPLICATE_VOTER, VOTER_NOT_FOUND, REQUEST_TIMED_OUT, ...), a
follower answers NOT_CONTROLLER with the leader; a refusal changes nothing.
UpdateRaftVoter is the voter's own call (`voter_updates.py` sends it): under
mTLS its certificate must be the voter's, as for its Raft requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable

from quorum.common.meta_properties import directory_id_problem
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.write_queue import NotController
from quorum.gen import admin_pb2 as api
from quorum.raft.client_api import NotLeaderError, ProposalFailed
from quorum.raft.config import ProposeResult
from quorum.raft.voters import Endpoint, Voter, VoterChangeRefused
from quorum.rpc.wire_errors import SHOWN_CHARS
from quorum.server.driver import RaftDriver
from quorum.server.voter_identity import VoterIdentity

MAX_LISTENERS = 16
MAX_NAME_CHARS = 255  # a host name's limit (RFC 1035), also for listener names


class VoterChanges:
    def __init__(
        self, driver: RaftDriver, timeout_s: float, identity: VoterIdentity | None = None
    ) -> None:
        self._driver = driver
        self._timeout_s = timeout_s
        self._identity = identity or VoterIdentity()

    async def add(self, request: api.AddRaftVoterRequest) -> api.AddRaftVoterResponse:
        _check_identity(request.voter_id, request.voter_directory_id)
        voter = Voter(request.voter_id, request.voter_directory_id, _endpoints(request.listeners))
        core = self._driver.core
        result = await self._change(lambda now: core.add_voter(voter, now))
        assert result is not None
        return api.AddRaftVoterResponse(offset=result.last_offset, leader_epoch=result.epoch)

    async def update(
        self, request: api.UpdateRaftVoterRequest, principal: str
    ) -> api.UpdateRaftVoterResponse:
        _check_identity(request.voter_id, request.voter_directory_id)
        problem = self._identity.problem(request.voter_id, principal)
        if problem is not None:
            raise ControllerError(ApiError.CLUSTER_AUTHORIZATION_FAILED, problem)
        low, high = request.min_kraft_version, request.max_kraft_version
        if not 0 <= low <= high:
            raise ControllerError(
                ApiError.INVALID_REQUEST, f"kraft.version range {low}-{high} is not a range"
            )
        endpoints = _endpoints(request.listeners)
        voter = Voter(request.voter_id, request.voter_directory_id, endpoints, low, high)
        core = self._driver.core
        result = await self._change(lambda now: core.update_voter(voter, now))
        if result is None:
            return api.UpdateRaftVoterResponse(offset=-1, leader_epoch=self._driver.epoch)
        return api.UpdateRaftVoterResponse(offset=result.last_offset, leader_epoch=result.epoch)

    async def remove(self, request: api.RemoveRaftVoterRequest) -> api.RemoveRaftVoterResponse:
        _check_identity(request.voter_id, request.voter_directory_id)
        core = self._driver.core
        voter_id, directory_id = request.voter_id, request.voter_directory_id
        result = await self._change(lambda now: core.remove_voter(voter_id, directory_id, now))
        assert result is not None
        return api.RemoveRaftVoterResponse(offset=result.last_offset, leader_epoch=result.epoch)

    async def _change(self, change: Callable[[int], ProposeResult | None]) -> ProposeResult | None:
        try:
            return await asyncio.wait_for(self._driver.change_voters(change), self._timeout_s)
        except NotLeaderError as err:
            raise NotController(err.leader_id) from err
        except VoterChangeRefused as err:
            raise ControllerError(ApiError[err.error.name], err.message) from err
        except ProposalFailed as err:
            raise ControllerError(
                ApiError.REQUEST_TIMED_OUT,
                f"the voter change was lost with a leader change ({err}); see quorum describe",
            ) from err
        except TimeoutError as err:
            raise ControllerError(
                ApiError.REQUEST_TIMED_OUT,
                f"the voter change is appended but not committed after {self._timeout_s:g} s "
                "(the new voter set has no majority yet?); it commits when it does",
            ) from err


def _endpoints(listeners: Iterable[api.RaftVoterEndpoint]) -> tuple[Endpoint, ...]:
    """A voter's listeners, checked: at least one, each a host and a port."""
    endpoints = tuple(Endpoint(e.name or "CONTROLLER", e.host, e.port) for e in listeners)
    if not endpoints:
        raise ControllerError(ApiError.INVALID_REQUEST, "a voter needs a listener")
    if len(endpoints) > MAX_LISTENERS:
        raise ControllerError(
            ApiError.INVALID_REQUEST, f"{len(endpoints)} listeners, at most {MAX_LISTENERS}"
        )
    for e in endpoints:
        too_long = len(e.host) > MAX_NAME_CHARS or len(e.name) > MAX_NAME_CHARS
        if not e.host or too_long or not 0 < e.port < 65536:
            raise ControllerError(
                ApiError.INVALID_REQUEST,
                f"listener {_shown(e.name)} {_shown(e.host)}:{e.port} is not valid",
            )
    return endpoints


def _check_identity(voter_id: int, directory_id: str) -> None:
    if voter_id < 0:
        raise ControllerError(ApiError.INVALID_REQUEST, f"voter id {voter_id} is negative")
    problem = directory_id_problem(directory_id)
    if problem is not None:
        raise ControllerError(
            ApiError.INVALID_REQUEST, f"voter directory id {_shown(directory_id)}: {problem}"
        )


def _shown(text: str) -> str:
    """Echo at most a few characters of a client's string: a huge one would
    overflow gRPC's metadata limit on the way back (RESOURCE_EXHAUSTED)."""
    shown = text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + "..."
    return f"{shown!r} ({len(text)} characters)" if len(text) > SHOWN_CHARS else repr(shown)
