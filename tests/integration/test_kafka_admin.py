"""Kafka's admin APIs on real brokers, with the three real AdminClients
(confluent-kafka / librdkafka, kafka-python, aiokafka): every request is
forwarded by the broker to the active controller, which validates and decides.

Each client creates a topic by counts and one by explicit assignment and sees
both in Metadata (librdkafka at once, from the broker it wrote through; aiokafka
and kafka-python read from any broker, so they first wait for every broker to
catch up), describes and changes a config,
adds partitions, manages an ACL (aiokafka has no ACL API), deletes the topics
and describes the cluster; each bad input gets Kafka's error with the
controller's message and changes nothing (checked over the admin API)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from quorum.gen import admin_pb2 as api
from tests.integration.controller_cluster import Cluster, cluster_with_online_brokers, ctl_json

pytestmark = pytest.mark.slow
BROKERS = (101, 102, 103)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with cluster_with_online_brokers(tmp_path_factory.mktemp("kafka-admin"), *BROKERS) as c:
        ctl_json(c, "topics", "create", "existing", "--partitions", "2",
                 "--replication-factor", "2")  # fmt: skip
        yield c


def broker(cluster: Cluster, broker_id: int = 101) -> str:
    return f"127.0.0.1:{cluster.brokers[broker_id].port}"


def topics(cluster: Cluster) -> dict[str, tuple[int, int]]:
    """name -> (partitions, replication factor), from the controllers."""
    return {
        t["Topic"]: (t["PartitionCount"], t["ReplicationFactor"])
        for t in ctl_json(cluster, "topics", "list")
    }


def settled_everywhere(cluster: Cluster, shown: list[str], gone: list[str]) -> None:
    """Wait until every broker's own Metadata shows `shown` and not `gone`.

    The read fence gives read-your-writes on the broker that forwarded a write
    (`test_metadata_on_another_connection_right_after_a_write_shows_it`); the other
    brokers catch up within a fetch, as in Kafka. aiokafka and kafka-python send
    Metadata to a random or least-loaded broker, so their reads wait for all."""
    from tests.integration.kafka_wire import KafkaSocket, metadata_v12

    def settled() -> bool:
        for b in cluster.brokers:
            with KafkaSocket("127.0.0.1", cluster.brokers[b].port) as s:
                answer = s.request(3, 12, metadata_v12(shown + gone))
                codes = {t.name: t.error_code for t in answer.topics}
                if any(codes[n] != 0 for n in shown) or any(codes[n] == 0 for n in gone):
                    return False
        return True

    cluster.wait_until(settled, 20, f"{shown} shown and {gone} gone on every broker")


def topic_config(cluster: Cluster, name: str) -> dict[str, str]:
    rows = ctl_json(cluster, "configs", "describe", "--entity-type", "topics",
                    "--entity-name", name)  # fmt: skip
    return {r["Name"]: r["Value"] for r in rows}


def acls(cluster: Cluster) -> list[Any]:
    return ctl_json(cluster, "acls", "list")  # type: ignore[no-any-return]


def state(cluster: Cluster) -> tuple[Any, ...]:
    """What a refused request must not change: the topics, a topic's configs, the
    ACLs, and the controllers' committed log (its high watermark). Read over the
    admin API in process (what `quorumctl topics list`, `configs describe --all`,
    `acls list` and `quorum describe` ask for): four quorumctl processes per read
    cost most of this module's time on a busy machine."""
    listed = cluster.call("admin", "ListTopics", api.ListTopicsRequest())
    configs = cluster.call("admin", "DescribeConfigs", api.DescribeConfigsRequest(resources=[
        api.DescribeConfigsResource(resource_type=api.TOPIC, resource_name="existing")
    ]))  # fmt: skip
    any_acl = api.AclBindingFilter(resource_type=1, pattern_type=1, operation=1, permission_type=1)
    acl_list = cluster.call("admin", "DescribeAcls", api.DescribeAclsRequest(filter=any_acl))
    high_watermark = cluster.wait_for_leader().high_watermark
    return (
        sorted(t.SerializeToString(deterministic=True) for t in listed.topics),
        configs.SerializeToString(deterministic=True),
        sorted(b.SerializeToString(deterministic=True) for b in acl_list.bindings),
        high_watermark,
    )


