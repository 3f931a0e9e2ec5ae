"""The brokers' Kafka listeners on real broker processes: ApiVersions and Metadata
answered to raw requests and to the real clients (kcat, confluent-kafka, aiokafka,
kafka-python), APIs and versions not served answered UNSUPPORTED_VERSION on a
connection that goes on, and hostile bytes that close only their own connection."""

from __future__ import annotations

import asyncio
import json
import shutil
import struct
import subprocess
import time
from collections.abc import Iterator

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka import codec, unsupported
from broker_agent.kafka.versions import SERVED, ApiKey
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json
from tests.integration.kafka_wire import (
    KafkaSocket,
    broker_socket,
    fetch_values,
    latest_offset,
    leader_of,
    metadata_v12,
    produce_batch,
    produce_values,
    wait_for_topic_everywhere,
)

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(tmp_path_factory.mktemp("kafka"), *BROKERS) as c:
        ctl_json(c, "topics", "create", "orders", "--partitions", "3", "--replication-factor", "3")
        yield c


def bootstrap(cluster: Cluster) -> str:
    return ",".join(f"127.0.0.1:{cluster.brokers[b].port}" for b in BROKERS)


def first(cluster: Cluster) -> KafkaSocket:
    return KafkaSocket("127.0.0.1", cluster.brokers[BROKERS[0]].port)


# ----------------------------------------------------------------- raw requests


@pytest.mark.parametrize("version", [0, 3])
def test_api_versions_answers_the_served_table(cluster: Cluster, version: int) -> None:
    values = {"client_software_name": "tests", "client_software_version": "1"}
    with first(cluster) as s:
        answer = s.request(ApiKey.API_VERSIONS, version, values)
    assert answer.error_code == ErrorCode.none
    table = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert table == {int(k): v for k, v in SERVED.items()}


def test_an_unknown_api_versions_version_gets_unsupported_version_and_the_table(
    cluster: Cluster,
) -> None:
    # ApiVersions v9 from a "newer client": header v2, a body this broker cannot parse.
    body = struct.pack(">hhih", 18, 9, 77, 5) + b"tests" + b"\x00" + b"\x00\x00\x00"
    with first(cluster) as s:
        s.send_raw(struct.pack(">i", len(body)) + body)
        frame = s.read_frame()
        correlation_id, answer = codec.decode_response(frame, ApiKey.API_VERSIONS, 0)
        assert correlation_id == 77
        assert answer.error_code == ErrorCode.unsupported_version
        assert {k.api_key for k in answer.api_keys} == {int(k) for k in SERVED}
        # ... and the connection stays open for the retry at a served version.
        again = s.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t",
                                                   "client_software_version": "1"})  # fmt: skip
        assert again.error_code == ErrorCode.none


def test_metadata_lists_live_brokers_topics_and_partitions(cluster: Cluster) -> None:
    wait_for_topic_everywhere(cluster, "orders")
    with first(cluster) as s:
        answer = s.request(ApiKey.METADATA, 12, metadata_v12(None))
    assert answer.cluster_id == cluster.cluster_id
    assert answer.controller_id in BROKERS
    assert {(b.node_id, b.host, b.port) for b in answer.brokers} == {
        (b, "127.0.0.1", cluster.brokers[b].port) for b in BROKERS
    }
    (orders,) = [t for t in answer.topics if t.name == "orders"]
    assert orders.error_code == ErrorCode.none
    assert [p.partition_index for p in orders.partitions] == [0, 1, 2]
    for p in orders.partitions:
        assert sorted(p.replica_nodes) == list(BROKERS)
        assert sorted(p.isr_nodes) == list(BROKERS)
        assert p.leader_id in BROKERS and p.leader_epoch >= 0
        assert p.offline_replicas == ()


