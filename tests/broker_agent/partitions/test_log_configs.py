"""A topic's LogConfig is rebuilt when, and only when, its configs change."""

from __future__ import annotations

from types import MappingProxyType

from broker_agent.partitions.partition_log import LogConfig
from broker_agent.partitions.replica_config import LogConfigs


def test_rebuilt_only_when_the_topics_configs_change() -> None:
    configs = LogConfigs(LogConfig(), 1_000)
    overrides = {"retention.ms": "5000"}
    first = configs.for_topic("t", overrides)
    assert first.retention_ms == 5000 and first.max_message_bytes == 1_000
    assert configs.for_topic("t", MappingProxyType(dict(overrides))) is first
    overrides["retention.ms"] = "7000"  # changed in place: still seen
    second = configs.for_topic("t", overrides)
    assert second.retention_ms == 7000 and second is not first
    assert configs.for_topic("u", {}).retention_ms == LogConfig().retention_ms


def test_a_deleted_topic_is_forgotten() -> None:
    configs = LogConfigs(LogConfig(), 1_000)
    old = configs.for_topic("t", {"cleanup.policy": "compact"})
    configs.keep_only(["u"])
    assert configs.for_topic("t", {"cleanup.policy": "compact"}) is not old
