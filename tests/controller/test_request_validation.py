"""The admin API's edge (quorum/controller/validation.py) without processes.

Bounds refuse a whole request before the image is read or placement runs; item
rules refuse one item of a batch. Each report of issue 17 (items 3 and 9) has a
case here; the wire-level regressions are in
tests/integration/test_admin_validation.py.
"""

from __future__ import annotations

import random
import time
from dataclasses import fields

import pytest

from quorum.controller import cluster_ops, topic_ops
from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import encode, wrap
from quorum.controller.request_limits import PROPERTIES, RequestLimits, limits_from
from quorum.controller.validation import (
    acl_binding_problem,
    broker_name_problem,
    check_partition_budget,
    check_request,
    feature_level_problem,
    principal_problem,
    shown,
    topic_counts_problem,
    validate_topic_name,
)
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb
from quorum.gen import metadata_pb2 as md

SMALL = RequestLimits(
    max_partitions_per_request=100,
    max_partitions=150,
    max_request_items=10,
    max_name_length=300,
    max_config_value_length=64,
)


def image_with_brokers(*broker_ids: int) -> MetadataImage:
    image = MetadataImage()
    for offset, broker in enumerate(broker_ids):
        record = md.RegisterBrokerRecord(broker_id=broker, incarnation_id=f"i{broker}",
                                         broker_epoch=1, fenced=False)  # fmt: skip
        image.apply(offset, encode(wrap(register_broker=record)))
    return image


def refusal(request: object, limits: RequestLimits = SMALL) -> ApiError:
    with pytest.raises(ControllerError) as caught:
        check_request(request, limits)
    assert len(caught.value.message) < 400, "a refusal never echoes a huge field"
    return caught.value.error


def topic(name: str = "t", **fields_: object) -> api.CreatableTopic:
    return api.CreatableTopic(name=name, **fields_)  # type: ignore[arg-type]


# ----------------------------------------------------------------- bounds


def test_a_billion_partitions_is_refused_at_once_without_touching_the_image() -> None:
    request = api.CreateTopicsRequest(topics=[topic(num_partitions=10**9, replication_factor=1)])
    started = time.monotonic()
    assert refusal(request, RequestLimits()) is ApiError.POLICY_VIOLATION
    image = image_with_brokers(1, 2, 3)
    with pytest.raises(ControllerError) as caught:
        topic_ops.build_create_topics(image, request, random.Random(1), RequestLimits())
    assert caught.value.error is ApiError.POLICY_VIOLATION
    assert "controller.max.partitions.per.request" in caught.value.message
    assert time.monotonic() - started < 1.0
    assert image.partition_count == 0


def test_partitions_are_summed_over_the_topics_of_a_request() -> None:
    within = api.CreateTopicsRequest(topics=[topic(f"t{i}", num_partitions=10) for i in range(10)])
    check_request(within, SMALL)
    over = api.CreateTopicsRequest(topics=[topic(f"t{i}", num_partitions=11) for i in range(10)])
    assert refusal(over) is ApiError.POLICY_VIOLATION


def test_a_large_cluster_default_counts_against_the_budget() -> None:
    """`num.partitions` is resolved before placement: a default topic cannot
    smuggle in what an explicit count could not."""
    image = image_with_brokers(1)
    image.apply(1, encode(wrap(config=md.ConfigRecord(
        resource_type=md.CONFIG_RESOURCE_CLUSTER, resource_name="", name="num.partitions",
        value="1000000000"))))  # fmt: skip
    request = api.CreateTopicsRequest(topics=[topic()])
    check_request(request, SMALL)  # nothing explicit to refuse yet
    with pytest.raises(ControllerError) as caught:
        topic_ops.build_create_topics(image, request, random.Random(1), SMALL)
    assert caught.value.error is ApiError.POLICY_VIOLATION


def test_the_cluster_wide_cap_counts_what_exists() -> None:
    check_partition_budget(100, 50, SMALL)
    with pytest.raises(ControllerError) as caught:
        check_partition_budget(101, 50, SMALL)
    assert caught.value.error is ApiError.POLICY_VIOLATION
    assert "max.partitions" in caught.value.message


def test_create_partitions_to_a_billion_is_refused_at_once() -> None:
    request = api.CreatePartitionsRequest(topics=[api.CreatePartitionsTopic(name="t", count=10**9)])
    assert refusal(request, RequestLimits()) is ApiError.POLICY_VIOLATION


