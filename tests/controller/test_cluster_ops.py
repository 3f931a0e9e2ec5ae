"""Configs, ACLs, producer ids and features (quorum/controller/cluster_ops.py).

Each write is built against an image made of records, committed, and read back
from the image (or through the describe functions, as an operator would).
"""

from __future__ import annotations

import pytest
from image_scenario import BROKER, CLUSTER, TOPIC, Scenario, error_of, kinds

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.cluster_ops import (
    PRODUCER_ID_BLOCK,
    build_allocate_producer_ids,
    build_alter_configs,
    build_create_acls,
    build_delete_acls,
    build_update_features,
    describe_acls,
    describe_configs,
)
from quorum.gen import admin_pb2 as api

SET, DELETE, APPEND, SUBTRACT = api.SET, api.DELETE, api.APPEND, api.SUBTRACT

# Kafka's ACL ids (proto/admin.proto).
ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4
R_TOPIC, R_GROUP, R_CLUSTER = 2, 3, 4
READ, WRITE = 3, 4
DENY, ALLOW = 2, 3


# ------------------------------------------------------------------- configs


def alter(
    s: Scenario,
    resource_type: int,
    name: str,
    *ops: tuple[str, int, str],
    validate_only: bool = False,
) -> tuple[int, ApiError]:
    """One IncrementalAlterConfigs resource; commits. (records written, error)."""
    resource = api.AlterConfigsResource(
        resource_type=resource_type,  # type: ignore[arg-type]
        resource_name=name,
        configs=[api.AlterableConfig(name=k, op=op, value=v) for k, op, v in ops],  # type: ignore[arg-type]
    )
    records, response = build_alter_configs(
        s.image,
        api.IncrementalAlterConfigsRequest(resources=[resource], validate_only=validate_only),
    )
    assert set(kinds(records)) <= {"config", "partition_change"}
    s.commit(records)
    return len(records), error_of(response.resources[0])


def topic_scenario(**configs: str) -> Scenario:
    s = Scenario()
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]], configs=configs)
    return s


def test_set_then_delete_a_topic_config() -> None:
    s = topic_scenario()
    assert alter(s, TOPIC, "orders", ("retention.ms", SET, "3600000")) == (1, ApiError.NONE)
    assert s.image.config(TOPIC, "orders") == {"retention.ms": "3600000"}
    assert alter(s, TOPIC, "orders", ("retention.ms", DELETE, "")) == (1, ApiError.NONE)
    assert s.image.config(TOPIC, "orders") == {}


def test_setting_a_value_it_already_has_writes_nothing() -> None:
    s = topic_scenario(**{"retention.ms": "1000"})
    assert alter(s, TOPIC, "orders", ("retention.ms", SET, "1000")) == (0, ApiError.NONE)
    assert alter(s, TOPIC, "orders", ("segment.ms", DELETE, "")) == (0, ApiError.NONE)


def test_operations_apply_in_order() -> None:
    s = topic_scenario(**{"retention.ms": "1000"})
    written, error = alter(
        s,
        TOPIC,
        "orders",
        ("retention.ms", DELETE, ""),
        ("retention.ms", SET, "2000"),
        ("segment.ms", SET, "5000"),
        ("segment.ms", DELETE, ""),
    )
    assert (written, error) == (1, ApiError.NONE)
    assert s.image.config(TOPIC, "orders") == {"retention.ms": "2000"}


def test_append_and_subtract_edit_a_list_starting_from_its_default() -> None:
    s = topic_scenario()
    alter(s, TOPIC, "orders", ("cleanup.policy", APPEND, "compact"))
    assert s.image.config(TOPIC, "orders") == {"cleanup.policy": "delete,compact"}
    assert alter(s, TOPIC, "orders", ("cleanup.policy", APPEND, "compact")) == (0, ApiError.NONE)
    alter(s, TOPIC, "orders", ("cleanup.policy", SUBTRACT, "delete"))
    assert s.image.config(TOPIC, "orders") == {"cleanup.policy": "compact"}


