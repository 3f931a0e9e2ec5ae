"""The HTTP endpoint every process serves (controllers and broker agents) on its
`metrics.listener`, and the latency buckets they share so their histograms compare.

`/metrics` is the Prometheus exposition; `/healthz` answers 200 while the process
serves at all (a liveness probe); `/readyz` answers 200 only when the process's
own readiness check passes (a controller: it knows a reachable leader; a broker:
it is ONLINE) and 503 with the reason otherwise, so an HTTP probe is honest. Any
other path is 404: prometheus_client's own server answered the metrics page on
every path, so a probe of `/healthz` "passed" on a leaderless node.

Given an SSL context (`metrics.listener=https://...`, `quorum.common.metrics_tls`)
the same paths are served over HTTPS only. The handshake runs on the
connection's own thread, not in `accept`, so a client that connects and says
nothing holds one thread until `HANDSHAKE_TIMEOUT_S`, never the listener; a
plaintext client's failed handshake is dropped without a traceback.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

from prometheus_client import CollectorRegistry, Info, ProcessCollector
from prometheus_client.exposition import choose_encoder

from quorum.common.channels import ListenerError
from quorum.common.version import product_version

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT_S = 10.0

# (ready?, one line saying why) — evaluated on every /readyz request.
ReadinessCheck = Callable[[], tuple[bool, str]]

LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
)


class _Handler(BaseHTTPRequestHandler):
    """`/metrics`, `/healthz`, `/readyz`; 404 elsewhere. One per request."""

    endpoint: ClassVar[MetricsEndpoint]
    timeout = HANDSHAKE_TIMEOUT_S  # also bounds a silent client over plain HTTP

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            self._answer(200, encoder(self.endpoint.registry), content_type)
        elif path == "/healthz":
            self._answer(200, b"ok\n")
        elif path == "/readyz":
            ready, reason = self.endpoint.readiness()
            self._answer(200 if ready else 503, f"{reason}\n".encode())
        else:
            self._answer(404, b"not found: try /metrics, /healthz or /readyz\n")

    def _answer(self, status: int, body: bytes, content_type: str = "text/plain") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Scrapes every few seconds would flood the process's log."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A failed TLS handshake (a plaintext scrape, an untrusted certificate) or
        a dropped connection: one debug line, not a traceback on stderr."""
        log.debug("metrics connection from %s failed", client_address, exc_info=True)


class MetricsEndpoint:
    """`/metrics`, `/healthz` and `/readyz` over HTTP on their own thread, one
    registry per process. `readiness` is set by the process (default: ready)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # process_resident_memory_bytes, process_cpu_seconds_total, process_open_fds,
        # process_start_time_seconds, ...: what every Prometheus exporter serves.
        ProcessCollector(registry=self.registry)
        self.readiness: ReadinessCheck = lambda: (True, "ready")
        self._server: ThreadingHTTPServer | None = None

    def build_info(self, **labels: str) -> None:
        """`quorum_build_info{version=..., ...} 1`: the version, plus what the process
        knows of itself (cluster id, node id), to join on in dashboards."""
        info = Info("quorum_build", "The running build and this process's identity.",
                    registry=self.registry)  # fmt: skip
        info.info({"version": product_version(), **labels})

    def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int:
        """Serve on `host:port` (HTTPS with `tls`); the port actually bound."""
        handler = type("Handler", (_Handler,), {"endpoint": self})
        scheme = "https" if tls else "http"
        try:
            server = _Server((host, port), handler)
        except OSError as err:
            raise ListenerError(
                f"cannot listen on metrics.listener {scheme}://{host}:{port}: {err.strerror}"
            ) from err
        if tls is not None:
            listening: socket.socket = server.socket
            server.socket = tls.wrap_socket(
                listening, server_side=True, do_handshake_on_connect=False
            )
        threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
        self._server = server
        return int(server.server_port)

    def stop(self) -> None:
        server = self._server
        if server is not None:
            server.shutdown()
            server.server_close()
            self._server = None
