"""`broker-agent --config FILE`: run one broker's metadata agent.

Exit codes: 0 after a completed controlled shutdown (or a stop before it ever
registered), 1 when it cannot start (configuration, unformatted directory, a
damaged metadata cache), 3 when the controllers refuse it for good (another
cluster's id, a cache ahead of the controllers' log), 6 when the controlled
shutdown did not finish within `controlled.shutdown.timeout.ms`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

from broker_agent import event_loop
from broker_agent.agent import BrokerAgent
from broker_agent.apply_trace import ApplyTrace
from broker_agent.config import BrokerConfig, load_broker_config
from broker_agent.groups.metrics import GroupMetrics
from broker_agent.isr_changer import AdminIsrChanger
from broker_agent.kafka.leader_client import KafkaLeaderFetchClient
from broker_agent.kafka.metrics import KafkaRequestMetrics
from broker_agent.kafka.server import KafkaServer, inter_broker_ssl_context
from broker_agent.metadata_cache import MetadataCache
from broker_agent.metrics import AgentMetrics
from broker_agent.partitions.api import LeaderFetchClient
from broker_agent.partitions.log_cleaner import CleanerConfig
from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.replica_config import ReplicaConfig
from broker_agent.partitions.replica_manager import ReplicaManager
from broker_agent.replication.follower import TruncationMode
from broker_agent.switches_for_tests import SwitchError, truncation_mode
from quorum.admin_client import AdminError
from quorum.common import process
from quorum.common.channels import ListenerError
from quorum.common.clocks import wall_clock_ms
from quorum.common.config import LONG_MAX
from quorum.common.meta_properties import (
    StorageFormatError,
    check_directory,
    ensure_directory_id,
)
from quorum.log.errors import StorageError
from snapshots.errors import SnapshotCorruptionError
from snapshots.policy import SnapshotPolicy

log = logging.getLogger("broker_agent")

PROG = "broker-agent"
EXIT_STARTUP = process.EXIT_STARTUP
EXIT_REFUSED = 3
EXIT_SHUTDOWN_TIMEOUT = 6


def main(argv: list[str] | None = None) -> int:
    parser = process.argument_parser(
        "broker-agent",
        "Run one broker's metadata agent: register, fetch metadata, heartbeat.",
        "the broker's properties file",
        "data/config/broker-1.properties",
    )
    parser.add_argument(
        "--rebuild-metadata-cache",
        action="store_true",
        help="drop the local metadata cache and fetch everything again from the controllers",
    )
    args = parser.parse_args(argv)
    config = process.load_config(PROG, load_broker_config, args.config)
    if config is None:
        return EXIT_STARTUP
    try:
        truncation = truncation_mode(os.environ)
    except SwitchError as err:
        return process.cannot_start(PROG, err)
    process.configure_logging(config.log_level, f"broker {config.node_id}")
    process.tune_collector()
    if truncation is not TruncationMode.LEADER_EPOCH:
        log.warning(
            "test-only %s truncation: this broker can lose acknowledged records", truncation.value
        )
    return event_loop.run(_start_and_run(config, args.rebuild_metadata_cache, truncation))


def replica_config(config: BrokerConfig) -> ReplicaConfig:
    return ReplicaConfig(
        replica_lag_time_max_ms=config.replica_lag_time_max_ms,
        replica_fetch_max_bytes=config.replica_fetch_max_bytes,
        replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
        num_recovery_threads_per_data_dir=config.num_recovery_threads_per_data_dir,
        message_max_bytes=config.message_max_bytes,
        log=LogConfig(
            segment_bytes=config.log_segment_bytes,
            retention_ms=config.log_retention_ms,
            retention_bytes=config.log_retention_bytes,
            max_message_bytes=config.message_max_bytes,
            min_insync_replicas=config.min_insync_replicas,
            flush_interval_messages=config.log_flush_interval_messages,
            flush_interval_ms=config.log_flush_interval_ms,
            cleanup_policy=config.log_cleanup_policy,
            min_cleanable_dirty_ratio=config.log_cleaner_min_cleanable_ratio,
            min_compaction_lag_ms=config.log_cleaner_min_compaction_lag_ms,
            max_compaction_lag_ms=config.log_cleaner_max_compaction_lag_ms,
            delete_retention_ms=config.log_cleaner_delete_retention_ms,
            segment_ms=config.log_roll_ms,
        ),
        cleaner=CleanerConfig(
            enable=config.log_cleaner_enable,
            dedupe_buffer_size=config.log_cleaner_dedupe_buffer_size,
            io_buffer_load_factor=config.log_cleaner_io_buffer_load_factor,
            backoff_ms=config.log_cleaner_backoff_ms,
            threads=config.log_cleaner_threads,
            io_max_bytes_per_second=(
                float("inf")
                if config.log_cleaner_io_max_bytes_per_second == LONG_MAX
                else float(config.log_cleaner_io_max_bytes_per_second)
            ),
        ),
    )


def make_leader_fetch_client(config: BrokerConfig, agent: BrokerAgent) -> LeaderFetchClient:
    """How followers reach leaders: Kafka's Fetch (with the follower's replica_id)
    and OffsetsForLeaderEpoch over the wire, to the leader's endpoint for the
    inter-broker listener (`inter.broker.listener.name`), over TLS with the
    broker's own certificate when that listener is SSL."""
    return KafkaLeaderFetchClient(
        config.node_id,
        lambda: agent.image,
        config.inter_broker_listener,
        config.socket_request_max_bytes,
        inter_broker_ssl_context(config),
    )


