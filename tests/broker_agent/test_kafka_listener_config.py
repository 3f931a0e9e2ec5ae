"""The Kafka listener keys of a broker's properties file: `listeners` (several),
`advertised.listeners`, `socket.request.max.bytes`, and SSL listeners with the
ssl.* keys beside a plaintext or TLS connection to the controllers."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.config import parse_broker_config
from quorum.common.config import ConfigError, Endpoint
from quorum.common.local_ca import LocalCa
from quorum.common.tls import ClientAuth

BROKER = {
    "node.id": "101",
    "process.roles": "broker",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "metadata.log.dir": "/tmp/unused",
}


def test_one_plaintext_listener_is_advertised_as_itself() -> None:
    config = parse_broker_config(BROKER)
    assert config.listeners == (("PLAINTEXT", Endpoint("127.0.0.1", 9092)),)
    assert config.advertised_listeners == config.listeners
    assert config.listener_protocols == {"PLAINTEXT": "PLAINTEXT"}
    assert config.socket_request_max_bytes == 104_857_600
    assert config.kafka_tls is None


def test_advertised_listeners_name_listeners() -> None:
    config = parse_broker_config(
        {**BROKER, "listeners": "PLAINTEXT://0.0.0.0:9092",
         "advertised.listeners": "PLAINTEXT://broker-101.example:19092",
         "socket.request.max.bytes": "1048576"}
    )  # fmt: skip
    assert config.advertised_listeners == (("PLAINTEXT", Endpoint("broker-101.example", 19092)),)
    assert config.socket_request_max_bytes == 1 << 20


@pytest.mark.parametrize(
    ("extra", "key"),
    [
        ({"listeners": "PLAINTEXT://127.0.0.1:9092,PLAINTEXT://127.0.0.1:9093"}, "listeners"),
        ({"listeners": "127.0.0.1:9092"}, "listeners"),
        ({"advertised.listeners": "OTHER://h:1"}, "advertised.listeners"),
        ({"socket.request.max.bytes": "0"}, "socket.request.max.bytes"),
        ({"listeners": "SSL://127.0.0.1:9092"}, "ssl.certificate.location"),
    ],
)
def test_bad_listener_settings_name_their_key(extra: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_broker_config({**BROKER, **extra})
    assert err.value.key == key


def test_an_ssl_listener_takes_the_ssl_keys_beside_plaintext_controllers(tmp_path: Path) -> None:
    files = LocalCa().write(tmp_path, "broker-101")
    config = parse_broker_config(
        {**BROKER, "listeners": "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093",
         "ssl.certificate.location": str(files.certificate), "ssl.key.location": str(files.key),
         "ssl.ca.location": str(files.ca), "ssl.client.auth": "required"}
    )  # fmt: skip
    assert config.listener_protocols == {"PLAINTEXT": "PLAINTEXT", "SSL": "SSL"}
    assert config.kafka_tls is not None
    assert config.kafka_tls.client_auth is ClientAuth.REQUIRED
    assert config.tls is None  # the controllers are still dialled in plaintext