# Versions before 4 always allow auto-creation (tests/integration/test_kafka_auto_create.py).
@pytest.mark.parametrize("version", [4, 9, 12])
def test_metadata_of_an_unknown_topic_is_unknown_topic_or_partition(
    cluster: Cluster, version: int
) -> None:
    values = {
        "topics": [{"name": "no-such-topic", "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    with first(cluster) as s:
        answer = s.request(ApiKey.METADATA, version, values)
    (topic,) = answer.topics
    assert topic.error_code == ErrorCode.unknown_topic_or_partition
    assert topic.partitions == ()


# ------------------------------------------------------------------- bad input


def still_serving(cluster: Cluster) -> bool:
    with first(cluster) as s:
        answer = s.request(ApiKey.METADATA, 12, metadata_v12([]))
    return answer.controller_id in BROKERS


def unserved(api_key: int, version: int, correlation_id: int, tail: bytes) -> bytes:
    """A raw request frame for an API or version the broker does not serve."""
    body = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"tests" + tail
    return struct.pack(">i", len(body)) + body


def test_an_api_not_served_gets_unsupported_version_and_the_connection_goes_on(
    cluster: Cluster,
) -> None:
    # AddPartitionsToTxn (24) is not served (no transactions). Kafka would close the
    # connection; the issue asks for an answer: its error response, code 35.
    with first(cluster) as bystander, first(cluster) as s:
        s.send_raw(unserved(24, 4, 41, b"\x00" + b"\x00" * 20))
        s.send_request(ApiKey.METADATA, 12, metadata_v12([]))  # pipelined behind it
        correlation_id, answer = codec.decode_response(s.read_frame(), 24, 4)
        assert correlation_id == 41
        assert answer.error_code == ErrorCode.unsupported_version
        assert answer.results_by_transaction == ()
        correlation_id, metadata = codec.decode_response(s.read_frame(), ApiKey.METADATA, 12)
        assert (correlation_id, metadata.controller_id in BROKERS) == (s.correlation_id, True)
        assert s.request(ApiKey.METADATA, 12, metadata_v12([])).brokers
        assert bystander.request(ApiKey.METADATA, 12, metadata_v12([])).brokers
    assert still_serving(cluster)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(ApiKey.FETCH, 3), (ApiKey.FETCH, 17), (ApiKey.LIST_OFFSETS, 0), (ApiKey.METADATA, 13),
     (ApiKey.OFFSET_FOR_LEADER_EPOCH, 0), (ApiKey.FETCH, 32767), (ApiKey.PRODUCE, -1)],
)  # fmt: skip
def test_an_unsupported_version_of_a_served_api_gets_unsupported_version(
    cluster: Cluster, api_key: ApiKey, version: int
) -> None:
    # Answered in that API's response at the version asked for when the codec has
    # it (Fetch v17), else at the nearest it has (Fetch v3 as v4): the client
    # matches it by correlation id, and the connection serves the next request.
    low, high = unsupported.codec_versions(api_key) or (0, 0)
    with first(cluster) as s:
        s.send_raw(unserved(api_key, version, 7, b"\x00" * 30))
        correlation_id, answer = codec.decode_response(
            s.read_frame(), api_key, min(max(version, low), high)
        )
        assert correlation_id == 7
        if hasattr(answer, "error_code"):
            assert answer.error_code == ErrorCode.unsupported_version
        assert s.request(ApiKey.METADATA, 12, metadata_v12([])).brokers
    assert still_serving(cluster)


@pytest.mark.parametrize("acks", [-1, 0])
def test_a_produce_of_an_unsupported_version_appends_nothing(cluster: Cluster, acks: int) -> None:
    from tests.broker_agent.partitions.partitions_cluster import make_batch

    wait_for_topic_everywhere(cluster, "orders")
    leader, _ = leader_of(cluster, "orders", 0)
    before = latest_offset(cluster, "orders", 0)
    values = produce_values("orders", 0, acks=acks)
    values["topic_data"] = [{"name": "orders", "partition_data": [
        {"index": 0, "records": make_batch(b"v10")}]}]  # fmt: skip
    with broker_socket(cluster, leader) as s:
        if acks == 0:
            # No answer is read, so the error closes the connection (as when a
            # served acks=0 produce fails).
            s.send_request(ApiKey.PRODUCE, 10, values)
            assert s.closed_by_peer()
        else:
            answer = s.request(ApiKey.PRODUCE, 10, values)  # served up to v9
            assert answer.responses == ()  # no partition was written to
            assert s.request(ApiKey.METADATA, 12, metadata_v12([])).brokers
    assert latest_offset(cluster, "orders", 0) == before


def test_a_key_that_is_no_kafka_api_closes_only_that_connection(cluster: Cluster) -> None:
    # Not an API this broker leaves out but no Kafka API at all: these bytes are
    # not a Kafka request, and Kafka closes the connection, as for random bytes.
    with first(cluster) as bystander, first(cluster) as s:
        s.send_raw(unserved(31999, 0, 1, b"\x00" * 20))
        assert s.closed_by_peer()
        assert bystander.request(ApiKey.METADATA, 12, metadata_v12([])).brokers
    assert still_serving(cluster)


def test_a_frame_over_socket_request_max_bytes_closes_the_connection(cluster: Cluster) -> None:
    with first(cluster) as bystander, first(cluster) as s:
        s.send_raw(struct.pack(">i", 104_857_600 + 1) + b"\x00" * 1024)
        assert s.closed_by_peer()
        assert bystander.request(ApiKey.METADATA, 12, metadata_v12([])).brokers
    assert still_serving(cluster)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_bytes_close_the_connection_and_nothing_else(cluster: Cluster, seed: int) -> None:
    import random

    rng = random.Random(seed)
    with first(cluster) as s:
        # a plausible size, then garbage: the request fails to parse
        garbage = rng.randbytes(200)
        s.send_raw(struct.pack(">i", len(garbage)) + garbage)
        assert s.closed_by_peer()
    with first(cluster) as s:
        s.send_raw(rng.randbytes(64))  # garbage from the first byte: a nonsense size
        assert s.closed_by_peer()
    assert still_serving(cluster)


def test_a_truncated_request_body_closes_the_connection(cluster: Cluster) -> None:
    with first(cluster) as s:
        body = struct.pack(">hhih", int(ApiKey.METADATA), 12, 1, 5) + b"tests\x00" + b"\x05"
        s.send_raw(struct.pack(">i", len(body)) + body)
        assert s.closed_by_peer()
    assert still_serving(cluster)


# ---------------------------------------------------------------- real clients


def test_kcat_lists_brokers_and_topics(cluster: Cluster) -> None:
    assert shutil.which("kcat"), "kcat is installed by `make test` (Debian's kcat)"
    wait_for_topic_everywhere(cluster, "orders")
    done = subprocess.run(
        ["kcat", "-b", bootstrap(cluster), "-L", "-J"],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    listing = json.loads(done.stdout)
    assert sorted(b["id"] for b in listing["brokers"]) == list(BROKERS)
    (orders,) = [t for t in listing["topics"] if t["topic"] == "orders"]
    assert len(orders["partitions"]) == 3
    for p in orders["partitions"]:
        assert sorted(r["id"] for r in p["replicas"]) == list(BROKERS)
        assert sorted(r["id"] for r in p["isrs"]) == list(BROKERS)


def test_confluent_kafka_lists_topics(cluster: Cluster) -> None:
    from confluent_kafka.admin import AdminClient

    wait_for_topic_everywhere(cluster, "orders")
    # (a librdkafka handle asks to auto-create the topics it names, unless told not to)
    admin = AdminClient(
        {"bootstrap.servers": bootstrap(cluster), "allow.auto.create.topics": False}
    )
    listing = admin.list_topics(timeout=20)
    assert listing.cluster_id == cluster.cluster_id
    assert sorted(listing.brokers) == list(BROKERS)
    orders = listing.topics["orders"]
    assert orders.error is None
    assert sorted(orders.partitions) == [0, 1, 2]
    assert all(sorted(p.replicas) == list(BROKERS) for p in orders.partitions.values())
    missing = admin.list_topics("no-such-topic", timeout=20).topics["no-such-topic"]
    assert missing.error is not None and missing.error.code() == 3  # UNKNOWN_TOPIC_OR_PART


def test_aiokafka_reads_the_metadata(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    wait_for_topic_everywhere(cluster, "orders")

    async def go() -> tuple[set[str], set[int]]:
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap(cluster), request_timeout_ms=20000)
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap(cluster), request_timeout_ms=20000)
        await consumer.start()
        await producer.start()
        try:
            return await consumer.topics(), await producer.partitions_for("orders")
        finally:
            await consumer.stop()
            await producer.stop()

    topics, partitions = asyncio.run(go())
    assert "orders" in topics
    assert partitions == {0, 1, 2}


def test_kafka_python_reads_the_metadata(cluster: Cluster) -> None:
    from kafka import KafkaConsumer

    wait_for_topic_everywhere(cluster, "orders")
    consumer = KafkaConsumer(bootstrap_servers=bootstrap(cluster), request_timeout_ms=20000)
    try:
        assert "orders" in consumer.topics()
        assert consumer.partitions_for_topic("orders") == {0, 1, 2}
    finally:
        consumer.close()


def test_the_broker_log_names_its_kafka_listener(cluster: Cluster) -> None:
    proc = cluster.brokers[BROKERS[0]]
    assert f"PLAINTEXT://127.0.0.1:{proc.port}" in proc.log_text()


# ------------------------------------------------------- data APIs at the edge


@pytest.mark.parametrize("version", [3, 7, 9])
def test_produce_to_an_unknown_topic_or_partition(cluster: Cluster, version: int) -> None:
    with first(cluster) as s:
        for topic, partition in (("no-such-topic", 0), ("orders", 99)):
            answer = s.request(ApiKey.PRODUCE, version, produce_values(topic, partition))
            (r,) = answer.responses[0].partition_responses
            assert r.error_code == ErrorCode.unknown_topic_or_partition
            assert r.base_offset == -1


@pytest.mark.parametrize("version", [4, 11, 12])
def test_fetch_of_an_unknown_topic_or_partition(cluster: Cluster, version: int) -> None:
    with first(cluster) as s:
        for topic, partition in (("no-such-topic", 0), ("orders", 99)):
            answer = s.request(ApiKey.FETCH, version, fetch_values(topic, partition))
            (r,) = answer.responses[0].partitions
            assert r.error_code == ErrorCode.unknown_topic_or_partition


def test_list_offsets_and_epochs_of_an_unknown_topic(cluster: Cluster) -> None:
    with first(cluster) as s:
        listed = s.request(ApiKey.LIST_OFFSETS, 7, {
            "replica_id": -1, "isolation_level": 0,
            "topics": [{"name": "nope", "partitions": [
                {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
        })  # fmt: skip
        assert listed.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition
        epochs = s.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, {
            "replica_id": -1,
            "topics": [{"topic": "nope", "partitions": [
                {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}],
        })  # fmt: skip
        assert epochs.topics[0].partitions[0].error_code == ErrorCode.unknown_topic_or_partition


def test_clients_find_records_by_timestamp_and_the_largest_timestamp(cluster: Cluster) -> None:
    """ListOffsets by time (librdkafka's offsets_for_times, kafka-python's) and
    MAX_TIMESTAMP (-3, KIP-734, librdkafka's admin list_offsets) answer the exact
    record, inside a gzip batch of records with timestamps out of order."""
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, OffsetSpec
    from kafka import KafkaConsumer
    from kafka import TopicPartition as PyTopicPartition

    # Recent times: records older than retention.ms (7 days) would be deleted.
    topic, t = "stamped", int(time.time() * 1000) - 60_000
    ctl_json(cluster, "topics", "create", topic, "--partitions", "1", "--replication-factor", "3")
    wait_for_topic_everywhere(cluster, topic)
    times = [t, t + 40, t + 10, t + 90, t + 20, t + 90, t + 30]  # max at offsets 3 and 5
    producer = Producer({"bootstrap.servers": bootstrap(cluster), "acks": "all",
                         "compression.type": "gzip", "linger.ms": 1000})  # fmt: skip
    for i, ts in enumerate(times):
        producer.produce(topic, b"v%d" % i, partition=0, timestamp=ts)
    assert producer.flush(60) == 0

    consumer = Consumer({"bootstrap.servers": bootstrap(cluster), "group.id": "stamped"})
    try:
        found = [
            consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=30)[0].offset
            for ts in (t + 15, t + 41, t + 91)
        ]
        assert found == [1, 3, -1]  # -1: no record that late
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": bootstrap(cluster)})
    listed = admin.list_offsets({TopicPartition(topic, 0): OffsetSpec.max_timestamp()})
    [info] = [f.result(timeout=30) for f in listed.values()]
    assert (info.offset, info.timestamp) == (3, t + 90)
    py = KafkaConsumer(bootstrap_servers=bootstrap(cluster), request_timeout_ms=20000)
    try:
        partition = PyTopicPartition(topic, 0)
        at = py.offsets_for_times({partition: t + 25})[partition]
        assert (at.offset, at.timestamp) == (1, t + 40)
    finally:
        py.close()


def test_init_producer_id_hands_out_distinct_ids_from_the_controllers_blocks(
    cluster: Cluster,
) -> None:
    values = {"transactional_id": None, "transaction_timeout": 60000,
              "producer_id": -1, "producer_epoch": -1}  # fmt: skip
    ids = []
    for b in BROKERS:
        with KafkaSocket("127.0.0.1", cluster.brokers[b].port) as s:
            for _ in range(2):
                answer = s.request(ApiKey.INIT_PRODUCER_ID, 4, values)
                assert answer.error_code == ErrorCode.none
                assert answer.producer_epoch == 0
                ids.append(answer.producer_id)
    assert len(set(ids)) == len(ids) and min(ids) >= 0
    with first(cluster) as s:
        refused = s.request(ApiKey.INIT_PRODUCER_ID, 4, {**values, "transactional_id": "tx"})
    assert refused.error_code == ErrorCode.transactional_id_authorization_failed


def test_the_leader_fetch_client_speaks_fetch_and_epochs_to_a_broker(cluster: Cluster) -> None:
    from broker_agent.kafka.leader_client import KafkaLeaderFetchClient
    from broker_agent.partitions.api import EpochQuery, FetchPartition
    from quorum.controller.metadata_image import MetadataImage
    from quorum.gen import metadata_pb2 as md

    image = MetadataImage()
    proc = cluster.brokers[BROKERS[1]]
    record = md.MetadataRecord(
        register_broker=md.RegisterBrokerRecord(
            broker_id=BROKERS[1], broker_epoch=1, incarnation_id="x",
            endpoints=[md.BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=proc.port,
                                         security_protocol="PLAINTEXT")],
        )
    )  # fmt: skip
    image.apply_record(record, 0)

    async def go() -> None:
        client = KafkaLeaderFetchClient(BROKERS[0], lambda: image, "PLAINTEXT")
        try:
            (result,) = await client.fetch(
                BROKERS[1], BROKERS[0], 10, 1, 1 << 20, [FetchPartition("no-such-topic", 0, 0)]
            )
            assert result.error == ErrorCode.unknown_topic_or_partition
            (epoch,) = await client.offsets_for_leader_epoch(
                BROKERS[1], BROKERS[0], [EpochQuery("no-such-topic", 0, -1, 0)]
            )
            assert epoch.error == ErrorCode.unknown_topic_or_partition
            with pytest.raises(ConnectionError):
                await client.fetch(999, BROKERS[0], 10, 1, 1, [FetchPartition("t", 0, 0)])
        finally:
            await client.close()

    asyncio.run(go())


# ------------------------------------------------- bad data, leaders and epochs


def test_a_batch_with_a_bad_crc_is_corrupt_message_and_appends_nothing(cluster: Cluster) -> None:
    from tests.broker_agent.partitions.partitions_cluster import make_batch

    wait_for_topic_everywhere(cluster, "orders")
    leader, _ = leader_of(cluster, "orders", 0)
    before = latest_offset(cluster, "orders", 0)
    batch = bytearray(make_batch(b"good", b"bad"))
    batch[-1] ^= 0xFF  # inside the CRC'd bytes
    assert produce_batch(cluster, leader, "orders", 0, bytes(batch)) == ErrorCode.corrupt_message
    assert latest_offset(cluster, "orders", 0) == before
    assert produce_batch(cluster, leader, "orders", 0, make_batch(b"ok")) == ErrorCode.none
    assert latest_offset(cluster, "orders", 0) == before + 1


def test_two_batches_for_one_partition_are_invalid_record_and_append_nothing(
    cluster: Cluster,
) -> None:
    """Produce v3+ carries exactly one batch per partition (Kafka: INVALID_RECORD)."""
    from tests.broker_agent.partitions.partitions_cluster import make_batch

    wait_for_topic_everywhere(cluster, "orders")
    leader, _ = leader_of(cluster, "orders", 0)
    before = latest_offset(cluster, "orders", 0)
    two = make_batch(b"first") + make_batch(b"second")
    assert produce_batch(cluster, leader, "orders", 0, two) == ErrorCode.invalid_record
    assert latest_offset(cluster, "orders", 0) == before


def test_a_record_over_max_message_bytes_is_message_too_large(cluster: Cluster) -> None:
    from tests.broker_agent.partitions.partitions_cluster import make_batch

    ctl_json(cluster, "topics", "create", "small", "--partitions", "1",
             "--replication-factor", "3", "--config", "max.message.bytes=1000")  # fmt: skip
    wait_for_topic_everywhere(cluster, "small")
    leader, _ = leader_of(cluster, "small", 0)
    answer = produce_batch(cluster, leader, "small", 0, make_batch(b"x" * 2000))
    assert answer == ErrorCode.message_too_large
    assert latest_offset(cluster, "small", 0) == 0


def test_a_non_leader_answers_not_leader_or_follower(cluster: Cluster) -> None:
    from tests.broker_agent.partitions.partitions_cluster import make_batch

    wait_for_topic_everywhere(cluster, "orders")
    leader, _ = leader_of(cluster, "orders", 1)
    other = next(b for b in BROKERS if b != leader)
    answer = produce_batch(cluster, other, "orders", 1, make_batch(b"misdirected"))
    assert answer == ErrorCode.not_leader_or_follower


def test_future_leader_epochs_and_strangers_fetching_as_replicas_are_refused(
    cluster: Cluster,
) -> None:
    wait_for_topic_everywhere(cluster, "orders")
    leader, epoch = leader_of(cluster, "orders", 2)
    values = fetch_values("orders", 2)
    part = values["topics"][0]["partitions"][0]  # type: ignore[index]
    with broker_socket(cluster, leader) as s:
        part["current_leader_epoch"] = epoch + 1
        answer = s.request(ApiKey.FETCH, 12, values)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.unknown_leader_epoch
        part["current_leader_epoch"] = epoch
        stranger = {**values, "replica_id": 999}
        answer = s.request(ApiKey.FETCH, 12, stranger)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
        answer = s.request(ApiKey.FETCH, 12, values)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.none


def test_pipelined_requests_are_answered_in_order(cluster: Cluster) -> None:
    with first(cluster) as s:
        for _ in range(20):
            s.send_request(ApiKey.METADATA, 12, metadata_v12([]))
        ids = [codec.decode_response(s.read_frame(), ApiKey.METADATA, 12)[0] for _ in range(20)]
    assert ids == list(range(1, 21))


def test_request_metrics_count_apis_errors_and_closed_connections(cluster: Cluster) -> None:
    import urllib.request

    with first(cluster) as s:
        s.request(ApiKey.METADATA, 12, metadata_v12(["no-such-topic"]))
    with first(cluster) as s:
        s.send_raw(struct.pack(">i", 2**31 - 1))
        assert s.closed_by_peer()
    with first(cluster) as s:
        s.send_raw(unserved(24, 4, 1, b"\x00" * 21))
        assert (
            codec.decode_response(s.read_frame(), 24, 4)[1].error_code
            == ErrorCode.unsupported_version
        )
    port = cluster.brokers[BROKERS[0]].metrics_port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    samples = {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("quorum_broker_kafka")
    }
    assert samples['quorum_broker_kafka_requests_total{api="metadata",version="12"}'] >= 1
    key = 'quorum_broker_kafka_errors_total{api="metadata",error="UNKNOWN_TOPIC_OR_PARTITION"}'
    assert samples[key] >= 1
    assert samples['quorum_broker_kafka_connections_closed_total{listener="PLAINTEXT"}'] >= 1
    assert samples['quorum_broker_kafka_unsupported_requests_total{listener="PLAINTEXT"}'] >= 1
    assert samples['quorum_broker_kafka_request_seconds_count{api="metadata"}'] >= 1


def test_a_failed_acks_0_produce_closes_the_connection(cluster: Cluster) -> None:
    # No answer can carry the error, so Kafka closes the connection (the producer
    # then refreshes its metadata); a successful acks=0 produce gets no answer.
    with first(cluster) as s:
        s.send_request(ApiKey.PRODUCE, 9, produce_values("no-such-topic", 0, acks=0))
        assert s.closed_by_peer()
    assert still_serving(cluster)


def test_an_unknown_fetch_session_is_fetch_session_id_not_found(cluster: Cluster) -> None:
    with first(cluster) as s:
        answer = s.request(ApiKey.FETCH, 12, {**fetch_values("orders", 0), "session_id": 12345,
                                              "session_epoch": 3})  # fmt: skip
    assert answer.error_code == ErrorCode.fetch_session_id_not_found
    assert answer.responses == ()