def build_replica_manager(
    config: BrokerConfig, agent: BrokerAgent, truncation: TruncationMode
) -> ReplicaManager:
    changer = AdminIsrChanger(
        agent.client, lambda: agent.stats.broker_epoch, agent._request_deadline_s
    )
    return ReplicaManager(
        config.node_id,
        config.log_dirs[0],
        replica_config(config),
        isr_changer=changer,
        fetch_client=make_leader_fetch_client(config, agent),
        truncation_mode=truncation,
    )


def open_cache(config: BrokerConfig, rebuild: bool) -> MetadataCache:
    directory = Path(config.metadata_log_dir)
    if rebuild and MetadataCache.drop(directory):
        log.warning("dropped the metadata cache under %s; fetching it again", directory)
    policy = SnapshotPolicy(config.snapshot_max_new_record_bytes, config.snapshot_max_interval_ms)
    return MetadataCache(directory, policy, config.segment_bytes, wall_clock_ms())


async def _start_and_run(config: BrokerConfig, rebuild: bool, truncation: TruncationMode) -> int:
    try:
        meta = check_directory(Path(config.metadata_log_dir), config.node_id)
        cache = open_cache(config, rebuild)
    except (StorageFormatError, StorageError, SnapshotCorruptionError) as err:
        return process.cannot_start(
            PROG,
            err,
            "\n(restart with --rebuild-metadata-cache to drop the cache and fetch it again)",
        )
    try:
        # After the cache's lock: one process at a time may give the directory an id.
        meta = ensure_directory_id(Path(config.metadata_log_dir), meta)
    except StorageFormatError as err:
        cache.close()
        return process.cannot_start(PROG, err)
    assert meta.directory_id is not None
    trace = ApplyTrace(Path(config.metadata_log_dir), config.node_id, meta.cluster_id)
    agent = BrokerAgent(config, meta.cluster_id, cache, trace, log_dirs=(meta.directory_id,))
    try:
        agent.replicas = build_replica_manager(config, agent, truncation)
    except ListenerError as err:
        trace.close()
        cache.close()
        return process.cannot_start(PROG, err)
    except (OSError, StorageError) as err:
        print(f"broker-agent: cannot open the partition logs: {err}", file=sys.stderr)
        trace.close()
        cache.close()
        return EXIT_STARTUP
    await agent.replicas.start()
    metrics = AgentMetrics(agent)
    metrics.build_info(
        cluster_id=meta.cluster_id, node_id=str(config.node_id), process_roles="broker"
    )
    log.info(
        "broker %d: event loop %s", config.node_id, type(asyncio.get_running_loop()).__module__
    )
    process.stop_on_signals(agent.request_stop)
    try:
        metrics_at = process.start_metrics(metrics, config.metrics_listener, config.metrics_tls)
    except ListenerError as err:
        trace.close()
        cache.close()
        return process.cannot_start(PROG, err)
    kafka = KafkaServer(config, agent, replicas=agent.replicas)
    kafka.apis.observe = KafkaRequestMetrics(metrics.registry, kafka.listeners).observe
    if kafka.groups is not None:
        GroupMetrics(metrics.registry, kafka.groups)
    try:
        kafka_at = await kafka.start()
    except ListenerError as err:
        metrics.stop()
        trace.close()
        cache.close()
        return process.cannot_start(PROG, err)
    log.info(
        "broker %d of cluster %s (directory %s) starting at metadata offset %d; "
        "controllers %s; Kafka listeners %s; metrics %s",
        config.node_id,
        meta.cluster_id,
        meta.directory_id,
        cache.next_offset,
        ",".join(config.bootstrap),
        ",".join(kafka_at),
        metrics_at,
    )
    try:
        code = await agent.run()
        return EXIT_SHUTDOWN_TIMEOUT if code else 0
    except AdminError as err:
        print(f"broker-agent: the controllers refuse this broker: {err}", file=sys.stderr)
        return EXIT_REFUSED
    finally:
        await kafka.stop()
        await agent.replicas.close()
        fetch_client = agent.replicas.fetcher.client if agent.replicas.fetcher else None
        if isinstance(fetch_client, KafkaLeaderFetchClient):
            await fetch_client.close()
        await agent.client.close()
        metrics.stop()
        trace.close()
        await agent.finish_snapshot()
        cache.close()


if __name__ == "__main__":
    sys.exit(main())
