"""Configs, ACLs, producer-id blocks and features as records, and their reads."""

from __future__ import annotations

import random

from quorum.controller import config_schema as cs
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.features import SUPPORTED_FEATURES
from quorum.controller.metadata_image import AclEntry, MetadataImage
from quorum.controller.partition_ops import elections_for_unclean_enabled
from quorum.controller.record_codec import new_uuid, wrap
from quorum.controller.topic_ops import OK, Records, api_error
from quorum.controller.validation import (
    acl_binding_problem,
    broker_name_problem,
    feature_level_problem,
)
from quorum.gen import admin_pb2 as api
from quorum.gen import metadata_pb2 as md

PRODUCER_ID_BLOCK = 1000

ANY = 1  # Kafka's wildcard id in ACL filters
MATCH, PREFIXED = 2, 4  # pattern types: a MATCH filter finds every ACL that applies to a name


# ------------------------------------------------------------------- configs


def _check_resource(image: MetadataImage, rtype: int, name: str) -> None:
    if rtype == cs.TOPIC:
        if image.topic(name) is None:
            raise ControllerError(ApiError.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {name!r}")
    elif rtype == cs.BROKER:
        problem = broker_name_problem(name)
        if problem is not None:
            raise ControllerError(ApiError.INVALID_REQUEST, problem)
    elif rtype == cs.CLUSTER:
        if name:
            raise ControllerError(
                ApiError.INVALID_REQUEST, "the cluster resource's name is the empty string"
            )
    else:
        raise ControllerError(ApiError.INVALID_REQUEST, f"unknown resource type {rtype}")


def build_alter_configs(
    image: MetadataImage, request: api.IncrementalAlterConfigsRequest
) -> tuple[Records, api.IncrementalAlterConfigsResponse]:
    records: Records = []
    response = api.IncrementalAlterConfigsResponse()
    changed: dict[tuple[int, str], dict[str, str]] = {}
    for item in request.resources:
        rtype, name = int(item.resource_type), item.resource_name
        result = response.resources.add(resource_type=item.resource_type, resource_name=name)
        try:
            _check_resource(image, rtype, name)
            current = image.config(rtype, name)
            ops = [(c.name, int(c.op), c.value) for c in item.configs]
            updated = cs.apply_incremental(rtype, current, ops)
            if rtype == cs.TOPIC:
                topic = image.topic(name)
                factor = len(topic.partitions[0].replicas) if topic and topic.partitions else 1
                cs.validate_topic_configs(updated, factor)
        except ControllerError as err:
            result.error.CopyFrom(api_error(err.error, err.message))
            continue
        result.error.CopyFrom(OK)
        if request.validate_only:
            continue
        changed[(rtype, name)] = updated
        kind = md.ConfigResourceType.Value(
            {cs.TOPIC: "CONFIG_RESOURCE_TOPIC", cs.BROKER: "CONFIG_RESOURCE_BROKER"}.get(
                rtype, "CONFIG_RESOURCE_CLUSTER"
            )
        )
        for key in sorted(set(current) | set(updated)):
            if current.get(key) == updated.get(key):
                continue
            record = md.ConfigRecord(resource_type=kind, resource_name=name, name=key)
            if key in updated:
                record.value = updated[key]
            records.append(wrap(config=record))
    return records + elections_for_unclean_enabled(image, changed), response


def describe_configs(
    image: MetadataImage, request: api.DescribeConfigsRequest
) -> api.DescribeConfigsResponse:
    response = api.DescribeConfigsResponse()
    cluster = image.config(cs.CLUSTER, "")
    for item in request.resources:
        rtype, name = int(item.resource_type), item.resource_name
        result = response.resources.add(resource_type=item.resource_type, resource_name=name)
        try:
            _check_resource(image, rtype, name)
        except ControllerError as err:
            result.error.CopyFrom(api_error(err.error, err.message))
            continue
        result.error.CopyFrom(OK)
        wanted = set(item.names)
        for entry in cs.effective(rtype, image.config(rtype, name), cluster):
            if wanted and entry.name not in wanted:
                continue
            result.configs.add(
                name=entry.name,
                value=entry.value,
                source=api.ConfigSource.Value(entry.source),
                is_default=entry.source == "DEFAULT_CONFIG",
            )
    return response


# ---------------------------------------------------------------------- ACLs


def _binding(acl: AclEntry) -> api.AclBinding:
    return api.AclBinding(
        resource_type=acl.resource_type,
        resource_name=acl.resource_name,
        pattern_type=acl.pattern_type,
        principal=acl.principal,
        host=acl.host,
        operation=acl.operation,
        permission_type=acl.permission_type,
    )


def _key(b: api.AclBinding) -> tuple[object, ...]:
    return (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host,
            b.operation, b.permission_type)  # fmt: skip


def build_create_acls(
    image: MetadataImage, request: api.CreateAclsRequest, rng: random.Random
) -> tuple[Records, api.CreateAclsResponse]:
    existing = {_key(_binding(a)) for a in image.acls.values()}
    records: Records = []
    response = api.CreateAclsResponse()
    for binding in request.creations:
        result = response.results.add()
        problem = acl_binding_problem(binding)
        if problem is not None:
            result.error.CopyFrom(api_error(ApiError.INVALID_REQUEST, problem))
            continue
        result.error.CopyFrom(OK)
        if _key(binding) in existing:
            continue  # creating an existing ACL succeeds and changes nothing, as in Kafka
        existing.add(_key(binding))
        records.append(
            wrap(
                access_control_entry=md.AccessControlEntryRecord(
                    id=new_uuid(rng),
                    resource_type=binding.resource_type,
                    resource_name=binding.resource_name,
                    pattern_type=binding.pattern_type,
                    principal=binding.principal,
                    host=binding.host,
                    operation=binding.operation,
                    permission_type=binding.permission_type,
                )
            )
        )
    return records, response


def matches(acl: AclEntry, f: api.AclBindingFilter) -> bool:
    def field(wanted: int, actual: int) -> bool:
        return wanted in (0, ANY) or wanted == actual

    return (
        field(f.resource_type, acl.resource_type)
        and (f.pattern_type == MATCH or field(f.pattern_type, acl.pattern_type))
        and field(f.operation, acl.operation)
        and field(f.permission_type, acl.permission_type)
        and (not f.HasField("resource_name") or _name_matches(f, acl))
        and (not f.HasField("principal") or f.principal == acl.principal)
        and (not f.HasField("host") or f.host == acl.host)
    )


def _name_matches(f: api.AclBindingFilter, acl: AclEntry) -> bool:
    """Kafka's rule: MATCH takes the literal name, the literal '*' and any prefix."""
    if f.pattern_type != MATCH:
        return f.resource_name == acl.resource_name
    if acl.pattern_type == PREFIXED:
        return f.resource_name.startswith(acl.resource_name)
    return acl.resource_name in (f.resource_name, "*")


def describe_acls(
    image: MetadataImage, request: api.DescribeAclsRequest
) -> api.DescribeAclsResponse:
    response = api.DescribeAclsResponse()
    for acl in sorted(image.acls.values(), key=lambda a: _key(_binding(a))):
        if matches(acl, request.filter):
            response.bindings.append(_binding(acl))
    return response


def build_delete_acls(
    image: MetadataImage, request: api.DeleteAclsRequest
) -> tuple[Records, api.DeleteAclsResponse]:
    records: Records = []
    response = api.DeleteAclsResponse()
    removed: set[str] = set()
    for f in request.filters:
        result = response.results.add()
        result.error.CopyFrom(OK)
        for acl in sorted(image.acls.values(), key=lambda a: a.acl_id):
            if matches(acl, f):
                result.matching.append(_binding(acl))
                if acl.acl_id not in removed:
                    removed.add(acl.acl_id)
                    records.append(
                        wrap(
                            remove_access_control_entry=md.RemoveAccessControlEntryRecord(
                                id=acl.acl_id
                            )
                        )
                    )
    return records, response


# ---------------------------------------------------- producer ids, features


def build_allocate_producer_ids(
    image: MetadataImage, request: api.AllocateProducerIdsRequest
) -> tuple[Records, api.AllocateProducerIdsResponse]:
    broker = image.brokers.get(request.broker_id)
    if broker is None:
        raise ControllerError(ApiError.BROKER_ID_NOT_REGISTERED, f"broker {request.broker_id}")
    if broker.broker_epoch != request.broker_epoch:
        raise ControllerError(
            ApiError.STALE_BROKER_EPOCH,
            f"broker {request.broker_id} epoch is {broker.broker_epoch}, "
            f"not {request.broker_epoch}",
        )
    start = image.next_producer_id
    record = wrap(
        producer_ids=md.ProducerIdsRecord(
            broker_id=request.broker_id,
            broker_epoch=request.broker_epoch,
            next_producer_id=start + PRODUCER_ID_BLOCK,
        )
    )
    return [record], api.AllocateProducerIdsResponse(
        producer_id_start=start, producer_id_len=PRODUCER_ID_BLOCK
    )


def build_update_features(
    image: MetadataImage, request: api.UpdateFeaturesRequest
) -> tuple[Records, api.UpdateFeaturesResponse]:
    records: Records = []
    response = api.UpdateFeaturesResponse()
    for update in request.updates:
        result = response.results.add(feature=update.feature)
        supported = SUPPORTED_FEATURES.get(update.feature)
        current = image.features.get(update.feature, 0)
        level = update.max_version_level
        if supported is None:
            problem = f"feature {update.feature!r} is not supported here"
        elif (level_problem := feature_level_problem(update, current)) is not None:
            problem = level_problem
        elif level < current and not update.allow_downgrade:
            problem = f"{update.feature} is at {current}; lowering it needs allow_downgrade"
        elif level != 0 and not supported[0] <= level <= supported[1]:
            problem = f"{update.feature} supports levels {supported[0]}..{supported[1]}"
        else:
            problem = None
        if problem is not None:
            result.error.CopyFrom(api_error(ApiError.INVALID_UPDATE_VERSION, problem))
            continue
        result.error.CopyFrom(OK)
        if not request.validate_only and level != current:
            records.append(
                wrap(feature_level=md.FeatureLevelRecord(name=update.feature, feature_level=level))
            )
    return records, response
