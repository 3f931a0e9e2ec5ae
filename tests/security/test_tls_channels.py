"""TLS on the one place channels and servers are built: who gets through, and as whom.

A real gRPC server and real channels on loopback, with certificates from two
separate throw-away CAs (`quorum.common.local_ca`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import grpc
import pytest

from quorum.common.channels import listen, open_channel
from quorum.common.local_ca import LocalCa
from quorum.common.tls import ANONYMOUS, ClientAuth, TlsSettings, principal_of
from quorum.gen import raft_pb2 as pb
from quorum.gen import raft_pb2_grpc as pb_grpc
from quorum.rpc.servers import new_server


class _WhoAmI(pb_grpc.RaftQuorumServicer):
    """Answers DescribeQuorum with the caller's principal in `leader_address`."""

    async def DescribeQuorum(self, request: Any, context: Any) -> pb.DescribeQuorumResponse:
        return pb.DescribeQuorumResponse(leader_address=principal_of(context))


def _settings(ca: LocalCa, name: str | None, auth: ClientAuth = ClientAuth.NONE) -> TlsSettings:
    cert, key = ca.issue(name) if name else (None, None)
    return TlsSettings(certificate_chain=cert, private_key=key, ca=ca.ca_pem(), client_auth=auth)


async def _serve(
    server_tls: TlsSettings | None, client_tls: TlsSettings | None, timeout_s: float = 3.0
) -> str:
    """The principal the server saw, or raise the call's AioRpcError."""
    server = new_server()
    pb_grpc.add_RaftQuorumServicer_to_server(_WhoAmI(), server)
    port = listen(server, "127.0.0.1:0", server_tls)
    await server.start()
    channel = open_channel(f"127.0.0.1:{port}", tls=client_tls)
    try:
        stub = pb_grpc.RaftQuorumStub(channel)
        reply = await stub.DescribeQuorum(pb.DescribeQuorumRequest(), timeout=timeout_s)
        return str(reply.leader_address)
    finally:
        await channel.close()
        await server.stop(None)


def _run(coro: Awaitable[str]) -> str:
    return asyncio.run(coro)  # type: ignore[arg-type]


CA = LocalCa("test CA")
OTHER_CA = LocalCa("another CA")


def test_mtls_principal_is_the_client_certificate_subject() -> None:
    seen = _run(_serve(_settings(CA, "controller-1", ClientAuth.REQUIRED), _settings(CA, "alice")))
    assert seen == "User:CN=alice"


def test_plaintext_client_to_a_tls_port_is_refused() -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        _run(_serve(_settings(CA, "controller-1", ClientAuth.REQUIRED), None, timeout_s=1.5))
    assert refused.value.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )


def test_a_certificate_from_another_ca_is_refused() -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        _run(
            _serve(
                _settings(CA, "controller-1", ClientAuth.REQUIRED),
                TlsSettings(
                    certificate_chain=OTHER_CA.issue("mallory")[0],
                    private_key=OTHER_CA.issue("mallory")[1],
                    ca=CA.ca_pem(),  # trusts the server, but is not trusted by it
                ),
                timeout_s=1.5,
            )
        )
    assert refused.value.code() in (
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
    )


def test_a_client_without_certificate_is_refused_when_required() -> None:
    with pytest.raises(grpc.aio.AioRpcError):
        _run(_serve(_settings(CA, "controller-1", ClientAuth.REQUIRED), _settings(CA, None), 1.5))


def test_tls_without_client_auth_admits_clients_as_anonymous() -> None:
    server = _settings(CA, "controller-1", ClientAuth.NONE)
    assert _run(_serve(server, _settings(CA, None))) == ANONYMOUS
    # A certificate the server never asked for does not name the caller.
    assert _run(_serve(server, _settings(CA, "bob"))) == ANONYMOUS


def test_a_server_from_an_untrusted_ca_is_refused_by_the_client() -> None:
    with pytest.raises(grpc.aio.AioRpcError):
        _run(_serve(_settings(OTHER_CA, "impostor"), _settings(CA, "alice"), 1.5))


def test_plaintext_principal_is_anonymous() -> None:
    assert _run(_serve(None, None)) == ANONYMOUS
