"""`quorum-controller --config FILE`: one controller (or observer) process.

Start-up refuses, with a message naming the problem and exit code 1, a bad
configuration, an unformatted metadata directory or one formatted for another
node id, and a log or quorum-state file that fails its checks. At run time the
process exits (code 3) when a majority of the voters reject its cluster id, and
(code 4) when its log cannot be flushed, and (code 5) when a committed record
cannot be applied (an unknown record version, or a record that contradicts the
image: skipping it would silently fork this replica). SIGTERM or SIGINT stop it gracefully: a
leader first hands over with EndQuorumEpoch.

Data layout under `metadata.log.dir` (Kafka's names where Kafka has them):

    meta.properties                    cluster.id, node.id, version
    __cluster_metadata-0/              log segments, index, epoch cache, quorum-state
    __cluster_metadata-0/snapshots/    RocksDB snapshots
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

import grpc

from quorum.common import process
from quorum.common.channels import ListenerError
from quorum.common.config import BOOTSTRAP_SERVERS_KEY, bootstrap_ids
from quorum.common.meta_properties import (
    StorageFormatError,
    check_directory,
    ensure_directory_id,
)
from quorum.controller.controller import QuorumController
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.rate_limit import RateLimiter
from quorum.controller.record_codec import only_noop
from quorum.controller_config import ControllerConfig, load_config
from quorum.log.errors import StorageError
from quorum.log.file_log import FileLogStore
from quorum.log.kraft_bootstrap import read_kraft_version
from quorum.log.quorum_state import FileQuorumStateStore
from quorum.log.retention import LogRetention
from quorum.raft.config import RaftConfig
from quorum.rpc.servers import mute_shutdown_cancellations
from quorum.server.access import AccessControl
from quorum.server.admin_servicer import ControllerCalls
from quorum.server.broker_servicer import add_servicers
from quorum.server.controller_metrics import ControllerCollector, cancel
from quorum.server.describe_quorum import describe_quorum
from quorum.server.driver import RaftDriver
from quorum.server.kraft_upgrade import KraftVersionChanges
from quorum.server.listener_risk import listener_warning
from quorum.server.metrics import MetricsServer
from quorum.server.node_runtime import QuorumNode
from quorum.server.poll_idle import PollIdleRatio
from quorum.server.voter_addresses import VoterAddresses
from quorum.server.voter_identity import voter_identity
from snapshots.errors import SnapshotCorruptionError
from snapshots.policy import SnapshotPolicy
from snapshots.store import FileSnapshotStore

log = logging.getLogger("quorum.controller")

LOG_PARTITION_DIR = "__cluster_metadata-0"
PROG = "quorum-controller"
EXIT_STARTUP = process.EXIT_STARTUP
EXIT_FOREIGN_CLUSTER = 3
EXIT_STORAGE_FAILED = 4
EXIT_APPLY_FAILED = 5
SWITCH_INTERVAL_S = 0.0002


class ControllerProcess:
    """The process's parts, opened in order and closed in reverse."""

    def __init__(self, config: ControllerConfig, cluster_id: str, directory_id: str = "") -> None:
        self.config = config
        self.cluster_id = cluster_id
        self.directory_id = directory_id
        partition_dir = config.metadata_log_dir / LOG_PARTITION_DIR
        self.log_store = FileLogStore(
            partition_dir,
            segment_bytes=config.log_segment_bytes,
            retention=LogRetention(config.max_retention_bytes, config.max_retention_ms),
        )
        try:
            state_store = FileQuorumStateStore(
                partition_dir / "quorum-state", cluster_id, config.node_id
            )
            snapshot_store = FileSnapshotStore(partition_dir / "snapshots", archive_on_write=True)
            self.image = MetadataImage()
            image = self.image
            self.access = AccessControl(
                config.authorizer,
                lambda: image.acls.values(),
                lambda topic_id: t.name if (t := image.topics_by_id.get(topic_id)) else None,
                RateLimiter(config.admin_rate_per_client, config.admin_burst_per_client),
            )
            kraft_version = read_kraft_version(config.metadata_log_dir)
            bootstrap = dict(
                zip(
                    bootstrap_ids(len(config.bootstrap_servers)),
                    config.bootstrap_servers,
                    strict=True,
                )
            )
            raft_config = RaftConfig(
                config.node_id,
                frozenset(config.voters),
                election_timeout_ms=config.election_timeout_ms,
                fetch_timeout_ms=config.fetch_timeout_ms,
                election_backoff_max_ms=config.election_backoff_max_ms,
                fetch_max_wait_ms=config.fetch_max_wait_ms,
                max_epoch_jump=config.max_epoch_jump,
                kraft_version=kraft_version,
                directory_id=directory_id,
                bootstrap_ids=frozenset(bootstrap),
            )
            peers = {
                node: endpoint.address()
                for node, endpoint in (*config.voters.items(), *bootstrap.items())
            }
            self.node = QuorumNode(
                raft_config,
                config.listener.address(),
                peers,
                cluster_id,
                self.log_store,
                state_store,
                snapshot_store,
                config.request_timeout_ms,
                validate_record=only_noop,
                add_services=self._add_admin_services,
                max_request_bytes=config.request_limits.socket_request_max_bytes,
                directory_id=directory_id,
                tls=config.tls,
                access=self.access,
                identity=voter_identity(config.voters, config.voter_principals, config.tls),
                snapshot_retain_count=config.snapshot_retain_count,
                applied_state=self.image,
                advertised=config.advertised.address(),
            )
            self.node.driver.poll_idle = PollIdleRatio(
                config.metrics_sample_window_ms / 1000, config.metrics_num_samples
            )
            # The formatted version, or 1 found in the log (a runtime upgrade).
            if config.bootstrap_servers and self.node.driver.core.kraft_version == 0:
                raise StorageFormatError(
                    f"{BOOTSTRAP_SERVERS_KEY} needs kraft.version 1 (the voters live in the log), "
                    f"but {config.metadata_log_dir} is at kraft.version 0 (static "
                    "controller.quorum.voters): format it with --standalone, "
                    "--initial-controllers or --no-initial-controllers, or upgrade the "
                    "cluster with `quorumctl features upgrade --feature kraft.version=1`"
                )
        except BaseException:
            self.log_store.close()
            raise
        self.metrics = MetricsServer(self.node.driver)
        self.controller_metrics = ControllerCollector(self.controller.view, self.metrics.registry)
        self.metrics.build_info(
            cluster_id=cluster_id,
            node_id=str(config.node_id),
            process_roles=",".join(config.process_roles),
        )
        self.metrics.registry.register(self.access)
        self.metrics.registry.register(self.node.driver.refusals)
        self.exit_code = 0
        self.stopping = asyncio.Event()

    async def run(self) -> int:
        process.stop_on_signals(self.stopping.set)
        self.node.transport.on_foreign_cluster = self._foreign_cluster
        self.node.driver.on_fatal.append(self._storage_failed)
        self.node.driver.on_apply_failed.append(self._apply_failed)
        try:
            metrics_at = process.start_metrics(
                self.metrics, self.config.metrics_listener, self.config.metrics_tls
            )
        except ListenerError as err:
            self.log_store.close()
            return process.cannot_start(PROG, err)
        await self.node.start()
        background = [
            asyncio.ensure_future(self.controller_metrics.refresh_forever()),
            asyncio.ensure_future(self.controller.rebalance_forever()),
            asyncio.ensure_future(self.controller.fence_expired_forever()),
            asyncio.ensure_future(self.controller.snapshot_forever()),
        ]
        role = "voter" if self.node.driver.core.is_voter else "observer"
        listener = self.config.listener
        risk = listener_warning(listener.host, listener.address(), self.config.tls)
        if risk is not None:
            log.warning("%s", risk)
        security = "SSL" if self.config.tls else "PLAINTEXT"
        if self.config.tls:
            security += f" (ssl.client.auth={self.config.tls.client_auth.value})"
        if self.config.authorizer.enabled:
            security += (
                f", StandardAuthorizer with super.users "
                f"{';'.join(sorted(self.config.authorizer.super_users)) or '(none)'}"
            )
        log.info(
            "controller %d (%s) of cluster %s listening on %s %s, metrics %s, voters %s",
            self.config.node_id,
            role,
            self.cluster_id,
            security,
            self.config.listener.address(),
            metrics_at,
            ",".join(f"{n}@{e.address()}" for n, e in sorted(self.config.voters.items()))
            or "from the log, found through controller.quorum.bootstrap.servers "
            + ",".join(e.address() for e in self.config.bootstrap_servers),
        )
        try:
            await self.stopping.wait()
        finally:
            graceful = self.exit_code == 0
            log.info("stopping controller %d", self.config.node_id)
            for task in background:
                await cancel(task)
            mute_shutdown_cancellations()
            await self.node.stop(resign=graceful)
            self.metrics.stop()
            self.log_store.close()
        return self.exit_code

    def _foreign_cluster(self, peers: set[int]) -> None:
        log.critical(
            "voters %s reject cluster id %s: this node was formatted for another cluster "
            "(check %s)",
            sorted(peers),
            self.cluster_id,
            self.config.metadata_log_dir / "meta.properties",
        )
        self.exit_code = EXIT_FOREIGN_CLUSTER
        self.stopping.set()

    def _add_admin_services(self, server: grpc.aio.Server, driver: RaftDriver) -> list[str]:
        static = {node: e.address() for node, e in self.config.voters.items()}
        addresses = VoterAddresses(static, driver.core.current_voter_set)
        self.controller = QuorumController(
            driver,
            self.image,
            self.cluster_id,
            addresses,
            session_timeout_s=self.config.broker_session_timeout_ms / 1000,
            limits=self.config.request_limits,
            snapshot_policy=SnapshotPolicy(
                self.config.snapshot_max_new_record_bytes, self.config.snapshot_max_interval_ms
            ),
        )
        return add_servicers(
            server,
            ControllerCalls(self.controller, addresses, self.access),
            lambda include_digest: describe_quorum(
                driver, addresses, include_digest, self.directory_id
            ),
            driver.read_snapshot_chunk,
            KraftVersionChanges(
                driver,
                self.config.request_timeout_ms / 1000 * 5,
                self.config.voters,
                self.directory_id,
                self.cluster_id,
                self.config.tls,
                voter_identity(self.config.voters, self.config.voter_principals, self.config.tls),
            ),
        )

    def _storage_failed(self, reason: str) -> None:
        self.exit_code = EXIT_STORAGE_FAILED
        self.stopping.set()

    def _apply_failed(self, reason: str) -> None:
        """An unknown record version or a record that contradicts the image."""
        self.exit_code = EXIT_APPLY_FAILED
        self.stopping.set()


