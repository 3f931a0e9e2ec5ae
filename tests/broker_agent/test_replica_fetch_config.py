"""The followers' fetch keys of a broker's properties file, Kafka's names and
defaults: `replica.fetch.max.bytes` (per partition, the first batch comes whole)
and `replica.fetch.wait.max.ms` (how long the leader parks a fetch), which Kafka
requires to be at most `replica.lag.time.max.ms`; and
`num.recovery.threads.per.data.dir`, the threads that open replicas' logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.config import parse_broker_config
from broker_agent.main import replica_config
from quorum.common.config import ConfigError

BROKER = {
    "node.id": "101",
    "process.roles": "broker",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "metadata.log.dir": "/tmp/unused",
}


def test_kafkas_defaults() -> None:
    config = replica_config(parse_broker_config(BROKER))
    assert (config.replica_fetch_max_bytes, config.replica_fetch_wait_max_ms) == (1048576, 500)
    assert config.num_recovery_threads_per_data_dir == 1


def test_the_log_opening_threads_reach_the_replica_manager(tmp_path: Path) -> None:
    from broker_agent.partitions.replica_manager import ReplicaManager

    config = replica_config(
        parse_broker_config({**BROKER, "num.recovery.threads.per.data.dir": "3"})
    )
    assert ReplicaManager(101, tmp_path, config)._opener.threads == 3


def test_the_keys_reach_the_followers_fetcher() -> None:
    config = replica_config(parse_broker_config(
        {**BROKER, "replica.fetch.max.bytes": "1", "replica.fetch.wait.max.ms": "100"}
    ))  # fmt: skip
    assert (config.replica_fetch_max_bytes, config.replica_fetch_wait_max_ms) == (1, 100)


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"replica.fetch.max.bytes": "-1"}, "replica.fetch.max.bytes"),
        ({"replica.fetch.wait.max.ms": "soon"}, "replica.fetch.wait.max.ms"),
        ({"num.recovery.threads.per.data.dir": "0"}, "num.recovery.threads.per.data.dir"),
        ({"num.recovery.threads.per.data.dir": "1000"}, "num.recovery.threads.per.data.dir"),
        (
            {"replica.fetch.wait.max.ms": "30001", "replica.lag.time.max.ms": "30000"},
            "replica.fetch.wait.max.ms",
        ),
    ],
)
def test_bad_values_name_their_key(extra: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        parse_broker_config({**BROKER, **extra})
    assert raised.value.key == key
