"""kraft.version can be raised at runtime (`quorumctl features upgrade`): the
server parts that act only at kraft.version 1 read the core's live version, not
the formatted one in the config, so an upgraded quorum stamps replica keys and
keeps voter entries true without a restart."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

from quorum.gen import raft_pb2 as pb
from quorum.raft.effects import Role
from quorum.raft.voters import Endpoint, Voter, VoterSet
from quorum.server.transport import GrpcTransport
from quorum.server.voter_updates import VoterUpdates

OLD = Endpoint("CONTROLLER", "10.0.0.1", 9093)


def formatted_static_upgraded_later() -> Any:
    """A driver formatted at kraft.version 0 whose log now holds the upgrade."""
    voters = VoterSet((Voter(1, "d1", (OLD,)), Voter(2, "d2", (OLD,))))
    changes: list[Any] = []

    async def change_voters(change: Any) -> None:
        changes.append(change)

    core = SimpleNamespace(
        kraft_version=0,
        is_voter=True,
        config=SimpleNamespace(directory_id="d1"),
        current_voter_set=lambda: voters,
        voter_change_pending=lambda: False,
    )
    return SimpleNamespace(
        config=SimpleNamespace(kraft_version=0, node_id=1, election_timeout_ms=1000),
        core=core,
        role=Role.LEADER,
        change_voters=change_voters,
        changes=changes,
    )


def test_replica_keys_are_stamped_once_the_live_version_is_1() -> None:
    driver = formatted_static_upgraded_later()
    transport = GrpcTransport({}, "cluster", 500)
    transport.bind(driver)
    fetch, vote = pb.FetchRequest(), pb.VoteRequest()
    transport._stamp_directory_ids(2, fetch)
    assert fetch.replica_directory_id == ""  # kraft.version 0: no replica keys
    driver.core.kraft_version = 1
    transport._stamp_directory_ids(2, fetch)
    transport._stamp_directory_ids(2, vote)
    assert (fetch.replica_directory_id, vote.voter_directory_id) == ("d1", "d2")


def test_a_voter_updates_its_entry_after_a_runtime_upgrade() -> None:
    driver = formatted_static_upgraded_later()

    async def run() -> None:
        updates = VoterUpdates(driver, GrpcTransport({}, "cluster", 500), "10.0.0.9:9999", "c")
        updates.start()  # at kraft.version 0: it must still watch for the upgrade
        try:
            await updates._once()
            assert driver.changes == []
            driver.core.kraft_version = 1
            await updates._once()
            assert len(driver.changes) == 1  # the leader writes its moved entry itself
        finally:
            await updates.stop()

    asyncio.run(run())
