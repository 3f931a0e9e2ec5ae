"""What `make run` runs (the launcher), end to end: three controllers, three brokers
ONLINE, the README's kcat lines (list, produce, consume) against its brokers, a
clean stop on Ctrl-C, and a second run resuming from the same data.

It uses the fixed ports the README documents (9093-9095 and friends), below the
ephemeral range the other tests' free ports come from; `make run TLS=1` is tested
here too, so the two never run at once (one module is one xdist worker).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_cluster import BIN
from process_logs import watch

ONLINE_LINES = ("101       ONLINE", "102       ONLINE", "103       ONLINE")


@contextlib.contextmanager
def launched(data_dir: Path, *flags: str) -> Iterator[list[str]]:
    """The launcher (`make run`) started on `data_dir`; yields its output lines once
    the "all ONLINE" banner is out (the list grows with what it prints on Ctrl-C),
    then stops it with Ctrl-C, which must end it with status 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "quorum.launcher", *flags, "--data-dir", str(data_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    for name in (
        "controller-1",
        "controller-2",
        "controller-3",
        "broker-101",
        "broker-102",
        "broker-103",
    ):  # the launcher's processes' logs
        watch(data_dir / "logs" / f"{name}.log", name)  # fmt: skip
    try:
        assert proc.stdout is not None
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "Ctrl-C stops everything" in line:
                break
        yield lines
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            rest, _ = proc.communicate(timeout=60)
            lines.append(rest)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0, "".join(lines)


def run_until_online(data_dir: Path) -> str:
    with launched(data_dir) as lines:
        pass
    return "".join(lines)


@pytest.mark.slow
def test_make_run_starts_three_controllers_and_three_online_brokers(tmp_path: Path) -> None:
    with launched(tmp_path) as lines:
        # The brokers speak Kafka's protocol on 9092/9192/9292: kcat lists the cluster.
        listing = subprocess.run(
            ["kcat", "-b", "127.0.0.1:9092", "-L"],
            capture_output=True, text=True, timeout=30, check=False,
        )  # fmt: skip
        assert listing.returncode == 0, listing.stderr
        assert "3 brokers:" in listing.stdout, listing.stdout
        assert "broker 101 at 127.0.0.1:9092" in listing.stdout, listing.stdout
        # The README's lines: a topic made with quorumctl, produced to and read back.
        made = subprocess.run(
            [str(BIN / "quorumctl"), "topics", "create", "orders", "--partitions", "3",
             "--replication-factor", "3"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
        produced = subprocess.run(
            ["kcat", "-b", "127.0.0.1:9092", "-P", "-t", "orders", "-p", "0", "-X", "acks=all"],
            input="one\ntwo\n", capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        consumed = subprocess.run(
            ["kcat", "-b", "127.0.0.1:9092", "-C", "-t", "orders", "-p", "0", "-o", "beginning",
             "-e", "-f", "%o %s\n"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert (consumed.returncode, consumed.stdout) == (0, "0 one\n1 two\n"), consumed.stderr
    first = "".join(lines)
    for line in ONLINE_LINES:
        assert line in first, first
    assert "LeaderId:" in first and "stopping brokers, then controllers" in first
    for name in ("controller-1", "controller-2", "controller-3", "broker-101", "broker-102"):
        assert (tmp_path / "config" / f"{name}.properties").exists()
    broker_log = (tmp_path / "logs" / "broker-101.log").read_text()
    assert "STOPPING -> OFFLINE" in broker_log  # Ctrl-C: a controlled shutdown
    second = run_until_online(tmp_path)
    assert "Formatting" not in second  # resumed, not formatted again
    for line in ONLINE_LINES:
        assert line in second, second


@pytest.mark.slow
def test_make_run_over_mtls_and_quorumctl_with_the_generated_certificate(
    tmp_path: Path,
) -> None:
    with launched(tmp_path, "--tls") as lines:
        out = "".join(lines)
        for broker in (101, 102, 103):
            assert f"{broker}       ONLINE" in out, out
        env = dict(os.environ)
        env.update(re.findall(r"export (QUORUMCTL_SSL_\w+)=(\S+)", out))
        assert len(env) - len(os.environ) == 3, out

        def quorumctl(*args: str, environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [str(BIN / "quorumctl"), *args],
                capture_output=True, text=True, timeout=60, env=environment, check=False,
            )  # fmt: skip

        described = quorumctl("quorum", "describe", "--status", environment=env)
        assert described.returncode == 0, described.stderr
        assert "LeaderId:" in described.stdout
        brokers = quorumctl("brokers", "list", environment=env)
        assert brokers.returncode == 0 and "ONLINE" in brokers.stdout, brokers.stderr
        config = (tmp_path / "config" / "controller-1.properties").read_text()
        assert "ssl.client.auth=required" in config
        assert "listener.security.protocol.map=CONTROLLER:SSL" in config
        assert "super.users=User:CN=controller-1;" in config
        acls = quorumctl("acls", "list", environment=env)
        assert acls.returncode == 0 and "User:CN=broker-101" in acls.stdout, acls.stderr
        # Without the operator's certificate: refused at the handshake.
        dropped = ("QUORUMCTL_SSL_CERTIFICATE_LOCATION", "QUORUMCTL_SSL_KEY_LOCATION")
        plain = {k: v for k, v in env.items() if k not in dropped}
        refused = quorumctl("quorum", "describe", "--status", environment=plain)
        assert refused.returncode == 1