def test_subtracting_every_item_of_a_list_is_refused() -> None:
    s = topic_scenario(**{"cleanup.policy": "compact"})
    written, error = alter(s, TOPIC, "orders", ("cleanup.policy", SUBTRACT, "compact"))
    assert (written, error) == (0, ApiError.INVALID_CONFIG)
    assert s.image.config(TOPIC, "orders") == {"cleanup.policy": "compact"}


@pytest.mark.parametrize(
    "op",
    [
        ("retention.ms", APPEND, "5"),  # not a list
        ("cleanup.policy", APPEND, "shred"),
        ("retention.ms", SET, "an hour"),
        ("retention.ms", SET, "1_000"),
        ("retention.ms", SET, "\uff11\uff10\uff10\uff10"),  # fullwidth digits
        ("retention.ms", SET, "-2"),
        ("min.insync.replicas", SET, "0"),
        ("min.insync.replicas", SET, "4"),  # above the replication factor of 3
        ("unclean.leader.election.enable", SET, "maybe"),
        ("compression.type", SET, "brotli"),
        ("log.retention.ms", SET, "1000"),  # a broker key, not a topic key
        ("no.such.key", SET, "1"),
        ("no.such.key", DELETE, ""),
    ],
)
def test_an_invalid_topic_config_is_refused_and_changes_nothing(op: tuple[str, int, str]) -> None:
    s = topic_scenario(**{"retention.ms": "1000"})
    written, error = alter(s, TOPIC, "orders", ("segment.ms", SET, "5000"), op)
    assert (written, error) == (0, ApiError.INVALID_CONFIG)
    assert s.image.config(TOPIC, "orders") == {"retention.ms": "1000"}


def test_an_unknown_operation_is_an_invalid_request() -> None:
    s = topic_scenario()
    assert alter(s, TOPIC, "orders", ("retention.ms", 7, "1")) == (0, ApiError.INVALID_REQUEST)


@pytest.mark.parametrize(
    ("resource_type", "name", "error"),
    [
        (TOPIC, "nope", ApiError.UNKNOWN_TOPIC_OR_PARTITION),
        (BROKER, "one", ApiError.INVALID_REQUEST),
        (BROKER, "-1", ApiError.INVALID_REQUEST),
        (BROKER, "99999999999", ApiError.INVALID_REQUEST),
        (CLUSTER, "x", ApiError.INVALID_REQUEST),
        (99, "", ApiError.INVALID_REQUEST),
    ],
)
def test_a_resource_that_cannot_have_configs_is_refused(
    resource_type: int, name: str, error: ApiError
) -> None:
    s = topic_scenario()
    assert alter(s, resource_type, name, ("num.partitions", SET, "3")) == (0, error)


def test_broker_and_cluster_configs_take_broker_keys() -> None:
    s = topic_scenario()
    assert alter(s, BROKER, "2", ("num.partitions", SET, "6")) == (1, ApiError.NONE)
    assert alter(s, CLUSTER, "", ("unclean.leader.election.enable", SET, "true")) == (
        1,
        ApiError.NONE,
    )
    assert alter(s, CLUSTER, "", ("retention.ms", SET, "1")) == (0, ApiError.INVALID_CONFIG)
    assert s.image.config(BROKER, "2") == {"num.partitions": "6"}
    assert s.image.config(CLUSTER, "") == {"unclean.leader.election.enable": "true"}


def test_validate_only_answers_and_writes_nothing() -> None:
    s = topic_scenario()
    ok = alter(s, TOPIC, "orders", ("retention.ms", SET, "1"), validate_only=True)
    bad = alter(s, TOPIC, "orders", ("retention.ms", SET, "x"), validate_only=True)
    assert (ok, bad) == ((0, ApiError.NONE), (0, ApiError.INVALID_CONFIG))
    assert s.image.configs == {}


