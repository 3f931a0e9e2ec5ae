"""The controller's key set: its properties file in Kafka's conventions.

Operators of Kafka's KRaft controllers already know these keys, so we read the
same file format with the same names and defaults instead of inventing our own.

The structural keys (``node.id``, ``process.roles``, ``controller.quorum.voters``,
``listeners``, ``controller.listener.names``, ``metadata.log.dir``, the TLS keys
``listener.security.protocol.map`` and ``ssl.*`` (`quorum.common.tls`), and ours,
``metrics.listener`` and ``log.level``) are parsed by hand; every integer key is
one line of `INT_KEYS` below (name, field, default, bounds, doc, Kafka's or
ours), from which parsing, the effective configuration and the docs' table
come. The admin request limits are `quorum.controller.request_limits`; the
framework (reading, `ConfigError`, value parsers) is `quorum.common.config`.

Everything is checked before the process does anything: an unknown key (with the
closest known one suggested, since a misspelt timeout would otherwise silently
fall back to its default), a key given twice in a file, a value the key does not
take, or settings that contradict each other raise `ConfigError`, whose `key`
names the offending property and whose message always contains it. Every
problem of a file is reported at once (`ConfigErrors`), so an operator bringing
a real Kafka `controller.properties` fixes it in one pass, not one run per key.

A key Kafka defines that this product does not use (`num.network.threads`,
`log.retention.hours`, ... in `KAFKA_IGNORED_KEYS`) is accepted and listed in
`ControllerConfig.ignored_keys`, which the process logs in one WARN line.
`log.dirs` (or `log.dir`) stands in for an absent `metadata.log.dir`, as in Kafka,
where the metadata log lives in the first log directory unless told otherwise.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from quorum.authz.authorizer import (
    NO_AUTHORIZER,
    STANDARD_AUTHORIZER,
    AuthorizerConfig,
    authorizer_from,
)
from quorum.common.config import (
    BOOTSTRAP_SERVERS_KEY,
    ConfigError,
    ConfigErrors,
    Endpoint,
    IntSpec,
    Problems,
    host_port,
    integer,
    log_level,
    quorum_endpoints,
    read_properties,
    render_properties,
    same_endpoint,
    unknown_key,
    url,
)
from quorum.common.metrics_tls import CLIENT_AUTH_KEY as METRICS_CLIENT_AUTH_KEY
from quorum.common.metrics_tls import MetricsTls, metrics_tls_from
from quorum.common.tls import (
    TlsConfigError,
    TlsSettings,
    plaintext_properties,
    tls_from_properties,
)
from quorum.controller.request_limits import DEFAULTS as DEFAULT_LIMITS
from quorum.controller.request_limits import PROPERTIES as LIMIT_PROPERTIES
from quorum.controller.request_limits import RequestLimits, default_of, limits_from
from quorum.controller_keys import (
    INT_KEYS,
    KAFKA_IGNORED_KEYS,
    KAFKA_KEYS,
    KNOWN_KEYS,
    LOG_DIRS_KEYS,
    OUR_KEYS,
    VOTER_PRINCIPALS_KEY,
    int_key_table,
)

__all__ = [
    "INT_KEYS",
    "KAFKA_IGNORED_KEYS",
    "KAFKA_KEYS",
    "KNOWN_KEYS",
    "OUR_KEYS",
    "ConfigError",
    "ConfigErrors",
    "ControllerConfig",
    "Endpoint",
    "int_key_table",
    "load_config",
    "parse_config",
    "read_properties",
    "render_properties",
]

T = TypeVar("T")

CONTROLLER = "controller"


BROKER = "broker"


DEFAULT_LISTENER_NAME = "CONTROLLER"


@dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    """One controller's (or observer's) validated settings.

    Keyword-only, because twenty integers in a row are too easy to misplace.
    """

    node_id: int
    process_roles: tuple[str, ...]
    voters: dict[int, Endpoint]
    listener: Endpoint
    advertised: Endpoint
    metadata_log_dir: Path
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    fetch_max_wait_ms: int
    max_epoch_jump: int = 10_000
    # `controller.quorum.bootstrap.servers` (KIP-853), set instead of `voters`:
    # addresses to learn the leader from; the voter set comes from the log.
    bootstrap_servers: tuple[Endpoint, ...] = ()
    # `controller.quorum.voter.principals`: the principal each voter's certificate
    # must carry under mTLS (`quorum.server.voter_identity`); unset ids default.
    voter_principals: dict[int, str] = field(default_factory=dict)
    metrics_listener: Endpoint | None = None
    metrics_tls: MetricsTls | None = None
    log_segment_bytes: int
    log_segment_ms: int
    max_retention_bytes: int
    max_retention_ms: int
    snapshot_max_new_record_bytes: int
    snapshot_max_interval_ms: int
    snapshot_retain_count: int
    broker_session_timeout_ms: int = 9000
    admin_rate_per_client: int = 0
    admin_burst_per_client: int = 0
    metrics_sample_window_ms: int = 30000
    metrics_num_samples: int = 2
    log_level: str = "INFO"
    request_limits: RequestLimits = DEFAULT_LIMITS
    tls: TlsSettings | None = None
    authorizer: AuthorizerConfig = NO_AUTHORIZER
    source: Path | None = None
    # Kafka keys the file sets that this product does not use (logged, not applied).
    ignored_keys: tuple[str, ...] = ()

    @property
    def is_voter(self) -> bool:
        """Whether this node votes (a controller) rather than only follows the log."""
        return self.node_id in self.voters

    def as_properties(self) -> dict[str, str]:
        """Every key with its effective value, defaults included.

        What the node actually runs with, for its startup log and `describe`;
        `parse_config` of the result gives back an equal configuration.
        """
        voters = ",".join(f"{n}@{e.address()}" for n, e in sorted(self.voters.items()))
        props = {
            "node.id": str(self.node_id),
            "process.roles": ",".join(self.process_roles),
            "controller.quorum.voters": voters,
            BOOTSTRAP_SERVERS_KEY: ",".join(e.address() for e in self.bootstrap_servers),
            "listeners": f"{DEFAULT_LISTENER_NAME}://{self.listener.address()}",
            "controller.listener.names": DEFAULT_LISTENER_NAME,
            "metadata.log.dir": str(self.metadata_log_dir),
            VOTER_PRINCIPALS_KEY: ";".join(
                f"{n}@{p}" for n, p in sorted(self.voter_principals.items())
            ),
        }
        for key in INT_KEYS:
            props[key.name] = str(getattr(self, key.field))
        scheme = "https" if self.metrics_tls else "http"
        props["metrics.listener"] = (
            f"{scheme}://{self.metrics_listener.address()}" if self.metrics_listener else ""
        )
        props[METRICS_CLIENT_AUTH_KEY] = (
            self.metrics_tls.client_auth.value if self.metrics_tls else ""
        )
        props["log.level"] = self.log_level
        for prop in LIMIT_PROPERTIES:
            props[prop.key] = str(getattr(self.request_limits, prop.field))
        props.update(self.tls.properties() if self.tls else plaintext_properties())
        auth = self.authorizer
        props["authorizer.class.name"] = STANDARD_AUTHORIZER if auth.enabled else ""
        props["super.users"] = ";".join(sorted(auth.super_users))
        props["allow.everyone.if.no.acl.found"] = str(auth.allow_everyone_if_no_acl_found).lower()
        return props


def load_config(path: Path | str) -> ControllerConfig:
    """Read and validate a controller's properties file."""
    path = Path(path)
    return parse_config(read_properties(path), source=path)


