"""A real Spark standalone cluster on loopback: one master and one worker, started
from the pyspark installation's `bin/spark-class` and always stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [str(SPARK_CLASS), *args], stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,
        )  # fmt: skip


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


def _wait_for(log: Path, needle: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if needle in text:
            return
        if proc.poll() is not None:
            raise AssertionError(f"{log.name} exited {proc.returncode}:\n{text[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"no {needle!r} in {log} after {timeout_s}s:\n{log.read_text()[-3000:]}")


@contextmanager
def standalone_cluster(work: Path, cores: int = 2, memory: str = "1g") -> Iterator[str]:
    """Yields the master URL, spark://127.0.0.1:PORT."""
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "SPARK_HOME": str(SPARK_HOME), "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_LOG_DIR": str(work), "SPARK_WORKER_DIR": str(work / "worker")}  # fmt: skip
    port = free_port()
    url = f"spark://127.0.0.1:{port}"
    master = _start(
        ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(free_port())],
        work / "master.log", env,
    )  # fmt: skip
    worker: subprocess.Popen[bytes] | None = None
    try:
        _wait_for(work / "master.log", "I have been elected leader", master, 90)
        worker = _start(
            ["org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--webui-port", str(free_port()), "--cores", str(cores), "--memory", memory,
             "--work-dir", str(work / "worker")],
            work / "worker.log", env,
        )  # fmt: skip
        _wait_for(work / "worker.log", "Successfully registered with master", worker, 90)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)