# Bad input: (what, kwargs of the topic to create, Kafka's error name)
BAD_TOPICS = [
    ("existing name", {"name": "existing", "partitions": 1, "rf": 1}, "TOPIC_ALREADY_EXISTS"),
    ("dot-dot", {"name": "..", "partitions": 1, "rf": 1}, "INVALID_TOPIC_EXCEPTION"),
    ("250 characters", {"name": "x" * 250, "partitions": 1, "rf": 1}, "INVALID_TOPIC_EXCEPTION"),
    ("a slash", {"name": "a/b", "partitions": 1, "rf": 1}, "INVALID_TOPIC_EXCEPTION"),
    ("0 partitions", {"name": "zero", "partitions": 0, "rf": 1}, "INVALID_PARTITIONS"),
    ("RF above live brokers", {"name": "rf4", "partitions": 1, "rf": 4},
     "INVALID_REPLICATION_FACTOR"),
    ("unknown broker", {"name": "nobody", "assignment": {0: [999]}}, "INVALID_REPLICA_ASSIGNMENT"),
    ("unknown config key", {"name": "badkey", "partitions": 1, "rf": 1,
                            "configs": {"no.such.key": "1"}}, "INVALID_CONFIG"),
    ("bad config value", {"name": "badvalue", "partitions": 1, "rf": 1,
                          "configs": {"retention.ms": "soon"}}, "INVALID_CONFIG"),
]  # fmt: skip


def names_for(client: str) -> tuple[str, str]:
    return f"{client}-counts", f"{client}-pinned"


# ------------------------------------------------------------- confluent-kafka


def test_confluent_kafka_admin_client(cluster: Cluster) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        NewPartitions,
        NewTopic,
        ResourcePatternType,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": broker(cluster)})
    counts, pinned = names_for("librdkafka")
    created = admin.create_topics(
        [
            NewTopic(counts, 3, 2, config={"retention.ms": "3600000"}),
            NewTopic(pinned, 2, replica_assignment=[[101, 102], [103, 101]]),
        ],
        operation_timeout=15,
    )
    for future in created.values():
        future.result()
    seen = admin.list_topics(timeout=10).topics  # the same broker, at once
    assert len(seen[counts].partitions) == 3 and len(seen[pinned].partitions) == 2
    assert seen[pinned].partitions[1].replicas == [103, 101]
    assert topics(cluster)[counts] == (3, 2)

    resource = ConfigResource(ResourceType.TOPIC, counts)
    described = admin.describe_configs([resource])[resource].result()
    assert described["retention.ms"].value == "3600000"
    assert described["cleanup.policy"].is_default
    change = ConfigResource(
        ResourceType.TOPIC,
        counts,
        incremental_configs=[
            ConfigEntry("retention.ms", "1000", incremental_operation=AlterConfigOpType.SET)
        ],
    )
    admin.incremental_alter_configs([change])[change].result()
    assert admin.describe_configs([resource])[resource].result()["retention.ms"].value == "1000"
    assert topic_config(cluster, counts)["retention.ms"] == "1000"

    admin.create_partitions([NewPartitions(counts, 5)])[counts].result()
    assert len(admin.list_topics(timeout=10).topics[counts].partitions) == 5
    with pytest.raises(KafkaException) as shrink:
        admin.create_partitions([NewPartitions(counts, 2)])[counts].result()
    assert shrink.value.args[0].name() == "INVALID_PARTITIONS"
    assert topics(cluster)[counts] == (5, 2)

    acl = AclBinding(
        ResourceType.TOPIC, counts, ResourcePatternType.LITERAL,
        "User:librdkafka", "*", AclOperation.READ, AclPermissionType.ALLOW,
    )  # fmt: skip
    admin.create_acls([acl])[acl].result()
    match = AclBindingFilter(ResourceType.TOPIC, counts, ResourcePatternType.ANY,
                             None, None, AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    assert admin.describe_acls(match).result() == [acl]
    assert admin.delete_acls([match])[match].result() == [acl]
    assert admin.describe_acls(match).result() == []

    cluster_info = admin.describe_cluster().result()
    assert sorted(n.id for n in cluster_info.nodes) == list(BROKERS)
    assert cluster_info.cluster_id == cluster.cluster_id
    assert cluster_info.controller.id in BROKERS

    for future in admin.delete_topics([counts, pinned], operation_timeout=15).values():
        future.result()
    assert counts not in admin.list_topics(timeout=10).topics
    assert counts not in topics(cluster)


@pytest.mark.parametrize(("what", "spec", "error"), BAD_TOPICS, ids=[b[0] for b in BAD_TOPICS])
def test_confluent_kafka_bad_topics(cluster: Cluster, what: str, spec: dict[str, Any],
                                    error: str) -> None:  # fmt: skip
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker(cluster)})
    before = state(cluster)
    if "assignment" in spec:
        assignment = [spec["assignment"][p] for p in sorted(spec["assignment"])]
        topic = NewTopic(spec["name"], len(assignment), replica_assignment=assignment)
    else:
        topic = NewTopic(spec["name"], spec["partitions"], spec["rf"],
                         config=spec.get("configs", {}))  # fmt: skip
    with pytest.raises(KafkaException) as refused:
        admin.create_topics([topic], operation_timeout=10)[spec["name"]].result()
    kafka_error = refused.value.args[0]
    expected = "TOPIC_EXCEPTION" if error == "INVALID_TOPIC_EXCEPTION" else error  # librdkafka's
    assert kafka_error.name() == expected
    assert kafka_error.str(), "the controller's message"
    assert state(cluster) == before


