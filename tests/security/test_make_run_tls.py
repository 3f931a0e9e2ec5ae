"""`make run TLS=1` (the launcher with `--tls`): the local cluster comes up over
mTLS with a generated CA, and quorumctl works with the printed environment.

It uses the fixed ports the README documents, like tests/integration/test_make_run.py.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.integration.controller_cluster import BIN


@pytest.mark.slow
def test_make_run_over_mtls_and_quorumctl_with_the_generated_certificate(
    tmp_path: Path,
) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "quorum.launcher", "--tls", "--data-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
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
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode == 0
