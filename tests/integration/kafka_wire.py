"""Raw Kafka requests over a socket, for the tests of the brokers' Kafka listeners.

Built with the same kio classes the broker decodes with, so a test says which API
and version it sends, and reads the typed answer; bad bytes are sent as bytes.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as HeaderV1
from kio.schema.request_header.v2.header import RequestHeader as HeaderV2

from broker_agent.kafka import codec
from broker_agent.kafka.versions import ApiKey
from tests.integration.controller_cluster import Cluster


class KafkaSocket:
    def __init__(self, host: str, port: int, timeout_s: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> KafkaSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        """Send one request built from `values`; return the decoded response."""
        self.send_request(api_key, version, values)
        correlation_id, body = codec.decode_response(self.read_frame(), api_key, version)
        assert correlation_id == self.correlation_id
        return body

    def send_request(self, api_key: int, version: int, values: dict[str, Any]) -> None:
        cls = codec.request_class(api_key, version)
        self.correlation_id += 1
        header_cls = HeaderV2 if cls.__header_schema__ is HeaderV2 else HeaderV1
        header = header_cls(
            request_api_key=api_key,
            request_api_version=version,
            correlation_id=self.correlation_id,
            client_id="tests",
        )  # type: ignore[arg-type]
        self.sock.sendall(codec.encode_request(header, codec.build(cls, values)))

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.sock.recv(n - len(out))
            if not chunk:
                raise ConnectionError("closed by the broker")
            out += chunk
        return out

    def closed_by_peer(self) -> bool:
        """True once the broker has closed this connection (EOF or reset)."""
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True


# ------------------------------------------------------------ request bodies


def metadata_v12(topics: list[str] | None) -> dict[str, object]:
    return {
        "topics": None if topics is None else [{"name": t, "topic_id": None} for t in topics],
        "allow_auto_topic_creation": False,  # reads only: no topic is created by asking
        "include_topic_authorized_operations": False,
    }


def wait_for_topic_everywhere(cluster: Cluster, topic: str) -> None:
    def seen() -> bool:
        for b in cluster.brokers:
            with KafkaSocket("127.0.0.1", cluster.brokers[b].port) as s:
                answer = s.request(ApiKey.METADATA, 12, metadata_v12([topic]))
                if answer.topics[0].error_code != ErrorCode.none:
                    return False
        return True

    cluster.wait_until(seen, 20, f"topic {topic} in every broker's metadata")


def produce_values(topic: str, partition: int, acks: int = 1) -> dict[str, object]:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout": 5000,
        "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": b"\0" * 70}]}
        ],
    }


def fetch_values(topic: str, partition: int) -> dict[str, object]:
    return {
        "replica_id": -1, "max_wait": 10, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": topic, "partitions": [
            {"partition": partition, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1 << 20}]}],
        "forgotten_topics_data": [], "rack_id": "",
    }  # fmt: skip


def leader_of(
    cluster: Cluster, topic: str, partition: int, via: int | None = None
) -> tuple[int, int]:
    """(leader id, leader epoch) from broker `via`'s Metadata answer."""
    broker = cluster.brokers[via if via is not None else min(cluster.brokers)]
    with KafkaSocket("127.0.0.1", broker.port) as s:
        answer = s.request(ApiKey.METADATA, 12, metadata_v12([topic]))
    (p,) = [p for p in answer.topics[0].partitions if p.partition_index == partition]
    return int(p.leader_id), int(p.leader_epoch)


def broker_socket(cluster: Cluster, broker_id: int) -> KafkaSocket:
    return KafkaSocket("127.0.0.1", cluster.brokers[broker_id].port)


def latest_offset(cluster: Cluster, topic: str, partition: int) -> int:
    leader, _ = leader_of(cluster, topic, partition)
    with broker_socket(cluster, leader) as s:
        answer = s.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": topic, "partitions": [
                {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}]}],
        })  # fmt: skip
    (p,) = answer.topics[0].partitions
    assert p.error_code == ErrorCode.none
    return int(p.offset)


def produce_batch(
    cluster: Cluster, broker_id: int, topic: str, partition: int, batch: bytes, version: int = 9
) -> ErrorCode:
    values = produce_values(topic, partition, acks=-1)
    values["topic_data"] = [{"name": topic, "partition_data": [{"index": partition,
                                                                "records": batch}]}]  # fmt: skip
    with broker_socket(cluster, broker_id) as s:
        answer = s.request(ApiKey.PRODUCE, version, values)
    return answer.responses[0].partition_responses[0].error_code
