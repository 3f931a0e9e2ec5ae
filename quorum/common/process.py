"""Start-up steps every server process takes the same way (controllers and brokers).

Both processes are started as ``NAME --config FILE``, answer ``--version``,
refuse a bad properties file with one line on stderr and exit code 1, log with
the node's id in every line at `log.level`, stop gracefully on SIGTERM or
SIGINT, and may serve Prometheus metrics on `metrics.listener` (HTTPS with
`metrics.ssl.*`). Kept here, once, so an operator sees the same behaviour and
messages from either process, and a fix to one reaches both.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import signal
import ssl
import sys
from collections.abc import Callable
from typing import Protocol, TypeVar

from quorum.common.config import ConfigError, Endpoint
from quorum.common.metrics_tls import MetricsTls
from quorum.common.version import version_line

EXIT_STARTUP = 1
C = TypeVar("C")
# The collector's generation sizes for a process that holds a metadata image.
GC_THRESHOLDS = (100_000, 50, 100)


class MetricsListener(Protocol):
    def start(self, host: str, port: int, tls: ssl.SSLContext | None = None) -> int: ...


def argument_parser(
    prog: str, description: str, config_help: str, example_config: str
) -> argparse.ArgumentParser:
    """``--config FILE`` (required) and ``--version``; a process adds its own flags."""
    parser = argparse.ArgumentParser(
        prog=prog, description=description, epilog=f"Example: {prog} --config {example_config}"
    )
    parser.add_argument("--config", required=True, help=config_help)
    parser.add_argument("--version", action="version", version=version_line(prog))
    return parser


def load_config(prog: str, load: Callable[[str], C], path: str) -> C | None:
    """The parsed properties file, or None after telling why on stderr."""
    try:
        return load(path)
    except ConfigError as err:
        print(f"{prog}: invalid configuration: {err}", file=sys.stderr)
        return None


def configure_logging(level: str, who: str) -> None:
    """`log.level`, and `who` (``node 1``, ``broker 101``) in every line, so the
    lines of several processes sharing a terminal or a file tell themselves apart."""
    logging.basicConfig(
        level=level.upper(),
        format=f"%(asctime)s [{who}] %(levelname)s %(name)s: %(message)s",
    )


def cannot_start(prog: str, err: object, hint: str = "") -> int:
    """Tell why on stderr (one line, plus an optional hint); the exit code to return."""
    print(f"{prog}: cannot start: {err}{hint}", file=sys.stderr)
    return EXIT_STARTUP


def stop_on_signals(stop: Callable[[], None]) -> None:
    """SIGTERM and SIGINT call `stop` on the running loop (a graceful stop)."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop)


def start_metrics(
    metrics: MetricsListener, endpoint: Endpoint | None, tls: MetricsTls | None
) -> str:
    """Serve `metrics` on `metrics.listener`; where (for the start-up line), or
    ``disabled``. Raises `ListenerError` when the address cannot be bound."""
    if endpoint is None:
        return "disabled"
    port = metrics.start(endpoint.host, endpoint.port, tls.server_context() if tls else None)
    scheme = "https" if tls else "http"
    return f"{scheme}://{endpoint.host}:{port}/metrics"


__all__ = [
    "EXIT_STARTUP",
    "MetricsListener",
    "argument_parser",
    "cannot_start",
    "configure_logging",
    "load_config",
    "start_metrics",
    "stop_on_signals",
]


def tune_collector() -> None:
    """A metadata image (the controller's, and every broker's copy) is many
    long-lived objects. With CPython's default 700-allocation young generation the
    collector keeps re-examining them: 15% of a controller's time while it built
    and applied a million-partition write, and 6-7% of a core per process of 125
    broker agents while 500 of them applied 20 commits/s (docs/benchmarks.md,
    "Broker fan-out, last pass")."""
    gc.set_threshold(*GC_THRESHOLDS)
