"""Who may do what: Kafka's StandardAuthorizer over the ACLs in the metadata image.

Pure decisions, no gRPC: the servicers pass the caller's principal and host
(`quorum.common.tls.principal_of`) and the actions a request needs
(`quorum.controller.acl_actions`). The rules are Kafka's:

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
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from quorum.common.config import ConfigError
from quorum.controller.metadata_image import AclEntry

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
CLUSTER_NAME = "kafka-cluster"  # Kafka's name for the one CLUSTER resource
WILDCARD = "*"
WILDCARD_PRINCIPAL = "User:*"


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
    acls: Iterable[AclEntry],
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


def _applies_to(acl: AclEntry, action: Action) -> bool:
    if acl.resource_type != action.resource_type:
        return False
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (action.resource_name, WILDCARD)
    if acl.pattern_type == PatternType.PREFIXED:
        return action.resource_name.startswith(acl.resource_name)
    return False


def _matches_caller(acl: AclEntry, principal: str, host: str) -> bool:
    return acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD)


def _denies(acl_operation: int, wanted: Operation) -> bool:
    return acl_operation in (Operation.ALL, wanted)


def _allows(acl_operation: int, wanted: Operation) -> bool:
    if acl_operation in (Operation.ALL, wanted):
        return True
    return acl_operation in _IMPLIED_BY.get(wanted, frozenset())


def parse_super_users(raw: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons (a principal
    like ``User:CN=a,O=b`` contains commas)."""
    return frozenset(p.strip() for p in raw.split(";") if p.strip())


__all__ = [
    "CLUSTER_NAME",
    "NO_AUTHORIZER",
    "STANDARD_AUTHORIZER",
    "Action",
    "AuthorizerConfig",
    "Decision",
    "Operation",
    "PatternType",
    "Permission",
    "ResourceType",
    "authorize",
    "parse_super_users",
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
