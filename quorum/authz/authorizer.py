"""Who may do what: Kafka's StandardAuthorizer over the ACLs in the metadata image.

The one place that answers "may this principal, calling from this host, do
this": the controllers' gRPC edge (`quorum/server/access.py`, one call per
request, with what `controller_actions` says the request needs) and the
brokers' Kafka edge (`broker_agent/kafka/authz.py`, per handler) both ask an
`Authorizer` and decide nothing themselves. Pure: no gRPC, no sockets, no
clock; the ACLs come from a callable (the image's), so the module sits below
the controller and the broker alike. The rules are Kafka's:

- `super.users` may do everything.
- An ACL applies to a resource when its pattern matches the resource's name:
  LITERAL equal (or the literal wildcard ``*``), PREFIXED a prefix of it.
- If no ACL applies to the resource at all, `allow.everyone.if.no.acl.found`
  decides (default false); once any ACL applies, only ACLs decide.
- Among the ACLs that apply, one matches the call when its principal is the
  caller's (or ``User:*``), its host the caller's (or ``*``), and its operation
  the action's or ALL. A matching DENY refuses, whatever allows it (deny wins).
  ALLOW also grants what Kafka implies: DESCRIBE by READ, WRITE, DELETE or
  ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS.
- Anything else is refused.
- A request is allowed when each of its `Requirement`s is; a requirement is met
  by any one of its alternative actions (CreateTopics: CREATE on the cluster,
  or on the topic). The first unmet one names the refusal.
- A producer may be idempotent when it may WRITE some topic (KIP-679): an ALLOW
  of WRITE (or ALL) on any topic for the caller (Kafka's authorizeByResourceType).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from quorum.common.config import ConfigError
from quorum.controller.api_errors import ApiError

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER_NAME = "kafka-cluster"  # Kafka's name for the one CLUSTER resource
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


class AclRule(Protocol):
    """One ACL as the image holds it (`AccessControlEntryRecord`'s fields)."""

    @property
    def acl_id(self) -> str: ...
    @property
    def resource_type(self) -> int: ...
    @property
    def resource_name(self) -> str: ...
    @property
    def pattern_type(self) -> int: ...
    @property
    def principal(self) -> str: ...
    @property
    def host(self) -> str: ...
    @property
    def operation(self) -> int: ...
    @property
    def permission_type(self) -> int: ...


class ResourceType(enum.IntEnum):
    """Kafka's AclResourceType ids (as stored in AccessControlEntryRecord)."""

    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5


class PatternType(enum.IntEnum):
    LITERAL = 3
    PREFIXED = 4


class Operation(enum.IntEnum):
    """Kafka's AclOperation ids."""

    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(enum.IntEnum):
    DENY = 2
    ALLOW = 3


# What an ALLOW of the key also grants (Kafka's AclEntry implied operations).
_IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER_CONFIGS}),
}


@dataclass(frozen=True, slots=True)
class Action:
    """One operation on one resource that a request needs."""

    resource_type: ResourceType
    resource_name: str
    operation: Operation

    def describe(self) -> str:
        return f"{self.operation.name} on {self.resource_type.name} {self.resource_name!r}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """Met when any one of `alternatives` is allowed."""

    alternatives: tuple[Action, ...]

    @property
    def error(self) -> ApiError:
        """Kafka's name for the refusal: the resource the caller asked about."""
        last = self.alternatives[-1]
        if last.resource_type is ResourceType.TOPIC:
            return ApiError.TOPIC_AUTHORIZATION_FAILED
        return ApiError.CLUSTER_AUTHORIZATION_FAILED


def cluster(operation: Operation) -> Action:
    return Action(ResourceType.CLUSTER, CLUSTER_NAME, operation)


def topic(name: str, operation: Operation) -> Action:
    return Action(ResourceType.TOPIC, name, operation)


def group(group_id: str, operation: Operation) -> Action:
    return Action(ResourceType.GROUP, group_id, operation)


@dataclass(frozen=True, kw_only=True)
class AuthorizerConfig:
    """`authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`."""

    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


NO_AUTHORIZER = AuthorizerConfig()


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str


def authorize(
    config: AuthorizerConfig,
    acls: Iterable[AclRule],
    principal: str,
    host: str,
    action: Action,
) -> Decision:
    """Whether `principal` calling from `host` may perform `action`, and why."""
    if not config.enabled:
        return Decision(True, "no authorizer configured")
    if principal in config.super_users:
        return Decision(True, f"{principal} is a super user")
    applying = [acl for acl in acls if _applies_to(acl, action)]
    if not applying:
        if config.allow_everyone_if_no_acl_found:
            return Decision(True, "no ACL for the resource; allow.everyone.if.no.acl.found=true")
        return Decision(False, f"no ACL allows {action.describe()}")
    matching = [acl for acl in applying if _matches_caller(acl, principal, host)]
    for acl in matching:
        if acl.permission_type == Permission.DENY and _denies(acl.operation, action.operation):
            return Decision(False, f"denied by ACL {acl.acl_id} ({action.describe()})")
    for acl in matching:
        if acl.permission_type == Permission.ALLOW and _allows(acl.operation, action.operation):
            return Decision(True, f"allowed by ACL {acl.acl_id}")
    return Decision(False, f"no ACL allows {action.describe()}")