def test_one_bad_resource_does_not_stop_the_others() -> None:
    s = topic_scenario()
    request = api.IncrementalAlterConfigsRequest(
        resources=[
            api.AlterConfigsResource(
                resource_type=api.TOPIC,
                resource_name="orders",
                configs=[api.AlterableConfig(name="retention.ms", op=SET, value="x")],
            ),
            api.AlterConfigsResource(
                resource_type=api.CLUSTER,
                configs=[api.AlterableConfig(name="num.partitions", op=SET, value="4")],
            ),
        ]
    )
    records, response = build_alter_configs(s.image, request)
    assert [error_of(r) for r in response.resources] == [ApiError.INVALID_CONFIG, ApiError.NONE]
    s.commit(records)
    assert s.image.configs == {(CLUSTER, ""): {"num.partitions": "4"}}


def test_describe_configs_names_where_each_value_comes_from() -> None:
    s = topic_scenario(**{"retention.ms": "1000"})
    s.config(CLUSTER, "", "min.insync.replicas", "2")
    request = api.DescribeConfigsRequest(
        resources=[
            api.DescribeConfigsResource(
                resource_type=api.TOPIC,
                resource_name="orders",
                names=["retention.ms", "min.insync.replicas", "segment.ms"],
            ),
            api.DescribeConfigsResource(resource_type=api.TOPIC, resource_name="nope"),
        ]
    )
    found, missing = describe_configs(s.image, request).resources
    assert error_of(missing) is ApiError.UNKNOWN_TOPIC_OR_PARTITION
    assert {(c.name, c.value, c.source, c.is_default) for c in found.configs} == {
        ("min.insync.replicas", "2", api.DYNAMIC_DEFAULT_BROKER_CONFIG, False),
        ("retention.ms", "1000", api.DYNAMIC_TOPIC_CONFIG, False),
        ("segment.ms", "604800000", api.DEFAULT_CONFIG, True),
    }


def test_describe_configs_without_names_lists_every_key() -> None:
    s = topic_scenario()
    request = api.DescribeConfigsRequest(
        resources=[api.DescribeConfigsResource(resource_type=api.BROKER, resource_name="1")]
    )
    (result,) = describe_configs(s.image, request).resources
    names = [c.name for c in result.configs]
    assert names == sorted(names) and "num.partitions" in names and "retention.ms" not in names


# ---------------------------------------------------------------------- ACLs


def binding(
    name: str,
    pattern: int = LITERAL,
    principal: str = "User:alice",
    operation: int = READ,
    permission: int = ALLOW,
    resource_type: int = R_TOPIC,
    host: str = "*",
) -> api.AclBinding:
    return api.AclBinding(
        resource_type=resource_type,
        resource_name=name,
        pattern_type=pattern,
        principal=principal,
        host=host,
        operation=operation,
        permission_type=permission,
    )


def acl_filter(
    name: str | None = None,
    pattern: int = ANY,
    principal: str | None = None,
    operation: int = ANY,
    permission: int = ANY,
    resource_type: int = ANY,
    host: str | None = None,
) -> api.AclBindingFilter:
    f = api.AclBindingFilter(
        resource_type=resource_type,
        pattern_type=pattern,
        operation=operation,
        permission_type=permission,
    )
    if name is not None:
        f.resource_name = name
    if principal is not None:
        f.principal = principal
    if host is not None:
        f.host = host
    return f


def create_acls(s: Scenario, *bindings: api.AclBinding) -> tuple[int, list[ApiError]]:
    records, response = build_create_acls(s.image, api.CreateAclsRequest(creations=bindings), s.rng)
    assert set(kinds(records)) <= {"access_control_entry"}
    s.commit(records)
    return len(records), [error_of(r) for r in response.results]


def described(s: Scenario, f: api.AclBindingFilter) -> list[tuple[str, int, str]]:
    response = describe_acls(s.image, api.DescribeAclsRequest(filter=f))
    return [(b.resource_name, b.pattern_type, b.principal) for b in response.bindings]


def acl_scenario() -> Scenario:
    s = Scenario()
    create_acls(
        s,
        binding("orders"),
        binding("orders", principal="User:bob", operation=WRITE),
        binding("ord", PREFIXED),
        binding("*"),
        binding("payments", permission=DENY, principal="User:bob"),
        binding("ops", resource_type=R_GROUP, host="10.0.0.1"),
    )
    return s


