"""The edge of the admin API: what a request may say, checked before it touches anything.

Two kinds of rule live here, so that every servicer and builder asks the same
place:

- **Bounds** (`check_request`, `check_partition_budget`): how big and costly a
  request may be (`RequestLimits`). They run before the request waits for the
  write queue, reads the image or reaches replica placement, and a breach
  refuses the whole call: POLICY_VIOLATION for a count the operator capped,
  INVALID_REQUEST (INVALID_CONFIG for a config value) for a field longer than
  any client sends. A refusal never echoes a huge field back.
- **Item rules** (`topic_counts_problem`, `acl_binding_problem`, ...): what one
  item of a batch may say. Kafka answers those per item, so one bad topic does
  not fail the others; the builders turn them into per-item errors.

Numbers arrive as int32 on the wire, so only their ranges need checking here;
numbers inside strings (config values, broker ids as resource names) must be
ASCII digits, since Python's int() also takes "1_000" and Arabic-Indic or
fullwidth digits.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.features import SUPPORTED_FEATURES
from quorum.controller.registration_rules import check_registration
from quorum.controller.request_limits import INT32_MAX, RequestLimits, property_of
from quorum.gen import admin_pb2 as api
from quorum.gen import broker_pb2 as bpb

DEFAULT_COUNT = -1  # Kafka's "use the cluster default" on the wire
MAX_TOPIC_NAME = 249  # Kafka's: a topic name is also a directory name on brokers
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_ASCII_INTEGER = re.compile(r"-?[0-9]+")
_BROKER_ID = re.compile(r"[0-9]+")
_SHOWN = 40  # characters of an offending value quoted back

# Kafka's ids (see proto/admin.proto).
ACL_RESOURCE_TYPES = {2, 3, 4, 5}  # TOPIC GROUP CLUSTER TRANSACTIONAL_ID
ACL_PATTERNS = {3, 4}  # LITERAL PREFIXED
ACL_OPERATIONS = set(range(2, 13))  # ALL .. IDEMPOTENT_WRITE
ACL_PERMISSIONS = {2, 3}  # DENY ALLOW


# ------------------------------------------------------------------ helpers


def shown(value: str) -> str:
    """A value quoted in a message, cut short: a refusal must stay small."""
    if len(value) <= _SHOWN:
        return repr(value)
    return f"{value[:_SHOWN]!r}... ({len(value)} characters)"


def is_ascii_integer(value: str) -> bool:
    return _ASCII_INTEGER.fullmatch(value) is not None


def has_control_characters(value: str) -> bool:
    """Control, format, surrogate, private-use or unassigned code points: they
    corrupt logs and terminals and make two principals look alike."""
    return any(unicodedata.category(ch).startswith("C") for ch in value)


def _count(what: str, count: int, limits: RequestLimits) -> None:
    if count > limits.max_request_items:
        raise ControllerError(
            ApiError.POLICY_VIOLATION,
            f"{count} {what} in one request; the limit is {limits.max_request_items} "
            f"({property_of('max_request_items')})",
        )


def _name(what: str, value: str, limits: RequestLimits) -> None:
    if len(value) > limits.max_name_length:
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"{what} {shown(value)} is longer than {limits.max_name_length} characters "
            f"({property_of('max_name_length')})",
        )


def _names(what: str, values: Iterable[str], limits: RequestLimits) -> None:
    for value in values:
        _name(what, value, limits)


def _config_value(key: str, value: str, limits: RequestLimits) -> None:
    if len(value) > limits.max_config_value_length:
        raise ControllerError(
            ApiError.INVALID_CONFIG,
            f"the value of {shown(key)} is {len(value)} characters; the limit is "
            f"{limits.max_config_value_length} ({property_of('max_config_value_length')})",
        )


def _new_partitions(count: int, limits: RequestLimits) -> None:
    if count > limits.max_partitions_per_request:
        raise ControllerError(
            ApiError.POLICY_VIOLATION,
            f"the request adds {count} partitions; the limit per request is "
            f"{limits.max_partitions_per_request} "
            f"({property_of('max_partitions_per_request')})",
        )


# ------------------------------------------------------------------- bounds


def _create_topics(r: api.CreateTopicsRequest, limits: RequestLimits) -> None:
    _count("topics", len(r.topics), limits)
    adding = 0
    for t in r.topics:
        _name("topic name", t.name, limits)
        _count(f"configs for topic {shown(t.name)}", len(t.configs), limits)
        for key, value in t.configs.items():
            _name("config name", key, limits)
            _config_value(key, value, limits)
        adding += max(t.num_partitions, len(t.assignments))
        _new_partitions(adding, limits)  # before the assignments are walked
        for a in t.assignments:
            _count("replicas for one partition", len(a.broker_ids), limits)


def _create_partitions(r: api.CreatePartitionsRequest, limits: RequestLimits) -> None:
    _count("topics", len(r.topics), limits)
    assigned = 0
    for t in r.topics:
        _name("topic name", t.name, limits)
        if t.count > limits.max_partitions:
            raise ControllerError(
                ApiError.POLICY_VIOLATION,
                f"topic {shown(t.name)} cannot have {t.count} partitions; the cluster may "
                f"hold {limits.max_partitions} ({property_of('max_partitions')})",
            )
        assigned += len(t.assignments)
        _new_partitions(assigned, limits)
        for a in t.assignments:
            _count("replicas for one partition", len(a.broker_ids), limits)


def _delete_topics(r: api.DeleteTopicsRequest, limits: RequestLimits) -> None:
    _count("topics", len(r.names) + len(r.topic_ids), limits)
    _names("topic name", r.names, limits)
    _names("topic id", r.topic_ids, limits)


def _describe_topics(r: api.DescribeTopicsRequest, limits: RequestLimits) -> None:
    _count("topics", len(r.names), limits)
    _names("topic name", r.names, limits)


def _alter_configs(r: api.IncrementalAlterConfigsRequest, limits: RequestLimits) -> None:
    _count("resources", len(r.resources), limits)
    _count("config changes", sum(len(res.configs) for res in r.resources), limits)
    for res in r.resources:
        _name("resource name", res.resource_name, limits)
        for c in res.configs:
            _name("config name", c.name, limits)
            _config_value(c.name, c.value, limits)


def _describe_configs(r: api.DescribeConfigsRequest, limits: RequestLimits) -> None:
    _count("resources", len(r.resources), limits)
    _count("config names", sum(len(res.names) for res in r.resources), limits)
    for res in r.resources:
        _name("resource name", res.resource_name, limits)
        _names("config name", res.names, limits)


def _binding_strings(b: api.AclBinding | api.AclBindingFilter, limits: RequestLimits) -> None:
    _name("ACL resource name", b.resource_name, limits)
    _name("principal", b.principal, limits)
    _name("host", b.host, limits)


def _create_acls(r: api.CreateAclsRequest, limits: RequestLimits) -> None:
    _count("ACL bindings", len(r.creations), limits)
    for b in r.creations:
        _binding_strings(b, limits)


def _describe_acls(r: api.DescribeAclsRequest, limits: RequestLimits) -> None:
    _binding_strings(r.filter, limits)


def _delete_acls(r: api.DeleteAclsRequest, limits: RequestLimits) -> None:
    _count("ACL filters", len(r.filters), limits)
    for f in r.filters:
        _binding_strings(f, limits)


def _elect_leaders(r: api.ElectLeadersRequest, limits: RequestLimits) -> None:
    _count("topics", len(r.partitions), limits)
    _count("partitions", sum(len(t.partitions) for t in r.partitions), limits)
    _names("topic name", (t.topic for t in r.partitions), limits)


def _alter_partition(r: api.AlterPartitionRequest, limits: RequestLimits) -> None:
    _count("partitions", len(r.partitions), limits)
    for p in r.partitions:
        _name("topic id", p.topic_id, limits)
        _count("ISR members", len(p.new_isr), limits)


def _update_features(r: api.UpdateFeaturesRequest, limits: RequestLimits) -> None:
    _count("feature updates", len(r.updates), limits)
    _names("feature name", (u.feature for u in r.updates), limits)


def _register_broker(r: bpb.RegisterBrokerRequest, limits: RequestLimits) -> None:
    _name("incarnation id", r.incarnation_id, limits)
    _name("rack", r.rack, limits)
    _count("listeners", len(r.listeners), limits)
    _count("features", len(r.features), limits)
    _count("log directories", len(r.log_dirs), limits)
    for listener in r.listeners:
        _name("listener name", listener.name, limits)
        _name("listener host", listener.host, limits)
        _name("security protocol", listener.security_protocol, limits)
    _names("feature name", (f.name for f in r.features), limits)
    check_registration(r, frozenset(SUPPORTED_FEATURES))


_BOUNDS: dict[type, Callable[[Any, RequestLimits], None]] = {
    bpb.RegisterBrokerRequest: _register_broker,
    api.CreateTopicsRequest: _create_topics,
    api.CreatePartitionsRequest: _create_partitions,
    api.DeleteTopicsRequest: _delete_topics,
    api.DescribeTopicsRequest: _describe_topics,
    api.IncrementalAlterConfigsRequest: _alter_configs,
    api.DescribeConfigsRequest: _describe_configs,
    api.CreateAclsRequest: _create_acls,
    api.DescribeAclsRequest: _describe_acls,
    api.DeleteAclsRequest: _delete_acls,
    api.ElectLeadersRequest: _elect_leaders,
    api.AlterPartitionRequest: _alter_partition,
    api.UpdateFeaturesRequest: _update_features,
}


def check_request(request: object, limits: RequestLimits) -> None:
    """Refuse (ControllerError) a request that breaks a bound; cheap, image-free.

    Requests with nothing unbounded in them (ListTopics, DescribeCluster,
    UnregisterBroker, ...) pass as they are.
    """
    check = _BOUNDS.get(type(request))
    if check is not None:
        check(request, limits)


def check_partition_budget(existing: int, adding: int, limits: RequestLimits) -> None:
    """The bounds that need the image: the partitions a write would add, with
    cluster defaults resolved, against the per-request and cluster-wide caps."""
    _new_partitions(adding, limits)
    if existing + adding > limits.max_partitions:
        raise ControllerError(
            ApiError.POLICY_VIOLATION,
            f"the cluster holds {existing} partitions; {adding} more would pass the limit "
            f"of {limits.max_partitions} ({property_of('max_partitions')})",
        )


# --------------------------------------------------------------- item rules


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1-249 of [a-zA-Z0-9._-], and not "." or ".."."""
    if not name:
        raise ControllerError(ApiError.INVALID_TOPIC_EXCEPTION, "topic name is empty")
    if name in (".", ".."):
        raise ControllerError(
            ApiError.INVALID_TOPIC_EXCEPTION, f"topic name {shown(name)} is illegal"
        )
    if len(name) > MAX_TOPIC_NAME:
        raise ControllerError(
            ApiError.INVALID_TOPIC_EXCEPTION,
            f"topic name is {len(name)} characters; the limit is {MAX_TOPIC_NAME}",
        )
    if not _LEGAL_TOPIC.fullmatch(name):
        raise ControllerError(
            ApiError.INVALID_TOPIC_EXCEPTION,
            f"topic name {shown(name)} has characters other than ASCII letters, digits, "
            "'.', '_', '-'",
        )


