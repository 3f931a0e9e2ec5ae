"""The broker agent's configuration: a properties file in Kafka's broker conventions.

Kafka's keys (same meaning, same default):

=============================================  =========================================
``node.id``                                    required, >= 0 (the broker id)
``process.roles``                              required: ``broker``
``controller.quorum.voters``                   required: the controllers to fetch from
``controller.quorum.bootstrap.servers``        instead of the voters (KIP-853): host:port,...
                                               of controllers to find the active one through
``listeners``                                  required: ``NAME://host:port[,...]``, the
                                               Kafka protocol listeners (PLAINTEXT; see below)
``advertised.listeners``                       the listeners: what the registration sends
                                               and Metadata answers hand to clients
``socket.request.max.bytes``                   104857600: a larger request frame closes
                                               its connection
``connections.max.idle.ms``                    600000: an idle Kafka connection is closed
``metadata.log.dir``                           required: the local metadata cache
``broker.rack``                                unset
``broker.heartbeat.interval.ms``               2000: the longest a caught-up MetadataFetch
                                               is parked (it returns at once on a commit)
``broker.session.timeout.ms``                  9000: without a successful fetch this long
                                               the agent counts itself FENCED
``metadata.log.segment.bytes``                 1 GiB
``metadata.snapshot.max.new.record.bytes``     20 MiB: the cache snapshots itself too
``metadata.snapshot.max.interval.ms``          1 hour
``log.dirs``                                   the metadata.log.dir: where partition
                                               replicas live (``topic-partition``);
                                               the first directory is used
``replica.lag.time.max.ms``                    30000: an ISR follower not caught up
                                               with the leader's LEO this long is removed
``replica.fetch.max.bytes``                    1048576: what a follower asks per partition
                                               in a fetch (the first batch comes whole)
``replica.fetch.wait.max.ms``                  500: how long a leader parks a
                                               follower's fetch that finds nothing new
``num.recovery.threads.per.data.dir``          1: threads opening replicas' logs (at
                                               start-up, and those a metadata change adds)
``min.insync.replicas``                        1: acks=all needs an ISR this large
``message.max.bytes``                          1048588: the largest record batch
``log.segment.bytes``                          1 GiB
``log.retention.ms``                           7 days (-1: no limit)
``log.retention.bytes``                        -1: no limit
``log.flush.interval.messages``                Long.MAX: no fsync per batch, as in
                                               Kafka: durability comes from replication
``log.flush.interval.ms``                      Long.MAX
``group.min.session.timeout.ms``               6000: the shortest session a group member
                                               may ask for (INVALID_SESSION_TIMEOUT)
``group.max.session.timeout.ms``               1800000: the longest
``group.initial.rebalance.delay.ms``           3000: an empty group waits this long for
                                               more members before its first rebalance
``group.max.size``                             Int.MAX: members per group
``offsets.topic.num.partitions``               50: partitions of ``__consumer_offsets``
``offsets.topic.replication.factor``           3: capped at the live brokers (a WARN)
``offsets.topic.segment.bytes``                104857600: its segments (it is compacted)
``offsets.retention.minutes``                  10080: an empty group's offsets expire
``offsets.commit.timeout.ms``                  5000: an offsets write waits this long
                                               for acks=all
``offset.metadata.max.bytes``                  4096: a commit's metadata string
``log.roll.ms``                                7 days: the active segment is closed this
                                               long after its first batch (``segment.ms``)
``log.cleanup.policy``                         delete: or compact, or compact,delete
``log.cleaner.enable``                         true: compaction runs on this broker
``log.cleaner.dedupe.buffer.size``             128 MiB: the key -> offset map's memory
``log.cleaner.io.buffer.load.factor``          0.9: the map counts as full this full
``log.cleaner.backoff.ms``                     15000: the pause when nothing needs cleaning
``log.cleaner.io.max.bytes.per.second``        Long.MAX: the cleaner's read throttle
``log.cleaner.min.cleanable.ratio``            0.5 (``min.cleanable.dirty.ratio``)
``log.cleaner.min.compaction.lag.ms``          0 (``min.compaction.lag.ms``)
``log.cleaner.max.compaction.lag.ms``          Long.MAX (``max.compaction.lag.ms``)
``log.cleaner.delete.retention.ms``            1 day (``delete.retention.ms``): how long
                                               a tombstone outlives its first cleaning
``auto.create.topics.enable``                  true: a Metadata request allowing it creates
                                               unknown topics through the controller
``num.partitions``                             unset: the partitions of an auto-created
                                               topic (unset: the cluster's num.partitions)
``default.replication.factor``                 unset: its replication factor (unset: the
                                               cluster's default.replication.factor)
=============================================  =========================================

Topic configs (``min.insync.replicas``, ``max.message.bytes``, ``retention.ms``,
``retention.bytes``, ``segment.bytes``, ``segment.ms``, ``flush.messages``, ``flush.ms``,
``cleanup.policy``, ``min.cleanable.dirty.ratio``, ``min.compaction.lag.ms``,
``max.compaction.lag.ms``, ``delete.retention.ms``) override these per topic.
``log.cleaner.threads`` (1): rounds run at once (asyncio tasks on the broker's loop,
so a long round on one partition does not hold up the others; no more CPU). Each
has ``log.cleaner.dedupe.buffer.size / threads`` for its key map and they share
``log.cleaner.io.max.bytes.per.second``, as in Kafka.

Ours:

=============================================  =========================================
``controlled.shutdown.timeout.ms``             30000: SIGTERM waits this long for the
                                               controller to finish the shutdown
``metrics.listener``                           unset: ``http://host:port`` for Prometheus,
                                               or ``https://`` with the ssl.* certificate
``metrics.listener.ssl.client.auth``           none: or required / requested (scrapers'
                                               certificates, `quorum.common.metrics_tls`)
``log.level``                                  INFO
=============================================  =========================================

TLS to the controllers (`quorum.common.tls`), Kafka's keys: the protocol of the
``CONTROLLER`` listener in ``listener.security.protocol.map`` (e.g.
``PLAINTEXT:PLAINTEXT,CONTROLLER:SSL``), ``ssl.ca.location`` (required with SSL),
and ``ssl.certificate.location`` / ``ssl.key.location`` for mTLS: the broker's
principal is its certificate's subject, e.g. ``User:CN=broker-101``.

A broker agent's file is told apart from a controller observer's (also
``process.roles=broker``) by its listener: a broker listens on a non-CONTROLLER one.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from quorum.authz.authorizer import AUTHORIZER_KEYS, AuthorizerConfig, authorizer_from
from quorum.common.config import (
    LONG_MAX,
    MIN_SEGMENT_BYTES,
    ConfigError,
    Endpoint,
    IntSpec,
    host_port,
    integer,
    known_properties,
    log_level,
    quorum_endpoints,
    read_properties,
    url,
)
from quorum.common.metrics_tls import CLIENT_AUTH_KEY as METRICS_CLIENT_AUTH_KEY
from quorum.common.metrics_tls import MetricsTls, metrics_tls_from
from quorum.common.tls import (
    CA_KEY,
    CERT_KEY,
    CLIENT_AUTH_KEY,
    KEY_KEY,
    PLAINTEXT,
    PROTOCOL_MAP_KEY,
    SSL,
    ClientAuth,
    TlsConfigError,
    TlsSettings,
    security_protocol,
    tls_from_properties,
)
from quorum.common.tls import SERVER_KEYS as TLS_KEYS

KEYS: tuple[str, ...] = (
    "node.id",
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "listeners",
    "advertised.listeners",
    "socket.request.max.bytes",
    "connections.max.idle.ms",
    "metadata.log.dir",
    "broker.rack",
    "broker.heartbeat.interval.ms",
    "broker.session.timeout.ms",
    "metadata.log.segment.bytes",
    "metadata.snapshot.max.new.record.bytes",
    "metadata.snapshot.max.interval.ms",
    "controlled.shutdown.timeout.ms",
    "log.dirs",
    "replica.lag.time.max.ms",
    "replica.fetch.max.bytes",
    "replica.fetch.wait.max.ms",
    "num.recovery.threads.per.data.dir",
    "min.insync.replicas",
    "message.max.bytes",
    "log.segment.bytes",
    "log.retention.ms",
    "log.retention.bytes",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
    "group.min.session.timeout.ms",
    "group.max.session.timeout.ms",
    "group.initial.rebalance.delay.ms",
    "group.max.size",
    "offsets.topic.num.partitions",
    "offsets.topic.replication.factor",
    "offsets.topic.segment.bytes",
    "offsets.retention.minutes",
    "offsets.commit.timeout.ms",
    "offset.metadata.max.bytes",
    "log.roll.ms",
    "log.cleanup.policy",
    "log.cleaner.enable",
    "log.cleaner.dedupe.buffer.size",
    "log.cleaner.io.buffer.load.factor",
    "log.cleaner.backoff.ms",
    "log.cleaner.io.max.bytes.per.second",
    "log.cleaner.min.cleanable.ratio",
    "log.cleaner.min.compaction.lag.ms",
    "log.cleaner.max.compaction.lag.ms",
    "log.cleaner.delete.retention.ms",
    "log.cleaner.threads",
    "auto.create.topics.enable",
    "num.partitions",
    "default.replication.factor",
    "metrics.listener",
    METRICS_CLIENT_AUTH_KEY,
    "log.level",
    "inter.broker.listener.name",
    *AUTHORIZER_KEYS,
    *TLS_KEYS,
)

# The smallest key map a cleaner thread gets (the buffer's own minimum).
MIN_DEDUPE_SHARE = 1024

_INTS: dict[str, IntSpec] = {
    "broker.heartbeat.interval.ms": IntSpec("heartbeat_interval_ms", 2000, 1),
    "broker.session.timeout.ms": IntSpec("session_timeout_ms", 9000, 1),
    "metadata.log.segment.bytes": IntSpec("segment_bytes", 1 << 30, MIN_SEGMENT_BYTES),
    "metadata.snapshot.max.new.record.bytes": IntSpec(
        "snapshot_max_new_record_bytes", 20 << 20, 1, LONG_MAX
    ),
    "metadata.snapshot.max.interval.ms": IntSpec(
        "snapshot_max_interval_ms", 3600 * 1000, 0, LONG_MAX
    ),
    "controlled.shutdown.timeout.ms": IntSpec("shutdown_timeout_ms", 30_000, 1),
    "socket.request.max.bytes": IntSpec("socket_request_max_bytes", 104_857_600, 1),
    "connections.max.idle.ms": IntSpec("connections_max_idle_ms", 600_000, 1, LONG_MAX),
    "replica.lag.time.max.ms": IntSpec("replica_lag_time_max_ms", 30_000, 1, LONG_MAX),
    "replica.fetch.max.bytes": IntSpec("replica_fetch_max_bytes", 1024 * 1024, 0),
    "replica.fetch.wait.max.ms": IntSpec("replica_fetch_wait_max_ms", 500, 0),
    "num.recovery.threads.per.data.dir": IntSpec("num_recovery_threads_per_data_dir", 1, 1, 64),
    "min.insync.replicas": IntSpec("min_insync_replicas", 1, 1),
    "message.max.bytes": IntSpec("message_max_bytes", 1024 * 1024 + 12, 0),
    "log.segment.bytes": IntSpec("log_segment_bytes", 1 << 30, MIN_SEGMENT_BYTES),
    "log.retention.ms": IntSpec("log_retention_ms", 7 * 24 * 3600 * 1000, -1, LONG_MAX),
    "log.retention.bytes": IntSpec("log_retention_bytes", -1, -1, LONG_MAX),
    "log.flush.interval.messages": IntSpec("log_flush_interval_messages", LONG_MAX, 1, LONG_MAX),
    "log.flush.interval.ms": IntSpec("log_flush_interval_ms", LONG_MAX, 0, LONG_MAX),
    # The group coordinator (broker_agent/groups), Kafka's names and defaults.
    "group.min.session.timeout.ms": IntSpec("group_min_session_timeout_ms", 6_000, 0),
    "group.max.session.timeout.ms": IntSpec("group_max_session_timeout_ms", 1_800_000, 0),
    "group.initial.rebalance.delay.ms": IntSpec("group_initial_rebalance_delay_ms", 3_000, 0),
    "group.max.size": IntSpec("group_max_size", 2**31 - 1, 1),
    "offsets.topic.num.partitions": IntSpec("offsets_topic_num_partitions", 50, 1),
    "offsets.topic.replication.factor": IntSpec("offsets_topic_replication_factor", 3, 1),
    "offsets.topic.segment.bytes": IntSpec(
        "offsets_topic_segment_bytes", 100 * 1024 * 1024, MIN_SEGMENT_BYTES
    ),
    "offsets.retention.minutes": IntSpec("offsets_retention_minutes", 7 * 24 * 60, 1),
    "offsets.commit.timeout.ms": IntSpec("offsets_commit_timeout_ms", 5_000, 1),
    "offset.metadata.max.bytes": IntSpec("offset_metadata_max_bytes", 4096, 0),
    "log.roll.ms": IntSpec("log_roll_ms", 7 * 24 * 3600 * 1000, 1, LONG_MAX),
    "log.cleaner.dedupe.buffer.size": IntSpec(
        "log_cleaner_dedupe_buffer_size", 128 << 20, MIN_DEDUPE_SHARE
    ),
    "log.cleaner.backoff.ms": IntSpec("log_cleaner_backoff_ms", 15_000, 0, LONG_MAX),
    "log.cleaner.io.max.bytes.per.second": IntSpec(
        "log_cleaner_io_max_bytes_per_second", LONG_MAX, 1, LONG_MAX
    ),
    "log.cleaner.min.compaction.lag.ms": IntSpec(
        "log_cleaner_min_compaction_lag_ms", 0, 0, LONG_MAX
    ),
    "log.cleaner.max.compaction.lag.ms": IntSpec(
        "log_cleaner_max_compaction_lag_ms", LONG_MAX, 1, LONG_MAX
    ),
    "log.cleaner.delete.retention.ms": IntSpec(
        "log_cleaner_delete_retention_ms", 24 * 3600 * 1000, 0, LONG_MAX
    ),
    # Accepted so a Kafka broker's file loads; one asyncio task cleans whatever it says.
    "log.cleaner.threads": IntSpec("log_cleaner_threads", 1, 1),
    "num.partitions": IntSpec("num_partitions", -1, 1),
    "default.replication.factor": IntSpec("default_replication_factor", -1, 1),
}


def _ratio(props: Mapping[str, str], key: str, default: float) -> float:
    raw = props.get(key)
    if raw is None:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(key, f"must be a number between 0 and 1, got {raw!r}") from None
    if not 0.0 <= value <= 1.0:
        raise ConfigError(key, f"must be a number between 0 and 1, got {raw!r}")
    return value


def _cleanup_policy(props: Mapping[str, str]) -> str:
    raw = props.get("log.cleanup.policy", "delete")
    items = [v.strip() for v in raw.split(",") if v.strip()]
    if not items or any(v not in ("delete", "compact") for v in items):
        raise ConfigError("log.cleanup.policy", f"must be delete, compact or both, got {raw!r}")
    return ",".join(items)


@dataclass(frozen=True)
class KafkaTls:
    """The SSL Kafka listeners' certificate, key, trusted CAs and `ssl.client.auth`."""

    certificate_location: str
    key_location: str
    ca_location: str
    client_auth: ClientAuth = ClientAuth.NONE


