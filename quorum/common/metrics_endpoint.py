"""The Prometheus `/metrics` endpoint every process serves (controllers and broker
agents), and the latency buckets they share so their histograms compare."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, start_http_server

from quorum.common.channels import ListenerError

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


class MetricsEndpoint:
    """`/metrics` over HTTP on its own thread, one registry per process."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._server: object | None = None

    def start(self, host: str, port: int) -> int:
        try:
            server, _thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            raise ListenerError(
                f"cannot listen on metrics.listener http://{host}:{port}: {err.strerror}"
            ) from err
        self._server = server
        return int(server.server_port)

    def stop(self) -> None:
        server = self._server
        if server is not None:
            server.shutdown()  # type: ignore[attr-defined]
            server.server_close()  # type: ignore[attr-defined]
            self._server = None
