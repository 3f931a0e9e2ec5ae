"""The config keys, their checks and how a value is resolved
(quorum/controller/config_schema.py): pure functions, no image needed."""

from __future__ import annotations

import pytest

from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError, ControllerError


def refused(call: object, *args: object) -> ApiError:
    with pytest.raises(ControllerError) as caught:
        call(*args)  # type: ignore[operator]
    return caught.value.error


@pytest.mark.parametrize(
    ("resource_type", "key", "value"),
    [
        (cs.TOPIC, "retention.ms", "-1"),
        (cs.TOPIC, "retention.ms", str(cs.LONG_MAX)),
        (cs.TOPIC, "max.message.bytes", str(cs.INT_MAX)),
        (cs.TOPIC, "segment.bytes", "14"),
        (cs.TOPIC, "unclean.leader.election.enable", "TRUE"),
        (cs.TOPIC, "cleanup.policy", "compact, delete"),
        (cs.TOPIC, "compression.type", "zstd"),
        (cs.TOPIC, "message.timestamp.type", "LogAppendTime"),
        (cs.BROKER, "leader.imbalance.per.broker.percentage", "100"),
        (cs.CLUSTER, "num.partitions", "1"),
    ],
)
def test_values_within_a_keys_rules_pass(resource_type: int, key: str, value: str) -> None:
    cs.validate(resource_type, key, value)


@pytest.mark.parametrize(
    ("resource_type", "key", "value"),
    [
        (cs.TOPIC, "retention.ms", "-2"),
        (cs.TOPIC, "retention.ms", str(cs.LONG_MAX + 1)),
        (cs.TOPIC, "max.message.bytes", str(cs.INT_MAX + 1)),
        (cs.TOPIC, "segment.bytes", "13"),
        (cs.TOPIC, "retention.ms", " 5"),
        (cs.TOPIC, "retention.ms", "1e3"),
        (cs.TOPIC, "retention.ms", "\u0661\u0662"),  # Arabic-Indic digits
        (cs.TOPIC, "retention.ms", ""),
        (cs.TOPIC, "unclean.leader.election.enable", "1"),
        (cs.TOPIC, "cleanup.policy", ","),
        (cs.TOPIC, "cleanup.policy", "delete,archive"),
        (cs.TOPIC, "compression.type", "ZSTD"),  # Kafka's choices are case-sensitive
        (cs.TOPIC, "num.partitions", "3"),  # a broker key on a topic
        (cs.BROKER, "retention.ms", "3"),  # a topic key on a broker
        (cs.BROKER, "leader.imbalance.per.broker.percentage", "101"),
        (cs.CLUSTER, "num.partitions", "0"),
        (99, "num.partitions", "1"),  # no such resource type
    ],
)
def test_values_outside_a_keys_rules_are_invalid_configs(
    resource_type: int, key: str, value: str
) -> None:
    assert refused(cs.validate, resource_type, key, value) is ApiError.INVALID_CONFIG


def test_the_message_names_the_key_and_the_rule() -> None:
    with pytest.raises(ControllerError, match=r"segment\.bytes: must be between 14 and"):
        cs.validate(cs.TOPIC, "segment.bytes", "1")
    with pytest.raises(ControllerError, match=r"unknown config 'segment\.byte'"):
        cs.validate(cs.TOPIC, "segment.byte", "1")


def test_min_insync_replicas_may_not_exceed_the_replication_factor() -> None:
    cs.validate_topic_configs({"min.insync.replicas": "3"}, replication_factor=3)
    with pytest.raises(ControllerError, match="larger than the replication factor 2") as caught:
        cs.validate_topic_configs({"min.insync.replicas": "3"}, replication_factor=2)
    assert caught.value.error is ApiError.INVALID_CONFIG
    cs.validate_topic_configs({}, replication_factor=1)