@dataclass(frozen=True, kw_only=True)
class BrokerConfig:
    node_id: int
    controllers: dict[int, Endpoint]
    # `controller.quorum.bootstrap.servers` (KIP-853), set instead of the voters:
    # where to reach the controllers; leader hints name the active one's address.
    bootstrap_servers: tuple[Endpoint, ...] = ()
    listener_name: str  # the first of `listeners`
    listener: Endpoint
    metadata_log_dir: Path
    rack: str | None
    heartbeat_interval_ms: int
    session_timeout_ms: int
    segment_bytes: int
    snapshot_max_new_record_bytes: int
    snapshot_max_interval_ms: int
    shutdown_timeout_ms: int
    log_dirs: tuple[Path, ...]
    replica_lag_time_max_ms: int
    min_insync_replicas: int
    message_max_bytes: int
    log_segment_bytes: int
    log_retention_ms: int
    log_retention_bytes: int
    log_flush_interval_messages: int
    log_flush_interval_ms: int
    log_roll_ms: int
    log_cleaner_dedupe_buffer_size: int
    log_cleaner_backoff_ms: int
    log_cleaner_io_max_bytes_per_second: int
    log_cleaner_min_compaction_lag_ms: int
    log_cleaner_max_compaction_lag_ms: int
    log_cleaner_delete_retention_ms: int
    log_cleaner_threads: int
    num_partitions: int
    default_replication_factor: int
    metrics_listener: Endpoint | None
    log_level: str
    socket_request_max_bytes: int = 104_857_600
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_wait_max_ms: int = 500
    num_recovery_threads_per_data_dir: int = 1
    connections_max_idle_ms: int = 600_000
    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = 2**31 - 1
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 100 * 1024 * 1024
    offsets_retention_minutes: int = 7 * 24 * 60
    offsets_commit_timeout_ms: int = 5_000
    offset_metadata_max_bytes: int = 4096
    tls: TlsSettings | None = None
    metrics_tls: MetricsTls | None = None
    log_cleanup_policy: str = "delete"
    log_cleaner_enable: bool = True
    log_cleaner_io_buffer_load_factor: float = 0.9
    log_cleaner_min_cleanable_ratio: float = 0.5
    # (name, endpoint) of every Kafka listener, and what each is advertised as.
    listeners: tuple[tuple[str, Endpoint], ...] = ()
    advertised_listeners: tuple[tuple[str, Endpoint], ...] = ()
    # The security protocol of each Kafka listener (PLAINTEXT or SSL), and the
    # SSL ones' TLS settings.
    listener_protocols: dict[str, str] = field(default_factory=dict)
    kafka_tls: KafkaTls | None = None
    auto_create_topics_enable: bool = True
    # The listener followers fetch from leaders on (Kafka's inter.broker.listener.name).
    inter_broker_listener: str = "PLAINTEXT"
    # Kafka's authorizer keys: ACLs from the metadata image decide the Kafka requests.
    authorizer: AuthorizerConfig = field(default_factory=AuthorizerConfig)

    @property
    def bootstrap(self) -> list[str]:
        if self.bootstrap_servers:
            return [e.address() for e in self.bootstrap_servers]
        return [e.address() for _, e in sorted(self.controllers.items())]


