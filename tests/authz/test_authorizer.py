"""The StandardAuthorizer's decisions, as Kafka makes them (no processes)."""

from __future__ import annotations

import itertools

import pytest

from quorum.authz.authorizer import (
    Action,
    Authorizer,
    AuthorizerConfig,
    Operation,
    PatternType,
    Permission,
    Requirement,
    ResourceType,
    authorize,
    cluster,
    parse_super_users,
    topic,
)
from quorum.authz.controller_actions import requirements
from quorum.controller.api_errors import ApiError
from quorum.controller.metadata_image import AclEntry
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb

ON = AuthorizerConfig(enabled=True, super_users=frozenset({"User:CN=admin"}))
ALICE = "User:CN=alice"
_ids = itertools.count()


def acl(
    name: str,
    operation: Operation,
    permission: Permission = Permission.ALLOW,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = ALICE,
    host: str = "*",
    resource: ResourceType = ResourceType.TOPIC,
) -> AclEntry:
    return AclEntry(
        f"acl-{next(_ids)}", resource, name, pattern, principal, host, operation, permission
    )


def allowed(
    acls: list[AclEntry], action: Action, principal: str = ALICE, host: str = "10.0.0.1"
) -> bool:
    return authorize(ON, acls, principal, host, action).allowed


def test_without_an_authorizer_everything_is_allowed() -> None:
    assert authorize(AuthorizerConfig(), [], ALICE, "h", topic("t", Operation.DELETE)).allowed


def test_no_acl_means_denied_unless_allow_everyone_if_no_acl_found() -> None:
    assert not allowed([], topic("orders", Operation.CREATE))
    lenient = AuthorizerConfig(enabled=True, allow_everyone_if_no_acl_found=True)
    assert authorize(lenient, [], ALICE, "h", topic("orders", Operation.CREATE)).allowed
    # Once any ACL applies to the resource, only ACLs decide (bob's ACL, not alice's).
    bobs = [acl("orders", Operation.READ, principal="User:CN=bob")]
    assert not authorize(lenient, bobs, ALICE, "h", topic("orders", Operation.CREATE)).allowed
    # An ACL on another resource leaves this one to the default.
    assert authorize(lenient, bobs, ALICE, "h", topic("other", Operation.CREATE)).allowed


def test_super_users_may_do_everything() -> None:
    deny_all = [acl("*", Operation.ALL, Permission.DENY, principal="User:*")]
    for op in Operation:
        assert allowed(deny_all, topic("t", op), principal="User:CN=admin")
        assert allowed(deny_all, cluster(op), principal="User:CN=admin")


def test_deny_beats_allow() -> None:
    acls = [
        acl("team-", Operation.ALL, pattern=PatternType.PREFIXED),
        acl("team-secret", Operation.CREATE, Permission.DENY),
    ]
    assert allowed(acls, topic("team-a", Operation.CREATE))
    assert not allowed(acls, topic("team-secret", Operation.CREATE))
    assert allowed(acls, topic("team-secret", Operation.DESCRIBE))  # deny names CREATE only
    wildcard_deny = [*acls, acl("*", Operation.ALL, Permission.DENY, principal="User:*")]
    assert not allowed(wildcard_deny, topic("team-a", Operation.READ))


@pytest.mark.parametrize(
    ("prefix", "name", "matches"),
    [
        ("pay", "payments", True),
        ("pay", "pay", True),  # a prefix of itself
        ("pay", "pa", False),
        ("pay", "xpay", False),
        ("pay", "PAYMENTS", False),  # case-sensitive, as Kafka
        ("", "anything", True),  # Kafka refuses an empty prefix at creation; it would match
    ],
)
def test_prefixed_acls_match_as_kafkas(prefix: str, name: str, matches: bool) -> None:
    acls = [acl(prefix, Operation.CREATE, pattern=PatternType.PREFIXED)]
    assert allowed(acls, topic(name, Operation.CREATE)) is matches


def test_literal_acls_match_the_name_or_the_wildcard_only() -> None:
    assert allowed([acl("orders", Operation.READ)], topic("orders", Operation.READ))
    assert not allowed([acl("orders", Operation.READ)], topic("orders-2", Operation.READ))
    assert allowed([acl("*", Operation.READ)], topic("anything", Operation.READ))
    # "*" as a PREFIXED pattern is a literal star prefix, not a wildcard.
    star = [acl("*", Operation.READ, pattern=PatternType.PREFIXED)]
    assert not allowed(star, topic("orders", Operation.READ))


def test_principal_and_host_must_match_or_be_wildcards() -> None:
    assert not allowed(
        [acl("t", Operation.READ, principal="User:CN=bob")], topic("t", Operation.READ)
    )
    assert allowed([acl("t", Operation.READ, principal="User:*")], topic("t", Operation.READ))
    assert allowed([acl("t", Operation.READ, host="10.0.0.1")], topic("t", Operation.READ))
    assert not allowed([acl("t", Operation.READ, host="10.0.0.2")], topic("t", Operation.READ))


