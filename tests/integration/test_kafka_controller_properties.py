"""`quorum-controller` given Kafka's own controller.properties, as a real process:
a broken file is refused with every problem in one run; a working one starts,
logs its effective configuration and one WARN line naming the Kafka keys it
ignores, and leads its one-voter quorum from the directory `log.dirs` names.
"""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

from controller_cluster import BIN, free_port, quorumctl
from process_logs import watch

from quorum.common.config import render_properties
from quorum.common.meta_properties import META_FILE


def kafka_file(tmp_path: Path, port: int, **extra: str) -> Path:
    props = {
        "process.roles": "controller",
        "node.id": "1",
        "controller.quorum.voters": f"1@127.0.0.1:{port}",
        "listeners": f"CONTROLLER://127.0.0.1:{port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "num.network.threads": "3",
        "num.io.threads": "8",
        "log.dirs": str(tmp_path / "kraft-controller-logs"),
        "num.partitions": "1",
        "log.retention.hours": "168",
        **extra,
    }
    path = tmp_path / "controller.properties"
    path.write_text(render_properties(props))
    return path


def test_a_broken_kafka_file_lists_every_problem_in_one_run(tmp_path: Path) -> None:
    config = kafka_file(
        tmp_path,
        free_port(),
        **{"num.netwrok.threads": "3", "log.retention.hour": "1", "node.id": "one"},
    )
    done = subprocess.run(
        [str(BIN / "quorum-controller"), "--config", str(config)],
        capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert "3 problems:" in done.stderr
    assert "did you mean num.network.threads?" in done.stderr
    assert "did you mean log.retention.hours?" in done.stderr
    assert "node.id: must be an integer" in done.stderr
    assert "Traceback" not in done.stderr


def test_kafkas_file_starts_and_says_what_it_ignores(tmp_path: Path) -> None:
    port = free_port()
    config = kafka_file(tmp_path, port)
    cluster_id = quorumctl("storage", "random-uuid").stdout.strip()
    formatted = quorumctl("storage", "format", "--cluster-id", cluster_id, "--config", str(config))
    assert formatted.returncode == 0, formatted.stderr
    assert (tmp_path / "kraft-controller-logs" / META_FILE).exists()
    log_file = tmp_path / "controller.log"
    watch(log_file, "controller")
    with log_file.open("wb") as out:
        proc = subprocess.Popen(
            [str(BIN / "quorum-controller"), "--config", str(config)],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            status = quorumctl(
                "quorum", "describe", "--status", "-o", "json",
                "--bootstrap-controller", f"127.0.0.1:{port}", "--timeout", "2",
            )  # fmt: skip
            if status.returncode == 0:
                break
            time.sleep(0.2)
        assert status.returncode == 0, status.stderr + log_file.read_text()
        text = log_file.read_text()
        assert "WARNING" in text
        assert (
            "ignoring 4 Kafka properties this controller does not use: "
            "log.retention.hours, num.io.threads, num.network.threads, num.partitions"
        ) in text
        values = text.split("ControllerConfig values", 1)[1]
        assert f"\tmetadata.log.dir = {tmp_path / 'kraft-controller-logs'}" in values
        assert "\tcontroller.quorum.election.timeout.ms = 1000" in values  # defaults too
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(15)
