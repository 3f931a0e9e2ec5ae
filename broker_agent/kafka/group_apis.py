"""The group APIs: adapters from kio requests to the group coordinator
(`broker_agent.groups`), in the same style as `apis.py`'s handlers.

FindCoordinator is answered by any broker (the leader of the group's
`__consumer_offsets` partition, with the endpoint of the listener the request
came on); the others go to this broker's coordinator, which answers
NOT_COORDINATOR for groups it does not own and COORDINATOR_LOAD_IN_PROGRESS
while it loads them. Validation happens here, at the edge, before anything
reaches the machine: an empty group id, a session timeout outside the bounds,
an unknown topic in a commit each get Kafka's error and change nothing.

ACLs, as Kafka's KafkaApis asks (GROUP_AUTHORIZATION_FAILED or
TOPIC_AUTHORIZATION_FAILED when refused):

    FindCoordinator                          DESCRIBE on the group
    JoinGroup, SyncGroup, Heartbeat, Leave   READ on the group
    OffsetCommit                             READ on the group and on each topic
    OffsetFetch                              DESCRIBE on the group and on each topic
    DescribeGroups                           DESCRIBE on the group
    ListGroups                               DESCRIBE on the cluster, else the groups
                                             the principal may DESCRIBE
    DeleteGroups                             DELETE on the group
    OffsetDelete                             DELETE on the group, READ on each topic
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.groups.coordinator import GroupCoordinator
from broker_agent.groups.effects import JoinAnswer
from broker_agent.groups.group import Group
from broker_agent.groups.state import GroupState, parse_state
from broker_agent.kafka import codec
from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.listener import Connection
from broker_agent.kafka.metadata_answer import live_brokers
from broker_agent.kafka.versions import ApiKey
from quorum.authz.authorizer import NO_AUTHORIZER, Operation
from quorum.controller.metadata_image import MetadataImage

# The client id of the request being handled (JoinGroup's member ids start with it);
# `KafkaApis.handle` sets it in the connection task's context.
CLIENT_ID: ContextVar[str] = ContextVar("kafka_client_id", default="")

KEY_TYPE_GROUP = 0
Handler = Callable[[Any, int, Connection], Awaitable[dict[str, Any] | None]]


class GroupApis:
    def __init__(
        self,
        node_id: int,
        image: Callable[[], MetadataImage],
        coordinator: GroupCoordinator | None,
        authz: KafkaAuthorizer | None = None,
    ) -> None:
        self.node_id = node_id
        self.image = image
        self.coordinator = coordinator
        self.authz = authz or KafkaAuthorizer(NO_AUTHORIZER, image)

    def handlers(self) -> dict[int, Handler]:
        return {
            ApiKey.FIND_COORDINATOR: self.find_coordinator,
            ApiKey.JOIN_GROUP: self.join_group,
            ApiKey.SYNC_GROUP: self.sync_group,
            ApiKey.HEARTBEAT: self.heartbeat,
            ApiKey.LEAVE_GROUP: self.leave_group,
            ApiKey.OFFSET_COMMIT: self.offset_commit,
            ApiKey.OFFSET_FETCH: self.offset_fetch,
            ApiKey.DESCRIBE_GROUPS: self.describe_groups,
            ApiKey.LIST_GROUPS: self.list_groups,
            ApiKey.DELETE_GROUPS: self.delete_groups,
            ApiKey.OFFSET_DELETE: self.offset_delete,
        }

    # ------------------------------------------------------ FindCoordinator

    def _coordinator_of(self, key: str, key_type: int, conn: Connection) -> dict[str, Any]:
        def fail(error: ErrorCode, message: str | None = None) -> dict[str, Any]:
            return {
                "key": key,
                "node_id": -1,
                "host": "",
                "port": -1,
                "error_code": int(error),
                "error_message": message,
            }

        if key_type != KEY_TYPE_GROUP:
            return fail(ErrorCode.invalid_request, "only GROUP coordinators are served")
        if not self.authz.group(conn, key, Operation.DESCRIBE):
            return fail(ErrorCode.group_authorization_failed)
        if self.coordinator is None:
            return fail(ErrorCode.coordinator_not_available)
        error, node = self.coordinator.find(key)
        if error is not ErrorCode.none:
            return fail(error)
        endpoint = [
            b for b in live_brokers(self.image(), conn.listener_name) if b["node_id"] == node
        ]
        if not endpoint:
            return fail(ErrorCode.coordinator_not_available)
        return {
            "key": key,
            "node_id": node,
            "host": endpoint[0]["host"],
            "port": endpoint[0]["port"],
            "error_code": 0,
            "error_message": None,
        }

    async def find_coordinator(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        key_type = int(getattr(body, "key_type", KEY_TYPE_GROUP))
        if version >= 4:
            return {
                "throttle_time": 0,
                "coordinators": [
                    self._coordinator_of(k, key_type, conn) for k in body.coordinator_keys
                ],
            }
        answer = self._coordinator_of(body.key, key_type, conn)
        return {"throttle_time": 0, **answer}

    # ------------------------------------------------------------ membership

    async def join_group(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        member_id = body.member_id or ""

        def answer(a: JoinAnswer) -> dict[str, Any]:
            return {
                "throttle_time": 0,
                "error_code": int(a.error),
                "generation_id": a.generation,
                "protocol_type": a.protocol_type,
                "protocol_name": a.protocol if version >= 7 or a.protocol else "",
                "leader": a.leader,
                "skip_assignment": a.skip_assignment,
                "member_id": a.member_id,
                "members": [
                    {"member_id": mid, "group_instance_id": inst, "metadata": meta}
                    for mid, inst, meta in a.members
                ],
            }

        if not self.authz.group(conn, body.group_id, Operation.READ):
            return answer(JoinAnswer(ErrorCode.group_authorization_failed, member_id))
        if self.coordinator is None:
            return answer(JoinAnswer(ErrorCode.coordinator_not_available, member_id))
        rebalance = getattr(body, "rebalance_timeout", None)
        protocols = [(p.name, bytes(p.metadata)) for p in body.protocols]
        result = await self.coordinator.join(
            body.group_id,
            member_id,
            getattr(body, "group_instance_id", None),
            CLIENT_ID.get(),
            f"/{conn.peer_host}",
            codec.millis(body.session_timeout),
            codec.millis(rebalance) if rebalance is not None else -1,
            body.protocol_type,
            protocols,
            version >= 4,
        )
        return answer(result)

    async def sync_group(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if not self.authz.group(conn, body.group_id, Operation.READ):
            return _sync(ErrorCode.group_authorization_failed)
        if self.coordinator is None:
            return _sync(ErrorCode.coordinator_not_available)
        result = await self.coordinator.sync(
            body.group_id,
            body.member_id,
            getattr(body, "group_instance_id", None),
            int(body.generation_id),
            getattr(body, "protocol_type", None),
            getattr(body, "protocol_name", None),
            {a.member_id: bytes(a.assignment) for a in body.assignments},
        )
        return {
            "throttle_time": 0,
            "error_code": int(result.error),
            "protocol_type": result.protocol_type,
            "protocol_name": result.protocol,
            "assignment": result.assignment,
        }

    async def heartbeat(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if not self.authz.group(conn, body.group_id, Operation.READ):
            error = ErrorCode.group_authorization_failed
        elif self.coordinator is None:
            error = ErrorCode.coordinator_not_available
        else:
            error = self.coordinator.heartbeat(
                body.group_id,
                body.member_id,
                getattr(body, "group_instance_id", None),
                int(body.generation_id),
            )
        return {"throttle_time": 0, "error_code": int(error)}

    async def leave_group(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if version >= 3:
            leaving = [(m.member_id or "", m.group_instance_id) for m in body.members]
        else:
            leaving = [(body.member_id or "", None)]
        if not self.authz.group(conn, body.group_id, Operation.READ):
            top, errors = ErrorCode.group_authorization_failed, []
        elif self.coordinator is None:
            top, errors = ErrorCode.coordinator_not_available, []
        else:
            top, errors = self.coordinator.leave(body.group_id, leaving)
        return {
            "throttle_time": 0,
            "error_code": int(top if version < 3 or not errors else _leave_top(top)),
            "members": [
                {"member_id": mid, "group_instance_id": inst, "error_code": int(err)}
                for (mid, inst), err in zip(leaving, errors, strict=False)
            ],
        }

    # ---------------------------------------------------------------- offsets

    async def offset_commit(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        image = self.image()
        wanted: list[tuple[str, int, int, int, str | None]] = []
        errors: dict[tuple[str, int], ErrorCode] = {}
        group_ok = self.authz.group(conn, body.group_id, Operation.READ)
        for t in body.topics:
            topic = image.topic(t.name)
            for p in t.partitions:
                key = (t.name, int(p.partition_index))
                if not group_ok:
                    errors[key] = ErrorCode.group_authorization_failed
                elif not self.authz.topic(conn, t.name, Operation.READ):
                    errors[key] = ErrorCode.topic_authorization_failed
                elif topic is None or key[1] not in topic.partitions:
                    errors[key] = ErrorCode.unknown_topic_or_partition
                else:
                    epoch = int(getattr(p, "committed_leader_epoch", -1))
                    wanted.append((*key, int(p.committed_offset), epoch, p.committed_metadata))
        if self.coordinator is None:
            errors.update({(t, p): ErrorCode.coordinator_not_available for t, p, *_ in wanted})
        elif wanted or not errors:
            errors.update(
                await self.coordinator.commit(
                    body.group_id,
                    body.member_id or "",
                    getattr(body, "group_instance_id", None),
                    int(body.generation_id_or_member_epoch),
                    wanted,
                )
            )
        return {
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": int(p.partition_index),
                            "error_code": int(errors[(t.name, int(p.partition_index))]),
                        }
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ],
        }

    def _fetch_group(
        self, group_id: str, topics: Any, version: int, conn: Connection
    ) -> tuple[ErrorCode, list[dict[str, Any]]]:
        wanted = (
            None
            if topics is None
            else [(t.name, int(p)) for t in topics for p in t.partition_indexes]
        )
        if not self.authz.group(conn, group_id, Operation.DESCRIBE):
            error, found = ErrorCode.group_authorization_failed, {}
        elif self.coordinator is None:
            error, found = ErrorCode.coordinator_not_available, {}
        else:
            error, found = self.coordinator.fetch_offsets(group_id, wanted)
        hidden = {t for t, _ in found if not self.authz.topic(conn, t, Operation.DESCRIBE)}
        if wanted is None:
            found = {tp: e for tp, e in found.items() if tp[0] not in hidden}
        if error is not ErrorCode.none:
            # Before v2 there is no group-level error: every partition carries it.
            found = {tp: None for tp in wanted or []}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), entry in found.items():
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": entry.offset if entry else -1,
                    "committed_leader_epoch": entry.leader_epoch if entry else -1,
                    "metadata": entry.metadata if entry else "",
                    "error_code": int(
                        ErrorCode.topic_authorization_failed
                        if topic in hidden
                        else error
                        if version < 2
                        else ErrorCode.none
                    ),
                }
            )
        return error, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]

    async def offset_fetch(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        if version >= 8:
            groups = []
            for g in body.groups:
                error, topics = self._fetch_group(g.group_id, g.topics, version, conn)
                groups.append({"group_id": g.group_id, "topics": topics, "error_code": int(error)})
            return {"throttle_time": 0, "groups": groups}
        error, topics = self._fetch_group(body.group_id, body.topics, version, conn)
        return {"throttle_time": 0, "topics": topics, "error_code": int(error)}

    async def offset_delete(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        wanted = [(t.name, int(p.partition_index)) for t in body.topics for p in t.partitions]
        refused = {
            tp: ErrorCode.topic_authorization_failed
            for tp in wanted
            if not self.authz.topic(conn, tp[0], Operation.READ)
        }
        allowed = [tp for tp in wanted if tp not in refused]
        if not self.authz.group(conn, body.group_id, Operation.DELETE):
            error, errors = ErrorCode.group_authorization_failed, {}
        elif self.coordinator is None:
            error, errors = ErrorCode.coordinator_not_available, {}
        else:
            error, errors = self.coordinator.delete_offsets(
                body.group_id, allowed, subscribed_topics
            )
            errors.update(refused)
        return {
            "error_code": int(error),
            "throttle_time": 0,
            "topics": [
                {
                    "name": t.name,
                    "partitions": [
                        {
                            "partition_index": int(p.partition_index),
                            "error_code": int(
                                errors.get((t.name, int(p.partition_index)), ErrorCode.none)
                            ),
                        }
                        for p in t.partitions
                    ],
                }
                for t in body.topics
            ]
            if error is ErrorCode.none
            else [],
        }

    # ---------------------------------------------------------- administration

    async def describe_groups(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        out = []
        for group_id in body.groups:
            if not self.authz.group(conn, group_id, Operation.DESCRIBE):
                error, group = ErrorCode.group_authorization_failed, None
            elif self.coordinator is None:
                error, group = ErrorCode.coordinator_not_available, None
            else:
                error, group = self.coordinator.group(group_id)
            out.append(_described(group_id, error, group))
        return {"throttle_time": 0, "groups": out}

    async def list_groups(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        states = {parse_state(s) for s in getattr(body, "states_filter", ()) or ()}
        types = set(getattr(body, "types_filter", ()) or ())
        if self.coordinator is None:
            return {"throttle_time": 0, "error_code": 0, "groups": []}
        error = (
            ErrorCode.coordinator_load_in_progress if self.coordinator.loading() else ErrorCode.none
        )
        all_visible = self.authz.cluster(conn, Operation.DESCRIBE)
        groups = [
            {
                "group_id": g.group_id,
                "protocol_type": g.protocol_type or "",
                "group_state": g.state.value,
                "group_type": "classic",
            }
            for g in self.coordinator.machine.groups.values()
            if (not states or g.state in states)
            and (not types or "classic" in types)
            and (all_visible or self.authz.group(conn, g.group_id, Operation.DESCRIBE))
        ]
        return {"throttle_time": 0, "error_code": int(error), "groups": groups}

    async def delete_groups(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        results = []
        for group_id in body.groups_names:
            if not self.authz.group(conn, group_id, Operation.DELETE):
                error = ErrorCode.group_authorization_failed
            elif self.coordinator is None:
                error = ErrorCode.coordinator_not_available
            else:
                error = self.coordinator.delete_group(group_id)
            results.append({"group_id": group_id, "error_code": int(error)})
        return {"throttle_time": 0, "results": results}


def _described(group_id: str, error: ErrorCode, group: Group | None) -> dict[str, Any]:
    if error is not ErrorCode.none or group is None:
        # Kafka describes a group it does not know as Dead, without an error.
        return {
            "error_code": int(error),
            "group_id": group_id,
            "group_state": GroupState.DEAD.value,
            "protocol_type": "",
            "protocol_data": "",
            "members": [],
            "authorized_operations": -(2**31),
        }
    stable = group.state is GroupState.STABLE
    return {
        "error_code": 0,
        "group_id": group_id,
        "group_state": group.state.value,
        "protocol_type": group.protocol_type or "",
        "protocol_data": group.protocol or "" if stable else "",
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata(group.protocol) if stable else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ],
        "authorized_operations": -(2**31),
    }


def subscribed_topics(group: Group) -> set[str]:
    """The topics a consumer group's members subscribe to, from their
    ConsumerProtocolSubscription metadata (OffsetDelete refuses those)."""
    if group.protocol_type != "consumer":
        return set()
    topics: set[str] = set()
    for m in group.members.values():
        topics |= _subscription_topics(m.metadata(group.protocol))
    return topics


def _subscription_topics(data: bytes) -> set[str]:
    """Topics of a ConsumerProtocolSubscription (version int16, then an array of
    strings, in every version)."""
    try:
        count = int.from_bytes(data[2:6], "big", signed=True)
        pos = 6
        out = set()
        for _ in range(max(count, 0)):
            n = int.from_bytes(data[pos : pos + 2], "big", signed=True)
            pos += 2
            out.add(data[pos : pos + n].decode())
            pos += n
        return out
    except (UnicodeDecodeError, IndexError, ValueError):
        return set()


def _leave_top(top: ErrorCode) -> ErrorCode:
    """v3+: member errors are per member; the top level only for group-level ones."""
    return top if top in _GROUP_LEVEL else ErrorCode.none


_GROUP_LEVEL = {
    ErrorCode.not_coordinator,
    ErrorCode.coordinator_not_available,
    ErrorCode.coordinator_load_in_progress,
    ErrorCode.invalid_group_id,
}


def _sync(error: ErrorCode) -> dict[str, Any]:
    return {
        "throttle_time": 0,
        "error_code": int(error),
        "protocol_type": None,
        "protocol_name": None,
        "assignment": b"",
    }