# ----------------------------------------------------------------- kafka-python


def test_kafka_python_admin_client(cluster: Cluster) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        ConfigResource,
        ConfigResourceType,
        KafkaAdminClient,
        NewPartitions,
        ResourcePattern,
        ResourcePatternFilter,
        ResourceType,
    )

    admin = KafkaAdminClient(bootstrap_servers=broker(cluster, 102))
    counts, pinned = names_for("kafka-python")
    try:
        admin.create_topics(
            {
                counts: {
                    "num_partitions": 3,
                    "replication_factor": 2,
                    "configs": {"retention.ms": "3600000"},
                },
                pinned: {"assignments": {0: [101, 102], 1: [103, 101]}},
            }
        )
        settled_everywhere(cluster, [counts, pinned], [])
        described = admin.describe_topics([counts, pinned])
        assert {t["name"]: len(t["partitions"]) for t in described} == {counts: 3, pinned: 2}
        assert topics(cluster)[pinned] == (2, 2)

        resource = ConfigResource(ConfigResourceType.TOPIC, counts)
        configs = admin.describe_configs([resource], config_filter="all")
        assert configs["topic"][counts]["retention.ms"]["value"] == "3600000"
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, counts, configs={"retention.ms": "1000"})],
            incremental=True,
        )
        configs = admin.describe_configs([resource], include_synonyms=True, config_filter="all")
        retention = configs["topic"][counts]["retention.ms"]
        assert retention["value"] == "1000"
        assert retention["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert [str(s.get("source")) for s in retention["synonyms"]] == [
            "DYNAMIC_TOPIC_CONFIG",
            "DEFAULT_CONFIG",
        ], retention
        assert topic_config(cluster, counts)["retention.ms"] == "1000"

        admin.create_partitions({counts: NewPartitions(total_count=4)})
        assert topics(cluster)[counts] == (4, 2)
        before = state(cluster)
        shrink = admin.create_partitions({counts: NewPartitions(total_count=2)}, raise_errors=False)
        assert [(r.error_code, bool(r.error_message)) for r in shrink.results] == [(37, True)]
        assert state(cluster) == before

        acl = ACL(
            principal="User:kafka-python", host="*", operation=ACLOperation.WRITE,
            permission_type=ACLPermissionType.ALLOW,
            resource_pattern=ResourcePattern(ResourceType.TOPIC, counts,
                                             ACLResourcePatternType.LITERAL),
        )  # fmt: skip
        created = admin.create_acls([acl])
        assert created["succeeded"] == [acl] and not created["failed"]
        match = ACLFilter(
            principal=None, host=None, operation=ACLOperation.ANY,
            permission_type=ACLPermissionType.ANY,
            resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, counts,
                                                   ACLResourcePatternType.ANY),
        )  # fmt: skip
        found, _ = admin.describe_acls(match)
        assert [a.principal for a in found] == ["User:kafka-python"]
        deleted = admin.delete_acls([match])
        assert [a.principal for _, matched, _ in deleted for a in matched] == ["User:kafka-python"]
        assert not acls(cluster)

        described_cluster = admin.describe_cluster()
        assert sorted(b["broker_id"] for b in described_cluster["brokers"]) == list(BROKERS)
        assert described_cluster["controller_id"] in BROKERS
        assert described_cluster["cluster_id"] == cluster.cluster_id

        admin.delete_topics([counts, pinned])
        assert counts not in topics(cluster)
        settled_everywhere(cluster, [], [counts, pinned])
        assert counts not in admin.list_topics() and pinned not in admin.list_topics()
    finally:
        admin.close()


