"""Where the replicas of new partitions go (the seeds' scheme, as Kafka does it).

Brokers sorted by id; a random start index `s` and a random shift `k`: partition
i's first replica (its preferred leader) is broker (s + i) mod n, so leaders go
round the brokers; its j-th other replica is (first + 1 + (k + j) mod (n - 1))
mod n, and `k` moves on each time i passes a multiple of n, so the followers of
one leader do not always sit on the same neighbours. With racks, the broker list
is first interleaved by rack (r1, r2, r3, r1, ...), so consecutive brokers sit
on different racks and a partition's replicas span min(RF, racks) racks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from quorum.controller.api_errors import ApiError, ControllerError


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    rack: str | None = None


def place_replicas(
    num_partitions: int,
    replication_factor: int,
    brokers: Sequence[BrokerInfo],
    rng: random.Random,
    start_partition: int = 0,
) -> list[tuple[int, ...]]:
    if num_partitions < 1:
        raise ControllerError(
            ApiError.INVALID_PARTITIONS,
            f"number of partitions must be at least 1, got {num_partitions}",
        )
    if replication_factor < 1:
        raise ControllerError(
            ApiError.INVALID_REPLICATION_FACTOR,
            f"replication factor must be at least 1, got {replication_factor}",
        )
    if replication_factor > len(brokers):
        raise ControllerError(
            ApiError.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the "
            f"{len(brokers)} available (registered, unfenced) brokers",
        )
    racks = {b.rack for b in brokers}
    if None in racks and len(racks) > 1:
        raise ControllerError(
            ApiError.INVALID_REPLICA_ASSIGNMENT,
            "not all brokers have rack information; set broker.rack on every broker or none",
        )
    rack_aware = None not in racks
    ids = _rack_alternated(brokers) if rack_aware else sorted(b.broker_id for b in brokers)
    rack_of = {b.broker_id: b.rack for b in brokers}
    n = len(ids)
    start = rng.randrange(n)
    shift = rng.randrange(n)
    out: list[tuple[int, ...]] = []
    for i in range(start_partition, start_partition + num_partitions):
        if i > start_partition and i % n == 0:
            shift += 1
        first = (start + i) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            step = 1 + (shift + j) % (n - 1)
            candidate = (first + step) % n
            if rack_aware:
                candidate = _next_on_new_rack(ids, candidate, replicas, rack_of, len(racks))
            replicas.append(ids[candidate])
        out.append(tuple(replicas))
    return out


def _next_on_new_rack(
    ids: list[int], start: int, chosen: list[int], rack_of: dict[int, str | None], racks: int
) -> int:
    """From `start` onwards, the first broker not yet chosen whose rack is not yet
    used (while unused racks remain), as Kafka's rack-aware assignment walks."""
    used = {rack_of[b] for b in chosen}
    fallback = -1
    for k in range(len(ids)):
        index = (start + k) % len(ids)
        broker = ids[index]
        if broker in chosen:
            continue
        if len(used) >= racks or rack_of[broker] not in used:
            return index
        if fallback < 0:
            fallback = index
    return fallback


def _rack_alternated(brokers: Sequence[BrokerInfo]) -> list[int]:
    by_rack: dict[str, list[int]] = {}
    for b in sorted(brokers, key=lambda b: b.broker_id):
        by_rack.setdefault(b.rack or "", []).append(b.broker_id)
    racks = sorted(by_rack)
    out: list[int] = []
    for i in range(max(len(v) for v in by_rack.values())):
        out.extend(by_rack[r][i] for r in racks if i < len(by_rack[r]))
    return out


def validate_assignment(
    assignments: Mapping[int, Sequence[int]], known_brokers: set[int], first_partition: int = 0
) -> None:
    """Explicit assignments: contiguous partitions, one RF, distinct known brokers."""
    if not assignments:
        raise ControllerError(ApiError.INVALID_REPLICA_ASSIGNMENT, "the assignment is empty")
    expected = list(range(first_partition, first_partition + len(assignments)))
    if sorted(assignments) != expected:
        raise ControllerError(
            ApiError.INVALID_REPLICA_ASSIGNMENT,
            f"partitions must be numbered {expected[0]}..{expected[-1]} without gaps, "
            f"got {sorted(assignments)}",
        )
    factors = {len(r) for r in assignments.values()}
    if len(factors) != 1 or 0 in factors:
        raise ControllerError(
            ApiError.INVALID_REPLICA_ASSIGNMENT,
            f"every partition needs the same, non-zero number of replicas, got {sorted(factors)}",
        )
    for partition, replicas in sorted(assignments.items()):
        if len(set(replicas)) != len(replicas):
            raise ControllerError(
                ApiError.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition} lists a broker twice: {list(replicas)}",
            )
        unknown = sorted(set(replicas) - known_brokers)
        if unknown:
            raise ControllerError(
                ApiError.INVALID_REPLICA_ASSIGNMENT,
                f"partition {partition} names unregistered brokers {unknown}",
            )
