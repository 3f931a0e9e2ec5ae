"""The configuration keys the controller accepts, with Kafka's names and defaults.

Only known keys are accepted, each value is validated, and a topic's effective
value comes from its own config, else the cluster-wide default (resource
CLUSTER, name ""), else the built-in default, as Kafka resolves them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.validation import is_ascii_integer

TOPIC = 2
BROKER = 4
CLUSTER = 16

LONG_MAX = (1 << 63) - 1
INT_MAX = (1 << 31) - 1


@dataclass(frozen=True, slots=True)
class ConfigKey:
    name: str
    default: str
    check: Callable[[str], str | None]  # a problem with the value, or None
    is_list: bool = False


def _int(low: int, high: int = INT_MAX) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        # ASCII digits only: int() would also take "1_000", " 5", Arabic-Indic or
        # fullwidth digits, stored verbatim then, which no Kafka client parses.
        if not is_ascii_integer(value):
            return "must be an integer in ASCII digits"
        number = int(value)
        if not low <= number <= high:
            return f"must be between {low} and {high}"
        return None

    return check


def _ratio(value: str) -> str | None:
    """A double in [0, 1] (`min.cleanable.dirty.ratio`), in plain decimal notation."""
    digits = value.replace(".", "", 1)
    if not digits or not is_ascii_integer(digits) or not 0.0 <= float(value) <= 1.0:
        return "must be a number between 0 and 1"
    return None


def _bool(value: str) -> str | None:
    return None if value.lower() in ("true", "false") else "must be true or false"


def _one_of(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        return None if value in choices else f"must be one of {', '.join(choices)}"

    return check


def _list_of(*choices: str) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        items = [v.strip() for v in value.split(",") if v.strip()]
        bad = [v for v in items if v not in choices]
        if not items or bad:
            return f"must be a comma-separated list of {', '.join(choices)}"
        return None

    return check


_TOPIC_KEYS = [
    ConfigKey("cleanup.policy", "delete", _list_of("delete", "compact"), is_list=True),
    ConfigKey("compression.type", "producer",
              _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")),
    ConfigKey("delete.retention.ms", "86400000", _int(0, LONG_MAX)),
    ConfigKey("max.compaction.lag.ms", str(LONG_MAX), _int(1, LONG_MAX)),
    ConfigKey("max.message.bytes", "1048588", _int(0)),
    ConfigKey("message.timestamp.type", "CreateTime", _one_of("CreateTime", "LogAppendTime")),
    ConfigKey("min.cleanable.dirty.ratio", "0.5", _ratio),
    ConfigKey("min.compaction.lag.ms", "0", _int(0, LONG_MAX)),
    ConfigKey("min.insync.replicas", "1", _int(1)),
    ConfigKey("retention.bytes", "-1", _int(-1, LONG_MAX)),
    ConfigKey("retention.ms", "604800000", _int(-1, LONG_MAX)),
    ConfigKey("segment.bytes", "1073741824", _int(14)),
    ConfigKey("segment.ms", "604800000", _int(1, LONG_MAX)),
    ConfigKey("unclean.leader.election.enable", "false", _bool),
]  # fmt: skip

_BROKER_KEYS = [
    ConfigKey("auto.leader.rebalance.enable", "true", _bool),
    ConfigKey("default.replication.factor", "1", _int(1)),
    ConfigKey("leader.imbalance.check.interval.seconds", "300", _int(1)),
    ConfigKey("leader.imbalance.per.broker.percentage", "10", _int(0, 100)),
    ConfigKey("log.retention.ms", "604800000", _int(-1, LONG_MAX)),
    ConfigKey("min.insync.replicas", "1", _int(1)),
    ConfigKey("num.partitions", "1", _int(1)),
    ConfigKey("unclean.leader.election.enable", "false", _bool),
]

# What each key does, in our own words (DescribeConfigs' include_documentation).
DOCS: dict[str, str] = {
    "cleanup.policy": "delete: drop old segments by retention; compact: keep the last "
    "record of each key; both together do both.",
    "compression.type": "The codec batches are stored with; producer keeps what the producer sent.",
    "delete.retention.ms": "How long delete markers stay in a compacted topic.",
    "max.message.bytes": "The largest record batch the topic accepts.",
    "message.timestamp.type": "Whether record timestamps are the producer's (CreateTime) "
    "or the broker's append time (LogAppendTime).",
    "min.compaction.lag.ms": "The least time a record stays uncompacted.",
    "max.compaction.lag.ms": "The most time a record may stay uncompacted before the "
    "cleaner takes its partition whatever its dirty ratio.",
    "min.cleanable.dirty.ratio": "The share of a log not yet cleaned above which the "
    "cleaner takes the partition.",
    "min.insync.replicas": "How many replicas must be in sync for an acks=all write to succeed.",
    "retention.bytes": "The most bytes a partition keeps before old segments go (-1: no limit).",
    "retention.ms": "How long records are kept before old segments go (-1: forever).",
    "segment.bytes": "The size at which a partition's log rolls to a new segment.",
    "segment.ms": "The age at which a partition's log rolls to a new segment.",
    "unclean.leader.election.enable": "Whether a replica outside the ISR may become "
    "leader when no ISR member can, at the price of losing acknowledged records.",
    "auto.leader.rebalance.enable": "Whether the controller moves leadership back to "
    "preferred replicas by itself.",
    "default.replication.factor": "The replication factor of topics created without one.",
    "leader.imbalance.check.interval.seconds": "How often the controller checks leader balance.",
    "leader.imbalance.per.broker.percentage": "The share of a broker's partitions led "
    "elsewhere that triggers a rebalance.",
    "log.retention.ms": "The default retention.ms of topics.",
    "num.partitions": "The partition count of topics created without one.",
}

KEYS: dict[int, dict[str, ConfigKey]] = {
    TOPIC: {k.name: k for k in _TOPIC_KEYS},
    BROKER: {k.name: k for k in _BROKER_KEYS},
    CLUSTER: {k.name: k for k in _BROKER_KEYS},
}

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def validate(resource_type: int, key: str, value: str) -> None:
    spec = KEYS.get(resource_type, {}).get(key)
    if spec is None:
        raise ControllerError(ApiError.INVALID_CONFIG, f"unknown config {key!r}")
    problem = spec.check(value)
    if problem is not None:
        raise ControllerError(
            ApiError.INVALID_CONFIG, f"invalid value {value!r} for {key}: {problem}"
        )


def validate_topic_configs(configs: Mapping[str, str], replication_factor: int) -> None:
    for key, value in configs.items():
        validate(TOPIC, key, value)
    min_isr = configs.get("min.insync.replicas")
    if min_isr is not None and int(min_isr) > replication_factor:
        raise ControllerError(
            ApiError.INVALID_CONFIG,
            f"min.insync.replicas={min_isr} is larger than the replication factor "
            f"{replication_factor}: no write with acks=all could ever succeed",
        )


def apply_incremental(
    resource_type: int, current: Mapping[str, str], ops: Sequence[tuple[str, int, str]]
) -> dict[str, str]:
    """SET/DELETE/APPEND/SUBTRACT in order; APPEND/SUBTRACT only on list keys."""
    result = dict(current)
    for key, op, value in ops:
        spec = KEYS.get(resource_type, {}).get(key)
        if spec is None:
            raise ControllerError(ApiError.INVALID_CONFIG, f"unknown config {key!r}")
        if op == DELETE:
            result.pop(key, None)
            continue
        if op in (APPEND, SUBTRACT):
            if not spec.is_list:
                raise ControllerError(
                    ApiError.INVALID_CONFIG, f"{key} is not a list: APPEND/SUBTRACT do not apply"
                )
            items = [v for v in result.get(key, spec.default).split(",") if v]
            if op == APPEND:
                items += [v for v in value.split(",") if v and v not in items]
            else:
                items = [v for v in items if v not in value.split(",")]
            value = ",".join(items)
        elif op != SET:
            raise ControllerError(ApiError.INVALID_REQUEST, f"unknown operation {op} for {key}")
        validate(resource_type, key, value)
        result[key] = value
    return result


@dataclass(frozen=True, slots=True)
class Effective:
    name: str
    value: str
    source: str  # DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, ... DEFAULT_CONFIG


def effective(
    resource_type: int, dynamic: Mapping[str, str], cluster: Mapping[str, str]
) -> list[Effective]:
    own = {TOPIC: "DYNAMIC_TOPIC_CONFIG", BROKER: "DYNAMIC_BROKER_CONFIG"}.get(
        resource_type, "DYNAMIC_DEFAULT_BROKER_CONFIG"
    )
    out = []
    for name, spec in sorted(KEYS[resource_type].items()):
        if name in dynamic:
            out.append(Effective(name, dynamic[name], own))
        elif name in cluster and name in KEYS[CLUSTER]:
            out.append(Effective(name, cluster[name], "DYNAMIC_DEFAULT_BROKER_CONFIG"))
        else:
            out.append(Effective(name, spec.default, "DEFAULT_CONFIG"))
    return out


def topic_value(key: str, topic: Mapping[str, str], cluster: Mapping[str, str]) -> str:
    if key in topic:
        return topic[key]
    if key in cluster:
        return cluster[key]
    return KEYS[TOPIC][key].default
