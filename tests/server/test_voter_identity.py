"""Which certificate may speak for which voter, static or added at runtime."""

from __future__ import annotations

from quorum.common.tls import ClientAuth, TlsSettings
from quorum.server.voter_identity import voter_identity


def tls(client_auth: ClientAuth) -> TlsSettings:
    return TlsSettings(
        certificate_chain=b"cert", private_key=b"key", ca=b"ca", client_auth=client_auth
    )


def test_static_voters_are_bound_to_their_principal() -> None:
    identity = voter_identity([1, 2, 3], {2: "User:CN=b"}, tls(ClientAuth.REQUIRED))
    assert identity.problem(1, "User:CN=controller-1") is None
    assert identity.problem(2, "User:CN=b") is None
    assert "bound to User:CN=b" in (identity.problem(2, "User:CN=controller-2") or "")
    assert identity.problem(1, "User:CN=controller-2") is not None
    assert identity.problem(3, "User:CN=broker-101") is not None


def test_a_voter_added_at_runtime_is_bound_too() -> None:
    identity = voter_identity([1, 2, 3], {}, tls(ClientAuth.REQUIRED))
    assert identity.problem(4, "User:CN=controller-4") is None
    problem = identity.problem(4, "User:CN=broker-101")
    assert problem is not None and "added at runtime" in problem
    assert identity.problem(4, "User:ANONYMOUS") is not None


def test_a_shared_controller_certificate_speaks_for_added_voters() -> None:
    shared = "User:CN=controllers,O=example"
    identity = voter_identity([0, 1, 2], dict.fromkeys([0, 1, 2], shared), tls(ClientAuth.REQUIRED))
    assert identity.problem(3, shared) is None
    assert identity.problem(3, "User:CN=broker-0") is not None


def test_nothing_is_checked_without_client_certificates() -> None:
    for settings in (None, tls(ClientAuth.NONE)):
        identity = voter_identity([1, 2, 3], {}, settings)
        assert identity.problem(4, "User:ANONYMOUS") is None
        assert identity.problem(1, "User:CN=anyone") is None
