"""The offline tools' JSON shows every field of a record, numbers as numbers."""

from __future__ import annotations

import json

from quorum.cli.proto_json import proto_to_dict
from quorum.gen import metadata_pb2 as md


def test_defaults_are_shown_and_int64_is_a_number() -> None:
    partition = md.PartitionRecord(partition_id=0, topic_id="t", replicas=[1], leader=0)
    assert proto_to_dict(partition) == {
        "partition_id": 0, "topic_id": "t", "replicas": [1], "isr": [],
        "removing_replicas": [], "adding_replicas": [], "leader": 0,
        "leader_epoch": 0, "partition_epoch": 0,
    }  # fmt: skip
    broker = md.RegisterBrokerRecord(broker_id=0, broker_epoch=2**40)
    body = proto_to_dict(broker)
    assert body["broker_epoch"] == 2**40 and isinstance(body["broker_epoch"], int)
    assert body["rack"] is None  # optional and unset: null, not left out
    assert json.loads(json.dumps(body))["broker_epoch"] == 2**40


def test_optional_fields_distinguish_unset_from_default() -> None:
    unchanged = proto_to_dict(md.PartitionChangeRecord(partition_id=0, topic_id="t"))
    assert unchanged["leader"] is None and unchanged["isr"] is None
    offline = proto_to_dict(md.PartitionChangeRecord(partition_id=0, topic_id="t", leader=-1))
    assert offline["leader"] == -1
    with_isr = proto_to_dict(
        md.PartitionChangeRecord(partition_id=0, topic_id="t", isr=md.BrokerIdList(ids=[0]))
    )
    assert with_isr["isr"] == {"ids": [0]}


def test_a_oneof_shows_only_its_member() -> None:
    record = md.MetadataRecord(version=0, no_op=md.NoOpRecord(payload=b"\x00\x01"))
    body = proto_to_dict(record)
    assert body["no_op"] == {"payload": "AAE="}
    assert "topic" not in body and "partition" not in body
    assert body["version"] == 0
