"""The admin APIs' dispatch entries: who answers which Kafka admin API.

Forwarded to the active controller (KIP-590): CreateTopics, DeleteTopics,
CreatePartitions, ElectLeaders (`admin_apis.py`), DescribeConfigs,
IncrementalAlterConfigs, AlterConfigs and the ACL APIs (`admin_configs.py`).
Answered by this broker: DescribeCluster, DeleteRecords, DescribeLogDirs
(`local_admin.py`). Metadata gains topic auto-creation (`auto_create.py`).

The APIs in `FENCED` answer from this broker's metadata image, so each first
waits for the image to show every write this broker has answered (the read
fence, `forwarding.py`): read-your-writes across the broker's connections.
The data plane (Produce, Fetch, ListOffsets...) and the group APIs do not wait:
a client finds a new topic through Metadata, which does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_agent.kafka import codec
from broker_agent.kafka.admin_apis import TopicAdmin
from broker_agent.kafka.admin_configs import AclAdmin, ConfigAdmin
from broker_agent.kafka.auto_create import AutoCreate, AutoCreateConfig
from broker_agent.kafka.forwarding import ControllerForwarder
from broker_agent.kafka.local_admin import LocalAdmin
from broker_agent.kafka.versions import ApiKey
from broker_agent.partitions.replica_manager import ReplicaManager
from quorum.admin_client import AdminClient
from quorum.controller.metadata_image import MetadataImage

if TYPE_CHECKING:
    from broker_agent.kafka.apis import KafkaApis
    from broker_agent.kafka.listener import Connection

    Handler = Callable[[Any, int, Connection], Awaitable[dict[str, Any] | None]]


# The APIs that read this broker's image to answer about what a forwarded write
# changed: topics and partitions (Metadata, CreatePartitions' numbering of an
# explicit assignment), brokers (DescribeCluster), configs (AlterConfigs' deletes).
FENCED = frozenset(
    {ApiKey.METADATA, ApiKey.DESCRIBE_CLUSTER, ApiKey.CREATE_PARTITIONS, ApiKey.ALTER_CONFIGS}
)


# The APIs forwarded to the controller: their answers, of one entry per topic,
# config or ACL, are written by the compiled writer (`response_writer.py`), as
# building them as kio entities cost more than the forwarding (docs/benchmarks.md).
FORWARDED = frozenset(
    {
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.ELECT_LEADERS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.ALTER_CONFIGS,
        ApiKey.CREATE_ACLS,
        ApiKey.DESCRIBE_ACLS,
        ApiKey.DELETE_ACLS,
    }
)


def fenced(forwarder: ControllerForwarder, handler: Handler) -> Handler:
    """`handler`, once this broker's image shows the writes it answered."""

    async def after_fence(body: Any, version: int, conn: Connection) -> dict[str, Any] | None:
        await forwarder.caught_up(codec.millis(getattr(body, "timeout", 0)))
        return await handler(body, version, conn)

    return after_fence


def install_admin_apis(
    apis: KafkaApis,
    client: AdminClient | None,
    image: Callable[[], MetadataImage],
    replicas: ReplicaManager | None,
    log_dir: Path | None,
    auto_create: AutoCreateConfig,
) -> ControllerForwarder:
    """Put the admin APIs into `apis`' dispatch; without a `client` (a KafkaApis
    built alone, in tests) forwarded requests answer REQUEST_TIMED_OUT."""
    forwarder = ControllerForwarder(client, lambda: image().applied_offset)
    topics = TopicAdmin(forwarder, image)
    configs = ConfigAdmin(forwarder, image)
    acls = AclAdmin(forwarder)
    local = LocalAdmin(apis.node_id, apis.cluster_id, image, replicas, log_dir, apis.authz)
    creating = AutoCreate(auto_create, forwarder, image, apis.metadata)
    handlers: dict[int, Handler] = {
        ApiKey.CREATE_TOPICS: topics.create_topics,
        ApiKey.DELETE_TOPICS: topics.delete_topics,
        ApiKey.CREATE_PARTITIONS: topics.create_partitions,
        ApiKey.ELECT_LEADERS: topics.elect_leaders,
        ApiKey.DESCRIBE_CONFIGS: configs.describe_configs,
        ApiKey.INCREMENTAL_ALTER_CONFIGS: configs.incremental_alter_configs,
        ApiKey.ALTER_CONFIGS: configs.alter_configs,
        ApiKey.CREATE_ACLS: acls.create_acls,
        ApiKey.DESCRIBE_ACLS: acls.describe_acls,
        ApiKey.DELETE_ACLS: acls.delete_acls,
        ApiKey.DESCRIBE_CLUSTER: local.describe_cluster,
        ApiKey.DELETE_RECORDS: local.delete_records,
        ApiKey.DESCRIBE_LOG_DIRS: local.describe_log_dirs,
        ApiKey.METADATA: creating.metadata,
    }
    apis.add_handlers(
        {k: fenced(forwarder, h) if k in FENCED else h for k, h in handlers.items()},
        written=FORWARDED,
    )
    return forwarder
