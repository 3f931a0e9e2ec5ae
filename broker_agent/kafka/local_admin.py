"""The admin APIs a broker answers itself: DescribeCluster (from its committed
metadata image, as KRaft brokers do), DeleteRecords and DescribeLogDirs (its
own replicas, through the replica manager).

DeleteRecords moves the leader's log start offset (Kafka's `deleteRecords`):
-1 means the high watermark; past the high watermark is OFFSET_OUT_OF_RANGE;
followers follow the leader's log start offset on their next fetch. Nothing
below the new start is served again. With ACLs on it needs DELETE on the topic
(else TOPIC_AUTHORIZATION_FAILED for its partitions), and DescribeLogDirs
DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED), as in Kafka.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.listener import Connection
from broker_agent.kafka.metadata_answer import live_brokers
from broker_agent.partitions.partition import Role
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.authz.authorizer import Operation
from quorum.controller.metadata_image import MetadataImage

OPERATIONS_OMITTED = -(2**31)
HIGH_WATERMARK = -1


class LocalAdmin:
    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        replicas: ReplicaManager | None,
        log_dir: Path | None,
        authz: KafkaAuthorizer,
    ) -> None:
        self.authz = authz
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.image = image
        self.replicas = replicas
        self.log_dir = log_dir

    async def describe_cluster(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        image = self.image()
        live = live_brokers(image, conn.listener_name)
        brokers = [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"],
             "is_fenced": False}
            for b in live
        ]  # fmt: skip
        if getattr(body, "include_fenced_brokers", False):
            for b in sorted(image.brokers.values(), key=lambda b: b.broker_id):
                if not b.fenced:
                    continue
                for name, host, port, _protocol in b.endpoints:
                    if name == conn.listener_name:
                        brokers.append({"broker_id": b.broker_id, "host": host, "port": port,
                                        "rack": b.rack, "is_fenced": True})  # fmt: skip
                        break
        ids = {b["node_id"] for b in live}
        controller_id = self.node_id if self.node_id in ids else min(ids, default=-1)
        if int(getattr(body, "endpoint_type", 1)) != 1:  # 2: controllers, not reachable here
            return {
                "throttle_time": 0,
                "error_code": int(ErrorCode.unsupported_endpoint_type),
                "error_message": "the controllers are not reachable by clients",
                "endpoint_type": int(body.endpoint_type),
                "cluster_id": self.cluster_id,
                "controller_id": -1,
                "brokers": [],
                "cluster_authorized_operations": OPERATIONS_OMITTED,
            }
        return {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": 1,
            "cluster_id": self.cluster_id,
            "controller_id": controller_id,
            "brokers": brokers,
            "cluster_authorized_operations": OPERATIONS_OMITTED,
        }

    async def delete_records(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        def one(topic: str, partition: int, offset: int) -> dict[str, Any]:
            if not self.authz.topic(conn, topic, Operation.DELETE):
                error, low = ErrorCode.topic_authorization_failed, -1
            else:
                error, low = self._delete_before(topic, partition, offset)
            return {"partition_index": partition, "low_watermark": low, "error_code": int(error)}

        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        one(t.name, int(p.partition_index), int(p.offset)) for p in t.partitions
                    ],
                }
                for t in body.topics
            ],
        }

    def _delete_before(self, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
        found = self.image().topic(topic)
        if found is None or partition not in found.partitions:
            return ErrorCode.unknown_topic_or_partition, -1
        part = self.replicas.partition_state(topic, partition) if self.replicas else None
        if part is None or part.role is not Role.LEADER:
            return ErrorCode.not_leader_or_follower, -1
        target = part.high_watermark if offset == HIGH_WATERMARK else offset
        if target < 0 or target > part.high_watermark:
            return ErrorCode.offset_out_of_range, -1
        if target > part.log.log_start_offset:
            part.log.advance_log_start(target)
            part.notify()
        return ErrorCode.none, part.log.log_start_offset

    async def describe_log_dirs(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if not self.authz.cluster(conn, Operation.DESCRIBE):
            return {
                "throttle_time": 0,
                "error_code": int(ErrorCode.cluster_authorization_failed),
                "results": [],
            }
        wanted: dict[str, set[int]] | None = None
        if body.topics is not None:
            wanted = {t.topic: {int(p) for p in t.partitions} for t in body.topics}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        parts = self.replicas.partitions if self.replicas is not None else {}
        for (topic, partition), part in sorted(parts.items()):
            if wanted is not None and partition not in wanted.get(topic, set()):
                continue
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "partition_size": part.log.size_bytes,
                    "offset_lag": 0
                    if part.role is Role.LEADER
                    else max(0, part.high_watermark - part.log.log_end_offset),
                    "is_future_key": False,
                }
            )
        total, usable = -1, -1
        if self.log_dir is not None:
            with contextlib.suppress(OSError):
                usage = shutil.disk_usage(self.log_dir)
                total, usable = usage.total, usage.free
        return {
            "throttle_time": 0,
            "error_code": 0,
            "results": [
                {
                    "error_code": 0,
                    "log_dir": str(self.log_dir.resolve()) if self.log_dir else "",
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                    "total_bytes": total,
                    "usable_bytes": usable,
                    "is_cordoned": False,
                }
            ],
        }