@pytest.mark.parametrize(("what", "spec", "error"), BAD_TOPICS, ids=[b[0] for b in BAD_TOPICS])
def test_kafka_python_bad_topics(cluster: Cluster, what: str, spec: dict[str, Any],
                                 error: str) -> None:  # fmt: skip
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=broker(cluster, 102))
    before = state(cluster)
    options: dict[str, Any] = {"configs": spec.get("configs", {})}
    if "assignment" in spec:
        options["assignments"] = spec["assignment"]
    else:
        options.update(num_partitions=spec["partitions"], replication_factor=spec["rf"])
    try:
        answer = admin.create_topics({spec["name"]: options}, raise_errors=False)
    finally:
        admin.close()
    (result,) = answer["topics"]
    assert kafka_python_error(result["error_code"]) == error
    assert result["error_message"]
    assert state(cluster) == before


def kafka_python_error(code: int) -> str:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code).name.upper()


# --------------------------------------------------------------------- aiokafka


def test_aiokafka_admin_client(cluster: Cluster) -> None:
    from aiokafka.admin import AIOKafkaAdminClient, NewPartitions, NewTopic
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
    from aiokafka.errors import InvalidPartitionsError

    counts, pinned = names_for("aiokafka")

    async def go() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker(cluster, 103))
        await admin.start()
        try:
            answer = await admin.create_topics(
                [
                    NewTopic(
                        counts,
                        3,
                        2,
                        topic_configs={"retention.ms": "3600000", "cleanup.policy": "compact"},
                    ),
                    NewTopic(pinned, -1, -1, replica_assignments={0: [101, 102], 1: [103, 101]}),
                ]
            )
            assert [t[1] for t in answer.topic_errors] == [0, 0], answer
            await asyncio.to_thread(settled_everywhere, cluster, [counts, pinned], [])
            described = await admin.describe_topics([counts, pinned])
            assert {t["topic"]: len(t["partitions"]) for t in described} == {counts: 3, pinned: 2}

            resource = ConfigResource(ConfigResourceType.TOPIC, counts)
            (configs,) = await admin.describe_configs([resource])
            values = {c[0]: c[1] for c in configs.resources[0][4]}
            assert values["retention.ms"] == "3600000"
            await admin.alter_configs(
                [ConfigResource(ConfigResourceType.TOPIC, counts, {"retention.ms": "1000"})]
            )
            (configs,) = await admin.describe_configs([resource])
            values = {c[0]: c[1] for c in configs.resources[0][4]}
            assert values["retention.ms"] == "1000"
            # AlterConfigs replaces the whole set: the topic keeps only what was sent.
            assert topic_config(cluster, counts)["retention.ms"] == "1000"
            assert "cleanup.policy" not in topic_config(cluster, counts)  # back to its default

            await admin.create_partitions({counts: NewPartitions(total_count=4)})
            assert topics(cluster)[counts] == (4, 2)
            before = await asyncio.to_thread(state, cluster)
            with pytest.raises(InvalidPartitionsError, match="must be larger"):
                await admin.create_partitions({counts: NewPartitions(total_count=2)})
            assert await asyncio.to_thread(state, cluster) == before

            described_cluster = await admin.describe_cluster()
            assert sorted(b["node_id"] for b in described_cluster["brokers"]) == list(BROKERS)

            deleted = await admin.delete_topics([counts, pinned])
            assert [t[1] for t in deleted.topic_error_codes] == [0, 0], deleted
            await asyncio.to_thread(settled_everywhere, cluster, [], [counts, pinned])
            assert counts not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(go())
    assert counts not in topics(cluster)


