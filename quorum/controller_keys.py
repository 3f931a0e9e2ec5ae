"""The controller's key set: every property it reads, as declared tables.

Adding an integer key is one line in `INT_KEYS` (plus the `ControllerConfig`
field it fills, which a test checks): parsing, bounds, the effective-config
dump, "did you mean" and the table in docs/configuration.md (`int_key_table`) follow. Kafka keys
this product does not use are listed in `KAFKA_IGNORED_KEYS` (accepted, named in
one WARN line). Parsing a file into a `ControllerConfig` is
`quorum.controller_config`.
"""

from __future__ import annotations

from quorum.authz.authorizer import AUTHORIZER_KEYS
from quorum.common.config import LONG_MAX, MIN_SEGMENT_BYTES, IntKey
from quorum.common.metrics_tls import CLIENT_AUTH_KEY as METRICS_CLIENT_AUTH_KEY
from quorum.common.tls import SERVER_KEYS as TLS_KEYS
from quorum.controller.request_limits import PROPERTIES as LIMIT_PROPERTIES

_DAY_MS = 24 * 3600 * 1000


INT_KEYS: tuple[IntKey, ...] = (
    IntKey("controller.quorum.election.timeout.ms", "election_timeout_ms", 1000, 1),
    IntKey("controller.quorum.fetch.timeout.ms", "fetch_timeout_ms", 2000, 1),
    IntKey("controller.quorum.election.backoff.max.ms", "election_backoff_max_ms", 1000, 1),
    IntKey("controller.quorum.request.timeout.ms", "request_timeout_ms", 2000, 1),
    IntKey("controller.quorum.retry.backoff.ms", "retry_backoff_ms", 20, 0),
    IntKey("controller.quorum.fetch.max.wait.ms", "fetch_max_wait_ms", 500, 0,
           doc="how long the leader holds an idle fetch", kafka=False),
    IntKey("controller.quorum.max.epoch.jump", "max_epoch_jump", 10_000, 1, kafka=False,
           doc="a request may move a node at most this many epochs above its last "
               "log entry's (see Security)"),
    IntKey("metadata.log.segment.bytes", "log_segment_bytes", 1 << 30, MIN_SEGMENT_BYTES),
    IntKey("metadata.log.segment.ms", "log_segment_ms", 7 * _DAY_MS, 1, LONG_MAX),
    IntKey("metadata.max.retention.bytes", "max_retention_bytes", 100 << 20, -1, LONG_MAX,
           doc="segments wholly below the latest snapshot; -1: unlimited"),
    IntKey("metadata.max.retention.ms", "max_retention_ms", 7 * _DAY_MS, -1, LONG_MAX,
           doc="-1: unlimited"),
    IntKey("metadata.snapshot.max.new.record.bytes", "snapshot_max_new_record_bytes",
           20 << 20, 1, LONG_MAX),
    IntKey("metadata.snapshot.max.interval.ms", "snapshot_max_interval_ms", 3600 * 1000, 0,
           LONG_MAX, doc="0 disables time-based snapshots"),
    IntKey("metadata.snapshot.retain.count", "snapshot_retain_count", 2, 1,
           doc="snapshots kept, newest first; the log starts after the oldest", kafka=False),
    IntKey("broker.session.timeout.ms", "broker_session_timeout_ms", 9000, 1,
           doc="a broker whose MetadataFetch heartbeats stop this long is fenced"),
    IntKey("admin.request.rate.per.client", "admin_rate_per_client", 0, 0, kafka=False,
           doc="admin calls a second per client (principal, else host); 0: unlimited"),
    IntKey("admin.request.burst.per.client", "admin_burst_per_client", 0, 0, kafka=False,
           doc="admin calls a client may make at once; 0: one second's worth"),
    IntKey("metrics.sample.window.ms", "metrics_sample_window_ms", 30000, 1,
           doc="one sample of the windowed metrics (`quorum_raft_poll_idle_ratio`)"),
    IntKey("metrics.num.samples", "metrics_num_samples", 2, 1, 100,
           doc="samples kept: the window covers `num.samples` - 1 to `num.samples` of them"),
)  # fmt: skip