def parse_config(props: Mapping[str, str], source: Path | None = None) -> ControllerConfig:
    """Validate properties (as read from a file) into a `ControllerConfig`; every
    problem found is reported at once (`ConfigErrors` when there are several)."""
    problems = Problems()
    props, ignored = _sorted_keys(props, problems)

    def check(parse: Callable[[], T]) -> T | None:
        try:
            return parse()
        except ConfigError as err:
            problems.add(err)
            return None

    node_id = check(lambda: integer(props, "node.id", IntSpec("node_id", -1, 0), required=True))
    roles = check(lambda: _roles(props.get("process.roles", "")))
    quorum = check(lambda: quorum_endpoints(props))
    voter_map, bootstrap = quorum if quorum is not None else (None, ())
    principals = check(lambda: voter_principals(props.get(VOTER_PRINCIPALS_KEY, ""), voter_map))
    listener = check(lambda: _listener(props))
    log_dir = _log_dir(props, problems)
    ints = {
        key.field: check(lambda key=key: integer(props, key.name, key.spec)) for key in INT_KEYS
    }  # type: ignore[misc]
    raw_metrics = props.get("metrics.listener", "")
    metrics = check(lambda: url("metrics.listener", raw_metrics)) if raw_metrics else None
    level = check(lambda: log_level(props.get("log.level", "") or "INFO"))
    limit_values = {
        p.field: check(
            lambda p=p: integer(props, p.key, IntSpec(p.field, default_of(p), p.minimum))  # type: ignore[misc]
        )
        for p in LIMIT_PROPERTIES
    }
    if node_id is not None and roles is not None and voter_map is not None and listener:
        for err in _role_problems(node_id, roles, voter_map, listener, bool(bootstrap)):
            problems.add(err)
    tls = check(lambda: _tls(props))
    metrics_tls = check(lambda: _metrics_tls(props, tls))
    authorizer = check(lambda: authorizer_from(props))
    if metrics is not None and listener is not None and same_endpoint(metrics, listener):
        problems.add(
            ConfigError(
                "metrics.listener", f"metrics.listener uses the listeners port {listener.port}"
            )
        )
    if all(v is not None for v in ints.values()):
        for err in _timeout_problems(ints):  # type: ignore[arg-type]
            problems.add(err)
    problems.raise_any()
    assert node_id is not None and roles is not None and voter_map is not None
    assert listener is not None and log_dir is not None and level is not None

    return ControllerConfig(
        node_id=node_id,
        process_roles=roles,
        voters=voter_map,
        bootstrap_servers=bootstrap,
        listener=listener,
        advertised=voter_map.get(node_id, listener),
        voter_principals=principals or {},
        metadata_log_dir=Path(log_dir),
        metrics_listener=metrics,
        metrics_tls=metrics_tls,
        **ints,  # type: ignore[arg-type]
        log_level=level,
        request_limits=limits_from(limit_values),  # type: ignore[arg-type]
        tls=tls,
        authorizer=authorizer if authorizer is not None else NO_AUTHORIZER,
        source=source,
        ignored_keys=ignored,
    )


