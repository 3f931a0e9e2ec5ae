"""The properties-file framework every process's configuration is built on.

Kafka's operators know its Java properties files, so every process (controller,
broker agent, tools) reads the same format with Kafka's names. This module has
what they share: reading a file (a key given twice is an error), rendering one,
`ConfigError` (whose `key` names the property to fix) and `ConfigErrors` (every
problem of a file at once), integer keys with bounds (`IntSpec`, `IntKey`), host
and port, URL, voter-list and log-level values, and "did you mean" for an unknown
key. Each process's key set lives with its process: the controller's in
`quorum.controller_config`, the broker agent's in `broker_agent.config`.
"""

from __future__ import annotations

import difflib
import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import javaproperties

MIN_SEGMENT_BYTES = 8 * 1024


INT_MAX = 2**31 - 1  # Kafka's INT settings


LONG_MAX = 2**63 - 1  # Kafka's LONG settings


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


_LOG_LEVEL_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL"}


_INTEGER = re.compile(r"[+-]?[0-9]+")  # ASCII only: int() would also take "1_000" or "٣"


_HOSTNAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?\.?")  # trailing dot: FQDN


_ANY_HOST = "0.0.0.0"


class ConfigError(Exception):
    """A property is unknown, malformed or contradicts another.

    `key` is the property to fix (``config`` when the file itself cannot be
    read), so callers can point at it; the message always contains it too.
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message if key in message else f"{key}: {message}")
        self.key = key


class ConfigErrors(ConfigError):
    """Several problems in one file, all reported at once; `key` is the first's."""

    def __init__(self, problems: list[ConfigError]) -> None:
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(problems[0].key, f"{len(problems)} problems:\n{lines}")
        self.problems = problems


class Problems:
    """Collects `ConfigError`s so every problem of a file is reported in one run."""

    def __init__(self) -> None:
        self.errors: list[ConfigError] = []

    def add(self, error: ConfigError) -> None:
        self.errors.append(error)

    def raise_any(self) -> None:
        if len(self.errors) == 1:
            raise self.errors[0]
        if self.errors:
            raise ConfigErrors(self.errors)


@dataclass(frozen=True)
class Endpoint:
    """A host and port as written in the configuration."""

    host: str
    port: int

    def address(self) -> str:
        """``host:port``, with an IPv6 host in brackets so the port stays unambiguous."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class IntSpec:
    field: str
    default: int
    minimum: int
    maximum: int = INT_MAX


@dataclass(frozen=True)
class IntKey:
    """One integer property. Adding a key is one line in `INT_KEYS` (plus the
    `ControllerConfig` field it fills, which a test checks): parsing, bounds,
    the effective-config dump, "did you mean" and the README's table follow."""

    name: str
    field: str
    default: int
    minimum: int
    maximum: int = INT_MAX
    doc: str = ""
    kafka: bool = True  # Kafka defines the key; else it is ours

    @property
    def spec(self) -> IntSpec:
        return IntSpec(self.field, self.default, self.minimum, self.maximum)


def read_properties(path: Path) -> dict[str, str]:
    """Read a properties file.

    A file that cannot be read or parsed is reported as key ``config``; a key
    given twice is an error (Java would silently keep the last one, hiding an
    edit that did not take effect).
    """
    try:
        text = path.read_text(encoding="utf-8")
        elements = list(javaproperties.parse(text))
    except OSError as err:
        raise ConfigError("config", f"cannot read config file {path}: {err.strerror}") from err
    except ValueError as err:  # undecodable bytes, a bad \u escape
        raise ConfigError("config", f"config file {path} is not a properties file: {err}") from err
    props: dict[str, str] = {}
    first_line: dict[str, int] = {}
    line = 1
    for element in elements:
        if isinstance(element, javaproperties.KeyValue):
            if element.key in props:
                raise ConfigError(
                    element.key,
                    f"{element.key} is set twice in {path} "
                    f"(lines {first_line[element.key]} and {line})",
                )
            props[element.key] = element.value
            first_line[element.key] = line
        line += len(element.source.splitlines())
    return props


def unknown_key(key: str, known: tuple[str, ...]) -> ConfigError:
    close = difflib.get_close_matches(key, known, n=1)
    hint = f" (did you mean {close[0]}?)" if close else ""
    return ConfigError(key, f"unknown property '{key}'{hint}")


def known_properties(props: Mapping[str, str], known: tuple[str, ...]) -> dict[str, str]:
    """Stripped keys and values; an unknown key is an error that suggests the
    closest known one, since a misspelt timeout would silently keep its default."""
    props = {k.strip(): v.strip() for k, v in props.items()}
    for key in props:
        if key not in known:
            raise unknown_key(key, known)
    return props