def listener_list(key: str, raw: str) -> tuple[tuple[str, Endpoint], ...]:
    """``NAME://host:port,...`` with distinct names."""
    out: list[tuple[str, Endpoint]] = []
    for item in (i.strip() for i in raw.split(",")):
        name, sep, rest = item.partition("://")
        name = name.strip().upper()
        if not sep or not name:
            raise ConfigError(key, f"must be NAME://host:port[,NAME://host:port], got {raw!r}")
        if any(n == name for n, _ in out):
            raise ConfigError(key, f"names the {name} listener twice")
        out.append((name, host_port(key, rest, any_host=True)))
    return tuple(out)


def load_broker_config(path: Path | str) -> BrokerConfig:
    return parse_broker_config(read_properties(Path(path)))


def parse_broker_config(props: Mapping[str, str]) -> BrokerConfig:
    props = known_properties(props, KEYS)
    node_id = integer(props, "node.id", IntSpec("node_id", -1, 0), required=True)
    if props.get("process.roles", "") != "broker":
        raise ConfigError("process.roles", "must be broker for a broker agent")
    controllers, bootstrap = quorum_endpoints(props)
    if node_id in controllers:
        raise ConfigError(
            "node.id", f"node.id {node_id} is a controller in controller.quorum.voters"
        )
    listeners = listener_list("listeners", props.get("listeners", ""))
    advertised = listeners
    if props.get("advertised.listeners", "").strip():
        advertised = listener_list("advertised.listeners", props["advertised.listeners"])
        names = {n for n, _ in listeners}
        for name, _ in advertised:
            if name not in names:
                raise ConfigError(
                    "advertised.listeners",
                    f"{name} is not one of the listeners ({props['listeners']})",
                )
    log_dir = props.get("metadata.log.dir", "")
    if not log_dir:
        raise ConfigError("metadata.log.dir", "is required: the broker's metadata cache")
    ints = {spec.field: integer(props, key, spec) for key, spec in _INTS.items()}
    if ints["heartbeat_interval_ms"] >= ints["session_timeout_ms"]:
        raise ConfigError(
            "broker.heartbeat.interval.ms",
            f"broker.heartbeat.interval.ms ({ints['heartbeat_interval_ms']}) must be below "
            f"broker.session.timeout.ms ({ints['session_timeout_ms']})",
        )
    if ints["replica_fetch_wait_max_ms"] > ints["replica_lag_time_max_ms"]:
        raise ConfigError(
            "replica.fetch.wait.max.ms",
            f"replica.fetch.wait.max.ms ({ints['replica_fetch_wait_max_ms']}) must not be above "
            f"replica.lag.time.max.ms ({ints['replica_lag_time_max_ms']}): a parked fetch "
            "would count as lag",
        )
    if ints["log_cleaner_dedupe_buffer_size"] // ints["log_cleaner_threads"] < MIN_DEDUPE_SHARE:
        raise ConfigError(
            "log.cleaner.dedupe.buffer.size",
            f"log.cleaner.dedupe.buffer.size ({ints['log_cleaner_dedupe_buffer_size']}) must "
            f"hold {MIN_DEDUPE_SHARE} bytes per cleaner thread "
            f"(log.cleaner.threads={ints['log_cleaner_threads']})",
        )
    raw_metrics = props.get("metrics.listener", "")
    try:
        protocols = {name: listener_protocol(props, name) for name, _ in listeners}
        kafka_tls = kafka_tls_from(props) if SSL in protocols.values() else None
        tls = tls_from_properties(controller_side(props, kafka_tls is not None), server=False)
        metrics_tls = metrics_tls_from(props, tls)
    except TlsConfigError as err:
        raise ConfigError(err.key, str(err)) from None
    return BrokerConfig(
        node_id=node_id,
        controllers=controllers,
        bootstrap_servers=bootstrap,
        listener_name=listeners[0][0],
        listener=listeners[0][1],
        listeners=listeners,
        advertised_listeners=advertised,
        metadata_log_dir=Path(log_dir),
        log_dirs=tuple(Path(d.strip()) for d in (props.get("log.dirs") or log_dir).split(",")),
        rack=props.get("broker.rack") or None,
        metrics_listener=url("metrics.listener", raw_metrics) if raw_metrics else None,
        log_level=log_level(props.get("log.level", "") or "INFO"),
        tls=tls,
        metrics_tls=metrics_tls,
        log_cleanup_policy=_cleanup_policy(props),
        log_cleaner_enable=boolean(props, "log.cleaner.enable", True),
        log_cleaner_io_buffer_load_factor=_ratio(props, "log.cleaner.io.buffer.load.factor", 0.9),
        log_cleaner_min_cleanable_ratio=_ratio(props, "log.cleaner.min.cleanable.ratio", 0.5),
        listener_protocols=protocols,
        kafka_tls=kafka_tls,
        auto_create_topics_enable=boolean(props, "auto.create.topics.enable", True),
        inter_broker_listener=inter_broker_listener(props, listeners, protocols),
        authorizer=authorizer_from(props),
        **ints,
    )