def topic_counts_problem(item: api.CreatableTopic) -> ControllerError | None:
    """Kafka's wire rules: a count is -1 (or unset: the cluster default) or at
    least 1, and explicit assignments leave both counts at the default."""
    partitions_set = item.HasField("num_partitions") and item.num_partitions != DEFAULT_COUNT
    factor_set = item.HasField("replication_factor") and item.replication_factor != DEFAULT_COUNT
    if item.assignments:
        if partitions_set or factor_set:
            return ControllerError(
                ApiError.INVALID_REQUEST,
                "give either replica assignments or partitions/replication factor, not both",
            )
        return None
    if partitions_set and item.num_partitions < 1:
        return ControllerError(
            ApiError.INVALID_PARTITIONS,
            f"number of partitions must be at least 1 (or -1 for the cluster's "
            f"num.partitions), got {item.num_partitions}",
        )
    if factor_set and item.replication_factor < 1:
        return ControllerError(
            ApiError.INVALID_REPLICATION_FACTOR,
            f"replication factor must be at least 1 (or -1 for the cluster's "
            f"default.replication.factor), got {item.replication_factor}",
        )
    return None


def broker_name_problem(name: str) -> str | None:
    """A broker resource is named by its id: ASCII digits that fit an int32."""
    if not _BROKER_ID.fullmatch(name) or int(name) > INT32_MAX:
        return f"broker resource name {shown(name)} is not a broker id (0..{INT32_MAX})"
    return None