def test_created_acls_are_in_the_image() -> None:
    s = Scenario()
    written, errors = create_acls(s, binding("orders"), binding("ord", PREFIXED))
    assert (written, errors) == (2, [ApiError.NONE, ApiError.NONE])
    assert sorted((a.resource_name, a.pattern_type) for a in s.image.acls.values()) == [
        ("ord", PREFIXED),
        ("orders", LITERAL),
    ]
    assert all(len(acl_id) == 22 for acl_id in s.image.acls)


def test_creating_an_existing_acl_succeeds_and_writes_nothing() -> None:
    s = Scenario()
    create_acls(s, binding("orders"))
    assert create_acls(s, binding("orders"), binding("orders")) == (0, [ApiError.NONE] * 2)
    assert create_acls(s, binding("x"), binding("x")) == (1, [ApiError.NONE] * 2)
    assert len(s.image.acls) == 2


@pytest.mark.parametrize(
    "bad",
    [
        binding("orders", pattern=ANY),  # a filter's value, not a binding's
        binding("orders", pattern=MATCH),
        binding("orders", operation=ANY),
        binding("orders", permission=ANY),
        binding("orders", resource_type=ANY),
        binding("orders", principal="alice"),
        binding(""),
        binding("orders", host=""),
    ],
)
def test_an_invalid_binding_is_refused_and_the_others_are_created(bad: api.AclBinding) -> None:
    s = Scenario()
    written, errors = create_acls(s, bad, binding("orders", principal="User:ok"))
    assert (written, errors) == (1, [ApiError.INVALID_REQUEST, ApiError.NONE])
    assert [a.principal for a in s.image.acls.values()] == ["User:ok"]


def test_a_literal_name_filter_matches_that_exact_name_only() -> None:
    s = acl_scenario()
    assert described(s, acl_filter("orders", LITERAL)) == [
        ("orders", LITERAL, "User:alice"),
        ("orders", LITERAL, "User:bob"),
    ]
    assert described(s, acl_filter("orders", PREFIXED)) == []
    assert described(s, acl_filter("ord", PREFIXED)) == [("ord", PREFIXED, "User:alice")]


def test_an_any_pattern_filter_matches_the_name_under_every_pattern_type() -> None:
    s = acl_scenario()
    assert described(s, acl_filter("ord")) == [("ord", PREFIXED, "User:alice")]
    assert len(described(s, acl_filter())) == 6


def test_filters_narrow_by_principal_operation_permission_type_and_host() -> None:
    s = acl_scenario()
    assert described(s, acl_filter(principal="User:bob")) == [
        ("orders", LITERAL, "User:bob"),
        ("payments", LITERAL, "User:bob"),
    ]
    assert described(s, acl_filter(operation=WRITE)) == [("orders", LITERAL, "User:bob")]
    assert described(s, acl_filter(permission=DENY)) == [("payments", LITERAL, "User:bob")]
    assert described(s, acl_filter(resource_type=R_GROUP)) == [("ops", LITERAL, "User:alice")]
    assert described(s, acl_filter(host="10.0.0.1")) == [("ops", LITERAL, "User:alice")]
    assert described(s, acl_filter(resource_type=R_CLUSTER)) == []


def test_a_match_filter_finds_every_acl_that_applies_to_a_resource() -> None:
    """Kafka's MATCH: the literal name, the literal wildcard '*', and every prefix
    of the name (`kafka-acls --list --topic orders --resource-pattern-type match`)."""
    s = acl_scenario()
    assert sorted(described(s, acl_filter("orders", MATCH, resource_type=R_TOPIC))) == [
        ("*", LITERAL, "User:alice"),
        ("ord", PREFIXED, "User:alice"),
        ("orders", LITERAL, "User:alice"),
        ("orders", LITERAL, "User:bob"),
    ]
    assert described(s, acl_filter("payments", MATCH, permission=DENY)) == [
        ("payments", LITERAL, "User:bob")
    ]
    assert described(s, acl_filter("other", MATCH, resource_type=R_TOPIC)) == [
        ("*", LITERAL, "User:alice")
    ]


