"""A real Kafka controller.properties: every problem at once, Kafka's keys this
product does not use accepted and listed, `log.dirs` standing in for
`metadata.log.dir`. Parsing here; the process's start-up log in
tests/integration/test_kafka_controller_properties.py.
"""

from __future__ import annotations

import pytest

from quorum.controller_config import (
    KAFKA_IGNORED_KEYS,
    KNOWN_KEYS,
    ConfigError,
    ConfigErrors,
    parse_config,
)

# Kafka 3.x's config/kraft/controller.properties, comments dropped.
KAFKA_CONTROLLER_PROPERTIES = {
    "process.roles": "controller",
    "node.id": "1",
    "controller.quorum.voters": "1@localhost:9093",
    "listeners": "CONTROLLER://:9093",
    "controller.listener.names": "CONTROLLER",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL",
    "num.network.threads": "3",
    "num.io.threads": "8",
    "socket.send.buffer.bytes": "102400",
    "socket.receive.buffer.bytes": "102400",
    "socket.request.max.bytes": "104857600",
    "log.dirs": "/tmp/kraft-controller-logs",
    "num.partitions": "1",
    "num.recovery.threads.per.data.dir": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "log.retention.hours": "168",
    "log.segment.bytes": "1073741824",
    "log.retention.check.interval.ms": "300000",
}


def test_kafkas_own_file_is_accepted_with_its_unused_keys_listed() -> None:
    config = parse_config(KAFKA_CONTROLLER_PROPERTIES)
    assert str(config.metadata_log_dir) == "/tmp/kraft-controller-logs"
    assert config.ignored_keys == tuple(
        sorted(k for k in KAFKA_CONTROLLER_PROPERTIES if k not in KNOWN_KEYS and k != "log.dirs")
    )
    assert "num.network.threads" in config.ignored_keys
    assert "socket.request.max.bytes" not in config.ignored_keys  # used: a request limit
    # The effective configuration is what runs: the log dir resolved, nothing ignored.
    effective = config.as_properties()
    assert effective["metadata.log.dir"] == "/tmp/kraft-controller-logs"
    assert not set(config.ignored_keys) & set(effective)


def test_log_dirs_first_directory_and_metadata_log_dir_wins() -> None:
    props = {**KAFKA_CONTROLLER_PROPERTIES, "log.dirs": "/data/a, /data/b"}
    assert str(parse_config(props).metadata_log_dir) == "/data/a"
    props = {k: v for k, v in props.items() if k != "log.dirs"} | {"log.dir": "/data/c"}
    assert str(parse_config(props).metadata_log_dir) == "/data/c"
    props["metadata.log.dir"] = "/data/meta"
    assert str(parse_config(props).metadata_log_dir) == "/data/meta"


def test_without_any_log_dir_the_message_names_both_keys() -> None:
    props = {k: v for k, v in KAFKA_CONTROLLER_PROPERTIES.items() if k != "log.dirs"}
    with pytest.raises(ConfigError) as info:
        parse_config(props)
    assert info.value.key == "metadata.log.dir"
    assert "log.dirs" in str(info.value)


def test_every_problem_is_reported_at_once() -> None:
    props = {
        **KAFKA_CONTROLLER_PROPERTIES,
        "num.netwrok.threads": "3",  # a typo of an ignored key is still unknown
        "controller.quorum.election.timout.ms": "500",
        "controller.quorum.fetch.timeout.ms": "soon",
        "metrics.listener": "ftp://x:1",
        "zookeeper.connect": "localhost:2181",
    }
    with pytest.raises(ConfigErrors) as info:
        parse_config(props)
    keys = [p.key for p in info.value.problems]
    assert keys == [
        "num.netwrok.threads",
        "controller.quorum.election.timout.ms",
        "zookeeper.connect",
        "controller.quorum.fetch.timeout.ms",
        "metrics.listener",
    ]
    text = str(info.value)
    assert text.startswith("5 problems:")
    assert "did you mean num.network.threads?" in text
    assert "did you mean controller.quorum.election.timeout.ms?" in text
    assert all(key in text for key in keys)
    assert info.value.key == "num.netwrok.threads"


def test_contradicting_timeouts_are_all_reported() -> None:
    props = {
        **KAFKA_CONTROLLER_PROPERTIES,
        "controller.quorum.election.timeout.ms": "5000",
        "controller.quorum.fetch.max.wait.ms": "3000",
    }
    with pytest.raises(ConfigErrors) as info:
        parse_config(props)
    assert [p.key for p in info.value.problems] == [
        "controller.quorum.election.timeout.ms",
        "controller.quorum.fetch.max.wait.ms",
        "controller.quorum.fetch.max.wait.ms",
    ]


def test_the_ignored_list_never_shadows_a_key_we_use() -> None:
    assert not set(KAFKA_IGNORED_KEYS) & set(KNOWN_KEYS)
    assert len(set(KAFKA_IGNORED_KEYS)) == len(KAFKA_IGNORED_KEYS)


def test_security_keys_we_do_not_implement_are_refused_not_ignored() -> None:
    props = {**KAFKA_CONTROLLER_PROPERTIES, "ssl.keystore.location": "/etc/kafka/ks.jks"}
    with pytest.raises(ConfigError) as info:
        parse_config(props)
    assert info.value.key == "ssl.keystore.location"
    assert "unknown property" in str(info.value)