def render_properties(props: Mapping[str, str], header: str | None = None) -> str:
    """A properties file's text: `header` as ``#`` comments, then the keys in order.

    Values are escaped only where reading them back would change them, so
    ``host:port`` and ``1@host:9093`` stay readable for the operator who opens
    the file (javaproperties would also escape every colon).
    """
    lines = [f"# {line}".rstrip() for line in (header or "").splitlines()]
    lines += [f"{javaproperties.escape(k)}={_escape_value(v)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def _escape_value(value: str) -> str:
    out: list[str] = []
    leading = True
    for char in value:
        if leading and char in " \t\f":
            # Java strips whitespace before a value; an escaped one is kept.
            out.append({" ": "\\ ", "\t": "\\t", "\f": "\\f"}[char])
            continue
        leading = False
        if char == "\\":
            out.append("\\\\")
        elif char in "\n\r\t\f":
            out.append({"\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    return "".join(out)


def integer(props: Mapping[str, str], key: str, spec: IntSpec, *, required: bool = False) -> int:
    raw = props.get(key)
    if raw is None:
        if required:
            raise ConfigError(key, "is required")
        return spec.default
    if not _INTEGER.fullmatch(raw):
        raise ConfigError(key, f"must be an integer, got {raw!r}")
    value = int(raw)
    if value < spec.minimum:
        raise ConfigError(key, f"must be at least {spec.minimum}, got {value}")
    if value > spec.maximum:
        raise ConfigError(key, f"must be at most {spec.maximum}, got {value}")
    return value


def voters(raw: str) -> dict[int, Endpoint]:
    key = "controller.quorum.voters"
    if not raw:
        raise ConfigError(key, "is required, e.g. 1@127.0.0.1:9093,2@127.0.0.1:9094")
    found: dict[int, Endpoint] = {}
    for entry in (e.strip() for e in raw.split(",")):
        node, at, address = entry.partition("@")
        if not at:
            raise ConfigError(key, f"entry {entry!r} is not id@host:port")
        if not re.fullmatch(r"[0-9]+", node.strip()):
            raise ConfigError(key, f"entry {entry!r} does not start with a node id >= 0")
        node_id = int(node)
        if node_id > INT_MAX:
            raise ConfigError(key, f"entry {entry!r} has a node id above {INT_MAX}")
        endpoint = host_port(key, address.strip())
        if node_id in found:
            raise ConfigError(key, f"node {node_id} appears twice")
        for other, known in found.items():
            if same_endpoint(known, endpoint):
                raise ConfigError(
                    key, f"nodes {other} and {node_id} share the address {endpoint.address()}"
                )
        found[node_id] = endpoint
    return found


BOOTSTRAP_SERVERS_KEY = "controller.quorum.bootstrap.servers"


def bootstrap_servers(raw: str) -> tuple[Endpoint, ...]:
    """``host:port,host:port`` (KIP-853): where to find the controllers when the
    voter set lives in the log; used only to learn who leads."""
    key = BOOTSTRAP_SERVERS_KEY
    found: list[Endpoint] = []
    for entry in filter(None, (e.strip() for e in raw.split(","))):
        endpoint = host_port(key, entry)
        if any(same_endpoint(endpoint, known) for known in found):
            raise ConfigError(key, f"names {endpoint.address()} twice")
        found.append(endpoint)
    return tuple(found)


def bootstrap_ids(count: int) -> tuple[int, ...]:
    """The ids the bootstrap servers go by until they are known: -2, -3, ...
    (as Kafka numbers them; -1 is "no node" on the wire)."""
    return tuple(-2 - i for i in range(count))


def quorum_endpoints(
    props: Mapping[str, str],
) -> tuple[dict[int, Endpoint], tuple[Endpoint, ...]]:
    """(controller.quorum.voters, controller.quorum.bootstrap.servers): one of
    the two, never both (the voter set is either static or in the log)."""
    raw_voters = props.get("controller.quorum.voters", "").strip()
    raw_bootstrap = props.get(BOOTSTRAP_SERVERS_KEY, "").strip()
    if raw_voters and raw_bootstrap:
        raise ConfigError(
            BOOTSTRAP_SERVERS_KEY,
            f"set controller.quorum.voters (static voters) or {BOOTSTRAP_SERVERS_KEY} "
            "(voters in the log, kraft.version 1), not both",
        )
    if raw_bootstrap:
        found = bootstrap_servers(raw_bootstrap)
        if found:
            return {}, found
    try:
        return voters(raw_voters), ()
    except ConfigError as err:
        if raw_voters:
            raise
        raise ConfigError(
            "controller.quorum.voters",
            f"{err.args[0] if err.args else err} (or {BOOTSTRAP_SERVERS_KEY}=host:port,... "
            "to find the controllers of a kraft.version 1 cluster)",
        ) from None


def url(key: str, raw: str) -> Endpoint:
    """``http://host:port`` or ``https://host:port`` (the metrics listener)."""
    scheme, sep, rest = raw.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        raise ConfigError(key, f"must look like http://host:port or https://host:port, got {raw!r}")
    return host_port(key, rest.rstrip("/"), any_host=True)


def host_port(key: str, raw: str, any_host: bool = False) -> Endpoint:
    """Parse ``host:port`` or ``[ipv6]:port``; an empty host (only where
    `any_host`) means every interface, as in Kafka's ``CONTROLLER://:9093``."""
    host, sep, port_text = raw.rpartition(":")
    if not sep:
        raise ConfigError(key, f"{raw!r} is not host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise ConfigError(key, f"{raw!r} has an invalid IPv6 address") from None
    elif ":" in host:
        raise ConfigError(key, f"{raw!r}: put an IPv6 address in brackets, [addr]:port")
    elif not host and any_host:
        host = _ANY_HOST
    elif not _HOSTNAME.fullmatch(host):
        raise ConfigError(key, f"{raw!r} has an invalid host {host!r}")
    if not re.fullmatch(r"[0-9]{1,5}", port_text) or not 1 <= int(port_text) <= 65535:
        raise ConfigError(key, f"{raw!r} has an invalid port {port_text!r} (1-65535)")
    return Endpoint(host, int(port_text))


def same_endpoint(a: Endpoint, b: Endpoint) -> bool:
    return a.port == b.port and a.host.lower() == b.host.lower()


def log_level(raw: str) -> str:
    level = raw.upper()
    level = _LOG_LEVEL_ALIASES.get(level, level)
    if level not in LOG_LEVELS:
        raise ConfigError("log.level", f"must be one of {', '.join(LOG_LEVELS)}, got {raw!r}")
    return level
