"""ACLs on the group APIs, as Kafka's authorizer decides: GROUP READ to join and
commit (plus topic READ), DESCRIBE to describe and fetch offsets, DELETE to
delete. Handlers driven directly with an image holding the ACLs; a refused
request gets GROUP_AUTHORIZATION_FAILED / TOPIC_AUTHORIZATION_FAILED and never
reaches the coordinator."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.kafka import codec
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.listener import Connection
from broker_agent.kafka.versions import ApiKey
from quorum.authz.authorizer import AuthorizerConfig, Operation, ResourceType
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import metadata_pb2 as md

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
ALICE = Connection("PLAINTEXT", "127.0.0.1", "User:alice")
ALLOW = 3


class Untouchable:
    """A coordinator that fails the test if a refused request reaches it."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"a refused request reached the coordinator ({name})")


def image(*acls: tuple[ResourceType, str, Operation]) -> MetadataImage:
    img = MetadataImage()
    records = [
        md.MetadataRecord(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID)),
        md.MetadataRecord(
            partition=md.PartitionRecord(
                partition_id=0,
                topic_id=TOPIC_ID,
                replicas=[1],
                isr=[1],
                leader=1,
                leader_epoch=0,
                partition_epoch=0,
            )
        ),
    ]
    for i, (kind, name, op) in enumerate(acls):
        records.append(
            md.MetadataRecord(
                access_control_entry=md.AccessControlEntryRecord(
                    id=f"acl-{i}",
                    resource_type=int(kind),
                    resource_name=name,
                    pattern_type=3,
                    principal="User:alice",
                    host="*",
                    operation=int(op),
                    permission_type=ALLOW,
                )
            )
        )
    for offset, record in enumerate(records):
        img.apply_record(record, offset)
    return img


def call(img: MetadataImage, api: ApiKey, version: int, values: dict[str, Any]) -> Any:
    apis = KafkaApis(
        1,
        "c",
        lambda: img,
        None,
        None,
        KafkaAuthorizer(AuthorizerConfig(enabled=True), lambda: img),
        Untouchable(),  # type: ignore[arg-type]
    )
    request = codec.DecodedRequest(
        api, version, 1, "client", codec.build(codec.request_class(api, version), values)
    )
    return asyncio.run(apis.handle(request, ALICE))


JOIN = {
    "group_id": "g",
    "session_timeout": 10000,
    "rebalance_timeout": 10000,
    "member_id": "",
    "group_instance_id": None,
    "protocol_type": "consumer",
    "protocols": [{"name": "range", "metadata": b""}],
    "reason": None,
}


def commit(group: str = "g") -> dict[str, Any]:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "group_instance_id": None,
        "topics": [
            {
                "name": "orders",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 1,
                        "committed_leader_epoch": -1,
                        "committed_metadata": None,
                    }
                ],
            }
        ],
    }


def test_without_acls_every_group_request_is_refused() -> None:
    img = image()
    found = call(img, ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert found.error_code == ErrorCode.group_authorization_failed
    assert call(img, ApiKey.JOIN_GROUP, 5, JOIN).error_code == ErrorCode.group_authorization_failed
    beat = call(
        img,
        ApiKey.HEARTBEAT,
        3,
        {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None},
    )
    assert beat.error_code == ErrorCode.group_authorization_failed
    answer = call(img, ApiKey.OFFSET_COMMIT, 8, commit())
    assert answer.topics[0].partitions[0].error_code == ErrorCode.group_authorization_failed
    described = call(
        img, ApiKey.DESCRIBE_GROUPS, 5, {"groups": ["g"], "include_authorized_operations": False}
    )
    assert described.groups[0].error_code == ErrorCode.group_authorization_failed
    deleted = call(img, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert deleted.results[0].error_code == ErrorCode.group_authorization_failed


def test_group_read_without_topic_read_refuses_the_commit_per_topic() -> None:
    img = image((ResourceType.GROUP, "g", Operation.READ))
    answer = call(img, ApiKey.OFFSET_COMMIT, 8, commit())
    assert answer.topics[0].partitions[0].error_code == ErrorCode.topic_authorization_failed


def test_group_read_does_not_allow_delete() -> None:
    img = image((ResourceType.GROUP, "g", Operation.READ))
    deleted = call(img, ApiKey.DELETE_GROUPS, 2, {"groups_names": ["g"]})
    assert deleted.results[0].error_code == ErrorCode.group_authorization_failed
    fetched = call(
        img,
        ApiKey.OFFSET_FETCH,
        8,
        {
            "groups": [
                {"group_id": "other", "member_id": None, "member_epoch": -1, "topics": None}
            ],
            "require_stable": False,
        },
    )
    assert fetched.groups[0].error_code == ErrorCode.group_authorization_failed