def _tls(props: Mapping[str, str]) -> TlsSettings | None:
    try:
        return tls_from_properties(props, server=True, listener_name=_listener_name(props))
    except TlsConfigError as err:
        raise ConfigError(err.key, str(err)) from None


def _metrics_tls(props: Mapping[str, str], tls: TlsSettings | None) -> MetricsTls | None:
    try:
        return metrics_tls_from(props, tls)
    except TlsConfigError as err:
        raise ConfigError(err.key, str(err)) from None


def _sorted_keys(
    props: Mapping[str, str], problems: Problems
) -> tuple[dict[str, str], tuple[str, ...]]:
    """(the keys this product reads, the Kafka keys it ignores); every unknown key
    is a problem, with the closest known one suggested."""
    stripped = {k.strip(): v.strip() for k, v in props.items()}
    used = KNOWN_KEYS + LOG_DIRS_KEYS
    ignored = tuple(sorted(k for k in stripped if k in KAFKA_IGNORED_KEYS))
    for key in stripped:
        if key not in used and key not in KAFKA_IGNORED_KEYS:
            problems.add(unknown_key(key, used + KAFKA_IGNORED_KEYS))
    return {k: v for k, v in stripped.items() if k in used}, ignored


def _log_dir(props: Mapping[str, str], problems: Problems) -> str | None:
    """metadata.log.dir, else the first of log.dirs (or log.dir), as Kafka does."""
    if props.get("metadata.log.dir"):
        return props["metadata.log.dir"]
    for key in LOG_DIRS_KEYS:
        first = props.get(key, "").split(",")[0].strip()
        if first:
            return first
    problems.add(
        ConfigError(
            "metadata.log.dir",
            "metadata.log.dir is required: the metadata log directory "
            "(or log.dirs, whose first directory Kafka uses when it is absent)",
        )
    )
    return None


def _role_problems(
    node_id: int,
    roles: tuple[str, ...],
    voter_map: Mapping[int, Endpoint],
    listener: Endpoint,
    bootstrap: bool = False,
) -> list[ConfigError]:
    if bootstrap:
        # The voters are in the log: a controller not (yet) among them runs as
        # an observer until `quorumctl quorum add-controller` adds it.
        return []
    if roles == (CONTROLLER,):
        if node_id not in voter_map:
            return [
                ConfigError(
                    "node.id",
                    f"node.id {node_id} is not in controller.quorum.voters "
                    f"({', '.join(map(str, sorted(voter_map)))}): a controller must be a "
                    "voter. To follow the log as an observer, set process.roles=broker",
                )
            ]
        if voter_map[node_id].port != listener.port:
            return [
                ConfigError(
                    "listeners",
                    f"listeners port {listener.port} differs from the port of node {node_id} "
                    f"in controller.quorum.voters ({voter_map[node_id].address()}); peers "
                    "would dial a port nobody listens on",
                )
            ]
        return []
    if node_id in voter_map:
        return [
            ConfigError(
                "process.roles",
                f"process.roles=broker, but node.id {node_id} is in "
                "controller.quorum.voters: a voter must be a controller",
            )
        ]
    return [
        ConfigError(
            "listeners",
            f"listeners {listener.address()} is voter {voter}'s address "
            "in controller.quorum.voters",
        )
        for voter, endpoint in voter_map.items()
        if same_endpoint(endpoint, listener)
    ][:1]


