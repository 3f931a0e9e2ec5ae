"""Kafka-style controller configuration: every field, defaults, and every refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from quorum.server.config import ConfigError, Endpoint, load_config, parse_config, render_properties

BASE = {
    "node.id": "2",
    "process.roles": "controller",
    "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095",
    "listeners": "CONTROLLER://127.0.0.1:9094",
    "metadata.log.dir": "/var/lib/quorum/controller-2",
}


def with_(**changes: str | None) -> dict[str, str]:
    props = dict(BASE)
    for key, value in changes.items():
        name = key.replace("__", ".")
        if value is None:
            props.pop(name, None)
        else:
            props[name] = value
    return props


def refused(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(props)
    assert info.value.key in str(info.value)
    return info.value


def test_defaults_follow_kafka() -> None:
    config = parse_config(BASE)
    assert config.node_id == 2 and config.is_voter
    assert config.voters[3] == Endpoint("127.0.0.1", 9095)
    assert config.listener == config.advertised == Endpoint("127.0.0.1", 9094)
    assert config.metadata_log_dir == Path("/var/lib/quorum/controller-2")
    assert (config.election_timeout_ms, config.fetch_timeout_ms) == (1000, 2000)
    assert config.election_backoff_max_ms == 1000 and config.request_timeout_ms == 2000
    assert config.fetch_max_wait_ms == 500
    assert config.max_retention_bytes == 100 * 1024 * 1024
    assert config.snapshot_max_new_record_bytes == 20 * 1024 * 1024
    assert config.snapshot_max_interval_ms == 3_600_000
    assert config.metrics_listener is None and config.log_level == "INFO"


def test_every_setting_is_read() -> None:
    config = parse_config(
        {
            **BASE,
            "controller.quorum.election.timeout.ms": "300",
            "controller.quorum.fetch.timeout.ms": "900",
            "controller.quorum.election.backoff.max.ms": "150",
            "controller.quorum.request.timeout.ms": "1500",
            "controller.quorum.retry.backoff.ms": "5",
            "controller.quorum.fetch.max.wait.ms": "200",
            "metadata.log.segment.bytes": "65536",
            "metadata.log.segment.ms": "1000",
            "metadata.max.retention.bytes": "-1",
            "metadata.max.retention.ms": "60000",
            "metadata.snapshot.max.new.record.bytes": "4096",
            "metadata.snapshot.max.interval.ms": "0",
            "metadata.snapshot.retain.count": "5",
            "metrics.listener": "http://0.0.0.0:9194",
            "log.level": "debug",
        }
    )
    assert (config.election_timeout_ms, config.fetch_timeout_ms) == (300, 900)
    assert (config.election_backoff_max_ms, config.request_timeout_ms) == (150, 1500)
    assert (config.retry_backoff_ms, config.fetch_max_wait_ms) == (5, 200)
    assert (config.log_segment_bytes, config.log_segment_ms) == (65536, 1000)
    assert (config.max_retention_bytes, config.max_retention_ms) == (-1, 60000)
    assert config.snapshot_max_new_record_bytes == 4096
    assert config.snapshot_max_interval_ms == 0 and config.snapshot_retain_count == 5
    assert config.metrics_listener == Endpoint("0.0.0.0", 9194)
    assert config.log_level == "DEBUG"


@pytest.mark.parametrize(
    ("props", "key", "says"),
    [
        (
            with_(controller__quorum__election__timout__ms="5"),
            "controller.quorum.election.timout.ms",
            "did you mean controller.quorum.election.timeout.ms",
        ),
        (with_(node__id=None), "node.id", "required"),
        (with_(node__id="two"), "node.id", "integer"),
        (with_(node__id="-1"), "node.id", "at least 0"),
        (with_(process__roles="zookeeper"), "process.roles", "unknown role"),
        (with_(process__roles="broker,controller"), "process.roles", "combined"),
        (
            with_(controller__quorum__voters="1@127.0.0.1:9093,2@127.0.0.1"),
            "controller.quorum.voters",
            "not host:port",
        ),
        (with_(controller__quorum__voters="1@a:1,1@b:2"), "controller.quorum.voters", "twice"),
        (with_(controller__quorum__voters="1@a:1,2@a:1"), "controller.quorum.voters", "twice"),
        (with_(controller__quorum__voters="x@a:1"), "controller.quorum.voters", "non-numeric"),
        (
            with_(controller__quorum__voters="1@a:99999,2@127.0.0.1:9094"),
            "controller.quorum.voters",
            "outside",
        ),
        (
            with_(listeners="PLAINTEXT://127.0.0.1:9094"),
            "listeners",
            "no listener named CONTROLLER",
        ),
        (with_(listeners="CONTROLLER://127.0.0.1:9999"), "listeners", "port 9094"),
        (with_(metadata__log__dir=None), "metadata.log.dir", "required"),
        (
            with_(controller__quorum__election__timeout__ms="5000"),
            "controller.quorum.election.timeout.ms",
            "larger than",
        ),
        (
            with_(controller__quorum__fetch__max__wait__ms="2000"),
            "controller.quorum.fetch.max.wait.ms",
            "below",
        ),
        (with_(metadata__log__segment__bytes="100"), "metadata.log.segment.bytes", "at least"),
        (with_(metrics__listener="127.0.0.1:1"), "metrics.listener", "http://"),
        (with_(log__level="LOUD"), "log.level", "one of"),
        (with_(node__id="7"), "node.id", "must be a voter"),
    ],
)
def test_refusals_name_the_key(props: dict[str, str], key: str, says: str) -> None:
    error = refused(props)
    assert error.key == key
    assert says in str(error)


def test_observer_is_a_broker_outside_the_voters() -> None:
    config = parse_config(
        with_(node__id="4", process__roles="broker", listeners="CONTROLLER://127.0.0.1:9096")
    )
    assert not config.is_voter
    assert config.advertised == Endpoint("127.0.0.1", 9096)
    assert refused(with_(process__roles="broker")).key == "process.roles"


def test_render_and_load_round_trip(tmp_path: Path) -> None:
    config = parse_config(with_(metrics__listener="http://127.0.0.1:9194"))
    path = tmp_path / "controller.properties"
    path.write_text(render_properties(config.as_properties(), header="written by a test"))
    assert path.read_text().startswith("# written by a test\n")
    again = load_config(path)
    assert again.as_properties() == config.as_properties()
    assert again.source == path


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.properties")
    assert info.value.key == "config"
