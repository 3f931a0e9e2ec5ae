"""Kafka's ACL checks for the Kafka requests: a connection's questions to the
`Authorizer` (`quorum.authz.authorizer`, where every decision is made) over the
ACLs in the broker's metadata image.

The principal is the connection's (its TLS client certificate's subject, or
User:ANONYMOUS), with its host. What each request needs, as Kafka's KafkaApis
asks, is decided by its handler:

    Produce                  WRITE on the topic
    Fetch (consumer)         READ on the topic
    Fetch (follower)         CLUSTER_ACTION on the cluster
    Metadata, ListOffsets    DESCRIBE on the topic
    OffsetsForLeaderEpoch    DESCRIBE on the topic (a follower: CLUSTER_ACTION)
    InitProducerId           IDEMPOTENT_WRITE on the cluster, or WRITE on any topic
    the group APIs           see broker_agent/kafka/group_apis.py

Without `authorizer.class.name` everything is allowed, as in Kafka.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_agent.kafka.listener import Connection
from quorum.authz.authorizer import Authorizer, AuthorizerConfig, Operation, cluster, group, topic
from quorum.controller.metadata_image import MetadataImage


class KafkaAuthorizer:
    def __init__(self, config: AuthorizerConfig, image: Callable[[], MetadataImage]) -> None:
        self.config = config
        self.image = image
        self._authorizer = Authorizer(config, lambda: image().acls.values())

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def topic(self, conn: Connection, name: str, operation: Operation) -> bool:
        return self._authorizer.allows(conn.principal, conn.peer_host, topic(name, operation))

    def group(self, conn: Connection, group_id: str, operation: Operation) -> bool:
        return self._authorizer.allows(conn.principal, conn.peer_host, group(group_id, operation))

    def cluster(self, conn: Connection, operation: Operation) -> bool:
        return self._authorizer.allows(conn.principal, conn.peer_host, cluster(operation))

    def may_write_some_topic(self, conn: Connection) -> bool:
        """Kafka lets a producer that may WRITE any topic be idempotent (KIP-679)."""
        return self._authorizer.may_write_some_topic(conn.principal, conn.peer_host)
