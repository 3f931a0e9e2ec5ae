"""The start-up WARN for a controller listener reachable without client certificates."""

from __future__ import annotations

import pytest

from quorum.common.tls import ClientAuth, TlsSettings
from quorum.server.listener_risk import is_loopback, listener_warning


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.1.2.3", False),
        ("no-such-host.invalid", False),
    ],
)
def test_loopback_is_told_apart(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def tls(client_auth: ClientAuth) -> TlsSettings:
    return TlsSettings(
        certificate_chain=b"cert", private_key=b"key", ca=b"ca", client_auth=client_auth
    )


def test_only_a_listener_without_client_certificates_off_loopback_is_named() -> None:
    plaintext = listener_warning("0.0.0.0", "0.0.0.0:9093", None)
    assert plaintext is not None
    assert "0.0.0.0:9093 is PLAINTEXT on a non-loopback address" in plaintext
    assert "ssl.client.auth=required" in plaintext
    one_way = listener_warning("10.0.0.5", "10.0.0.5:9093", tls(ClientAuth.NONE))
    assert one_way is not None and "SSL without ssl.client.auth" in one_way
    assert listener_warning("10.0.0.5", "10.0.0.5:9093", tls(ClientAuth.REQUIRED)) is None
    assert listener_warning("127.0.0.1", "127.0.0.1:9093", None) is None
