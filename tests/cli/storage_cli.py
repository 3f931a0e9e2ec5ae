"""`quorumctl storage` as an operator runs it (a subprocess), and a controller's
configuration to format: the set-up the storage tests share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from quorum.common.config import render_properties


def quorumctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quorum.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def write_config(tmp_path: Path, node_id: int = 1, extra: dict[str, str] | None = None) -> Path:
    props = {
        "node.id": str(node_id),
        "process.roles": "controller",
        "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9094",
        "listeners": f"CONTROLLER://127.0.0.1:{9092 + node_id}",
        "metadata.log.dir": str(tmp_path / "controller"),
        **(extra or {}),
    }
    path = tmp_path / f"controller-{node_id}.properties"
    path.write_text(render_properties(props))
    return path


def format_(config: Path, cluster_id: str, *more: str) -> subprocess.CompletedProcess[str]:
    return quorumctl(
        "storage", "format", "--cluster-id", cluster_id, "--config", str(config), *more
    )
