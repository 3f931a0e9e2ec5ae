"""`controller.quorum.bootstrap.servers` (KIP-853) in the controller's and the
broker agent's properties: the alternative to a static voter list."""

from __future__ import annotations

import pytest

from broker_agent.config import parse_broker_config
from quorum.common.config import Endpoint, bootstrap_ids
from quorum.controller_config import ConfigError, parse_config

SERVERS = "127.0.0.1:9093, ctl-2.example.com:9093,[::1]:9095"
CONTROLLER = {
    "node.id": "4",
    "process.roles": "controller",
    "controller.quorum.bootstrap.servers": SERVERS,
    "listeners": "CONTROLLER://127.0.0.1:9096",
    "metadata.log.dir": "/var/lib/quorum/controller-4",
}
BROKER = {
    "node.id": "101",
    "process.roles": "broker",
    "controller.quorum.bootstrap.servers": SERVERS,
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "metadata.log.dir": "/tmp/unused",
}
PARSED = (
    Endpoint("127.0.0.1", 9093),
    Endpoint("ctl-2.example.com", 9093),
    Endpoint("::1", 9095),
)


def test_a_controller_given_bootstrap_servers_has_no_static_voters() -> None:
    config = parse_config(CONTROLLER)
    assert config.bootstrap_servers == PARSED
    assert config.voters == {} and not config.is_voter  # an observer until added
    assert config.advertised == Endpoint("127.0.0.1", 9096)
    effective = config.as_properties()
    assert effective["controller.quorum.bootstrap.servers"] == (
        "127.0.0.1:9093,ctl-2.example.com:9093,[::1]:9095"
    )
    assert parse_config(effective) == config


def test_the_bootstrap_servers_go_by_kafkas_negative_ids() -> None:
    assert bootstrap_ids(3) == (-2, -3, -4)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"controller.quorum.voters": "1@127.0.0.1:9093"}, "not both"),
        ({"controller.quorum.bootstrap.servers": "127.0.0.1"}, "is not host:port"),
        ({"controller.quorum.bootstrap.servers": "a:1,a:1"}, "names a:1 twice"),
        ({"controller.quorum.bootstrap.servers": "127.0.0.1:0"}, "invalid port"),
        ({"controller.quorum.bootstrap.servers": ""}, "controller.quorum.bootstrap.servers"),
    ],
)
def test_bad_bootstrap_servers_are_refused(change: dict[str, str], message: str) -> None:
    for base, parse in ((CONTROLLER, parse_config), (BROKER, parse_broker_config)):
        with pytest.raises(ConfigError) as err:
            parse({**base, **change})  # type: ignore[operator]
        assert message in str(err.value), str(err.value)


def test_a_broker_given_bootstrap_servers_bootstraps_from_them() -> None:
    config = parse_broker_config(BROKER)
    assert config.controllers == {}
    assert config.bootstrap == ["127.0.0.1:9093", "ctl-2.example.com:9093", "[::1]:9095"]