def _applies_to(acl: AclRule, action: Action) -> bool:
    if acl.resource_type != action.resource_type:
        return False
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (action.resource_name, WILDCARD)
    if acl.pattern_type == PatternType.PREFIXED:
        return action.resource_name.startswith(acl.resource_name)
    return False


def _matches_caller(acl: AclRule, principal: str, host: str) -> bool:
    return acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)


def _denies(acl_operation: int, wanted: Operation) -> bool:
    return acl_operation in (Operation.ALL, wanted)


def _allows(acl_operation: int, wanted: Operation) -> bool:
    if acl_operation in (Operation.ALL, wanted):
        return True
    return acl_operation in _IMPLIED_BY.get(wanted, frozenset())


class Authorizer:
    """`authorize` bound to a configuration and the live ACLs: what every edge asks.

    `acls` is called once per question (per request on the gRPC edge), so a
    decision sees the image as it is when the request is decided."""

    def __init__(self, config: AuthorizerConfig, acls: Callable[[], Iterable[AclRule]]) -> None:
        self.config = config
        self._acls = acls

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def is_super_user(self, principal: str) -> bool:
        """Everything is allowed to it (or to anyone, without an authorizer)."""
        return not self.config.enabled or principal in self.config.super_users

    def decide(self, principal: str, host: str, action: Action) -> Decision:
        acls = () if self.is_super_user(principal) else self._acls()
        return authorize(self.config, acls, principal, host, action)

    def allows(self, principal: str, host: str, action: Action) -> bool:
        return self.decide(principal, host, action).allowed

    def first_unmet(
        self, principal: str, host: str, needs: Sequence[Requirement]
    ) -> tuple[Requirement, Decision] | None:
        """The first requirement none of whose alternatives is allowed, and why
        (the last alternative's refusal); None when every one is met."""
        if self.is_super_user(principal) or not needs:
            return None
        acls = list(self._acls())
        for need in needs:
            decision = None
            for action in need.alternatives:
                decision = authorize(self.config, acls, principal, host, action)
                if decision.allowed:
                    break
            assert decision is not None
            if not decision.allowed:
                return need, decision
        return None

    def may_forward(self, principal: str, host: str) -> bool:
        """Whether the caller may speak for another principal (a broker forwarding
        a client's request, KIP-590): CLUSTER_ACTION on the cluster. Never without
        an authorizer: nothing is authenticated to decide by."""
        if not self.config.enabled:
            return False
        return self.allows(principal, host, cluster(Operation.CLUSTER_ACTION))

    def visible_topics(self, principal: str, host: str, names: Iterable[str]) -> set[str]:
        """The topics among `names` the caller may DESCRIBE (what a listing shows)."""
        found = set(names)
        if self.is_super_user(principal):
            return found
        acls = list(self._acls())
        return {
            n
            for n in found
            if authorize(self.config, acls, principal, host, topic(n, Operation.DESCRIBE)).allowed
        }

    def may_write_some_topic(self, principal: str, host: str) -> bool:
        """Kafka lets a producer that may WRITE any topic be idempotent (KIP-679)."""
        if self.is_super_user(principal):
            return True
        return any(
            acl.resource_type == ResourceType.TOPIC
            and acl.permission_type == Permission.ALLOW
            and acl.operation in (Operation.WRITE, Operation.ALL)
            and acl.principal in (principal, WILDCARD_PRINCIPAL)
            and acl.host in (host, WILDCARD)
            for acl in self._acls()
        )


def parse_super_users(raw: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons (a principal
    like ``User:CN=a,O=b`` contains commas)."""
    return frozenset(p.strip() for p in raw.split(";") if p.strip())


__all__ = [
    "CLUSTER_NAME",
    "NO_AUTHORIZER",
    "STANDARD_AUTHORIZER",
    "AclRule",
    "Action",
    "Authorizer",
    "AuthorizerConfig",
    "Decision",
    "Operation",
    "PatternType",
    "Permission",
    "Requirement",
    "ResourceType",
    "authorize",
    "cluster",
    "group",
    "parse_super_users",
    "topic",
]


AUTHORIZER_KEYS = ("authorizer.class.name", "super.users", "allow.everyone.if.no.acl.found")


def authorizer_from(props: Mapping[str, str]) -> AuthorizerConfig:
    """Kafka's authorizer keys, read the same way by every process (the brokers'
    Kafka listeners read the same three keys as the controllers). Only the
    StandardAuthorizer exists here; naming another class is refused rather than
    silently running without one."""
    name = props.get("authorizer.class.name", "")
    if name not in ("", STANDARD_AUTHORIZER):
        raise ConfigError(
            "authorizer.class.name",
            f"authorizer.class.name must be {STANDARD_AUTHORIZER} or empty, got {name!r}",
        )
    raw_allow = props.get("allow.everyone.if.no.acl.found", "") or "false"
    if raw_allow.lower() not in ("true", "false"):
        raise ConfigError(
            "allow.everyone.if.no.acl.found",
            f"allow.everyone.if.no.acl.found must be true or false, got {raw_allow!r}",
        )
    super_users = parse_super_users(props.get("super.users", ""))
    for user in super_users:
        kind, sep, who = user.partition(":")
        if not sep or not kind or not who:
            raise ConfigError(
                "super.users",
                f"super.users entry {user!r} is not Type:name (e.g. User:CN=controller-1; "
                "entries are separated by ';')",
            )
    return AuthorizerConfig(
        enabled=bool(name),
        super_users=super_users,
        allow_everyone_if_no_acl_found=raw_allow.lower() == "true",
    )