def test_deleting_acls_removes_what_the_filters_match_once() -> None:
    s = acl_scenario()
    request = api.DeleteAclsRequest(
        filters=[
            acl_filter("orders", LITERAL),
            acl_filter(principal="User:bob"),
            acl_filter("nothing-here", LITERAL),
        ]
    )
    records, response = build_delete_acls(s.image, request)
    assert kinds(records) == ["remove_access_control_entry"] * 3
    by_filter = [sorted(b.principal for b in r.matching) for r in response.results]
    assert by_filter == [["User:alice", "User:bob"], ["User:bob", "User:bob"], []]
    assert all(error_of(r) is ApiError.NONE for r in response.results)
    s.commit(records)
    assert sorted(a.resource_name for a in s.image.acls.values()) == ["*", "ops", "ord"]


def test_deleting_with_a_match_filter_removes_every_acl_that_applies() -> None:
    s = acl_scenario()
    records, response = build_delete_acls(
        s.image, api.DeleteAclsRequest(filters=[acl_filter("orders", MATCH, resource_type=R_TOPIC)])
    )
    assert len(response.results[0].matching) == 4
    s.commit(records)
    assert sorted(a.resource_name for a in s.image.acls.values()) == ["ops", "payments"]


def test_deleting_with_a_prefixed_filter_leaves_the_literal_acls() -> None:
    s = acl_scenario()
    records, _ = build_delete_acls(
        s.image, api.DeleteAclsRequest(filters=[acl_filter("ord", PREFIXED)])
    )
    s.commit(records)
    assert ("ord", PREFIXED) not in {
        (a.resource_name, a.pattern_type) for a in s.image.acls.values()
    }
    assert len(s.image.acls) == 5


# ------------------------------------------------------------- producer ids


def test_producer_id_blocks_follow_each_other() -> None:
    s = Scenario()
    s.brokers(1, 2)
    starts = []
    for broker in (1, 2, 1):
        epoch = s.image.brokers[broker].broker_epoch
        records, reply = build_allocate_producer_ids(
            s.image, api.AllocateProducerIdsRequest(broker_id=broker, broker_epoch=epoch)
        )
        assert reply.producer_id_len == PRODUCER_ID_BLOCK
        starts.append(reply.producer_id_start)
        s.commit(records)
    assert starts == [0, PRODUCER_ID_BLOCK, 2 * PRODUCER_ID_BLOCK]
    assert s.image.next_producer_id == 3 * PRODUCER_ID_BLOCK
    assert s.image.producer_id_owner == (1, s.image.brokers[1].broker_epoch)


@pytest.mark.parametrize(
    ("broker", "epoch_shift", "error"),
    [(9, 0, ApiError.BROKER_ID_NOT_REGISTERED), (1, 1, ApiError.STALE_BROKER_EPOCH)],
)
def test_producer_ids_go_only_to_a_registered_broker_at_its_epoch(
    broker: int, epoch_shift: int, error: ApiError
) -> None:
    s = Scenario()
    s.brokers(1)
    request = api.AllocateProducerIdsRequest(
        broker_id=broker, broker_epoch=s.image.brokers[1].broker_epoch + epoch_shift
    )
    with pytest.raises(ControllerError) as caught:
        build_allocate_producer_ids(s.image, request)
    assert caught.value.error is error


# ------------------------------------------------------------------ features


def update_features(
    s: Scenario, *updates: api.FeatureUpdate, validate_only: bool = False
) -> tuple[int, list[ApiError]]:
    records, response = build_update_features(
        s.image, api.UpdateFeaturesRequest(updates=updates, validate_only=validate_only)
    )
    assert set(kinds(records)) <= {"feature_level"}
    s.commit(records)
    return len(records), [error_of(r) for r in response.results]


