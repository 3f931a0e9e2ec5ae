"""Broker registration, heartbeats, fencing and controlled shutdown (KIP-631).

A broker registers fenced. A heartbeat showing it has applied the metadata up
to its own registration unfences it, and offline partitions it can lead get it
as leader. Asking to shut down marks it STOPPING, moves its leaderships away,
and once it leads nothing the controller tells it to finish. A broker whose
heartbeats stop for `broker.session.timeout.ms` is fenced (`expired`, then
`fence_records` one broker per write, since each broker's partition moves are
computed against the image the previous fence produced).

Heartbeat times are the active controller's memory, not metadata: a controller
that becomes active starts every broker's session afresh (`refresh_all`), so a
failover never fences a live broker.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.partition_ops import (
    leads_anything,
    moves_for_available_broker,
    moves_for_shutdown,
    moves_for_unavailable_broker,
)
from quorum.controller.record_codec import wrap
from quorum.controller.topic_ops import Records, acceptable_leader
from quorum.gen import broker_pb2 as bpb
from quorum.gen import metadata_pb2 as md


@dataclass
class Session:
    last_heartbeat: float
    metadata_offset: int = -1
    reported_state: str = ""


class BrokerRegistry:
    def __init__(
        self,
        image: MetadataImage,
        session_timeout_s: float = 9.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.image = image
        self.session_timeout_s = session_timeout_s
        self.clock = clock
        self.sessions: dict[int, Session] = {}

    def touch(self, broker_id: int, metadata_offset: int, reported_state: str = "") -> None:
        """A heartbeat arrived (validated by the caller)."""
        self.sessions[broker_id] = Session(self.clock(), metadata_offset, reported_state)

    def refresh_all(self) -> None:
        """On becoming the active controller: every registered broker gets a
        fresh session, whatever an earlier term of this controller remembered."""
        now = self.clock()
        for broker_id in self.image.brokers:
            old = self.sessions.get(broker_id)
            offset, state = (old.metadata_offset, old.reported_state) if old else (-1, "")
            self.sessions[broker_id] = Session(now, offset, state)

    def expired(self) -> list[int]:
        """Unfenced brokers whose session has run out."""
        now = self.clock()
        return [
            broker_id
            for broker_id, broker in sorted(self.image.brokers.items())
            if not broker.fenced and not self._alive(broker_id, now)
        ]

    def build_fence_expired(self, broker_id: int) -> tuple[Records, bool]:
        """Re-checked inside the write queue: a heartbeat may have arrived meanwhile."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.fenced or self._alive(broker_id, self.clock()):
            return [], False
        return self.fence_records(broker_id), True

    def heartbeat_needs_write(self, request: bpb.BrokerHeartbeatRequest) -> bool:
        """Whether this heartbeat changes the broker's registration (so it must go
        through the write queue); most heartbeats do not."""
        broker = self.image.brokers.get(request.broker_id)
        if broker is None or broker.broker_epoch != request.broker_epoch:
            return False  # build_heartbeat raises the error without writing
        if request.want_shutdown:
            return True
        if request.want_fence:
            return not broker.fenced
        return broker.fenced and request.current_metadata_offset > broker.broker_epoch

    def plain_beat(
        self, broker_id: int, broker_epoch: int, metadata_offset: int, reported_state: str
    ) -> tuple[bool, bool] | None:
        """A heartbeat that asks for nothing and changes nothing (a MetadataFetch's,
        most of the time): its session is renewed and (is_fenced, is_caught_up)
        returned, with no message built. None, and nothing touched, when it is not
        one: an unknown broker or epoch, or a fenced broker now caught up (each for
        `build_heartbeat`, which refuses or unfences)."""
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.broker_epoch != broker_epoch:
            return None
        caught_up = metadata_offset > broker.broker_epoch
        if broker.fenced and caught_up:
            return None
        session = self.sessions.get(broker_id)
        if session is None:
            self.sessions[broker_id] = Session(self.clock(), metadata_offset, reported_state)
        else:
            session.last_heartbeat = self.clock()
            session.metadata_offset = metadata_offset
            session.reported_state = reported_state
        return broker.fenced, caught_up

    def build_register(
        self, request: bpb.RegisterBrokerRequest, next_offset: int
    ) -> tuple[Records, bpb.RegisterBrokerResponse]:
        if request.broker_id < 0:
            raise ControllerError(ApiError.INVALID_REQUEST, "broker id must not be negative")
        if not request.incarnation_id:
            raise ControllerError(ApiError.INVALID_REQUEST, "incarnation id is required")
        existing = self.image.brokers.get(request.broker_id)
        if existing is not None and existing.incarnation_id == request.incarnation_id:
            return [], bpb.RegisterBrokerResponse(broker_epoch=existing.broker_epoch)
        self._check_directories_unclaimed(request)
        if existing is not None and not existing.fenced and self._alive(request.broker_id):
            raise ControllerError(
                ApiError.DUPLICATE_BROKER_REGISTRATION,
                f"broker {request.broker_id} is registered and alive with another incarnation",
            )
        # An old incarnation still unfenced (its session ran out, the fencing write
        # has not run yet) is fenced here first, its leaderships moved, as that
        # write would: the new registration is fenced and the fencer skips it.
        records = (
            [] if existing is None or existing.fenced else self.fence_records(existing.broker_id)
        )
        epoch = max(
            [next_offset + len(records)] + [b.broker_epoch + 1 for b in self.image.brokers.values()]
        )
        record = md.RegisterBrokerRecord(
            broker_id=request.broker_id,
            incarnation_id=request.incarnation_id,
            broker_epoch=epoch,
            endpoints=[
                md.BrokerEndpoint(
                    name=lst.name,
                    host=lst.host,
                    port=lst.port,
                    security_protocol=lst.security_protocol,
                )
                for lst in request.listeners
            ],
            features=[
                md.BrokerFeatureRange(
                    name=f.name,
                    min_supported_version=f.min_supported_version,
                    max_supported_version=f.max_supported_version,
                )
                for f in request.features
            ],
            fenced=True,
            log_dirs=request.log_dirs,
        )
        if request.HasField("rack"):
            record.rack = request.rack
        self.touch(request.broker_id, -1)
        records.append(wrap(register_broker=record))
        return records, bpb.RegisterBrokerResponse(broker_epoch=epoch)

    def _check_directories_unclaimed(self, request: bpb.RegisterBrokerRequest) -> None:
        """One directory, one broker (KIP-858): a copied data directory or a
        cloned disk image would otherwise give two brokers the same id."""
        wanted = set(request.log_dirs)
        for broker in self.image.brokers.values():
            if broker.broker_id == request.broker_id:
                continue
            for directory_id in broker.log_dirs:
                if directory_id in wanted:
                    raise ControllerError(
                        ApiError.INVALID_REGISTRATION,
                        f"broker {broker.broker_id} is already registered with directory "
                        f"{directory_id}",
                    )

    def build_heartbeat(
        self, request: bpb.BrokerHeartbeatRequest, high_watermark: int
    ) -> tuple[Records, bpb.BrokerHeartbeatResponse]:
        broker = self.image.brokers.get(request.broker_id)
        if broker is None:
            raise ControllerError(
                ApiError.BROKER_ID_NOT_REGISTERED, f"broker {request.broker_id} is not registered"
            )
        if broker.broker_epoch != request.broker_epoch:
            raise ControllerError(
                ApiError.STALE_BROKER_EPOCH,
                f"broker {request.broker_id} epoch is {broker.broker_epoch}, "
                f"not {request.broker_epoch}",
            )
        old = self.sessions.get(broker.broker_id)
        self.touch(
            broker.broker_id, request.current_metadata_offset, old.reported_state if old else ""
        )
        # The registration record sits at offset broker_epoch: caught up once applied.
        caught_up = request.current_metadata_offset > broker.broker_epoch
        records: Records = []
        epoch = broker.broker_epoch
        fenced = broker.fenced
        if request.want_shutdown:
            if not broker.in_controlled_shutdown:
                records.append(
                    wrap(
                        broker_registration_change=md.BrokerRegistrationChangeRecord(
                            broker_id=broker.broker_id,
                            broker_epoch=epoch,
                            in_controlled_shutdown=True,
                        )
                    )
                )
                broker_ok = acceptable_leader(self.image)
                records += moves_for_shutdown(
                    self.image, broker.broker_id, lambda b: b != broker.broker_id and broker_ok(b)
                )
            done = broker.in_controlled_shutdown and not leads_anything(
                self.image, broker.broker_id
            )
            if done and not fenced:
                # Its work is handed over: fence it now so nothing waits on it and a
                # restart (a new incarnation) may register at once.
                records += self.fence_records(broker.broker_id)
                self.sessions.pop(broker.broker_id, None)
                fenced = True
            return records, bpb.BrokerHeartbeatResponse(
                is_caught_up=caught_up, is_fenced=fenced, should_shut_down=done,
                high_watermark=high_watermark,
            )  # fmt: skip
        if request.want_fence and not fenced:
            records += self.fence_records(broker.broker_id)
            fenced = True
        elif fenced and caught_up and not request.want_fence:
            records.append(
                wrap(
                    unfence_broker=md.UnfenceBrokerRecord(
                        broker_id=broker.broker_id, broker_epoch=epoch
                    )
                )
            )
            ok = acceptable_leader(self.image)
            records += moves_for_available_broker(
                self.image, broker.broker_id, lambda b: b == broker.broker_id or ok(b)
            )
            fenced = False
        return records, bpb.BrokerHeartbeatResponse(
            is_caught_up=caught_up, is_fenced=fenced, should_shut_down=False,
            high_watermark=high_watermark,
        )  # fmt: skip

    def build_unregister(self, broker_id: int) -> tuple[Records, None]:
        """Fence (moving leaderships and ISR places away), then forget the broker."""
        broker = self.image.brokers.get(broker_id)
        if broker is None:
            raise ControllerError(
                ApiError.BROKER_ID_NOT_REGISTERED, f"broker {broker_id} is not registered"
            )
        records = [] if broker.fenced else self.fence_records(broker_id)
        records.append(
            wrap(
                unregister_broker=md.UnregisterBrokerRecord(
                    broker_id=broker_id, broker_epoch=broker.broker_epoch
                )
            )
        )
        self.sessions.pop(broker_id, None)
        return records, None

    def fence_records(self, broker_id: int) -> Records:
        """Fence a broker and move its leaderships and ISR places away."""
        broker = self.image.brokers[broker_id]
        ok = acceptable_leader(self.image)
        records: Records = [
            wrap(
                fence_broker=md.FenceBrokerRecord(
                    broker_id=broker_id, broker_epoch=broker.broker_epoch
                )
            )
        ]
        records += moves_for_unavailable_broker(
            self.image, broker_id, lambda b: b != broker_id and ok(b)
        )
        return records

    def _alive(self, broker_id: int, now: float | None = None) -> bool:
        session = self.sessions.get(broker_id)
        now = self.clock() if now is None else now
        return session is not None and now - session.last_heartbeat < self.session_timeout_s
