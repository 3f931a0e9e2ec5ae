"""The Kafka API handlers: thin adapters from kio requests to the broker's parts.

Each handler reads the request fields it needs (the same names in every served
version; fields a version lacks read as their defaults) and returns a plain
mapping, which `codec.build` turns into the response class of the request's
version. Metadata is answered from the broker's committed metadata image;
Produce, Fetch, ListOffsets and OffsetsForLeaderEpoch go to the replica manager
(ListOffsets from Kafka's DEBUGGING_REPLICA_ID, -2, as tools send it, is answered
by any replica from its own log: latest is its LEO, where a consumer's is the HW);
InitProducerId hands out ids from blocks the controller allocates.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.groups.coordinator import GroupCoordinator
from broker_agent.kafka import codec
from broker_agent.kafka.admin_handlers import install_admin_apis
from broker_agent.kafka.answer_cache import AnswerCache, CachedAnswer
from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.auto_create import AutoCreateConfig
from broker_agent.kafka.group_apis import CLIENT_ID, GroupApis
from broker_agent.kafka.listener import CloseConnection, Connection, api_versions_table
from broker_agent.kafka.metadata_answer import metadata_response, metadata_shape
from broker_agent.kafka.metrics import error_codes
from broker_agent.kafka.producer_ids import ProducerIdSource
from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.api import DEBUGGING_REPLICA_ID, FetchPartition
from broker_agent.partitions.compression import ZSTD
from broker_agent.partitions.record_batch import CODEC_BITS, InvalidRecordBatch, parse_header
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.authz.authorizer import NO_AUTHORIZER, Operation
from quorum.controller.metadata_image import MetadataImage

log = logging.getLogger("broker_agent.kafka")

# KIP-110: a producer may send zstd batches from Produce v7 on; Kafka refuses them
# in older versions with UNSUPPORTED_COMPRESSION_TYPE (its clients never do so).
ZSTD_PRODUCE_VERSION = 7

Handler = Callable[[Any, int, Connection], Awaitable[dict[str, Any] | None]]


class KafkaApis:
    """The dispatch of one broker: `handle` is the listener's `Dispatch`."""

    def __init__(
        self,
        node_id: int,
        cluster_id: str,
        image: Callable[[], MetadataImage],
        replicas: ReplicaManager | None,
        producer_ids: ProducerIdSource | None,
        authorizer: KafkaAuthorizer | None = None,
        groups: GroupCoordinator | None = None,
    ) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.image = image
        self.replicas = replicas
        self.producer_ids = producer_ids
        self.authz = authorizer or KafkaAuthorizer(NO_AUTHORIZER, image)
        self.requests: dict[str, int] = {}
        self.answers = AnswerCache()  # Metadata answers of the current image
        # (api, version, seconds, response mapping or None): the request metrics
        self.observe: Callable[[str, int, float, dict[str, Any] | None], None] | None = None
        self._handlers: dict[int, Handler] = {
            ApiKey.API_VERSIONS: self.api_versions,
            ApiKey.METADATA: self.metadata,
            ApiKey.PRODUCE: self.produce,
            ApiKey.FETCH: self.fetch,
            ApiKey.LIST_OFFSETS: self.list_offsets,
            ApiKey.OFFSET_FOR_LEADER_EPOCH: self.offsets_for_leader_epoch,
            ApiKey.INIT_PRODUCER_ID: self.init_producer_id,
        }
        self._written: set[int] = set()
        self._handlers.update(GroupApis(node_id, image, groups, self.authz).handlers())
        # The admin APIs (admin_handlers.py): REQUEST_TIMED_OUT until server.py
        # installs them again with a client for the controllers.
        install_admin_apis(self, None, image, replicas, None, AutoCreateConfig(enabled=False))

    def add_handlers(self, handlers: Mapping[int, Handler], written: Iterable[int] = ()) -> None:
        """APIs served by other modules (the admin APIs, `admin_handlers.py`);
        an entry for an API already here replaces it (Metadata's auto-creation).
        The answers of the APIs in `written` are written by the compiled writer
        (`codec.write_response`) instead of built as kio entities."""
        self._handlers.update(handlers)
        self._written.update(written)

    async def handle(self, request: codec.DecodedRequest, conn: Connection) -> Any | None:
        name = codec.api_name(request.api_key)
        self.requests[name] = self.requests.get(name, 0) + 1
        log.debug("%s v%d from %s", name, request.api_version, request.client_id)
        CLIENT_ID.set(request.client_id or "")
        started = time.monotonic()
        values = await self._handlers[request.api_key](request.body, request.api_version, conn)
        if isinstance(values, CachedAnswer):
            if values.body is None:  # its first use: built and encoded once
                cls = codec.response_class(request.api_key, request.api_version)
                values.body = codec.encode_body(codec.build(cls, values))
                values.error_codes = tuple(error_codes(values))
                values.response_class = cls
            if self.observe is not None:
                self.observe(name, request.api_version, time.monotonic() - started, values)
            return codec.Encoded(values.response_class, values.body)
        if self.observe is not None:
            self.observe(name, request.api_version, time.monotonic() - started, values)
        if values is None:
            return None
        cls = codec.response_class(request.api_key, request.api_version)
        if request.api_key in self._written:
            return codec.write_response(cls, values)
        return codec.build(cls, values)

    # ------------------------------------------------------------ cluster

    async def api_versions(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        return {"error_code": 0, "api_keys": api_versions_table(), "throttle_time": 0}

    async def metadata(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        """From the answer cache while the image has not moved (`answer_cache.py`):
        a failover's Metadata storm asks the same few questions thousands of times."""
        image = self.image()
        key = (version, conn.listener_name, self._visibility(conn), metadata_shape(body))
        cached = self.answers.get(image, key)
        if cached is not None:
            return cached
        values = metadata_response(
            image, self.node_id, self.cluster_id, conn.listener_name, body, version,
            lambda topic: self.authz.topic(conn, topic, Operation.DESCRIBE),
        )  # fmt: skip
        if any(t["error_code"] for t in values["topics"]):
            return values
        return self.answers.put(image, key, values)

    def _visibility(self, conn: Connection) -> tuple[str, str] | None:
        """Who asks, as far as an answer can differ by it: nobody without an
        authorizer; the principal and host (ACLs may name hosts) with one."""
        return (conn.principal, conn.peer_host) if self.authz.enabled else None

    async def init_producer_id(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if body.transactional_id is not None:
            # Transactions are not served: a transactional producer is refused for good.
            return _init_error(ErrorCode.transactional_id_authorization_failed)
        if not (
            self.authz.cluster(conn, Operation.IDEMPOTENT_WRITE)
            or self.authz.may_write_some_topic(conn)
        ):
            return _init_error(ErrorCode.cluster_authorization_failed)
        if self.producer_ids is None:
            return _init_error(ErrorCode.coordinator_not_available)
        try:
            producer_id = await self.producer_ids.next_id()
        except Exception as err:  # the controller unreachable: the client retries
            log.info("InitProducerId: no producer id block: %s", err)
            return _init_error(ErrorCode.coordinator_not_available)
        return {
            "throttle_time": 0,
            "error_code": 0,
            "producer_id": producer_id,
            "producer_epoch": 0,
        }

    # --------------------------------------------------------------- data

    def _known(self, topic: str, partition: int) -> bool:
        found = self.image().topic(topic)
        return found is not None and partition in found.partitions

    async def produce(self, body: Any, version: int, conn: Connection) -> dict[str, Any] | None:
        acks = int(body.acks)
        timeout_ms = codec.millis(body.timeout)

        async def one(topic: str, partition: int, records: bytes | None) -> dict[str, Any]:
            if acks not in (0, 1, -1):
                return _produce_error(partition, ErrorCode.invalid_required_acks)
            if not self.authz.topic(conn, topic, Operation.WRITE):
                return _produce_error(partition, ErrorCode.topic_authorization_failed)
            if not self._known(topic, partition):
                return _produce_error(partition, ErrorCode.unknown_topic_or_partition)
            if not records:
                return _produce_error(partition, ErrorCode.corrupt_message)
            if version < ZSTD_PRODUCE_VERSION and _says_zstd(records):
                return _produce_error(partition, ErrorCode.unsupported_compression_type)
            if self.replicas is None:
                return _produce_error(partition, ErrorCode.not_leader_or_follower)
            result = await self.replicas.append(topic, partition, bytes(records), acks, timeout_ms)
            return {
                "index": partition,
                "error_code": int(result.error),
                "base_offset": result.base_offset,
                "log_append_time": result.log_append_time_ms,
                "log_start_offset": result.log_start_offset,
                "record_errors": [],
                "error_message": result.error_message,
            }

        topics = [
            (t.name, [(p.index, p.records) for p in t.partition_data]) for t in body.topic_data
        ]
        answers = await asyncio.gather(
            *(one(name, index, records) for name, parts in topics for index, records in parts)
        )
        if acks == 0:
            if any(a["error_code"] != 0 for a in answers):
                # No answer to carry the error: Kafka closes the connection, so the
                # producer refreshes its metadata and finds the new leader.
                raise CloseConnection("an acks=0 produce failed")
            return None
        it = iter(answers)
        return {
            "throttle_time": 0,
            "responses": [
                {"name": name, "partition_responses": [next(it) for _ in parts]}
                for name, parts in topics
            ],
        }

    async def fetch(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if int(getattr(body, "session_id", 0)) != 0:
            # No fetch session is ever created here (answers carry session_id 0), so
            # any other id is one this broker does not know: the client starts over
            # with a full fetch, as after a Kafka broker evicted its session.
            return {"throttle_time": 0, "error_code": int(ErrorCode.fetch_session_id_not_found),
                    "session_id": 0, "responses": []}  # fmt: skip
        # v13+ name topics by id: resolved here; an unknown id keeps a label no topic
        # name can have ("\0" is not allowed in names) and gets UNKNOWN_TOPIC_ID.
        ids: dict[str, Any] = {}
        unknown_ids: set[str] = set()
        for t in body.topics:
            label, topic_id = self._fetch_topic(t)
            ids[label] = topic_id
            if label.startswith("\0"):
                unknown_ids.add(label)
        wanted = [
            FetchPartition(
                topic=self._fetch_topic(t)[0],
                partition=int(p.partition),
                fetch_offset=int(p.fetch_offset),
                current_leader_epoch=int(getattr(p, "current_leader_epoch", -1)),
                last_fetched_epoch=int(getattr(p, "last_fetched_epoch", -1)),
                log_start_offset=int(getattr(p, "log_start_offset", -1)),
                partition_max_bytes=int(p.partition_max_bytes),
            )
            for t in body.topics
            for p in t.partitions
        ]
        results: dict[tuple[str, int], dict[str, Any]] = {}
        replica_id = _fetch_replica_id(body)
        allowed = self._fetch_allowed(conn, replica_id, {w.topic for w in wanted} - unknown_ids)
        for w in wanted:
            if w.topic in unknown_ids:
                results[(w.topic, w.partition)] = _fetch_error(
                    w.partition, ErrorCode.unknown_topic_id
                )
            elif w.topic not in allowed:
                results[(w.topic, w.partition)] = _fetch_error(
                    w.partition, ErrorCode.topic_authorization_failed
                )
        known = [w for w in wanted if w.topic in allowed and self._known(w.topic, w.partition)]
        if known and self.replicas is not None:
            answered = await self.replicas.fetch(
                replica_id,
                codec.millis(body.max_wait),
                int(body.min_bytes),
                int(getattr(body, "max_bytes", 0x7FFFFFFF)),
                known,
                int(getattr(body, "isolation_level", 0)),
            )
            for r in answered:
                entry: dict[str, Any] = {
                    "partition_index": r.partition,
                    "error_code": int(r.error),
                    "high_watermark": r.high_watermark,
                    "last_stable_offset": r.last_stable_offset,
                    "log_start_offset": r.log_start_offset,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": r.records,
                }
                if r.diverging_epoch is not None:
                    epoch, end_offset = r.diverging_epoch
                    entry["diverging_epoch"] = {"epoch": epoch, "end_offset": end_offset}
                results[(r.topic, r.partition)] = entry
        for w in wanted:
            if (w.topic, w.partition) not in results:
                error = (
                    ErrorCode.not_leader_or_follower
                    if self._known(w.topic, w.partition)
                    else ErrorCode.unknown_topic_or_partition
                )
                results[(w.topic, w.partition)] = _fetch_error(w.partition, error)
        return {
            "throttle_time": 0,
            "error_code": 0,
            "session_id": 0,
            "responses": [
                {
                    "topic": topic,
                    "topic_id": ids.get(topic) or codec.NULL_UUID,
                    "partitions": [results[(topic, p)] for p in parts],
                }
                for topic, parts in _grouped((w.topic, w.partition) for w in wanted)
            ],
        }

    def _fetch_topic(self, t: Any) -> tuple[str, Any]:
        """(topic name, topic id) of a Fetch request's topic entry, by name (v4-12)
        or by id (v13+); an id this broker does not know gets a "\0" label."""
        name = getattr(t, "topic", None)
        topic_id = getattr(t, "topic_id", None)
        if name is not None:
            found = self.image().topic(name)
            return name, (codec.topic_uuid(found.topic_id) if found else None)
        found = self.image().topic_by_id(codec.topic_id_text(topic_id))
        return (found.name, topic_id) if found else (f"\0{topic_id}", topic_id)

    def _fetch_allowed(self, conn: Connection, replica_id: int, topics: set[str]) -> set[str]:
        """The topics this fetch may read: a follower's need CLUSTER_ACTION (else every
        partition is TOPIC_AUTHORIZATION_FAILED, as Kafka answers), a consumer's READ."""
        if replica_id >= 0:
            return topics if self.authz.cluster(conn, Operation.CLUSTER_ACTION) else set()
        return {t for t in topics if self.authz.topic(conn, t, Operation.READ)}

    async def list_offsets(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        replica_id = int(getattr(body, "replica_id", -1))

        def one(topic: str, p: Any) -> dict[str, Any]:
            partition = int(p.partition_index)
            if not self.authz.topic(conn, topic, Operation.DESCRIBE):
                error, offset, timestamp, epoch = ErrorCode.topic_authorization_failed, -1, -1, -1
            elif not self._known(topic, partition):
                error, offset, timestamp, epoch = ErrorCode.unknown_topic_or_partition, -1, -1, -1
            elif self.replicas is None:
                error, offset, timestamp, epoch = ErrorCode.not_leader_or_follower, -1, -1, -1
            else:
                # Tools (replica_id -2) may ask any replica for its own log's offsets.
                lookup = (
                    self.replicas.replica_offsets
                    if replica_id == DEBUGGING_REPLICA_ID
                    else self.replicas.list_offsets
                )
                error, offset, timestamp, epoch = lookup(
                    topic,
                    partition,
                    int(p.timestamp),
                    int(getattr(p, "current_leader_epoch", -1)),
                )
            return {
                "partition_index": partition,
                "error_code": int(error),
                "timestamp": timestamp,
                "offset": offset,
                "leader_epoch": epoch,
            }

        return {
            "throttle_time": 0,
            "topics": [
                {"name": t.name, "partitions": [one(t.name, p) for p in t.partitions]}
                for t in body.topics
            ],
        }

    async def offsets_for_leader_epoch(
        self, body: Any, version: int, conn: Connection
    ) -> dict[str, Any]:
        follower = int(getattr(body, "replica_id", -1)) >= 0
        cluster_ok = not follower or self.authz.cluster(conn, Operation.CLUSTER_ACTION)

        def one(topic: str, p: Any) -> dict[str, Any]:
            partition = int(p.partition)
            if not cluster_ok:
                error, epoch, end = ErrorCode.cluster_authorization_failed, -1, -1
            elif not follower and not self.authz.topic(conn, topic, Operation.DESCRIBE):
                error, epoch, end = ErrorCode.topic_authorization_failed, -1, -1
            elif not self._known(topic, partition):
                error, epoch, end = ErrorCode.unknown_topic_or_partition, -1, -1
            elif self.replicas is None:
                error, epoch, end = ErrorCode.not_leader_or_follower, -1, -1
            else:
                error, epoch, end = self.replicas.offsets_for_leader_epoch(
                    topic, partition, int(p.current_leader_epoch), int(p.leader_epoch)
                )
            return {
                "error_code": int(error),
                "partition": partition,
                "leader_epoch": epoch,
                "end_offset": end,
            }

        return {
            "throttle_time": 0,
            "topics": [
                {"topic": t.topic, "partitions": [one(t.topic, p) for p in t.partitions]}
                for t in body.topics
            ],
        }


def _fetch_replica_id(body: Any) -> int:
    """Fetch v4-14 carry replica_id; v15+ a ReplicaState (KIP-903) with the id."""
    if hasattr(body, "replica_id"):
        return int(body.replica_id)
    state = getattr(body, "replica_state", None)
    return int(state.replica_id) if state is not None else -1


def _grouped(pairs: Iterable[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    """Topic by topic in request order (a topic named twice keeps its first place)."""
    out: dict[str, list[int]] = {}
    for topic, partition in pairs:
        out.setdefault(topic, []).append(partition)
    return list(out.items())


def _says_zstd(records: bytes) -> bool:
    """Whether the produced batch says zstd; a batch too short to say is left to
    the append, which refuses it."""
    try:
        return parse_header(records).attributes & CODEC_BITS == ZSTD
    except InvalidRecordBatch:
        return False


def _produce_error(partition: int, error: ErrorCode) -> dict[str, Any]:
    return {
        "index": partition,
        "error_code": int(error),
        "base_offset": -1,
        "log_append_time": -1,
        "log_start_offset": -1,
        "record_errors": [],
        "error_message": None,
    }


def _fetch_error(partition: int, error: ErrorCode) -> dict[str, Any]:
    return {
        "partition_index": partition,
        "error_code": int(error),
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        # Empty, never null: Kafka sends empty records with an error, and librdkafka
        # cannot parse a null there.
        "records": b"",
    }


def _init_error(error: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": int(error), "producer_id": -1, "producer_epoch": -1}