@pytest.mark.parametrize(("what", "spec", "error"), BAD_TOPICS, ids=[b[0] for b in BAD_TOPICS])
def test_aiokafka_bad_topics(cluster: Cluster, what: str, spec: dict[str, Any],
                             error: str) -> None:  # fmt: skip
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic

    before = state(cluster)
    if "assignment" in spec:
        topic = NewTopic(spec["name"], -1, -1, replica_assignments=spec["assignment"])
    else:
        topic = NewTopic(spec["name"], spec["partitions"], spec["rf"],
                         topic_configs=spec.get("configs", {}))  # fmt: skip

    async def go() -> Any:
        admin = AIOKafkaAdminClient(bootstrap_servers=broker(cluster, 103))
        await admin.start()
        try:
            return await admin.create_topics([topic])
        finally:
            await admin.close()

    answer = asyncio.run(go())
    ((_, code, message),) = answer.topic_errors
    assert kafka_python_error(code) == error
    assert message
    assert state(cluster) == before


# ------------------------------------------------- the rest of the admin APIs


def test_delete_records_log_dirs_elections_and_topic_ids(cluster: Cluster) -> None:
    """DeleteRecords moves the log start offset; DescribeLogDirs sizes each replica;
    ElectLeaders answers per partition; DeleteTopics by topic id; validate_only
    creates nothing; a broker's configs are described with their sources."""
    from confluent_kafka import Consumer, ElectionType, Producer, TopicPartition
    from confluent_kafka.admin import (
        AdminClient,
        ConfigResource,
        NewTopic,
        OffsetSpec,
        ResourceType,
    )
    from kafka.admin import KafkaAdminClient

    admin = AdminClient({"bootstrap.servers": broker(cluster)})
    admin.create_topics([NewTopic("records", 1, 3)], operation_timeout=15)["records"].result()
    producer = Producer({"bootstrap.servers": broker(cluster), "acks": "all"})
    for i in range(10):
        producer.produce("records", f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    deleted = admin.delete_records([TopicPartition("records", 0, 4)])
    (future,) = deleted.values()
    assert future.result().low_watermark == 4
    earliest = admin.list_offsets({TopicPartition("records", 0): OffsetSpec.earliest()})
    assert next(iter(earliest.values())).result().offset == 4
    consumer = Consumer({"bootstrap.servers": broker(cluster), "group.id": "unused",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    consumer.assign([TopicPartition("records", 0, 0)])
    offsets: list[int] = []
    for _ in range(40):
        offsets += [m.offset() for m in consumer.consume(10, timeout=0.5) if not m.error()]
        if len(offsets) >= 6:
            break
    consumer.close()
    assert offsets == [4, 5, 6, 7, 8, 9]

    legacy = KafkaAdminClient(bootstrap_servers=broker(cluster, 102))
    try:
        dirs = legacy.describe_log_dirs({"records": [0]})
        sizes = list(values_of("partition_size", dirs))
        assert len(sizes) == 3 and all(size > 0 for size in sizes), dirs
        elected = legacy.elect_leaders(0, {"records": [0]})
        (result,) = elected.replica_election_results
        assert [p.error_code for p in result.partition_result] == [84]  # ELECTION_NOT_NEEDED
    finally:
        legacy.close()
    unclean = admin.elect_leaders(ElectionType.UNCLEAN, [TopicPartition("records", 0)])
    (outcome,) = unclean.result().values()
    assert outcome is not None and outcome.name() == "ELECTION_NOT_NEEDED"

    admin.create_topics([NewTopic("checked", 2, 2)], validate_only=True)["checked"].result()
    assert "checked" not in topics(cluster)

    broker_configs = admin.describe_configs([ConfigResource(ResourceType.BROKER, "101")])
    entries = next(iter(broker_configs.values())).result()
    assert entries["num.partitions"].value == "1" and entries["num.partitions"].is_default

    assert documented(cluster, "records")["retention.ms"].startswith("How long records")
    delete_by_id(cluster, "records")  # none of the clients deletes by id: DeleteTopics v6
    assert "records" not in topics(cluster)


def values_of(key: str, tree: Any) -> Iterator[Any]:
    """Every value of `key` in nested dicts and lists (each client shapes answers its way)."""
    if isinstance(tree, dict):
        for k, v in tree.items():
            if k == key:
                yield v
            else:
                yield from values_of(key, v)
    elif isinstance(tree, (list, tuple)):
        for item in tree:
            yield from values_of(key, item)


def documented(cluster: Cluster, topic: str) -> dict[str, str]:
    """DescribeConfigs v4 with include_documentation (no client here asks for it)."""
    from tests.integration.kafka_wire import KafkaSocket

    with KafkaSocket("127.0.0.1", cluster.brokers[101].port) as sock:
        answer = sock.request(
            32, 4,
            {"resources": [{"resource_type": 2, "resource_name": topic,
                            "configuration_keys": None}],
             "include_synonyms": False, "include_documentation": True},
        )  # fmt: skip
    (result,) = answer.results
    return {c.name: c.documentation for c in result.configs}


def delete_by_id(cluster: Cluster, name: str) -> None:
    from broker_agent.kafka import codec
    from tests.integration.kafka_wire import KafkaSocket

    listed = {t["Topic"]: t["TopicId"] for t in ctl_json(cluster, "topics", "list")}
    with KafkaSocket("127.0.0.1", cluster.brokers[101].port) as sock:
        answer = sock.request(
            20, 6, {"topics": [{"name": None, "topic_id": codec.topic_uuid(listed[name])}],
                    "timeout": 15_000},
        )  # fmt: skip
    (result,) = answer.responses
    assert (result.error_code, result.name) == (0, name)


# --------------------------------------------------------- read-your-writes


def test_metadata_on_another_connection_right_after_a_write_shows_it(cluster: Cluster) -> None:
    """The read fence: CreateTopics, CreatePartitions and DeleteTopics answer once
    committed, and a Metadata request that the same broker receives right after,
    on another connection, shows the write (the broker waits for its own image)."""
    from tests.integration.kafka_wire import KafkaSocket, metadata_v12

    def create(names: list[str]) -> dict[str, Any]:
        topics = [
            {"name": n, "num_partitions": 3, "replication_factor": 3, "assignments": [],
             "configs": []}
            for n in names
        ]  # fmt: skip
        return {"topics": topics, "timeout": 15_000, "validate_only": False}

    def grow(name: str, count: int) -> dict[str, Any]:
        topic = {"name": name, "count": count, "assignments": None}
        return {"topics": [topic], "timeout": 15_000, "validate_only": False}

    def delete(names: list[str]) -> dict[str, Any]:
        return {"topics": [{"name": n, "topic_id": None} for n in names], "timeout": 15_000}

    def shown(reader: KafkaSocket, names: list[str]) -> dict[str, tuple[int, int]]:
        answer = reader.request(3, 12, metadata_v12(names))
        return {t.name: (t.error_code, len(t.partitions)) for t in answer.topics}

    port = cluster.brokers[102].port
    with KafkaSocket("127.0.0.1", port) as writer, KafkaSocket("127.0.0.1", port) as reader:
        for round_ in range(5):
            names = [f"fenced-{round_}-{i}" for i in range(20)]
            created = writer.request(19, 7, create(names))
            assert [t.error_code for t in created.topics] == [0] * len(names)
            assert shown(reader, names) == {n: (0, 3) for n in names}

            grown = writer.request(37, 3, grow(names[0], 5))
            assert [r.error_code for r in grown.results] == [0]
            assert shown(reader, names[:1]) == {names[0]: (0, 5)}

            deleted = writer.request(20, 6, delete(names))
            assert [r.error_code for r in deleted.responses] == [0] * len(names)
            unknown = int(ErrorCode.unknown_topic_or_partition)
            assert shown(reader, names) == {n: (unknown, 0) for n in names}