def test_incremental_ops_apply_in_order_and_leave_the_input_alone() -> None:
    current = {"retention.ms": "1", "segment.ms": "2"}
    ops = [
        ("retention.ms", cs.DELETE, ""),
        ("segment.ms", cs.SET, "3"),
        ("cleanup.policy", cs.APPEND, "compact"),
        ("cleanup.policy", cs.SUBTRACT, "delete"),
        ("max.message.bytes", cs.DELETE, ""),  # deleting what is not set is fine
    ]
    assert cs.apply_incremental(cs.TOPIC, current, ops) == {
        "segment.ms": "3",
        "cleanup.policy": "compact",
    }
    assert current == {"retention.ms": "1", "segment.ms": "2"}


def test_append_adds_only_new_items_and_subtract_removes_several() -> None:
    current = {"cleanup.policy": "delete"}
    appended = cs.apply_incremental(
        cs.TOPIC, current, [("cleanup.policy", cs.APPEND, "delete,compact")]
    )
    assert appended == {"cleanup.policy": "delete,compact"}
    with pytest.raises(ControllerError, match=r"cleanup\.policy"):
        cs.apply_incremental(
            cs.TOPIC, appended, [("cleanup.policy", cs.SUBTRACT, "compact,delete")]
        )


@pytest.mark.parametrize(
    ("op", "error"),
    [
        (("retention.ms", cs.APPEND, "1"), ApiError.INVALID_CONFIG),
        (("retention.ms", cs.SUBTRACT, "1"), ApiError.INVALID_CONFIG),
        (("retention.ms", 9, "1"), ApiError.INVALID_REQUEST),
        (("nope", cs.DELETE, ""), ApiError.INVALID_CONFIG),
        (("retention.ms", cs.SET, "soon"), ApiError.INVALID_CONFIG),
    ],
)
def test_a_bad_incremental_op_refuses_the_whole_change(
    op: tuple[str, int, str], error: ApiError
) -> None:
    ops = [("segment.ms", cs.SET, "5"), op]
    assert refused(cs.apply_incremental, cs.TOPIC, {}, ops) is error


def test_a_topics_value_comes_from_itself_then_the_cluster_then_the_default() -> None:
    topic = {"min.insync.replicas": "3"}
    cluster = {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    assert cs.topic_value("min.insync.replicas", topic, cluster) == "3"
    assert cs.topic_value("unclean.leader.election.enable", topic, cluster) == "true"
    assert cs.topic_value("retention.ms", topic, cluster) == "604800000"


def test_effective_configs_name_their_source_for_every_key() -> None:
    entries = cs.effective(cs.TOPIC, {"retention.ms": "5"}, {"min.insync.replicas": "2"})
    by_name = {e.name: (e.value, e.source) for e in entries}
    assert set(by_name) == set(cs.KEYS[cs.TOPIC])
    assert by_name["retention.ms"] == ("5", "DYNAMIC_TOPIC_CONFIG")
    assert by_name["min.insync.replicas"] == ("2", "DYNAMIC_DEFAULT_BROKER_CONFIG")
    assert by_name["segment.ms"] == ("604800000", "DEFAULT_CONFIG")
    assert [e.name for e in entries] == sorted(by_name)


def test_a_brokers_own_value_overrides_the_cluster_default() -> None:
    entries = cs.effective(cs.BROKER, {"num.partitions": "4"}, {"num.partitions": "2"})
    by_name = {e.name: (e.value, e.source) for e in entries}
    assert by_name["num.partitions"] == ("4", "DYNAMIC_BROKER_CONFIG")
    cluster = cs.effective(cs.CLUSTER, {"num.partitions": "2"}, {"num.partitions": "2"})
    assert {e.name: e.source for e in cluster}["num.partitions"] == "DYNAMIC_DEFAULT_BROKER_CONFIG"


def test_every_default_passes_its_own_check() -> None:
    for resource_type, keys in cs.KEYS.items():
        for key in keys.values():
            cs.validate(resource_type, key.name, key.default)
