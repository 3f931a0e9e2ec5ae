"""The entities of the metadata image: brokers, topics, partitions, ACLs.

Plain values the image holds and its readers (the controller, the brokers'
metadata cache, the Kafka edge) look at; a partition's state is replaced,
never changed in place, so a reader's copy stays what it read.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    broker_id: int
    incarnation_id: str
    broker_epoch: int
    endpoints: tuple[tuple[str, str, int, str], ...]
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    features: tuple[tuple[str, int, int], ...] = ()
    log_dirs: tuple[str, ...] = ()  # KIP-858 directory ids, the metadata.log.dir's first

    @property
    def state(self) -> str:
        if self.in_controlled_shutdown:
            return "STOPPING"
        return "FENCED" if self.fenced else "ONLINE"


@dataclass(slots=True)
class PartitionState:
    """Immutable by rule, replaced on change: a snapshot then needs only shallow
    copies of the containers, taken on the event loop in milliseconds, and encodes
    them in a worker thread while applying goes on. Nothing assigns a field after
    construction except the snapshot memo. (Not `frozen=True`: a frozen
    dataclass takes five times as long to build, and a million partitions are
    built on every replica.)

    It says nothing of which partition it is, so the image shares one object
    between every partition in the same state (`partition_states.py`): a
    million partitions over a few brokers hold a few hundred states, not a
    million."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: tuple[int, ...] = ()
    adding_replicas: tuple[int, ...] = ()
    # Its PartitionRecord's fields 3-9 encoded, by the first snapshot that meets
    # this state, and kept: a partition's snapshot record is a few bytes of its
    # own ids before these (`image_records.partition_value`). Not an __init__
    # argument, so `dataclasses.replace` starts it afresh.
    tail: bytes | None = field(default=None, init=False, compare=False, repr=False)


@dataclass(slots=True)
class TopicImage:
    name: str
    topic_id: str
    partitions: dict[int, PartitionState] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class AclEntry:
    acl_id: str
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission_type: int