def principal_problem(principal: str) -> str | None:
    """Kafka's `Type:name` (User:alice), both parts non-empty and printable."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return f"principal {shown(principal)} is not Type:name (e.g. User:alice)"
    if has_control_characters(principal):
        return f"principal {shown(principal)} contains control characters"
    return None


def acl_binding_problem(b: api.AclBinding) -> str | None:
    """Why an ACL binding cannot be created, or None."""
    if b.resource_type not in ACL_RESOURCE_TYPES:
        return f"unknown resource type {b.resource_type}"
    if b.pattern_type not in ACL_PATTERNS:
        return f"pattern type must be LITERAL (3) or PREFIXED (4), got {b.pattern_type}"
    if b.operation not in ACL_OPERATIONS:
        return f"unknown operation {b.operation}"
    if b.permission_type not in ACL_PERMISSIONS:
        return f"permission must be DENY (2) or ALLOW (3), got {b.permission_type}"
    problem = principal_problem(b.principal)
    if problem is not None:
        return problem
    if not b.resource_name or not b.host:
        return "resource name and host are required ('*' matches any)"
    for what, value in (("resource name", b.resource_name), ("host", b.host)):
        if has_control_characters(value):
            return f"{what} {shown(value)} contains control characters"
    return None


def feature_level_problem(update: api.FeatureUpdate, current: int) -> str | None:
    """Levels below 1 remove a feature: only a downgrade may ask for that."""
    level = update.max_version_level
    if level < 0:
        return f"{update.feature} level must be at least 0, got {level}"
    if level == 0 and not update.allow_downgrade:
        state = f"is at {current}" if current else "is not finalized"
        return f"{update.feature} {state}; level 0 removes a feature, which needs allow_downgrade"
    return None