def test_create_partitions_counts_only_the_new_partitions() -> None:
    image = image_with_brokers(1)
    records, reply = topic_ops.build_create_topics(
        image, api.CreateTopicsRequest(topics=[topic(num_partitions=90, replication_factor=1)]),
        random.Random(1), SMALL)  # fmt: skip
    assert reply.topics[0].error.error_code == 0
    for offset, record in enumerate(records, start=1):
        image.apply(offset, encode(record))
    grow = api.CreatePartitionsRequest(topics=[api.CreatePartitionsTopic(name="t", count=150)])
    _, grown = topic_ops.build_create_partitions(image, grow, random.Random(1), SMALL)
    assert grown.topics[0].error.error_code == 0
    past = api.CreatePartitionsRequest(topics=[api.CreatePartitionsTopic(name="t", count=151)])
    with pytest.raises(ControllerError) as caught:
        topic_ops.build_create_partitions(image, past, random.Random(1), SMALL)
    assert caught.value.error is ApiError.POLICY_VIOLATION


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (api.CreateTopicsRequest(topics=[topic(f"t{i}") for i in range(11)]),
         ApiError.POLICY_VIOLATION),
        (api.CreateTopicsRequest(topics=[topic("x" * 301)]), ApiError.INVALID_REQUEST),
        (api.CreateTopicsRequest(topics=[topic(configs={"retention.ms": "1" * 65})]),
         ApiError.INVALID_CONFIG),
        (api.CreateTopicsRequest(topics=[topic(configs={"k" * 301: "1"})]),
         ApiError.INVALID_REQUEST),
        (api.CreateTopicsRequest(topics=[topic(assignments=[
            api.ReplicaAssignment(partition_index=i, broker_ids=[1]) for i in range(101)])]),
         ApiError.POLICY_VIOLATION),
        (api.DeleteTopicsRequest(names=["a"] * 6, topic_ids=["b"] * 5), ApiError.POLICY_VIOLATION),
        (api.DeleteTopicsRequest(topic_ids=["b" * 301]), ApiError.INVALID_REQUEST),
        (api.DescribeTopicsRequest(names=["a"] * 11), ApiError.POLICY_VIOLATION),
        (api.IncrementalAlterConfigsRequest(resources=[api.AlterConfigsResource(
            resource_type=api.TOPIC, resource_name="t", configs=[
                api.AlterableConfig(name="retention.ms", value="1")] * 11)]),
         ApiError.POLICY_VIOLATION),
        (api.IncrementalAlterConfigsRequest(resources=[api.AlterConfigsResource(
            resource_type=api.TOPIC, resource_name="t", configs=[
                api.AlterableConfig(name="retention.ms", value="1" * 65)])]),
         ApiError.INVALID_CONFIG),
        (api.DescribeConfigsRequest(resources=[api.DescribeConfigsResource(
            resource_type=api.TOPIC, resource_name="t", names=["a"] * 11)]),
         ApiError.POLICY_VIOLATION),
        (api.CreateAclsRequest(creations=[api.AclBinding(principal="User:" + "a" * 10_000)]),
         ApiError.INVALID_REQUEST),
        (api.CreateAclsRequest(creations=[api.AclBinding(principal="User:a")] * 11),
         ApiError.POLICY_VIOLATION),
        (api.DescribeAclsRequest(filter=api.AclBindingFilter(host="h" * 301)),
         ApiError.INVALID_REQUEST),
        (api.DeleteAclsRequest(filters=[api.AclBindingFilter()] * 11), ApiError.POLICY_VIOLATION),
        (api.ElectLeadersRequest(partitions=[api.TopicPartitions(topic="t",
                                                                partitions=range(11))]),
         ApiError.POLICY_VIOLATION),
        (api.AlterPartitionRequest(partitions=[api.AlterPartitionItem(topic_id="i" * 301)]),
         ApiError.INVALID_REQUEST),
        (api.UpdateFeaturesRequest(updates=[api.FeatureUpdate(feature="f")] * 11),
         ApiError.POLICY_VIOLATION),
    ],
)  # fmt: skip
def test_every_request_type_is_bounded(request_: object, error: ApiError) -> None:
    assert refusal(request_) is error


def test_requests_within_the_limits_pass() -> None:
    check_request(
        api.CreateTopicsRequest(topics=[topic(num_partitions=100, configs={"a": "b" * 64})]),
        SMALL,
    )
    check_request(api.ListTopicsRequest(), SMALL)
    check_request(api.CreateAclsRequest(creations=[api.AclBinding(principal="U:" + "a" * 298)]),
                  SMALL)  # fmt: skip


