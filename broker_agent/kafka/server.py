"""The broker's Kafka protocol edge as one object: its listeners and its API dispatch.

`broker_agent/main.py` starts it beside the metadata agent and stops it on the way
out. It reads the committed metadata through the agent's cache (never the
controller's write side) and asks the controller for producer-id blocks through
the agent's admin client.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any

from broker_agent.agent import ONLINE, BrokerAgent
from broker_agent.config import BrokerConfig, KafkaTls
from broker_agent.groups.coordinator import GroupCoordinator, OffsetsTopicConfig
from broker_agent.groups.group import GroupConfig
from broker_agent.kafka import codec
from broker_agent.kafka.admin_handlers import install_admin_apis
from broker_agent.kafka.apis import KafkaApis
from broker_agent.kafka.authz import KafkaAuthorizer
from broker_agent.kafka.auto_create import AutoCreateConfig
from broker_agent.kafka.listener import Connection, KafkaListener
from broker_agent.kafka.producer_ids import ProducerIdSource
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.admin_client import AdminClient
from quorum.common.channels import ListenerError
from quorum.common.tls import SSL, ClientAuth
from quorum.gen import admin_pb2 as api

log = logging.getLogger("broker_agent.kafka")
TOPIC_ALREADY_EXISTS = 36


class KafkaServer:
    def __init__(
        self, config: BrokerConfig, agent: BrokerAgent, replicas: ReplicaManager | None
    ) -> None:
        self.config = config

        async def allocate() -> tuple[int, int]:
            reply = await agent.client.admin(
                "AllocateProducerIds",
                api.AllocateProducerIdsRequest(
                    broker_id=config.node_id, broker_epoch=agent.stats.broker_epoch
                ),
                deadline_s=10,
            )
            return reply.producer_id_start, reply.producer_id_len

        self.groups = group_coordinator(config, agent, replicas) if replicas is not None else None
        self.apis = KafkaApis(
            config.node_id,
            agent.cluster_id,
            lambda: agent.image,
            replicas,
            ProducerIdSource(allocate),
            KafkaAuthorizer(config.authorizer, lambda: agent.image),
            self.groups,
        )
        # Its own client: forwarded admin calls never disturb the MetadataFetch stream.
        self.admin_client = AdminClient(
            config.bootstrap,
            agent.cluster_id,
            addresses={n: e.address() for n, e in config.controllers.items()},
            tls=config.tls,
        )
        self.forwarder = install_admin_apis(
            self.apis,
            self.admin_client,
            lambda: agent.image,
            replicas,
            config.log_dirs[0],
            AutoCreateConfig(
                config.auto_create_topics_enable,
                config.num_partitions,
                config.default_replication_factor,
            ),
        )
        agent.stats.on_applied.append(self.forwarder.wake)  # once per applied batch
        agent.replies_first = self.forwarder.replies_first
        # As Kafka's broker enables request processing only once it is first
        # unfenced: before that its metadata may be the cache of before a restart,
        # and a client told a stale leader may keep asking it (aiokafka's
        # ListOffsets does not refresh on NOT_LEADER_OR_FOLLOWER). The port is
        # bound at once; requests wait.
        self.serving = asyncio.Event()
        if agent.state == ONLINE:
            self.serving.set()
        agent.state_listeners.append(lambda state: self.serving.set() if state == ONLINE else None)

        async def handle(request: codec.DecodedRequest, conn: Connection) -> Any | None:
            if not self.serving.is_set():
                await self.serving.wait()
            return await self.apis.handle(request, conn)

        self.listeners = [
            KafkaListener(
                name,
                endpoint.host,
                endpoint.port,
                handle,
                config.socket_request_max_bytes,
                max_idle_ms=config.connections_max_idle_ms,
            )
            for name, endpoint in config.listeners
        ]

    async def start(self) -> list[str]:
        """Bind every listener; raises ListenerError naming the one that cannot bind."""
        if self.groups is not None:
            await self.groups.start()
        bound = []
        for listener in self.listeners:
            if self.config.listener_protocols.get(listener.name) == SSL:
                assert self.config.kafka_tls is not None
                listener.ssl_context = ssl_context(self.config.kafka_tls)
            try:
                port = await listener.start()
            except OSError as err:
                await self.stop()
                raise ListenerError(
                    f"cannot listen on {listener.name}://{listener.host}:{listener.port}: "
                    f"{err.strerror}"
                ) from err
            bound.append(f"{listener.name}://{listener.host}:{port}")
        return bound

    async def stop(self) -> None:
        for listener in self.listeners:
            await listener.stop()
        await self.admin_client.close()
        if self.groups is not None:
            await self.groups.stop()


def group_coordinator(
    config: BrokerConfig, agent: BrokerAgent, replicas: ReplicaManager
) -> GroupCoordinator:
    """The broker's group coordinator; it creates `__consumer_offsets` through the
    controller's CreateTopics (an existing topic is fine: another broker won)."""

    async def create_topic(name: str, partitions: int, rf: int, configs: dict[str, str]) -> None:
        reply = await agent.client.admin(
            "CreateTopics",
            api.CreateTopicsRequest(
                topics=[
                    api.CreatableTopic(
                        name=name,
                        num_partitions=partitions,
                        replication_factor=rf,
                        configs=configs,
                    )
                ]
            ),
            deadline_s=10,
        )
        for result in reply.topics:
            if result.error.error_code not in (0, TOPIC_ALREADY_EXISTS):
                raise RuntimeError(f"{result.error.error_name}: {result.error.message}")

    return GroupCoordinator(
        config.node_id,
        replicas,
        lambda: agent.image,
        create_topic,
        OffsetsTopicConfig(
            num_partitions=config.offsets_topic_num_partitions,
            replication_factor=config.offsets_topic_replication_factor,
            segment_bytes=config.offsets_topic_segment_bytes,
            commit_timeout_ms=config.offsets_commit_timeout_ms,
        ),
        GroupConfig(
            min_session_timeout_ms=config.group_min_session_timeout_ms,
            max_session_timeout_ms=config.group_max_session_timeout_ms,
            initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
            max_size=config.group_max_size,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        ),
    )


_VERIFY = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


def ssl_context(tls: KafkaTls) -> ssl.SSLContext:
    """A TLS 1.2+ server context for the SSL Kafka listeners; the files are read now,
    so a bad one stops the broker at start-up with the file named."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.certificate_location, tls.key_location)
        context.verify_mode = _VERIFY[tls.client_auth]
        if tls.client_auth is not ClientAuth.NONE:
            context.load_verify_locations(cafile=tls.ca_location)
    except OSError as err:  # ssl.SSLError too
        raise ListenerError(
            f"cannot serve the SSL Kafka listener with {tls.certificate_location} "
            f"and {tls.key_location}: {err}"
        ) from err
    return context


def inter_broker_ssl_context(config: BrokerConfig) -> ssl.SSLContext | None:
    """The followers' TLS to leaders when the inter-broker listener is SSL: the
    broker's own certificate (its principal, e.g. User:CN=broker-101, needs
    CLUSTER_ACTION with ACLs on) and the CA its peers' certificates chain to."""
    if config.listener_protocols.get(config.inter_broker_listener) != SSL:
        return None
    tls = config.kafka_tls
    assert tls is not None
    context = ssl.create_default_context(cafile=tls.ca_location or None)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(tls.certificate_location, tls.key_location)
    except OSError as err:
        raise ListenerError(
            f"cannot use {tls.certificate_location} to reach leaders: {err}"
        ) from err
    return context
