"""Probes of the kraft-quorum chart, run by the kubelet inside a pod.

    probe.py alive HOST:PORT [--tls DIR]        a controller's gRPC health service answers at all
    probe.py ready HOST:PORT [--tls DIR]        ... and says SERVING (a leader is known)
    probe.py broker-online URL [--tls DIR]      a broker agent's metrics say it is ONLINE
    probe.py http-alive URL [--tls DIR]         the metrics listener answers 200 (/healthz)

Liveness must not depend on a leader: the health service says SERVING only while
the node knows one, so a quorum that lost its majority would otherwise be
restarted pod by pod and never recover. Any answer (SERVING or NOT_SERVING)
proves the process and its event loop respond; readiness wants SERVING.

`--tls DIR`: the pod's TLS Secret (tls.crt, tls.key, ca.crt, as mounted by the
chart), because the kubelet's own gRPC and HTTPS probes can neither verify the
server nor present a client certificate. The probe dials 127.0.0.1 and checks
the server's certificate against the pod's DNS name ($POD_DNS_NAME), which the
certificate names; it presents the pod's certificate, so it passes mTLS.
"""

from __future__ import annotations

import http.client
import os
import re
import socket
import ssl
import sys
import urllib.parse
from dataclasses import dataclass

ONLINE = re.compile(r'^quorum_broker_state\{state="ONLINE"\} 1(\.0)?$', re.MULTILINE)


@dataclass(frozen=True)
class Tls:
    """The pod's certificate, key and CA, and the name the server must prove."""

    directory: str
    server_name: str | None

    def file(self, name: str) -> str:
        return os.path.join(self.directory, name)

    def read(self, name: str) -> bytes:
        with open(self.file(name), "rb") as f:
            return f.read()


def health(address: str, tls: Tls | None, timeout_s: float = 5.0) -> str | None:
    """The health service's answer to Check(""), or None (printed why)."""
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    if tls is None:
        channel = grpc.insecure_channel(address)
    else:
        ca, key, cert = (tls.read(n) for n in ("ca.crt", "tls.key", "tls.crt"))
        credentials = grpc.ssl_channel_credentials(ca, key, cert)
        options = [("grpc.ssl_target_name_override", tls.server_name)] if tls.server_name else []
        channel = grpc.secure_channel(address, credentials, options=options)
    with channel:
        stub = health_pb2_grpc.HealthStub(channel)
        try:
            reply = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
        except grpc.RpcError as err:
            print(f"{address}: no answer from the health service: {err.code().name}")
            return None
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{address}: {status}")
    return status


def alive(address: str, tls: Tls | None) -> int:
    return 0 if health(address, tls) is not None else 1


def ready(address: str, tls: Tls | None) -> int:
    return 0 if health(address, tls) == "SERVING" else 1


class _Https(http.client.HTTPSConnection):
    """HTTPS to an address, verifying the certificate against another name."""

    def __init__(self, host: str, port: int, context: ssl.SSLContext, name: str, timeout: float):
        super().__init__(host, port, timeout=timeout, context=context)
        self._tls_context, self._server_name = context, name

    def connect(self) -> None:
        sock = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._tls_context.wrap_socket(sock, server_hostname=self._server_name)


def get(url: str, tls: Tls | None, timeout_s: float = 5.0) -> tuple[int, str]:
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    connection: http.client.HTTPConnection
    if parts.scheme == "https":
        context = ssl.create_default_context(cafile=tls.file("ca.crt") if tls else None)
        if tls is not None:
            context.load_cert_chain(tls.file("tls.crt"), tls.file("tls.key"))
        name = (tls.server_name if tls else None) or host
        connection = _Https(host, port, context, name, timeout_s)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout_s)
    try:
        connection.request("GET", parts.path or "/")
        reply = connection.getresponse()
        return reply.status, reply.read().decode("utf-8", "replace")
    finally:
        connection.close()


def broker_online(url: str, tls: Tls | None) -> int:
    try:
        status, text = get(url, tls)
    except (OSError, http.client.HTTPException) as err:
        print(f"{url}: {err}")
        return 1
    if status == 200 and ONLINE.search(text):
        print(f"{url}: ONLINE")
        return 0
    state = re.search(r'^quorum_broker_state\{state="(\w+)"\} 1(\.0)?$', text, re.MULTILINE)
    print(f"{url}: not ONLINE ({state.group(1) if state else f'HTTP {status}, no state'})")
    return 1


def http_alive(url: str, tls: Tls | None) -> int:
    try:
        status, _ = get(url, tls)
    except (OSError, http.client.HTTPException) as err:
        print(f"{url}: {err}")
        return 1
    print(f"{url}: HTTP {status}")
    return 0 if status == 200 else 1


CHECKS = {"alive": alive, "ready": ready, "broker-online": broker_online, "http-alive": http_alive}


def main(argv: list[str]) -> int:
    args = argv[1:]
    tls = None
    if len(args) == 4 and args[2] == "--tls":
        tls = Tls(args[3], os.environ.get("POD_DNS_NAME") or None)
        args = args[:2]
    if len(args) != 2 or args[0] not in CHECKS:
        print(
            f"usage: {argv[0]} alive|ready HOST:PORT | broker-online|http-alive URL [--tls DIR]",
            file=sys.stderr,
        )
        return 2
    return CHECKS[args[0]](args[1], tls)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
