"""Topic auto-creation as Kafka's brokers do it, in front of the Metadata answer.

With `auto.create.topics.enable` (Kafka's default, true), a Metadata request
that names topics this broker does not know and allows auto-creation (every
version before 4; the `allow_auto_topic_creation` flag from 4 on: producers
set it, librdkafka's consumers do not) creates them through the active
controller with `num.partitions` and `default.replication.factor` (the
broker's keys; unset, the cluster's defaults), forwarded for the client's
principal, so with ACLs on the client needs CREATE on the cluster or the
topic (else TOPIC_AUTHORIZATION_FAILED for that topic). Internal topics
(`__consumer_offsets`, `__transaction_state`) are never created this way, and
an invalid name gets INVALID_TOPIC_EXCEPTION from the controller's rules.

The answer waits (bounded: the read fence of `forwarding.py`) until this
broker's image shows the new topic, so the client gets its partitions at once;
if the controller cannot be reached in time the topic is LEADER_NOT_AVAILABLE,
which clients retry, as Kafka answers for a topic being created. With
auto-creation off, an unknown topic is UNKNOWN_TOPIC_OR_PARTITION and nothing
is created.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker_agent.kafka.admin_apis import caller
from broker_agent.kafka.forwarding import ControllerForwarder, ForwardError, item_error
from broker_agent.kafka.listener import Connection
from broker_agent.kafka.metadata_answer import INTERNAL_TOPICS
from quorum.controller.metadata_image import MetadataImage
from quorum.gen import admin_pb2 as api

AUTO_CREATE_TIMEOUT_MS = 10_000
# The errors a Metadata answer passes on for a topic that could not be created;
# anything else (no controller in time) is LEADER_NOT_AVAILABLE, retried by clients.
_PASSED_ON = frozenset(
    {
        ErrorCode.topic_authorization_failed,
        ErrorCode.cluster_authorization_failed,
        ErrorCode.invalid_topic_exception,
        ErrorCode.invalid_replication_factor,
        ErrorCode.invalid_partitions,
        ErrorCode.policy_violation,
    }
)


@dataclass(frozen=True, slots=True)
class AutoCreateConfig:
    enabled: bool = True
    num_partitions: int = -1  # -1: the cluster's num.partitions
    replication_factor: int = -1  # -1: the cluster's default.replication.factor


MetadataHandler = Callable[[Any, int, Connection], Awaitable[dict[str, Any]]]


class AutoCreate:
    def __init__(
        self,
        config: AutoCreateConfig,
        forwarder: ControllerForwarder,
        image: Callable[[], MetadataImage],
        answer: MetadataHandler,
    ) -> None:
        self.config = config
        self.forwarder = forwarder
        self.image = image
        self.answer = answer
        self.created = 0

    def _allowed(self, body: Any, version: int) -> bool:
        return version < 4 or bool(getattr(body, "allow_auto_topic_creation", False))

    async def metadata(self, body: Any, version: int, conn: Connection) -> dict[str, Any]:
        failed: dict[str, tuple[ErrorCode, str | None]] = {}
        if self.config.enabled and body.topics and self._allowed(body, version):
            image = self.image()
            missing = list(
                dict.fromkeys(
                    t.name
                    for t in body.topics
                    if t.name is not None
                    and t.name not in INTERNAL_TOPICS
                    and image.topic(t.name) is None
                )
            )
            if missing:
                outcomes = await asyncio.gather(*(self._create(n, conn) for n in missing))
                await self.forwarder.caught_up(AUTO_CREATE_TIMEOUT_MS)  # the image shows them
                image = self.image()
                for name, outcome in zip(missing, outcomes, strict=True):
                    if outcome is not None:
                        failed[name] = outcome
                    elif image.topic(name) is None:
                        failed[name] = (ErrorCode.leader_not_available, None)
        response = await self.answer(body, version, conn)
        if failed:
            for topic in response["topics"]:
                if topic["name"] in failed and topic["error_code"]:
                    topic["error_code"] = int(failed[topic["name"]][0])
        return response

    async def _create(self, name: str, conn: Connection) -> tuple[ErrorCode, str | None] | None:
        """None once the topic exists (created now or before); else the error to
        answer for it."""
        request = api.CreateTopicsRequest()
        item = request.topics.add(name=name)
        item.num_partitions = self.config.num_partitions
        item.replication_factor = self.config.replication_factor
        try:
            reply = await self.forwarder.write(
                "CreateTopics", request, caller(conn), AUTO_CREATE_TIMEOUT_MS
            )
        except ForwardError as err:
            error = err.error if err.error in _PASSED_ON else ErrorCode.leader_not_available
            return error, err.message
        code, message = item_error(reply.topics[0].error)
        if code == 0:
            self.created += 1
        if code in (0, int(ErrorCode.topic_already_exists)):
            return None
        error = ErrorCode(code)
        return (error if error in _PASSED_ON else ErrorCode.leader_not_available), message
