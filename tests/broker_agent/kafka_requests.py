"""Request bodies for every served Kafka API (a superset of the fields of all its
versions: `codec.build` keeps what each version has) and a small metadata image,
for the codec and listener tests that run without broker processes."""

from __future__ import annotations

from typing import Any

from broker_agent.kafka.versions import ApiKey
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import metadata_pb2 as md

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
TOPIC_ID_2 = "AAAAAAAAAAAAAAAAAAAAAg"  # no such topic
REQUESTS: dict[ApiKey, dict[str, Any]] = {
    ApiKey.API_VERSIONS: {"client_software_name": "t", "client_software_version": "1"},
    ApiKey.METADATA: {
        "topics": [{"name": "orders", "topic_id": None}, {"name": "nope", "topic_id": None}],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    },
    ApiKey.PRODUCE: {
        "transactional_id": None, "acks": -1, "timeout": 1000,
        "topic_data": [{"name": "orders", "partition_data": [{"index": 0, "records": b"x"}]}],
    },
    ApiKey.FETCH: {
        "replica_id": -1, "max_wait": 0, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1,
        "topics": [{"topic": "nope", "topic_id": TOPIC_ID_2, "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
             "last_fetched_epoch": -1, "log_start_offset": -1, "partition_max_bytes": 1024}]}],
        "forgotten_topics_data": [], "rack_id": "",
    },
    ApiKey.LIST_OFFSETS: {
        "replica_id": -1, "isolation_level": 0,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}],
    },
    ApiKey.OFFSET_FOR_LEADER_EPOCH: {
        "replica_id": -1,
        "topics": [{"topic": "orders", "partitions": [
            {"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}],
    },
    ApiKey.INIT_PRODUCER_ID: {
        "transactional_id": None, "transaction_timeout": 1000, "producer_id": -1,
        "producer_epoch": -1,
    },
    # The group APIs (broker_agent/kafka/group_apis.py).
    ApiKey.FIND_COORDINATOR: {"key": "g", "key_type": 0, "coordinator_keys": ["g", "h"]},
    ApiKey.JOIN_GROUP: {
        "group_id": "g", "session_timeout": 10000, "rebalance_timeout": 10000,
        "member_id": "", "group_instance_id": None, "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"m"}], "reason": None,
    },
    ApiKey.SYNC_GROUP: {
        "group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None,
        "protocol_type": "consumer", "protocol_name": "range",
        "assignments": [{"member_id": "m", "assignment": b"a"}],
    },
    ApiKey.HEARTBEAT: {"group_id": "g", "generation_id": 1, "member_id": "m",
                       "group_instance_id": None},
    ApiKey.LEAVE_GROUP: {"group_id": "g", "member_id": "m",
                         "members": [{"member_id": "m", "group_instance_id": None,
                                      "reason": None}]},
    ApiKey.OFFSET_COMMIT: {
        "group_id": "g", "generation_id_or_member_epoch": -1, "member_id": "",
        "group_instance_id": None, "retention_time": -1,
        "topics": [{"name": "orders", "partitions": [
            {"partition_index": 0, "committed_offset": 5, "committed_leader_epoch": -1,
             "committed_metadata": None}]}],
    },
    ApiKey.OFFSET_FETCH: {
        "group_id": "g", "topics": [{"name": "orders", "partition_indexes": [0]}],
        "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1,
                    "topics": [{"name": "orders", "partition_indexes": [0]}]}],
        "require_stable": False,
    },
    ApiKey.DESCRIBE_GROUPS: {"groups": ["g"], "include_authorized_operations": False},
    ApiKey.LIST_GROUPS: {"states_filter": [], "types_filter": []},
    ApiKey.DELETE_GROUPS: {"groups_names": ["g"]},
    ApiKey.OFFSET_DELETE: {"group_id": "g", "topics": [{"name": "orders",
                                                        "partitions": [{"partition_index": 0}]}]},
    # the admin APIs (broker_agent/kafka/admin_handlers.py)
    ApiKey.CREATE_TOPICS: {
        "topics": [{"name": "new", "num_partitions": 1, "replication_factor": 1,
                    "assignments": [], "configs": [{"name": "retention.ms", "value": "1"}]}],
        "timeout": 1000, "validate_only": False,
    },
    ApiKey.DELETE_TOPICS: {
        "topic_names": ["orders"], "topics": [{"name": "orders", "topic_id": None}],
        "timeout": 1000,
    },
    ApiKey.CREATE_PARTITIONS: {
        "topics": [{"name": "orders", "count": 2, "assignments": None}], "timeout": 1000,
        "validate_only": False,
    },
    ApiKey.DESCRIBE_CONFIGS: {
        "resources": [{"resource_type": 2, "resource_name": "orders",
                       "configuration_keys": None}],
        "include_synonyms": True, "include_documentation": True,
    },
    ApiKey.INCREMENTAL_ALTER_CONFIGS: {
        "resources": [{"resource_type": 2, "resource_name": "orders", "configs": [
            {"name": "retention.ms", "config_operation": 0, "value": "1"}]}],
        "validate_only": False,
    },
    ApiKey.ALTER_CONFIGS: {
        "resources": [{"resource_type": 2, "resource_name": "orders",
                       "configs": [{"name": "retention.ms", "value": "1"}]}],
        "validate_only": False,
    },
    ApiKey.DESCRIBE_CLUSTER: {
        "include_cluster_authorized_operations": False, "endpoint_type": 1,
        "include_fenced_brokers": False,
    },
    ApiKey.CREATE_ACLS: {
        "creations": [{"resource_type": 2, "resource_name": "orders",
                       "resource_pattern_type": 3, "principal": "User:a", "host": "*",
                       "operation": 3, "permission_type": 3}],
    },
    ApiKey.DESCRIBE_ACLS: {
        "resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
        "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1,
    },
    ApiKey.DELETE_ACLS: {
        "filters": [{"resource_type_filter": 2, "resource_name_filter": "orders",
                     "pattern_type_filter": 3, "principal_filter": None, "host_filter": None,
                     "operation": 1, "permission_type": 1}],
    },
    ApiKey.ELECT_LEADERS: {
        "election_type": 0, "topic_partitions": [{"topic": "orders", "partitions": [0]}],
        "timeout": 1000,
    },
    ApiKey.DELETE_RECORDS: {
        "topics": [{"name": "orders", "partitions": [{"partition_index": 0, "offset": -1}]}],
        "timeout": 1000,
    },
    ApiKey.DESCRIBE_LOG_DIRS: {"topics": None},
}  # fmt: skip


def image() -> MetadataImage:
    img = MetadataImage()
    records = [
        md.MetadataRecord(register_broker=md.RegisterBrokerRecord(
            broker_id=1, broker_epoch=1, incarnation_id="i",
            endpoints=[md.BrokerEndpoint(name="PLAINTEXT", host="h", port=9092,
                                         security_protocol="PLAINTEXT")])),
        md.MetadataRecord(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID)),
        md.MetadataRecord(partition=md.PartitionRecord(
            partition_id=0, topic_id=TOPIC_ID, replicas=[1, 2], isr=[1], leader=1,
            leader_epoch=3, partition_epoch=4)),
    ]  # fmt: skip
    for offset, record in enumerate(records):
        img.apply_record(record, offset)
    return img