def boolean(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key, "").strip().lower()
    if not raw:
        return default
    if raw not in ("true", "false"):
        raise ConfigError(key, f"must be true or false, got {props[key]!r}")
    return raw == "true"


def inter_broker_listener(
    props: Mapping[str, str],
    listeners: tuple[tuple[str, Endpoint], ...],
    protocols: Mapping[str, str],
) -> str:
    """`inter.broker.listener.name`, else the first PLAINTEXT listener (Kafka's default
    security.inter.broker.protocol), else the first listener."""
    name = props.get("inter.broker.listener.name", "").strip().upper()
    names = [n for n, _ in listeners]
    if name:
        if name not in names:
            raise ConfigError(
                "inter.broker.listener.name", f"{name} is not one of the listeners {names}"
            )
        return name
    plaintext = [n for n in names if protocols.get(n) == PLAINTEXT]
    return plaintext[0] if plaintext else names[0]


def listener_protocol(props: Mapping[str, str], name: str) -> str:
    """A Kafka listener's security protocol: its `listener.security.protocol.map`
    entry, or else the name itself (PLAINTEXT, SSL) as in Kafka's default map
    (a map that names only CONTROLLER, as the TLS set-ups here write, leaves
    the broker's PLAINTEXT listener plaintext)."""
    mapped = {
        n.strip().upper(): p.strip().upper()
        for n, _, p in (e.partition(":") for e in props.get(PROTOCOL_MAP_KEY, "").split(","))
        if n.strip()
    }
    if name in mapped:
        return security_protocol(props, name)
    return SSL if name == SSL else PLAINTEXT