def feature(name: str, level: int, downgrade: bool = False) -> api.FeatureUpdate:
    return api.FeatureUpdate(feature=name, max_version_level=level, allow_downgrade=downgrade)


def test_a_feature_is_finalized_at_a_supported_level_once() -> None:
    s = Scenario()
    assert update_features(s, feature("metadata.version", 1)) == (1, [ApiError.NONE])
    assert s.image.features == {"metadata.version": 1}
    assert update_features(s, feature("metadata.version", 1)) == (0, [ApiError.NONE])


def test_validate_only_finalizes_nothing() -> None:
    s = Scenario()
    assert update_features(s, feature("metadata.version", 1), validate_only=True) == (
        0,
        [ApiError.NONE],
    )
    assert s.image.features == {}


@pytest.mark.parametrize(
    "update",
    [
        feature("no.such.feature", 1),
        feature("metadata.version", 2),  # beyond what this controller supports
        feature("kraft.version", 1),
        feature("metadata.version", -1, downgrade=True),
        feature("metadata.version", 0),  # removing needs allow_downgrade
    ],
)
def test_an_unsupported_feature_level_is_refused(update: api.FeatureUpdate) -> None:
    s = Scenario()
    assert update_features(s, update, feature("metadata.version", 1)) == (
        1,
        [ApiError.INVALID_UPDATE_VERSION, ApiError.NONE],
    )


def test_lowering_or_removing_a_feature_needs_allow_downgrade() -> None:
    s = Scenario()
    update_features(s, feature("metadata.version", 1))
    assert update_features(s, feature("metadata.version", 0)) == (
        0,
        [ApiError.INVALID_UPDATE_VERSION],
    )
    assert update_features(s, feature("metadata.version", 0, downgrade=True)) == (
        1,
        [ApiError.NONE],
    )
    assert s.image.features == {}


# ---------------------------- turning unclean.leader.election.enable on


def offline_orders(s: Scenario) -> None:
    """orders-0 on [1, 2, 3] went offline with broker 1 alone in its ISR."""
    s.brokers(1, 2, 3)
    s.topic("orders", [[1, 2, 3]], isr=[[1]], leaders=[-1])
    s.fence(1)


@pytest.mark.parametrize(
    ("resource_type", "name"), [(TOPIC, "orders"), (CLUSTER, "")], ids=["topic", "cluster"]
)
def test_turning_unclean_election_on_elects_a_leader_for_offline_partitions(
    resource_type: int, name: str
) -> None:
    """Seed 003: with unclean election turned on, the stale replica leads at once
    (the acknowledged records it lacks are lost); nothing waits for a fencing."""
    s = Scenario()
    offline_orders(s)
    written, error = alter(s, resource_type, name, ("unclean.leader.election.enable", SET, "true"))
    assert (written, error) == (2, ApiError.NONE)  # the config and the election
    part = s.image.topic("orders").partitions[0]  # type: ignore[union-attr]
    assert (part.leader, tuple(part.isr), part.leader_epoch) == (2, (2,), 1)


def test_unclean_election_stays_off_where_the_topic_says_false() -> None:
    s = Scenario()
    offline_orders(s)
    alter(s, TOPIC, "orders", ("unclean.leader.election.enable", SET, "false"))
    written, _ = alter(s, CLUSTER, "", ("unclean.leader.election.enable", SET, "true"))
    assert written == 1  # the config only
    assert s.image.topic("orders").partitions[0].leader == -1  # type: ignore[union-attr]


def test_unclean_election_validate_only_and_unrelated_configs_elect_nothing() -> None:
    s = Scenario()
    offline_orders(s)
    ok = alter(s, TOPIC, "orders", ("unclean.leader.election.enable", SET, "true"),
               validate_only=True)  # fmt: skip
    other = alter(s, TOPIC, "orders", ("retention.ms", SET, "1000"))
    assert (ok, other) == ((0, ApiError.NONE), (1, ApiError.NONE))
    assert s.image.topic("orders").partitions[0].leader == -1  # type: ignore[union-attr]