def test_refusals_quote_only_the_start_of_a_huge_value() -> None:
    huge = "User:" + "x" * 50_000_000
    with pytest.raises(ControllerError) as caught:
        check_request(api.CreateAclsRequest(creations=[api.AclBinding(principal=huge)]), SMALL)
    assert len(caught.value.message) < 300 and "50000005 characters" in caught.value.message
    assert shown("abc") == "'abc'"


# ------------------------------------------------------------- item rules


@pytest.mark.parametrize(
    ("item", "error"),
    [
        (topic(num_partitions=-5), ApiError.INVALID_PARTITIONS),
        (topic(num_partitions=0), ApiError.INVALID_PARTITIONS),
        (topic(replication_factor=-3), ApiError.INVALID_REPLICATION_FACTOR),
        (topic(replication_factor=0), ApiError.INVALID_REPLICATION_FACTOR),
        (topic(num_partitions=2, assignments=[api.ReplicaAssignment(broker_ids=[1])]),
         ApiError.INVALID_REQUEST),
    ],
)  # fmt: skip
def test_counts_are_minus_one_or_positive(item: api.CreatableTopic, error: ApiError) -> None:
    problem = topic_counts_problem(item)
    assert problem is not None and problem.error is error


def test_unset_and_minus_one_mean_the_cluster_default() -> None:
    assert topic_counts_problem(topic()) is None
    assert topic_counts_problem(topic(num_partitions=-1, replication_factor=-1)) is None
    assert topic_counts_problem(topic(num_partitions=3, replication_factor=2)) is None
    assert (
        topic_counts_problem(
            topic(num_partitions=-1, assignments=[api.ReplicaAssignment(broker_ids=[1])])
        )
        is None
    )


def test_a_non_positive_count_creates_nothing() -> None:
    image = image_with_brokers(1, 2)
    request = api.CreateTopicsRequest(topics=[
        topic("a", num_partitions=-5), topic("b", num_partitions=0),
        topic("c", replication_factor=-3), topic("d", replication_factor=0)])  # fmt: skip
    records, reply = topic_ops.build_create_topics(image, request, random.Random(1))
    assert records == []
    assert [t.error.error_name for t in reply.topics] == [
        "INVALID_PARTITIONS", "INVALID_PARTITIONS",
        "INVALID_REPLICATION_FACTOR", "INVALID_REPLICATION_FACTOR"]  # fmt: skip


@pytest.mark.parametrize(
    "value", ["\u0663\u0660\u0660", "1_000", "\uff11", " 5", "5 ", "+5", "0x10", "", "1e3"]
)
def test_integer_configs_take_ascii_digits_only(value: str) -> None:
    with pytest.raises(ControllerError) as caught:
        cs.validate(cs.TOPIC, "retention.ms", value)
    assert caught.value.error is ApiError.INVALID_CONFIG
    assert cs.validate(cs.TOPIC, "retention.ms", "300") is None
    assert cs.validate(cs.TOPIC, "retention.ms", "-1") is None


@pytest.mark.parametrize("name", ["\u00b2", "\u0661", "\uff11", "-1", "2147483648", "", "1 "])
def test_broker_resources_are_named_by_an_ascii_int32_id(name: str) -> None:
    assert broker_name_problem(name) is not None
    request = api.IncrementalAlterConfigsRequest(resources=[api.AlterConfigsResource(
        resource_type=api.BROKER, resource_name=name, configs=[
            api.AlterableConfig(name="num.partitions", value="2")])])  # fmt: skip
    records, reply = cluster_ops.build_alter_configs(image_with_brokers(1), request)
    assert records == [] and reply.resources[0].error.error_name == "INVALID_REQUEST"


def test_broker_ids_in_range_are_accepted() -> None:
    assert broker_name_problem("0") is None and broker_name_problem("2147483647") is None


@pytest.mark.parametrize(
    "principal", ["User:", ":alice", "User", "", "User:al\x00ice", "User:\x1b[31mred",
                  "User:a\u202eb", "User:a\nb"]
)  # fmt: skip
def test_principals_are_type_colon_name_and_printable(principal: str) -> None:
    assert principal_problem(principal) is not None
    binding = api.AclBinding(
        resource_type=2,
        resource_name="t",
        pattern_type=3,
        principal=principal,
        host="*",
        operation=3,
        permission_type=3,
    )
    assert acl_binding_problem(binding) is not None
    binding.principal = "User:alice"
    assert acl_binding_problem(binding) is None
    binding.host = "local\x07host"
    assert acl_binding_problem(binding) is not None


