"""What `quorumctl topics describe` asks the brokers: each replica's log end offset,
and each partition's high watermark and log start offset.

The metadata (leader, replicas, ISR) comes from the controllers; the offsets live
on the brokers, so they are asked with Kafka's ListOffsets over their Kafka
listeners (addresses from the controllers' DescribeCluster, the brokers'
advertised listeners):

* every replica's broker, with Kafka's DEBUGGING_REPLICA_ID (-2) and LATEST: the
  replica's own LEO, leader or follower (what Kafka's tools use it for);
* the leader, as a consumer (replica id -1) with LATEST: the high watermark, and
  with -2 and EARLIEST: the log start offset.

An SSL listener is reached with the command's TLS settings (`--ssl-ca-location`
and, for mTLS, `--ssl-certificate-location` / `--ssl-key-location`: the same
files that reach the controllers, as in a cluster with TLS everywhere).

Brokers are asked in parallel with a short timeout each; one that cannot be
reached, does not answer, or answers with an error leaves its values unknown
(None), never fails or stalls the command. A replica's lag is the leader's LEO
minus its own, as `kafka-metadata-quorum.sh describe --replication` shows it.
"""

from __future__ import annotations

import ssl
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from quorum.common.tls import TlsSettings

if TYPE_CHECKING:
    from quorum.cli.kafka_client import KafkaConnection

CONSUMER, DEBUGGING = -1, -2
EARLIEST, LATEST = -2, -1
BROKER_TIMEOUT_S = 3.0

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class BrokerAddress:
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


def ssl_context(tls: TlsSettings | None) -> ssl.SSLContext:
    """TLS to an SSL listener: the CA given (else the system's), the client
    certificate when one is given."""
    cafile = (tls.ca_location or None) if tls is not None else None
    context = ssl.create_default_context(cafile=cafile)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if tls is not None and tls.certificate_location and tls.key_location:
        context.load_cert_chain(tls.certificate_location, tls.key_location)
    return context


@dataclass(frozen=True, slots=True)
class PartitionPlacement:
    topic: str
    partition: int
    leader: int  # -1: none
    replicas: tuple[int, ...]


@dataclass
class PartitionOffsets:
    """None wherever the broker that knows it did not say."""

    high_watermark: int | None = None
    log_start_offset: int | None = None
    log_end_offsets: dict[int, int | None] = field(default_factory=dict)

    def lag(self, leader: int, replica: int) -> int | None:
        """The leader's LEO minus the replica's (0 for the leader itself)."""
        ends = self.log_end_offsets
        top, own = ends.get(leader), ends.get(replica)
        if top is None or own is None:
            return None
        return max(0, top - own)


def list_offsets_request(
    replica_id: int, timestamp: int, partitions: Iterable[TopicPartition]
) -> Any:
    """One ListOffsets (v7) for `partitions`, grouped by topic as the schema wants.
    (The Kafka structs are imported here, not at the top: `topics describe` runs
    without them when no broker is asked.)"""
    from kio.schema.list_offsets.v7.request import (
        ListOffsetsPartition,
        ListOffsetsRequest,
        ListOffsetsTopic,
    )
    from kio.static.primitive import i8, i32, i64

    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    return ListOffsetsRequest(
        replica_id=i32(replica_id),
        isolation_level=i8(0),
        topics=tuple(
            ListOffsetsTopic(
                name=t,
                partitions=tuple(
                    ListOffsetsPartition(
                        partition_index=i32(p),
                        current_leader_epoch=i32(-1),
                        timestamp=i64(timestamp),
                    )
                    for p in ps
                ),
            )
            for t, ps in topics.items()
        ),
    )


def _answers(conn: KafkaConnection, request: Any) -> dict[TopicPartition, int]:
    from kio.schema.errors import ErrorCode

    answer = conn.request(request)
    return {
        (str(t.name), int(p.partition_index)): int(p.offset)
        for t in answer.topics
        for p in t.partitions
        if p.error_code == ErrorCode.none and p.offset >= 0
    }


@dataclass
class _BrokerAnswers:
    log_end: dict[TopicPartition, int] = field(default_factory=dict)
    high_watermark: dict[TopicPartition, int] = field(default_factory=dict)
    log_start: dict[TopicPartition, int] = field(default_factory=dict)


def _ask(
    address: BrokerAddress,
    hosted: list[TopicPartition],
    led: list[TopicPartition],
    timeout_s: float,
    tls: TlsSettings | None,
) -> _BrokerAnswers:
    from quorum.cli.kafka_client import KafkaClientError, KafkaConnection

    out = _BrokerAnswers()
    try:
        context = ssl_context(tls) if address.security_protocol == "SSL" else None
        with KafkaConnection(address.host, address.port, timeout_s, context) as conn:
            if hosted:
                out.log_end = _answers(conn, list_offsets_request(DEBUGGING, LATEST, hosted))
            if led:
                out.high_watermark = _answers(conn, list_offsets_request(CONSUMER, LATEST, led))
                out.log_start = _answers(conn, list_offsets_request(DEBUGGING, EARLIEST, led))
    except (KafkaClientError, OSError):
        pass  # unreachable, silent past the timeout, or closed: what it did not say stays unknown
    except Exception:  # an answer that does not parse must not crash the command either
        pass
    return out


def fetch_offsets(
    placements: Iterable[PartitionPlacement],
    brokers: Mapping[int, BrokerAddress],
    timeout_s: float = BROKER_TIMEOUT_S,
    tls: TlsSettings | None = None,
) -> dict[TopicPartition, PartitionOffsets]:
    """The offsets of every placement, unknown where no broker answered."""
    placements = list(placements)
    hosted: dict[int, list[TopicPartition]] = {}
    led: dict[int, list[TopicPartition]] = {}
    for p in placements:
        for replica in p.replicas:
            hosted.setdefault(replica, []).append((p.topic, p.partition))
        if p.leader >= 0:
            led.setdefault(p.leader, []).append((p.topic, p.partition))
    asked = [b for b in sorted(set(hosted) | set(led)) if b in brokers]
    answers: dict[int, _BrokerAnswers] = {}
    if asked:
        with ThreadPoolExecutor(max_workers=min(16, len(asked))) as pool:
            futures = {
                b: pool.submit(_ask, brokers[b], hosted.get(b, []), led.get(b, []), timeout_s, tls)
                for b in asked
            }
            answers = {b: f.result() for b, f in futures.items()}
    out: dict[TopicPartition, PartitionOffsets] = {}
    for p in placements:
        key = (p.topic, p.partition)
        leader = answers.get(p.leader, _BrokerAnswers())
        out[key] = PartitionOffsets(
            high_watermark=leader.high_watermark.get(key),
            log_start_offset=leader.log_start.get(key),
            log_end_offsets={
                r: answers.get(r, _BrokerAnswers()).log_end.get(key) for r in p.replicas
            },
        )
    return out
