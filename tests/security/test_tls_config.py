"""The TLS keys in controller and broker properties: refused with the key named
when they would leave the cluster in the clear or fail only at the first handshake."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.config import parse_broker_config
from quorum.common.local_ca import LocalCa
from quorum.common.tls import ClientAuth
from quorum.controller_config import ConfigError, parse_config

VOTERS = "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"
CONTROLLER = {
    "node.id": "1",
    "process.roles": "controller",
    "controller.quorum.voters": VOTERS,
    "listeners": "CONTROLLER://127.0.0.1:9093",
    "metadata.log.dir": "/tmp/unused",
}
BROKER = {
    "node.id": "101",
    "process.roles": "broker",
    "controller.quorum.voters": VOTERS,
    "listeners": "PLAINTEXT://127.0.0.1:9092",
    "metadata.log.dir": "/tmp/unused",
}


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    files = LocalCa().write(tmp_path_factory.mktemp("certs"), "controller-1")
    return {
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.certificate.location": str(files.certificate),
        "ssl.key.location": str(files.key),
        "ssl.ca.location": str(files.ca),
    }


def refused(props: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        parse_config(props)
    return err.value


def test_plaintext_is_the_default() -> None:
    assert parse_config(CONTROLLER).tls is None


def test_ssl_with_client_auth_required_reads_the_files(certs: dict[str, str]) -> None:
    config = parse_config({**CONTROLLER, **certs, "ssl.client.auth": "required"})
    assert config.tls is not None
    assert config.tls.client_auth is ClientAuth.REQUIRED
    assert config.tls.certificate_chain == Path(certs["ssl.certificate.location"]).read_bytes()
    assert parse_config(config.as_properties()) == config


def test_ssl_keys_beside_a_plaintext_listener_are_refused(certs: dict[str, str]) -> None:
    error = refused({**CONTROLLER, "ssl.ca.location": certs["ssl.ca.location"]})
    assert error.key == "ssl.ca.location"
    assert "PLAINTEXT" in str(error)


def test_ssl_without_a_certificate_is_refused(certs: dict[str, str]) -> None:
    error = refused({**CONTROLLER, "listener.security.protocol.map": "CONTROLLER:SSL"})
    assert error.key == "ssl.certificate.location"


def test_an_unreadable_file_is_named(certs: dict[str, str], tmp_path: Path) -> None:
    error = refused({**CONTROLLER, **certs, "ssl.key.location": str(tmp_path / "missing.key")})
    assert error.key == "ssl.key.location"
    assert "missing.key" in str(error)


def test_requested_client_auth_is_refused_with_the_reason(certs: dict[str, str]) -> None:
    error = refused({**CONTROLLER, **certs, "ssl.client.auth": "requested"})
    assert error.key == "ssl.client.auth"
    assert "not supported" in str(error)


def test_required_client_auth_needs_a_ca(certs: dict[str, str]) -> None:
    props = {k: v for k, v in certs.items() if k != "ssl.ca.location"}
    error = refused({**CONTROLLER, **props, "ssl.client.auth": "required"})
    assert error.key == "ssl.ca.location"


def test_sasl_is_refused_in_the_protocol_map() -> None:
    error = refused({**CONTROLLER, "listener.security.protocol.map": "CONTROLLER:SASL_SSL"})
    assert error.key == "listener.security.protocol.map"


def test_a_broker_uses_the_controller_listeners_protocol(certs: dict[str, str]) -> None:
    assert parse_broker_config(BROKER).tls is None
    config = parse_broker_config(
        {**BROKER, **certs, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"}
    )
    assert config.tls is not None and config.tls.ca is not None
    with pytest.raises(ConfigError) as err:
        parse_broker_config({**BROKER, "listener.security.protocol.map": "CONTROLLER:SSL"})
    assert err.value.key == "ssl.ca.location"
