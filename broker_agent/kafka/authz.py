"""Kafka's ACL checks for the Kafka requests, over the ACLs in the metadata image.

The decisions are the controllers' StandardAuthorizer (`quorum.controller.authorizer`,
pure), with the principal of the connection (its TLS client certificate's subject,
or User:ANONYMOUS) and its host. What each request needs, as Kafka's KafkaApis asks:

    Produce                  WRITE on the topic
    Fetch (consumer)         READ on the topic
    Fetch (follower)         CLUSTER_ACTION on the cluster
    Metadata, ListOffsets    DESCRIBE on the topic
    OffsetsForLeaderEpoch    DESCRIBE on the topic (a follower: CLUSTER_ACTION)
    InitProducerId           IDEMPOTENT_WRITE on the cluster, or WRITE on any topic

Without `authorizer.class.name` everything is allowed, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_agent.kafka.listener import Connection
from quorum.controller.authorizer import (
    CLUSTER_NAME,
    Action,
    AuthorizerConfig,
    Operation,
    Permission,
    ResourceType,
    authorize,
)
from quorum.controller.metadata_image import MetadataImage


class KafkaAuthorizer:
    def __init__(self, config: AuthorizerConfig, image: Callable[[], MetadataImage]) -> None:
        self.config = config
        self.image = image

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def topic(self, conn: Connection, topic: str, operation: Operation) -> bool:
        return self._allowed(conn, Action(ResourceType.TOPIC, topic, operation))

    def cluster(self, conn: Connection, operation: Operation) -> bool:
        return self._allowed(conn, Action(ResourceType.CLUSTER, CLUSTER_NAME, operation))

    def may_write_some_topic(self, conn: Connection) -> bool:
        """Kafka lets a producer that may WRITE any topic be idempotent (KIP-679)."""
        if not self.enabled or conn.principal in self.config.super_users:
            return True
        return any(
            acl.resource_type == ResourceType.TOPIC
            and acl.permission_type == Permission.ALLOW
            and acl.operation in (Operation.WRITE, Operation.ALL)
            and acl.principal in (conn.principal, "User:*")
            and acl.host in (conn.peer_host, "*")
            for acl in self.image().acls.values()
        )

    def _allowed(self, conn: Connection, action: Action) -> bool:
        if not self.enabled:
            return True
        acls = self.image().acls.values()
        return authorize(self.config, acls, conn.principal, conn.peer_host, action).allowed
