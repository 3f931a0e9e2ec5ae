"""Compaction's settings: Kafka's names and defaults at the controller (topic
configs), in a topic's log config, and in the broker's properties file."""

from __future__ import annotations

import pytest

from broker_agent.config import parse_broker_config
from broker_agent.main import replica_config
from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.replica_config import log_config_for
from quorum.common.config import ConfigError
from quorum.controller.api_errors import ControllerError
from quorum.controller.config_schema import TOPIC, validate

BROKER = {
    "node.id": "5",
    "process.roles": "broker",
    "controller.quorum.voters": "1@localhost:9000",
    "listeners": "PLAINTEXT://localhost:9092",
    "metadata.log.dir": "/tmp/unused",
}


def test_kafkas_topic_defaults() -> None:
    config = LogConfig()
    assert config.cleanup_policy == "delete" and not config.compact and config.delete
    assert config.min_cleanable_dirty_ratio == 0.5
    assert config.min_compaction_lag_ms == 0
    assert config.max_compaction_lag_ms == 2**63 - 1
    assert config.delete_retention_ms == 86_400_000
    assert config.segment_ms == 604_800_000


def test_topic_configs_override_the_brokers() -> None:
    topic = {
        "cleanup.policy": "compact,delete",
        "min.cleanable.dirty.ratio": "0.1",
        "min.compaction.lag.ms": "5",
        "max.compaction.lag.ms": "6",
        "delete.retention.ms": "7",
        "segment.ms": "8",
    }
    config = log_config_for(LogConfig(), 1000, topic)
    assert config.compact and config.delete
    assert (config.min_cleanable_dirty_ratio, config.min_compaction_lag_ms) == (0.1, 5)
    assert (config.max_compaction_lag_ms, config.delete_retention_ms, config.segment_ms) == (
        6,
        7,
        8,
    )
    assert (
        log_config_for(
            LogConfig(), 1000, {"min.cleanable.dirty.ratio": "7"}
        ).min_cleanable_dirty_ratio
        == 0.5
    )


@pytest.mark.parametrize(
    ("key", "good", "bad"),
    [
        ("cleanup.policy", "compact,delete", "compress"),
        ("min.cleanable.dirty.ratio", "0.01", "1.5"),
        ("max.compaction.lag.ms", "60000", "0"),
        ("delete.retention.ms", "0", "-1"),
        ("min.compaction.lag.ms", "0", "soon"),
    ],
)
def test_the_controller_validates_compaction_topic_configs(key: str, good: str, bad: str) -> None:
    validate(TOPIC, key, good)
    with pytest.raises(ControllerError):
        validate(TOPIC, key, bad)


def test_broker_properties() -> None:
    config = parse_broker_config(
        {
            **BROKER,
            "log.cleanup.policy": "compact",
            "log.cleaner.enable": "false",
            "log.cleaner.dedupe.buffer.size": "1048576",
            "log.cleaner.min.cleanable.ratio": "0.2",
            "log.cleaner.io.max.bytes.per.second": "1000000",
            "log.roll.ms": "3600000",
            "log.cleaner.threads": "4",
        }
    )
    replicas = replica_config(config)
    assert replicas.log.compact and replicas.log.min_cleanable_dirty_ratio == 0.2
    assert replicas.log.segment_ms == 3_600_000
    assert not replicas.cleaner.enable and replicas.cleaner.dedupe_buffer_size == 1 << 20
    assert replicas.cleaner.io_max_bytes_per_second == 1e6 and replicas.cleaner.threads == 4
    defaults = replica_config(parse_broker_config(BROKER))
    assert defaults.cleaner.enable and defaults.cleaner.dedupe_buffer_size == 128 << 20
    assert defaults.cleaner.io_max_bytes_per_second == float("inf")
    assert defaults.cleaner.threads == 1
    for key, value in [
        ("log.cleanup.policy", "compress"),
        ("log.cleaner.min.cleanable.ratio", "2"),
        ("log.cleaner.enable", "yes"),
        ("log.cleaner.dedupe.buffer.size", "10"),
        ("log.cleaner.threads", "0"),
    ]:
        with pytest.raises(ConfigError, match=key):
            parse_broker_config({**BROKER, key: value})
    # Each thread's key map is a share of the buffer, at least the buffer's minimum.
    with pytest.raises(ConfigError, match="1024 bytes per cleaner thread"):
        parse_broker_config(
            {**BROKER, "log.cleaner.dedupe.buffer.size": "4096", "log.cleaner.threads": "8"}
        )
