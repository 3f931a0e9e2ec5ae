"""Start a Toxiproxy server for a test: the real `toxiproxy-server` when it is on
PATH, else the project's compatible fault proxy (`fault_proxy.py`) as a process.
Either way the tests talk to it only through the `toxiproxy-python` client."""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from process_logs import watch
from toxiproxy import Toxiproxy

FAULT_PROXY = Path(__file__).with_name("fault_proxy.py")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_command(port: int) -> list[str]:
    binary = shutil.which("toxiproxy-server")
    if binary:
        return [binary, "-host", "127.0.0.1", "-port", str(port)]
    return [sys.executable, str(FAULT_PROXY), "--host", "127.0.0.1", "--port", str(port)]


@contextlib.contextmanager
def toxiproxy_server(log: Path | None = None) -> Iterator[Toxiproxy]:
    """A running server, the client pointed at it; stopped on exit."""
    port = free_port()
    if log is not None:
        watch(log, "fault proxy")
    out = log.open("ab") if log is not None else subprocess.DEVNULL
    popen = subprocess.Popen(server_command(port), stdout=out, stderr=subprocess.STDOUT)
    try:
        client = Toxiproxy()
        client.update_api_consumer("127.0.0.1", port)
        deadline = time.monotonic() + 15
        while not client.running():
            if popen.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"toxiproxy server did not start: {server_command(port)}")
            time.sleep(0.02)
        yield client
    finally:
        popen.terminate()
        try:
            popen.wait(5)
        except subprocess.TimeoutExpired:
            popen.kill()
            popen.wait(5)
        if log is not None and hasattr(out, "close"):
            out.close()