def test_implied_operations_are_kafkas() -> None:
    for op in (Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER):
        assert allowed([acl("t", op)], topic("t", Operation.DESCRIBE))
    assert allowed([acl("t", Operation.ALTER_CONFIGS)], topic("t", Operation.DESCRIBE_CONFIGS))
    assert not allowed([acl("t", Operation.DESCRIBE)], topic("t", Operation.READ))
    assert not allowed([acl("t", Operation.CREATE)], topic("t", Operation.DESCRIBE))
    # A DENY implies nothing: denying READ does not deny DESCRIBE.
    acls = [acl("t", Operation.ALL), acl("t", Operation.READ, Permission.DENY)]
    assert allowed(acls, topic("t", Operation.DESCRIBE))
    assert not allowed(acls, topic("t", Operation.READ))


def test_resource_types_are_kept_apart() -> None:
    group = [acl("t", Operation.READ, resource=ResourceType.GROUP)]
    assert not allowed(group, topic("t", Operation.READ))
    assert allowed(group, Action(ResourceType.GROUP, "t", Operation.READ))
    txn = [acl("tx-", Operation.WRITE, pattern=PatternType.PREFIXED,
               resource=ResourceType.TRANSACTIONAL_ID)]  # fmt: skip
    assert allowed(txn, Action(ResourceType.TRANSACTIONAL_ID, "tx-1", Operation.WRITE))


def test_cluster_action_acl_lets_a_broker_in_but_not_to_admin_calls() -> None:
    broker = "User:CN=broker-101"
    acls = [acl("kafka-cluster", Operation.CLUSTER_ACTION, principal=broker,
                resource=ResourceType.CLUSTER)]  # fmt: skip
    assert allowed(acls, cluster(Operation.CLUSTER_ACTION), principal=broker)
    assert not allowed(acls, cluster(Operation.ALTER), principal=broker)


def test_super_users_are_separated_by_semicolons() -> None:
    assert parse_super_users("User:CN=a,O=x; User:CN=b;;") == {"User:CN=a,O=x", "User:CN=b"}


def test_requirements_of_requests() -> None:
    def names(request: object) -> list[tuple[str, ...]]:
        return [tuple(a.describe() for a in r.alternatives)
                for r in requirements(request, {"id-1": "old"}.get)]  # fmt: skip

    create = api.CreateTopicsRequest(topics=[api.CreatableTopic(name="a")] * 2)
    assert names(create) == [("CREATE on CLUSTER 'kafka-cluster'", "CREATE on TOPIC 'a'")]
    delete = api.DeleteTopicsRequest(names=["x"], topic_ids=["id-1", "unknown"])
    assert names(delete) == [("DELETE on TOPIC 'x'",), ("DELETE on TOPIC 'old'",)]
    assert names(api.CreateAclsRequest()) == [("ALTER on CLUSTER 'kafka-cluster'",)]
    assert names(bpb.MetadataFetchRequest()) == [("CLUSTER_ACTION on CLUSTER 'kafka-cluster'",)]
    assert names(api.ListTopicsRequest()) == []
    configs = api.DescribeConfigsRequest(resources=[
        api.DescribeConfigsResource(resource_type=api.TOPIC, resource_name="t"),
        api.DescribeConfigsResource(resource_type=api.BROKER, resource_name="101"),
    ])  # fmt: skip
    assert names(configs) == [
        ("DESCRIBE_CONFIGS on TOPIC 't'",),
        ("DESCRIBE_CONFIGS on CLUSTER 'kafka-cluster'",),
    ]
    [need] = requirements(
        api.CreateTopicsRequest(topics=[api.CreatableTopic(name="a")]), dict().get
    )
    assert need.error is ApiError.TOPIC_AUTHORIZATION_FAILED
    [need] = requirements(api.ElectLeadersRequest(), {}.get)
    assert need.error is ApiError.CLUSTER_AUTHORIZATION_FAILED


def test_the_authorizer_answers_requirements_forwarding_listings_and_idempotence() -> None:
    """`Authorizer`, what both edges ask: the first unmet requirement names the
    refusal; super users skip the ACLs; forwarding needs CLUSTER_ACTION."""
    acls = [
        acl("orders", Operation.WRITE),
        acl("kafka-cluster", Operation.CLUSTER_ACTION, resource=ResourceType.CLUSTER,
            principal="User:CN=broker"),
    ]  # fmt: skip
    authorizer = Authorizer(ON, lambda: acls)
    create = Requirement((cluster(Operation.CREATE), topic("orders", Operation.CREATE)))
    write = Requirement((topic("orders", Operation.WRITE),))
    assert authorizer.first_unmet(ALICE, "h", [write]) is None
    unmet = authorizer.first_unmet(ALICE, "h", [write, create])
    assert unmet is not None and unmet[0] is create and not unmet[1].allowed
    assert unmet[0].error is ApiError.TOPIC_AUTHORIZATION_FAILED
    assert authorizer.first_unmet("User:CN=admin", "h", [create]) is None
    assert authorizer.may_forward("User:CN=broker", "h") and not authorizer.may_forward(ALICE, "h")
    assert not Authorizer(AuthorizerConfig(), lambda: acls).may_forward("User:CN=broker", "h")
    assert authorizer.visible_topics(ALICE, "h", ["orders", "payments"]) == {"orders"}
    assert authorizer.may_write_some_topic(ALICE, "h")
    assert not authorizer.may_write_some_topic("User:CN=bob", "h")
