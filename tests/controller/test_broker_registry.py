"""Broker registration, heartbeats, fencing, controlled shutdown and session expiry
(quorum/controller/broker_registry.py), on a fake clock and an in-memory image.

A broker registers fenced at the epoch of its registration record's offset, is
unfenced by a heartbeat showing it applied that record, and is fenced again when
it asks, when its session runs out, or when it finishes a controlled shutdown.
"""

from __future__ import annotations

import pytest
from image_scenario import Scenario, kinds, leader_isr

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.broker_registry import BrokerRegistry
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import broker_pb2 as bpb

TIMEOUT_S = 9.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class Cluster(Scenario):
    """A scenario whose brokers go through the registry, as the controller runs it."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.registry = BrokerRegistry(self.image, TIMEOUT_S, self.clock)

    def register(
        self, broker_id: int, incarnation: str | None = None, rack: str | None = None
    ) -> int:
        request = bpb.RegisterBrokerRequest(
            broker_id=broker_id,
            incarnation_id=incarnation or f"incarnation-{broker_id}",
            listeners=[bpb.Listener(name="PLAINTEXT", host="10.0.0.1", port=9092)],
            features=[bpb.SupportedFeature(name="metadata.version", max_supported_version=1)],
        )
        if rack is not None:
            request.rack = rack
        records, reply = self.registry.build_register(request, self.next_offset)
        self.commit(records)
        if records:  # "caught up" means past this offset: the epoch is the record's own
            assert reply.broker_epoch == self.next_offset - 1
        return reply.broker_epoch

    def heartbeat(
        self,
        broker_id: int,
        caught_up: bool = True,
        want_fence: bool = False,
        want_shutdown: bool = False,
        epoch: int | None = None,
    ) -> bpb.BrokerHeartbeatResponse:
        """A heartbeat (caught up: it has applied everything committed so far);
        checks `heartbeat_needs_write` agrees with what the builder writes."""
        registered = self.image.brokers.get(broker_id)
        request = bpb.BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=(registered.broker_epoch if registered else 0) if epoch is None else epoch,
            current_metadata_offset=self.next_offset if caught_up else 0,
            want_fence=want_fence,
            want_shutdown=want_shutdown,
        )
        needs_write = self.registry.heartbeat_needs_write(request)
        records, reply = self.registry.build_heartbeat(request, high_watermark=self.next_offset)
        assert needs_write or not records, "a heartbeat wrote outside the write queue"
        self.commit(records)
        return reply

    def online(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            self.register(broker_id)
            self.heartbeat(broker_id)

    def state(self, broker_id: int) -> str:
        return self.image.brokers[broker_id].state


# ------------------------------------------------------------- registration


def test_a_broker_registers_fenced_at_the_offset_of_its_registration() -> None:
    c = Cluster()
    c.online(7)
    offset = c.next_offset
    epoch = c.register(1, rack="r1")
    broker = c.image.brokers[1]
    assert epoch == offset == broker.broker_epoch
    assert (broker.state, broker.rack, broker.incarnation_id) == ("FENCED", "r1", "incarnation-1")
    assert broker.endpoints == (("PLAINTEXT", "10.0.0.1", 9092, ""),)
    assert broker.features == (("metadata.version", 0, 1),)


def test_registering_again_with_the_same_incarnation_writes_nothing() -> None:
    c = Cluster()
    epoch = c.register(1)
    request = bpb.RegisterBrokerRequest(broker_id=1, incarnation_id="incarnation-1")
    records, reply = c.registry.build_register(request, c.next_offset + 10)
    assert (records, reply.broker_epoch) == ([], epoch)


def test_directory_ids_are_registered_kept_in_snapshots_and_never_shared() -> None:
    """KIP-858: one directory, one broker; the ids survive a snapshot."""
    c = Cluster()
    request = bpb.RegisterBrokerRequest(
        broker_id=1, incarnation_id="one", log_dirs=["Jp7Fpx3hQy2b7mzT4a0yIg"]
    )
    records, _ = c.registry.build_register(request, c.next_offset)
    c.commit(records)
    assert c.image.brokers[1].log_dirs == ("Jp7Fpx3hQy2b7mzT4a0yIg",)
    copy = MetadataImage()
    copy.load_snapshot(c.image.snapshot_records(), c.next_offset)
    assert copy.brokers[1] == c.image.brokers[1]
    applied = c.next_offset
    thief = bpb.RegisterBrokerRequest(
        broker_id=2, incarnation_id="two", log_dirs=["Jp7Fpx3hQy2b7mzT4a0yIg"]
    )
    with pytest.raises(ControllerError) as caught:
        c.registry.build_register(thief, c.next_offset)
    assert caught.value.error is ApiError.INVALID_REGISTRATION
    assert "broker 1 is already registered with directory" in caught.value.message
    assert 2 not in c.image.brokers and c.next_offset == applied
    # The same broker may register its own directory again (a restart).
    again = bpb.RegisterBrokerRequest(
        broker_id=1, incarnation_id="one-again", log_dirs=["Jp7Fpx3hQy2b7mzT4a0yIg"]
    )
    records, _ = c.registry.build_register(again, c.next_offset)
    assert records


def test_a_live_broker_id_cannot_be_taken_by_another_incarnation() -> None:
    c = Cluster()
    c.online(1)
    with pytest.raises(ControllerError) as caught:
        c.register(1, incarnation="another")
    assert caught.value.error is ApiError.DUPLICATE_BROKER_REGISTRATION
    assert c.image.brokers[1].incarnation_id == "incarnation-1"


def test_a_fenced_broker_may_come_back_as_a_new_incarnation_with_a_higher_epoch() -> None:
    c = Cluster()
    c.online(1, 2)
    first = c.image.brokers[1].broker_epoch
    c.heartbeat(1, want_fence=True)
    second = c.register(1, incarnation="restarted")
    assert second > first
    assert (c.state(1), c.image.brokers[1].incarnation_id) == ("FENCED", "restarted")


def test_broker_epochs_never_go_back_even_if_the_offset_hint_does() -> None:
    c = Cluster()
    c.online(1)
    request = bpb.RegisterBrokerRequest(broker_id=2, incarnation_id="x")
    _, reply = c.registry.build_register(request, next_offset=0)
    assert reply.broker_epoch == c.image.brokers[1].broker_epoch + 1


@pytest.mark.parametrize(
    "request_",
    [
        bpb.RegisterBrokerRequest(broker_id=-1, incarnation_id="x"),
        bpb.RegisterBrokerRequest(broker_id=1, incarnation_id=""),
    ],
)
def test_a_registration_without_an_id_or_incarnation_is_refused(
    request_: bpb.RegisterBrokerRequest,
) -> None:
    c = Cluster()
    with pytest.raises(ControllerError) as caught:
        c.registry.build_register(request_, 0)
    assert caught.value.error is ApiError.INVALID_REQUEST


# ---------------------------------------------------------------- heartbeats


def test_a_heartbeat_from_a_caught_up_broker_unfences_it() -> None:
    c = Cluster()
    c.register(1)
    reply = c.heartbeat(1, caught_up=False)
    assert (reply.is_caught_up, reply.is_fenced, c.state(1)) == (False, True, "FENCED")
    reply = c.heartbeat(1)
    assert (reply.is_caught_up, reply.is_fenced, c.state(1)) == (True, False, "ONLINE")
    assert c.image.unfenced_broker_ids() == [1]


def test_the_registration_record_itself_must_be_applied_to_be_caught_up() -> None:
    c = Cluster()
    epoch = c.register(1)
    request = bpb.BrokerHeartbeatRequest(
        broker_id=1, broker_epoch=epoch, current_metadata_offset=epoch
    )
    records, reply = c.registry.build_heartbeat(request, c.next_offset)
    assert (records, reply.is_caught_up, reply.is_fenced) == ([], False, True)
    request.current_metadata_offset = epoch + 1
    records, reply = c.registry.build_heartbeat(request, c.next_offset)
    assert (kinds(records), reply.is_fenced) == (["unfence_broker"], False)


def test_an_ordinary_heartbeat_of_an_online_broker_writes_nothing() -> None:
    c = Cluster()
    c.online(1)
    before = c.image.digest()
    reply = c.heartbeat(1)
    assert (reply.is_fenced, reply.should_shut_down) == (False, False)
    assert c.image.digest() == before


def test_heartbeats_from_unknown_or_stale_brokers_are_refused() -> None:
    c = Cluster()
    c.online(1)
    with pytest.raises(ControllerError) as caught:
        c.heartbeat(9)
    assert caught.value.error is ApiError.BROKER_ID_NOT_REGISTERED
    with pytest.raises(ControllerError) as caught:
        c.heartbeat(1, epoch=c.image.brokers[1].broker_epoch - 1)
    assert caught.value.error is ApiError.STALE_BROKER_EPOCH


def test_a_plain_beat_renews_the_session_as_a_heartbeat_does_and_writes_nothing() -> None:
    """A MetadataFetch's heartbeat without a message (`plain_beat`): the same
    answer and the same session as `build_heartbeat` gives, and no write."""
    c = Cluster()
    c.online(1)
    epoch = c.image.brokers[1].broker_epoch
    before = c.image.digest()
    c.clock.advance(TIMEOUT_S - 0.1)
    assert c.registry.plain_beat(1, epoch, c.next_offset, "ONLINE") == (False, True)
    c.clock.advance(0.2)
    assert c.registry.expired() == []  # the session was renewed
    session = c.registry.sessions[1]
    assert (session.metadata_offset, session.reported_state) == (c.next_offset, "ONLINE")
    assert c.image.digest() == before
    # A fenced broker not yet caught up: answered fenced, nothing written either.
    c.register(2)
    epoch2 = c.image.brokers[2].broker_epoch
    assert c.registry.plain_beat(2, epoch2, epoch2, "STARTING") == (True, False)
    assert c.registry.sessions[2].reported_state == "STARTING"


def test_a_beat_that_must_write_or_be_refused_is_not_plain() -> None:
    """Unknown broker, stale epoch, a fenced broker now caught up (to unfence):
    `plain_beat` declines and touches nothing, for `build_heartbeat` to handle."""
    c = Cluster()
    c.online(1)
    epoch = c.register(2)
    sessions = {b: (s.last_heartbeat, s.metadata_offset) for b, s in c.registry.sessions.items()}
    c.clock.advance(1.0)
    assert c.registry.plain_beat(9, 0, c.next_offset, "ONLINE") is None
    assert c.registry.plain_beat(1, c.image.brokers[1].broker_epoch - 1, 5, "ONLINE") is None
    assert c.registry.plain_beat(2, epoch, epoch + 1, "STARTING") is None
    after = {b: (s.last_heartbeat, s.metadata_offset) for b, s in c.registry.sessions.items()}
    assert after == sessions
    assert c.state(2) == "FENCED"


def test_an_unfenced_broker_takes_back_the_offline_partitions_it_can_lead() -> None:
    c = Cluster()
    c.online(1, 2)
    c.topic("orders", [[1, 2], [2, 1]], isr=[[1], [2, 1]])
    c.heartbeat(1, want_fence=True)
    assert leader_isr(c.part("orders", 0)) == (-1, (1,))  # it was the only ISR member
    assert leader_isr(c.part("orders", 1)) == (2, (2,))
    c.heartbeat(1)
    assert c.state(1) == "ONLINE"
    assert leader_isr(c.part("orders", 0)) == (1, (1,))
    assert leader_isr(c.part("orders", 1)) == (2, (2,))  # rejoining the ISR is the leader's call


def test_a_broker_asking_to_be_fenced_hands_its_leaderships_over() -> None:
    c = Cluster()
    c.online(1, 2, 3)
    c.topic("orders", [[1, 2, 3], [2, 3, 1]])
    reply = c.heartbeat(1, want_fence=True)
    assert (reply.is_fenced, c.state(1)) == (True, "FENCED")
    assert leader_isr(c.part("orders", 0)) == (2, (2, 3))
    assert leader_isr(c.part("orders", 1)) == (2, (2, 3))
    # Asking again changes nothing.
    before = c.image.digest()
    assert c.heartbeat(1, want_fence=True).is_fenced
    assert c.image.digest() == before


# ----------------------------------------------------- controlled shutdown


def test_a_controlled_shutdown_moves_leadership_then_lets_the_broker_go() -> None:
    c = Cluster()
    c.online(1, 2, 3)
    c.topic("orders", [[1, 2, 3], [2, 1, 3]])

    reply = c.heartbeat(1, want_shutdown=True)
    assert (reply.should_shut_down, reply.is_fenced, c.state(1)) == (False, False, "STOPPING")
    assert leader_isr(c.part("orders", 0)) == (2, (2, 3))
    assert leader_isr(c.part("orders", 1)) == (2, (2, 3))

    reply = c.heartbeat(1, want_shutdown=True)
    assert (reply.should_shut_down, reply.is_fenced) == (True, True)
    assert c.image.brokers[1].fenced and c.state(1) == "STOPPING"
    # Its session is over: a restart may register at once, with a new epoch.
    assert c.register(1, incarnation="restarted") > c.image.brokers[2].broker_epoch
    assert c.state(1) == "FENCED"


def test_a_broker_shutting_down_gets_no_new_leaderships() -> None:
    c = Cluster()
    c.online(1, 2)
    c.topic("orders", [[1, 2]])
    c.heartbeat(1, want_shutdown=True)
    c.heartbeat(2, want_fence=True)
    assert leader_isr(c.part("orders")) == (-1, (2,))  # not broker 1: it is leaving


def test_a_sole_isr_leader_shutting_down_takes_its_partition_offline_and_is_done() -> None:
    c = Cluster()
    c.online(1, 2)
    c.topic("orders", [[1, 2]], isr=[[1]])
    c.heartbeat(1, want_shutdown=True)
    assert leader_isr(c.part("orders")) == (-1, (1,))
    assert c.heartbeat(1, want_shutdown=True).should_shut_down


# ------------------------------------------------------------ session expiry


def test_a_broker_whose_heartbeats_stop_is_fenced_after_the_session_timeout() -> None:
    c = Cluster()
    c.online(1, 2)
    c.topic("orders", [[1, 2]])
    c.clock.advance(TIMEOUT_S - 0.1)
    c.heartbeat(2)
    assert c.registry.expired() == []
    c.clock.advance(0.2)
    assert c.registry.expired() == [1]
    records, changed = c.registry.build_fence_expired(1)
    assert changed and kinds(records) == ["fence_broker", "partition_change"]
    c.commit(records)
    assert c.state(1) == "FENCED"
    assert leader_isr(c.part("orders")) == (2, (2,))
    assert c.registry.expired() == []  # a fenced broker has no session to expire


def test_a_heartbeat_arriving_before_the_fencing_write_saves_the_broker() -> None:
    c = Cluster()
    c.online(1)
    c.clock.advance(TIMEOUT_S + 1)
    assert c.registry.expired() == [1]
    c.heartbeat(1)  # queued ahead of the fencing write
    assert c.registry.build_fence_expired(1) == ([], False)
    assert c.state(1) == "ONLINE"


def test_fencing_an_expired_broker_twice_writes_once() -> None:
    c = Cluster()
    c.online(1)
    c.clock.advance(TIMEOUT_S + 1)
    records, _ = c.registry.build_fence_expired(1)
    c.commit(records)
    assert c.registry.build_fence_expired(1) == ([], False)
    assert c.registry.build_fence_expired(7) == ([], False)  # gone meanwhile


def test_a_newly_active_controller_gives_every_broker_a_fresh_session() -> None:
    """A failover must not fence a live broker for heartbeats sent to the old leader."""
    c = Cluster()
    c.online(1, 2)
    successor = BrokerRegistry(c.image, TIMEOUT_S, c.clock)
    c.clock.advance(TIMEOUT_S * 3)
    assert successor.expired() == [1, 2]  # never heard from them
    successor.refresh_all()
    assert successor.expired() == []
    c.clock.advance(TIMEOUT_S)
    assert successor.expired() == [1, 2]


def test_a_registered_broker_that_never_heartbeats_stays_fenced_and_is_not_expired() -> None:
    c = Cluster()
    c.register(1)
    c.clock.advance(TIMEOUT_S * 2)
    assert c.registry.expired() == []
    assert c.state(1) == "FENCED"


# -------------------------------------------------------------- unregister


def test_unregistering_a_live_broker_fences_it_first_then_forgets_it() -> None:
    c = Cluster()
    c.online(1, 2)
    c.topic("orders", [[1, 2]])
    records, _ = c.registry.build_unregister(1)
    assert kinds(records) == ["fence_broker", "partition_change", "unregister_broker"]
    c.commit(records)
    assert 1 not in c.image.brokers
    assert leader_isr(c.part("orders")) == (2, (2,))
    assert c.part("orders").replicas == (1, 2)  # replicas stay: reassignment is separate
    # The id is free again.
    c.register(1, incarnation="new")
    assert c.image.brokers[1].incarnation_id == "new"


def test_unregistering_a_fenced_broker_only_forgets_it() -> None:
    c = Cluster()
    c.online(1)
    c.heartbeat(1, want_fence=True)
    records, _ = c.registry.build_unregister(1)
    assert kinds(records) == ["unregister_broker"]
    c.commit(records)
    assert c.image.brokers == {}


def test_unregistering_an_unknown_broker_is_refused() -> None:
    c = Cluster()
    with pytest.raises(ControllerError) as caught:
        c.registry.build_unregister(3)
    assert caught.value.error is ApiError.BROKER_ID_NOT_REGISTERED


def test_a_restart_registering_before_its_old_session_is_fenced_still_moves_leadership() -> None:
    """The old incarnation's session ran out but the fencing write has not run yet
    (the fencer polls) when the restarted broker registers. The new registration
    is fenced, so the partitions the old incarnation led must move, as the fencing
    write would have moved them; they must not stay led by a fenced broker."""
    c = Cluster()
    c.online(1, 2)
    c.topic("orders", [[1, 2]])
    c.clock.advance(TIMEOUT_S + 0.1)
    c.heartbeat(2)
    assert c.registry.expired() == [1]
    c.register(1, incarnation="restarted")
    c.commit(c.registry.build_fence_expired(1)[0])
    assert c.state(1) == "FENCED"
    assert leader_isr(c.part("orders")) == (2, (2,))