def _roles(raw: str) -> tuple[str, ...]:
    key = "process.roles"
    roles = [r.strip() for r in raw.split(",")] if raw else []
    if not roles:
        raise ConfigError(key, "is required: controller, or broker for an observer")
    for role in roles:
        if role not in (CONTROLLER, BROKER):
            raise ConfigError(key, f"unknown role {role!r} (expected controller or broker)")
    if len(set(roles)) != len(roles):
        raise ConfigError(key, f"lists a role twice: {raw!r}")
    if len(roles) > 1:
        raise ConfigError(
            key,
            "combined mode (broker,controller) is not supported: run the controller and "
            "the observer as separate processes",
        )
    return (roles[0],)


def voter_principals(raw: str, voter_map: Mapping[int, Endpoint] | None) -> dict[int, str]:
    """``1@User:CN=a;2@User:CN=b``: semicolons between entries, since a
    certificate subject holds commas (as Kafka's `super.users` does)."""
    key = VOTER_PRINCIPALS_KEY
    found: dict[int, str] = {}
    for entry in filter(None, (e.strip() for e in raw.split(";"))):
        node, at, principal = entry.partition("@")
        if not at or not re.fullmatch(r"[0-9]+", node.strip()):
            raise ConfigError(key, f"entry {entry!r} is not id@User:subject")
        node_id = int(node)
        if not principal.startswith("User:") or len(principal) == len("User:"):
            raise ConfigError(key, f"entry {entry!r}: a principal is User:<subject>")
        if voter_map is not None and node_id not in voter_map:
            raise ConfigError(key, f"node {node_id} is not in controller.quorum.voters")
        if node_id in found:
            raise ConfigError(key, f"node {node_id} appears twice")
        found[node_id] = principal
    return found


def _listener_name(props: Mapping[str, str]) -> str:
    first = props.get("controller.listener.names", "").split(",")[0].strip().upper()
    return first or DEFAULT_LISTENER_NAME


def _listener(props: Mapping[str, str]) -> Endpoint:
    """The listener named first in controller.listener.names (Kafka uses the first)."""
    names = [n.strip().upper() for n in props.get("controller.listener.names", "").split(",")]
    if not any(names):
        names = [DEFAULT_LISTENER_NAME]
    if not all(names):
        raise ConfigError("controller.listener.names", "has an empty name")
    raw = props.get("listeners", "")
    if not raw:
        raise ConfigError("listeners", f"is required, e.g. {names[0]}://127.0.0.1:9093")
    found: dict[str, str] = {}
    for entry in (e.strip() for e in raw.split(",")):
        name, sep, rest = entry.partition("://")
        name = name.strip().upper()
        if not sep or not name:
            raise ConfigError("listeners", f"entry {entry!r} is not NAME://host:port")
        if name in found:
            raise ConfigError("listeners", f"names listener {name} twice")
        found[name] = rest.strip()
    if names[0] not in found:
        raise ConfigError(
            "listeners",
            f"listeners has no {names[0]} listener (named by controller.listener.names); "
            f"found {', '.join(found)}",
        )
    return host_port("listeners", found[names[0]], any_host=True)


def _timeout_problems(ints: Mapping[str, int]) -> list[ConfigError]:
    """Timeouts that contradict each other make a quorum that flaps or never
    elects, which is much harder to diagnose at runtime than here."""
    found = []
    election, fetch = ints["election_timeout_ms"], ints["fetch_timeout_ms"]
    if election > fetch:
        found.append(
            ConfigError(
                "controller.quorum.election.timeout.ms",
                f"controller.quorum.election.timeout.ms ({election}) is larger than "
                f"controller.quorum.fetch.timeout.ms ({fetch}): followers would give up "
                "on a leader before a candidate could win an election",
            )
        )
    wait, request = ints["fetch_max_wait_ms"], ints["request_timeout_ms"]
    if wait >= request:
        found.append(
            ConfigError(
                "controller.quorum.fetch.max.wait.ms",
                f"controller.quorum.fetch.max.wait.ms ({wait}) must be below "
                f"controller.quorum.request.timeout.ms ({request}): a parked fetch would "
                "time out before the leader answers it",
            )
        )
    if wait >= fetch:
        found.append(
            ConfigError(
                "controller.quorum.fetch.max.wait.ms",
                f"controller.quorum.fetch.max.wait.ms ({wait}) must be below "
                f"controller.quorum.fetch.timeout.ms ({fetch}): an idle leader would look "
                "dead to its followers",
            )
        )
    return found