def test_an_upgrade_to_level_zero_is_refused_and_writes_nothing() -> None:
    update = api.FeatureUpdate(feature="metadata.version", max_version_level=0)
    assert feature_level_problem(update, 0) is not None
    assert feature_level_problem(api.FeatureUpdate(feature="f", max_version_level=-1), 0)
    allowed = api.FeatureUpdate(feature="metadata.version", max_version_level=0,
                                allow_downgrade=True)  # fmt: skip
    assert feature_level_problem(allowed, 1) is None
    records, reply = cluster_ops.build_update_features(
        MetadataImage(), api.UpdateFeaturesRequest(updates=[update])
    )
    assert records == [] and reply.results[0].error.error_name == "INVALID_UPDATE_VERSION"


# ----------------------------------------------------------------- limits


def test_every_limit_has_one_property() -> None:
    assert sorted(p.field for p in PROPERTIES) == sorted(f.name for f in fields(RequestLimits))
    assert len({p.key for p in PROPERTIES}) == len(PROPERTIES)
    assert limits_from({"max_partitions": 5, "unknown": 1}) == RequestLimits(max_partitions=5)


def test_limits_are_controller_properties() -> None:
    from quorum.controller_config import ConfigError, parse_config

    base = {
        "node.id": "1",
        "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:9093",
        "listeners": "CONTROLLER://127.0.0.1:9093",
        "metadata.log.dir": "/tmp/unused",
    }
    assert parse_config(base).request_limits == RequestLimits()
    config = parse_config({**base, "max.partitions": "5000", "socket.request.max.bytes": "65536",
                           "controller.max.partitions.per.request": "50"})  # fmt: skip
    assert config.request_limits == RequestLimits(
        max_partitions=5000, socket_request_max_bytes=65536, max_partitions_per_request=50
    )
    assert parse_config(config.as_properties()) == config
    for key, value in (("max.partitions", "0"), ("controller.max.name.length", "10"),
                       ("controller.max.request.items", "1_000")):  # fmt: skip
        with pytest.raises(ConfigError) as caught:
            parse_config({**base, key: value})
        assert caught.value.key == key


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a/b", "orders\n", "caf\u00e9"])
def test_topic_names_follow_kafkas_rules(name: str) -> None:
    with pytest.raises(ControllerError) as caught:
        validate_topic_name(name)
    assert caught.value.error is ApiError.INVALID_TOPIC_EXCEPTION
    validate_topic_name("a" * 249)


@pytest.mark.parametrize(
    "request_",
    [
        bpb.RegisterBrokerRequest(broker_id=1, rack="r" * 5000),
        bpb.RegisterBrokerRequest(broker_id=1, incarnation_id="i" * 5000),
        bpb.RegisterBrokerRequest(
            broker_id=1, listeners=[bpb.Listener(name="PLAINTEXT", host="h", port=70000)]
        ),
        bpb.RegisterBrokerRequest(
            broker_id=1, listeners=[bpb.Listener(name="L", host="h", port=1)] * 20_000
        ),
    ],
)
def test_a_broker_registration_out_of_bounds_is_refused(
    request_: bpb.RegisterBrokerRequest,
) -> None:
    with pytest.raises(ControllerError) as caught:
        check_request(request_, RequestLimits())
    assert caught.value.error in (ApiError.INVALID_REQUEST, ApiError.POLICY_VIOLATION)


INCARNATION = "kBQU2BQmSje3Vyfi1RiIdg"


@pytest.mark.parametrize(
    ("log_dirs", "says"),
    [
        (["nope"], "URL-safe base64"),
        (["A" * 22], "reserved"),
        (["Jp7Fpx3hQy2b7mzT4a0yIg"] * 2, "twice"),
        (["d" * 100_000], "URL-safe base64"),
    ],
)
def test_a_bad_directory_id_is_refused(log_dirs: list[str], says: str) -> None:
    with pytest.raises(ControllerError) as caught:
        check_request(
            bpb.RegisterBrokerRequest(broker_id=1, incarnation_id=INCARNATION, log_dirs=log_dirs),
            RequestLimits(),
        )
    assert caught.value.error is ApiError.INVALID_REGISTRATION
    assert says in caught.value.message and len(caught.value.message) < 400


def test_a_plain_broker_registration_passes() -> None:
    check_request(
        bpb.RegisterBrokerRequest(
            broker_id=1,
            incarnation_id=INCARNATION,
            rack="r1",
            listeners=[
                bpb.Listener(
                    name="PLAINTEXT", host="127.0.0.1", port=9092, security_protocol="PLAINTEXT"
                )
            ],
            log_dirs=["Jp7Fpx3hQy2b7mzT4a0yIg", "styWu_z8Qr6dO6n-F-oNxQ"],
        ),
        RequestLimits(),
    )
