"""Which node a properties file describes and where its metadata lives.

`quorumctl storage` (format, info, upgrade) and the launcher need this of any
node's file, a controller's or a broker agent's, and nothing more; each
process's full key set stays with its process (`quorum.controller_config`,
`broker_agent.config`), which checks the rest of the file when it starts. A
broker agent's file names `process.roles=broker` and no CONTROLLER listener.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from quorum.common.config import ConfigError, IntSpec, integer, read_properties


@dataclass(frozen=True)
class NodeStorage:
    node_id: int
    metadata_log_dir: Path


def is_broker_agent_config(props: Mapping[str, str]) -> bool:
    roles = props.get("process.roles", "").strip()
    return roles == "broker" and "CONTROLLER://" not in props.get("listeners", "").upper()


def broker_storage(props: Mapping[str, str]) -> NodeStorage:
    """A broker agent's node id and metadata directory, checked as the agent
    checks them."""
    node_id = integer(props, "node.id", IntSpec("node_id", -1, 0), required=True)
    if props.get("process.roles", "") != "broker":
        raise ConfigError("process.roles", "must be broker for a broker agent")
    log_dir = props.get("metadata.log.dir", "")
    if not log_dir:
        raise ConfigError("metadata.log.dir", "is required: the broker's metadata cache")
    return NodeStorage(node_id, Path(log_dir))


def load_broker_storage(path: Path | str) -> NodeStorage:
    return broker_storage(read_properties(Path(path)))
