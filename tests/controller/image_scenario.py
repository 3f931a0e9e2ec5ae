"""A metadata image built by applying records, for the controller's unit tests.

The controller's builders read the committed image and return records; these
helpers build that image the way the log would (every record applied at the next
offset), run a builder's records through it again, and read the answer back, so
a test reads as the scenario it checks: brokers register, a topic exists, a
request arrives, the records it produced are committed, and the image shows the
outcome.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence

from quorum.controller.api_errors import ApiError
from quorum.controller.metadata_image import (
    BrokerRegistration,
    MetadataImage,
    PartitionState,
    TopicImage,
)
from quorum.controller.record_codec import encode, record_type, wrap
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md

TOPIC = md.CONFIG_RESOURCE_TOPIC
BROKER = md.CONFIG_RESOURCE_BROKER
CLUSTER = md.CONFIG_RESOURCE_CLUSTER


class Scenario:
    """An image standing at some offset, as the active controller sees it."""

    def __init__(self, seed: int = 7) -> None:
        self.image = MetadataImage()
        self.rng = random.Random(seed)
        self._ids = 0

    @property
    def next_offset(self) -> int:
        return self.image.applied_offset

    def commit(self, records: Iterable[md.MetadataRecord]) -> None:
        """Apply records at the next offsets, encoded as they are on the log."""
        for record in records:
            self.image.apply(self.next_offset, encode(record))

    # ------------------------------------------------------------ brokers

    def broker(
        self,
        broker_id: int,
        rack: str | None = None,
        fenced: bool = False,
        incarnation: str | None = None,
    ) -> BrokerRegistration:
        """Register a broker (its epoch is its registration's offset, as the
        controller assigns it) and, unless `fenced`, unfence it."""
        epoch = self.next_offset
        record = md.RegisterBrokerRecord(
            broker_id=broker_id,
            incarnation_id=incarnation or f"incarnation-{broker_id}",
            broker_epoch=epoch,
            endpoints=[
                md.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=9000 + broker_id)
            ],
            fenced=True,
        )
        if rack is not None:
            record.rack = rack
        self.commit([wrap(register_broker=record)])
        if not fenced:
            self.commit(
                [
                    wrap(
                        unfence_broker=md.UnfenceBrokerRecord(
                            broker_id=broker_id, broker_epoch=epoch
                        )
                    )
                ]
            )
        return self.image.brokers[broker_id]

    def brokers(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            self.broker(broker_id)

    def fence(self, broker_id: int) -> None:
        """Fence a broker by record alone (no partition moves), as a test's premise."""
        epoch = self.image.brokers[broker_id].broker_epoch
        self.commit(
            [wrap(fence_broker=md.FenceBrokerRecord(broker_id=broker_id, broker_epoch=epoch))]
        )

    # ------------------------------------------------------------- topics

    def topic(
        self,
        name: str,
        assignment: Sequence[Sequence[int]],
        isr: Sequence[Sequence[int]] | None = None,
        leaders: Sequence[int] | None = None,
        configs: dict[str, str] | None = None,
    ) -> str:
        """A topic as its records would have created it; `isr` and `leaders`
        (per partition, default: all replicas and the first) set up a premise."""
        self._ids += 1
        topic_id = f"topic-{self._ids}-{name}"
        records = [wrap(topic=md.TopicRecord(name=name, topic_id=topic_id))]
        for pid, replicas in enumerate(assignment):
            records.append(
                wrap(
                    partition=md.PartitionRecord(
                        topic_id=topic_id,
                        partition_id=pid,
                        replicas=replicas,
                        isr=isr[pid] if isr is not None else replicas,
                        leader=leaders[pid] if leaders is not None else replicas[0],
                    )
                )
            )
        for key, value in sorted((configs or {}).items()):
            records.append(config_record(TOPIC, name, key, value))
        self.commit(records)
        return topic_id

    def config(self, resource_type: int, name: str, key: str, value: str) -> None:
        self.commit([config_record(resource_type, name, key, value)])

    def topic_image(self, name: str) -> TopicImage:
        topic = self.image.topic(name)
        assert topic is not None, f"no topic {name!r} in the image"
        return topic

    def part(self, name: str, pid: int = 0) -> PartitionState:
        return self.topic_image(name).partitions[pid]


def config_record(resource_type: int, name: str, key: str, value: str) -> md.MetadataRecord:
    return wrap(
        config=md.ConfigRecord(
            resource_type=resource_type,  # type: ignore[arg-type]
            resource_name=name,
            name=key,
            value=value,
        )
    )


def kinds(records: Iterable[md.MetadataRecord]) -> list[str]:
    """The record types, in order: what a write would put on the log."""
    return [record_type(r) for r in records]


def error_of(result: object) -> ApiError:
    """The ApiError of one per-item result (anything with an `error` ApiError)."""
    error = result.error  # type: ignore[attr-defined]
    assert isinstance(error, api.ApiError)
    return ApiError[error.error_name]


def leader_isr(part: PartitionState) -> tuple[int, tuple[int, ...]]:
    return part.leader, part.isr


def epochs(part: PartitionState) -> tuple[int, int]:
    """(leader epoch, partition epoch)."""
    return part.leader_epoch, part.partition_epoch
