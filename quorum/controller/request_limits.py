"""How big and how costly one admin request may be, as controller properties.

The active controller is one event loop: a request that asks for 10^9
partitions would place them there, and everything else (heartbeats, fetches,
elections) would wait behind it until the process ran out of memory. Every
bound here is checked before a request touches the image or reaches replica
placement, so the worst request costs what the limits allow and no more.

Kafka bounds its requests by bytes (``socket.request.max.bytes``) and, in KRaft,
by the records one user operation may produce; it has no per-request partition
property, so ours are named in its style (KIP-578 proposed ``max.partitions``
for the cluster-wide cap). The properties file sets them (quorum/controller_config.py
reads `PROPERTIES`); a limit breached refuses the whole call with
POLICY_VIOLATION (a count the operator capped) or INVALID_REQUEST (a field no
sane client sends).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

INT32_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class RequestLimits:
    """The bounds every admin request is held to (defaults fit a million-partition cluster)."""

    # New partitions one CreateTopics or CreatePartitions call may add, summed over
    # its topics: bounds the placement work and the records of one atomic batch.
    max_partitions_per_request: int = 10_000
    # Partitions the cluster may hold in all: the image lives in memory.
    max_partitions: int = 2_000_000
    # Items in one request: topics, resources, config ops, ACL bindings or
    # filters, partitions to elect, feature updates.
    max_request_items: int = 10_000
    # Characters in any name a request carries: resource and config names,
    # principals, hosts, topic ids, feature names.
    max_name_length: int = 1024
    # Characters in one config value.
    max_config_value_length: int = 4096
    # Bytes of one gRPC message the controller accepts (Kafka's server-side
    # bound, same default); larger ones are refused by gRPC before decoding.
    socket_request_max_bytes: int = 100 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class LimitProperty:
    """One limit as a property: its key, the field it sets, and its floor."""

    key: str
    field: str
    minimum: int


PROPERTIES: tuple[LimitProperty, ...] = (
    LimitProperty("controller.max.partitions.per.request", "max_partitions_per_request", 1),
    LimitProperty("max.partitions", "max_partitions", 1),
    LimitProperty("controller.max.request.items", "max_request_items", 1),
    LimitProperty("controller.max.name.length", "max_name_length", 249),
    LimitProperty("controller.max.config.value.length", "max_config_value_length", 64),
    LimitProperty("socket.request.max.bytes", "socket_request_max_bytes", 64 * 1024),
)

DEFAULTS = RequestLimits()


def default_of(prop: LimitProperty) -> int:
    value: int = getattr(DEFAULTS, prop.field)
    return value


def property_of(field_name: str) -> str:
    """The property an operator sets to change a limit, for refusal messages."""
    return next(p.key for p in PROPERTIES if p.field == field_name)


def limits_from(values: dict[str, int]) -> RequestLimits:
    """Limits from {field: value}; a field left out keeps its default."""
    known = {f.name for f in fields(RequestLimits)}
    return RequestLimits(**{k: v for k, v in values.items() if k in known})
