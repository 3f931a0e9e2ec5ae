"""QuorumController against a fake Raft client: the seam is all it needs."""

from __future__ import annotations

import asyncio

import pytest
from fake_raft import FakeRaft, controller, register

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.write_queue import NotController
from quorum.gen import broker_pb2 as bpb


def test_a_registration_is_proposed_committed_and_applied_through_the_seam() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)
    assert raft.batches, "nothing was proposed"
    assert c.image.brokers[101].broker_epoch == epoch


def test_metadata_fetch_answers_committed_batches_with_their_commit_times() -> None:
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)
    request = bpb.MetadataFetchRequest(
        broker_id=101, broker_epoch=epoch, fetch_offset=0, current_state=bpb.FENCED
    )
    response = asyncio.run(c.metadata_fetch(request, received_ms=5))
    assert response.high_watermark == raft.high_watermark
    assert sum(len(b.records) for b in response.batches) == raft.high_watermark
    assert response.controller_receive_time_ms == 5


@pytest.mark.parametrize("state", [99, -1])
def test_a_fetch_with_an_unknown_broker_state_is_refused_before_its_heartbeat(
    state: int,
) -> None:
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)
    proposed = len(raft.batches)
    request = bpb.MetadataFetchRequest(broker_id=101, broker_epoch=epoch, current_state=state)
    with pytest.raises(ControllerError) as caught:
        asyncio.run(c.metadata_fetch(request, received_ms=0))
    assert caught.value.error is ApiError.INVALID_REQUEST
    assert len(raft.batches) == proposed


def test_a_write_on_a_follower_names_the_leader() -> None:
    c = controller(FakeRaft(leading=False))
    with pytest.raises(NotController) as caught:
        register(c, 101)
    assert caught.value.leader_id == 2


def test_a_parked_metadata_fetch_ends_at_once_when_the_controller_stops_being_active() -> None:
    """A broker's caught-up fetch is parked until the next commit; losing the
    leadership ends it at once with NotController naming the new leader."""
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)

    def caught_up() -> bpb.MetadataFetchRequest:
        return bpb.MetadataFetchRequest(
            broker_id=101,
            broker_epoch=epoch,
            fetch_offset=raft.high_watermark,
            max_wait_ms=30_000,
            current_state=bpb.FENCED,
        )

    async def scenario() -> None:
        await c.metadata_fetch(caught_up(), received_ms=0)  # unfenced: a write
        parked = asyncio.ensure_future(c.metadata_fetch(caught_up(), received_ms=0))
        await asyncio.sleep(0.05)
        assert not parked.done(), "a caught-up fetch is parked"
        raft.leading = False
        c.handle_leader_change(raft.leader_and_epoch())
        with pytest.raises(NotController) as caught:
            await asyncio.wait_for(parked, 1)
        assert caught.value.leader_id == 2

    asyncio.run(scenario())


def test_a_metadata_fetch_is_a_heartbeat_whether_it_writes_or_not() -> None:
    """The first caught-up fetch unfences (a write, as BrokerHeartbeat would);
    the next ones change nothing and still renew the session and report the
    broker's state; a stale epoch is refused and renews nothing."""
    raft = FakeRaft()
    c = controller(raft)
    epoch = register(c, 101)

    def fetch(state: int, broker_epoch: int = epoch) -> bpb.MetadataFetchRequest:
        return bpb.MetadataFetchRequest(
            broker_id=101, broker_epoch=broker_epoch, fetch_offset=raft.high_watermark,
            max_wait_ms=0, current_state=state,
        )  # fmt: skip

    async def scenario() -> None:
        first = await c.metadata_fetch(fetch(bpb.FENCED), received_ms=0)
        assert (first.is_fenced, first.is_caught_up) == (False, True)
        assert c.image.brokers[101].fenced is False
        proposed = len(raft.batches)
        second = await c.metadata_fetch(fetch(bpb.ONLINE), received_ms=0)
        assert (second.is_fenced, second.is_caught_up, second.should_shut_down) == (
            False, True, False,
        )  # fmt: skip
        assert len(raft.batches) == proposed, "a plain heartbeat wrote"
        session = c.registry.sessions[101]
        assert (session.reported_state, session.metadata_offset) == ("ONLINE", raft.high_watermark)
        beaten = session.last_heartbeat
        with pytest.raises(ControllerError) as caught:
            await c.metadata_fetch(fetch(bpb.STOPPING, epoch - 1), received_ms=0)
        assert caught.value.error is ApiError.STALE_BROKER_EPOCH
        assert c.registry.sessions[101].last_heartbeat == beaten
        assert c.registry.sessions[101].reported_state == "ONLINE"

    asyncio.run(scenario())