def main(argv: list[str] | None = None) -> int:
    parser = process.argument_parser(
        PROG,
        "Run one KRaft-style controller (a Raft voter) or observer.",
        "the controller's properties file",
        "data/config/controller-1.properties",
    )
    args = parser.parse_args(argv)
    config = process.load_config(PROG, load_config, args.config)
    if config is None:
        return EXIT_STARTUP
    process.configure_logging(config.log_level, f"node {config.node_id}")
    log_configuration(config)
    # The log's fsyncs run in a worker thread; with CPython's default 5 ms switch
    # interval a finished fsync can wait that long for the loop to let go of the
    # GIL, which would put 5 ms on every commit.
    sys.setswitchinterval(SWITCH_INTERVAL_S)
    process.tune_collector()
    return asyncio.run(_start_and_run(config))


def log_configuration(config: ControllerConfig) -> None:
    """The effective configuration, defaults included, as Kafka logs its
    `KafkaConfig values:` at start-up (what the node runs with, not what the file
    says); then one WARN line naming the Kafka keys the file sets and this
    controller ignores."""
    values = "".join(f"\n\t{k} = {v}" for k, v in sorted(config.as_properties().items()))
    log.info("ControllerConfig values (from %s):%s", config.source or "defaults", values)
    if config.ignored_keys:
        log.warning(
            "ignoring %d Kafka properties this controller does not use: %s",
            len(config.ignored_keys),
            ", ".join(config.ignored_keys),
        )


async def _start_and_run(config: ControllerConfig) -> int:
    # gRPC's asyncio objects belong to the loop they are made on: build inside it.
    try:
        meta = check_directory(Path(config.metadata_log_dir), config.node_id)
        meta = ensure_directory_id(Path(config.metadata_log_dir), meta)
        controller = ControllerProcess(config, meta.cluster_id, meta.directory_id or "")
    except (StorageFormatError, StorageError, SnapshotCorruptionError, ListenerError) as err:
        return process.cannot_start(PROG, err)
    return await controller.run()


if __name__ == "__main__":
    sys.exit(main())