def kafka_tls_from(props: Mapping[str, str]) -> KafkaTls:
    """The SSL Kafka listeners' settings: a certificate and key always, the CA when
    clients must (required) or may (requested) present certificates."""
    for key in (CERT_KEY, KEY_KEY):
        if not props.get(key, "").strip():
            raise TlsConfigError(key, f"{key} is required for an SSL listener")
    raw_auth = props.get(CLIENT_AUTH_KEY, "").strip().lower() or ClientAuth.NONE.value
    try:
        client_auth = ClientAuth(raw_auth)
    except ValueError:
        raise TlsConfigError(
            CLIENT_AUTH_KEY, f"{CLIENT_AUTH_KEY} must be required, requested or none"
        ) from None
    if client_auth is not ClientAuth.NONE and not props.get(CA_KEY, "").strip():
        raise TlsConfigError(CA_KEY, f"{CA_KEY} is required with {CLIENT_AUTH_KEY}={raw_auth}")
    return KafkaTls(
        props[CERT_KEY].strip(), props[KEY_KEY].strip(), props.get(CA_KEY, "").strip(), client_auth
    )


def controller_side(props: Mapping[str, str], kafka_ssl: bool) -> dict[str, str]:
    """The keys that configure the connection to the controllers: `ssl.client.auth`
    belongs to the broker's own listeners, and with an SSL Kafka listener the
    certificate keys are its, so a PLAINTEXT CONTROLLER connection ignores them."""
    out = {k: v for k, v in props.items() if k != CLIENT_AUTH_KEY}
    if kafka_ssl and security_protocol(props) == PLAINTEXT:
        for key in (CERT_KEY, KEY_KEY, CA_KEY):
            out.pop(key, None)
    return out