# The keys parsed by hand (structure rather than one number each).
_STRUCTURAL_KAFKA_KEYS = (
    "node.id",
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "listeners",
    "controller.listener.names",
    "metadata.log.dir",
    *TLS_KEYS,
    *AUTHORIZER_KEYS,
)


VOTER_PRINCIPALS_KEY = "controller.quorum.voter.principals"


_STRUCTURAL_OUR_KEYS = (
    "metrics.listener",
    METRICS_CLIENT_AUTH_KEY,
    "log.level",
    VOTER_PRINCIPALS_KEY,
)


KAFKA_KEYS: tuple[str, ...] = _STRUCTURAL_KAFKA_KEYS + tuple(k.name for k in INT_KEYS if k.kafka)


OUR_KEYS: tuple[str, ...] = _STRUCTURAL_OUR_KEYS + tuple(k.name for k in INT_KEYS if not k.kafka)


KNOWN_KEYS: tuple[str, ...] = KAFKA_KEYS + OUR_KEYS + tuple(p.key for p in LIMIT_PROPERTIES)


# Keys Kafka's brokers and controllers define that this product does not use: a
# real Kafka controller.properties (or a combined-mode server.properties) carries
# them, and refusing each in turn makes an operator edit the file once per key.
# They are accepted and named in one WARN line. A curated list of the common ones,
# not all of Kafka's; anything else is still an unknown key ("did you mean"), and
# so is zookeeper.connect: a ZooKeeper-mode file is the wrong file, not a detail.
# Security keys this product does not implement (JKS stores, SASL, a custom
# principal builder) are never ignored: an operator who set them expects
# protection that would silently be missing, so they stay errors.
# `log.dirs` and `log.dir` are used: they stand in for an absent metadata.log.dir.
LOG_DIRS_KEYS = ("log.dirs", "log.dir")


KAFKA_IGNORED_KEYS: tuple[str, ...] = (
    # listeners, security and networking
    "advertised.listeners",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
    "num.network.threads",
    "num.io.threads",
    "num.replica.fetchers",
    "num.recovery.threads.per.data.dir",
    "background.threads",
    "queued.max.requests",
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "socket.listen.backlog.size",
    "connections.max.idle.ms",
    "max.connections",
    "max.connections.per.ip",
    "request.timeout.ms",
    "reserved.broker.max.id",
    "ssl.endpoint.identification.algorithm",
    # the data plane: topics, partitions and their logs
    "num.partitions",
    "default.replication.factor",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "auto.create.topics.enable",
    "delete.topic.enable",
    "offsets.topic.replication.factor",
    "offsets.topic.num.partitions",
    "transaction.state.log.replication.factor",
    "transaction.state.log.min.isr",
    "group.initial.rebalance.delay.ms",
    "log.retention.hours",
    "log.retention.minutes",
    "log.retention.ms",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.segment.bytes",
    "log.segment.ms",
    "log.roll.hours",
    "log.roll.ms",
    "log.cleanup.policy",
    "log.cleaner.enable",
    "log.cleaner.threads",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "log.message.timestamp.type",
    "message.max.bytes",
    "replica.lag.time.max.ms",
    "replica.fetch.max.bytes",
    "compression.type",
    "auto.leader.rebalance.enable",
    "leader.imbalance.check.interval.seconds",
    "leader.imbalance.per.broker.percentage",
    # broker registration and metadata handling this product does its own way
    "broker.id",
    "broker.rack",
    "broker.heartbeat.interval.ms",
    "controlled.shutdown.enable",
    "controller.quorum.append.linger.ms",
    "metadata.log.max.record.bytes.between.snapshots",
    "metadata.max.idle.interval.ms",
    "initial.broker.registration.timeout.ms",
    "metric.reporters",
    "metrics.recording.level",
    "group.coordinator.rebalance.protocols",
    "share.coordinator.state.topic.replication.factor",
    "share.coordinator.state.topic.min.isr",
)


def int_key_table() -> str:
    """The table of integer keys in docs/configuration.md, rendered from `INT_KEYS`."""
    rows = ["| key | default | range | |", "|-----|---------|-------|--|"]
    for k in INT_KEYS:
        note = k.doc if k.kafka else f"ours: {k.doc}"
        rows.append(f"| `{k.name}` | {k.default} | {k.minimum}..{k.maximum} | {note} |")
    return "\n".join(rows) + "\n"
