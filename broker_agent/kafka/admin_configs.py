"""Kafka's config and ACL admin APIs on the broker, forwarded to the active controller.

DescribeConfigs, IncrementalAlterConfigs, AlterConfigs, CreateAcls,
DescribeAcls and DeleteAcls: translations only (see `admin_apis.py`).

Resources: Kafka names the cluster-wide broker defaults as the BROKER resource
with the empty name; the controllers call that CLUSTER (""). BROKER_LOGGER is
not served (INVALID_REQUEST for that resource). The older AlterConfigs replaces
a resource's whole dynamic config: it becomes an incremental change (SET what
is given, DELETE what is set now and not given), so the controller validates
it by the same rules as IncrementalAlterConfigs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kio.schema.errors import ErrorCode

import quorum.controller.config_schema as cs
from broker_agent.kafka.admin_apis import caller
from broker_agent.kafka.forwarding import ControllerForwarder, ForwardError, item_error
from broker_agent.kafka.listener import Connection
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api

TOPIC, BROKER, BROKER_LOGGER = 2, 4, 8
SET, DELETE = 0, 1
DEFAULT_SOURCE = 5  # Kafka's ConfigSource.DEFAULT_CONFIG
# Kafka's ConfigType ids
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7
TIMEOUT_MS = 30_000  # these requests carry none; Kafka's default request timeout


def to_controller(resource_type: int, name: str) -> tuple[int, str] | None:
    """The controllers' resource for Kafka's (type, name), or None when not served."""
    if resource_type == TOPIC:
        return cs.TOPIC, name
    if resource_type == BROKER:
        return (cs.CLUSTER, "") if name == "" else (cs.BROKER, name)
    return None


def config_type(resource_type: int, name: str) -> int:
    spec = cs.KEYS.get(resource_type, {}).get(name)
    if spec is None:
        return STRING
    if spec.is_list:
        return LIST
    if spec.default in ("true", "false"):
        return BOOLEAN
    if spec.default.lstrip("-").isdigit():
        return LONG if name.endswith((".ms", ".bytes")) else INT
    return STRING


def _unserved(resource_type: int, name: str) -> dict[str, Any]:
    return {
        "error_code": int(ErrorCode.invalid_request),
        "error_message": f"resource type {resource_type} is not served here",
        "resource_type": resource_type,
        "resource_name": name,
    }


class ConfigAdmin:
    def __init__(self, forwarder: ControllerForwarder, image: Callable[[], MetadataImage]) -> None:
        self.forwarder = forwarder
        self.image = image

    # --------------------------------------------------------- DescribeConfigs

    async def describe_configs(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        synonyms = bool(getattr(body, "include_synonyms", False))
        documentation = bool(getattr(body, "include_documentation", False))
        request = api.DescribeConfigsRequest()
        answers: list[dict[str, Any] | int] = []  # an answer, or the index in the request
        for r in body.resources:
            target = to_controller(int(r.resource_type), r.resource_name)
            if target is None:
                answers.append({**_unserved(int(r.resource_type), r.resource_name), "configs": []})
                continue
            answers.append(len(request.resources))
            request.resources.add(
                resource_type=target[0],
                resource_name=target[1],
                names=list(r.configuration_keys or ()),
            )
        reply: Any = None
        failure: ForwardError | None = None
        if request.resources:
            try:
                reply = await self.forwarder.call(
                    "DescribeConfigs", request, caller(conn), TIMEOUT_MS
                )
            except ForwardError as err:
                failure = err
        results = []
        for r, answer in zip(body.resources, answers, strict=True):
            if isinstance(answer, dict):
                results.append(answer)
                continue
            base = {"resource_type": int(r.resource_type), "resource_name": r.resource_name}
            if failure is not None:
                results.append(
                    {
                        **base,
                        "error_code": int(failure.error),
                        "error_message": failure.message,
                        "configs": [],
                    }
                )
                continue
            described = reply.resources[answer]
            code, message = item_error(described.error)
            results.append(
                {
                    **base,
                    "error_code": code,
                    "error_message": message,
                    "configs": [
                        _config_entry(int(described.resource_type), c, synonyms, documentation)
                        for c in described.configs
                    ],
                }
            )
        return {"throttle_time": 0, "results": results}

    # ------------------------------------------------- (Incremental)AlterConfigs

    async def incremental_alter_configs(
        self, body: Any, version: int, conn: Connection
    ) -> dict[str, Any]:
        changes = [
            (int(r.resource_type), r.resource_name,
             [(c.name, int(c.config_operation), c.value or "") for c in r.configs])
            for r in body.resources
        ]  # fmt: skip
        return await self._alter(changes, bool(body.validate_only), conn)

    async def alter_configs(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        image = self.image()
        changes = []
        for r in body.resources:
            rtype = int(r.resource_type)
            ops = [(c.name, SET, c.value) for c in r.configs if c.value is not None]
            target = to_controller(rtype, r.resource_name)
            if target is not None:
                given = {c.name for c in r.configs if c.value is not None}
                current = image.config(target[0], target[1])
                ops += [(k, DELETE, "") for k in sorted(current) if k not in given]
            changes.append((rtype, r.resource_name, ops))
        return await self._alter(changes, bool(body.validate_only), conn)

    async def _alter(
        self, changes: list[tuple[int, str, list[tuple[str, int, str]]]], validate_only: bool,
        conn: Connection,
    ) -> dict[str, Any]:  # fmt: skip
        request = api.IncrementalAlterConfigsRequest(validate_only=validate_only)
        answers: list[dict[str, Any] | int] = []
        for rtype, name, ops in changes:
            target = to_controller(rtype, name)
            if target is None:
                answers.append(_unserved(rtype, name))
                continue
            answers.append(len(request.resources))
            item = request.resources.add(resource_type=target[0], resource_name=target[1])
            for key, op, value in ops:
                item.configs.add(name=key, op=op, value=value)
        reply: Any = None
        failure: ForwardError | None = None
        if request.resources:
            try:
                reply = await self.forwarder.write(
                    "IncrementalAlterConfigs", request, caller(conn), TIMEOUT_MS
                )
            except ForwardError as err:
                failure = err
        responses = []
        for (rtype, name, _), answer in zip(changes, answers, strict=True):
            if isinstance(answer, dict):
                responses.append(answer)
                continue
            base = {"resource_type": rtype, "resource_name": name}
            message: str | None
            if failure is not None:
                code, message = int(failure.error), failure.message
            else:
                code, message = item_error(reply.resources[answer].error)
            responses.append({**base, "error_code": code, "error_message": message})
        return {"throttle_time": 0, "responses": responses}


def _config_entry(
    resource_type: int, entry: api.ConfigEntry, synonyms: bool, documentation: bool
) -> dict[str, Any]:
    source = int(entry.source)
    out: dict[str, Any] = {
        "name": entry.name,
        "value": entry.value,
        "read_only": entry.read_only,
        "is_default": entry.is_default,
        "config_source": source,
        "is_sensitive": entry.sensitive,
        "config_type": config_type(resource_type, entry.name),
        "documentation": cs.DOCS.get(entry.name) if documentation else None,
        "synonyms": [],
    }
    if synonyms:
        chain = [{"name": entry.name, "value": entry.value, "source": source}]
        spec = cs.KEYS.get(resource_type, {}).get(entry.name)
        if spec is not None and source != DEFAULT_SOURCE:
            chain.append({"name": entry.name, "value": spec.default, "source": DEFAULT_SOURCE})
        out["synonyms"] = chain
    return out


# ---------------------------------------------------------------------- ACLs


def _filter(f: Any) -> api.AclBindingFilter:
    out = api.AclBindingFilter(
        resource_type=int(f.resource_type_filter),
        pattern_type=int(getattr(f, "pattern_type_filter", 3)),
        operation=int(f.operation),
        permission_type=int(f.permission_type),
    )
    if f.resource_name_filter is not None:
        out.resource_name = f.resource_name_filter
    if f.principal_filter is not None:
        out.principal = f.principal_filter
    if f.host_filter is not None:
        out.host = f.host_filter
    return out


class AclAdmin:
    def __init__(self, forwarder: ControllerForwarder) -> None:
        self.forwarder = forwarder

    async def create_acls(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        request = api.CreateAclsRequest()
        for c in body.creations:
            request.creations.add(
                resource_type=int(c.resource_type),
                resource_name=c.resource_name,
                pattern_type=int(getattr(c, "resource_pattern_type", 3)),
                principal=c.principal,
                host=c.host,
                operation=int(c.operation),
                permission_type=int(c.permission_type),
            )
        try:
            reply = await self.forwarder.write(
                "CreateAcls", request, caller(conn), TIMEOUT_MS, settle=True
            )
        except ForwardError as err:
            failed = {"error_code": int(err.error), "error_message": err.message}
            return {"throttle_time": 0, "results": [failed for _ in body.creations]}
        results = []
        for r in reply.results:
            code, message = item_error(r.error)
            results.append({"error_code": code, "error_message": message})
        return {"throttle_time": 0, "results": results}

    async def describe_acls(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        request = api.DescribeAclsRequest(filter=_filter(body))
        try:
            reply = await self.forwarder.call("DescribeAcls", request, caller(conn), TIMEOUT_MS)
        except ForwardError as err:
            return {
                "throttle_time": 0,
                "error_code": int(err.error),
                "error_message": err.message,
                "resources": [],
            }
        grouped: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
        for b in reply.bindings:
            grouped.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(
                {
                    "principal": b.principal,
                    "host": b.host,
                    "operation": b.operation,
                    "permission_type": b.permission_type,
                }
            )
        return {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "resources": [
                {"resource_type": t, "resource_name": n, "pattern_type": p, "acls": acls}
                for (t, n, p), acls in grouped.items()
            ],
        }

    async def delete_acls(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        request = api.DeleteAclsRequest(filters=[_filter(f) for f in body.filters])
        try:
            reply = await self.forwarder.write(
                "DeleteAcls", request, caller(conn), TIMEOUT_MS, settle=True
            )
        except ForwardError as err:
            failed = {"error_code": int(err.error), "error_message": err.message,
                      "matching_acls": []}  # fmt: skip
            return {"throttle_time": 0, "filter_results": [failed for _ in body.filters]}
        results = []
        for r in reply.results:
            code, message = item_error(r.error)
            results.append(
                {
                    "error_code": code,
                    "error_message": message,
                    "matching_acls": [
                        {
                            "error_code": 0,
                            "error_message": None,
                            "resource_type": b.resource_type,
                            "resource_name": b.resource_name,
                            "pattern_type": b.pattern_type,
                            "principal": b.principal,
                            "host": b.host,
                            "operation": b.operation,
                            "permission_type": b.permission_type,
                        }
                        for b in r.matching
                    ],
                }
            )
        return {"throttle_time": 0, "filter_results": results}
