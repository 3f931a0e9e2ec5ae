"""`kraft.version` 1 on disk: what `quorumctl storage format` writes for KIP-853.

Kafka's `kafka-storage.sh format --initial-controllers` finalizes `kraft.version`
1 and writes the first voter set; `--no-initial-controllers` finalizes it for a
controller that joins later as an observer and learns the voters from the log.
Here:

- `bootstrap.checkpoint` in `metadata.log.dir` holds ``kraft.version=1``; its
  absence is `kraft.version` 0 (static `controller.quorum.voters`, as before);
- `--initial-controllers` also writes the initial VotersRecord as the metadata
  log's first entry (offset 0, epoch 0, a control batch with timestamp 0), the
  same bytes on every initial controller, so that it is replicated like any
  entry: an observer fetching from offset 0 learns the voter set, and snapshots
  carry it once the log no longer starts at 0.

A snapshot stores the voter set of its offsets under `VOTERS_SNAPSHOT_KEY`
(a key no state machine writes: it starts with a zero byte), which the driver
strips before the state machine loads the snapshot.
"""

from __future__ import annotations

import os
from pathlib import Path

from quorum.raft.records import Batch
from quorum.raft.voters import (
    KRAFT_VERSION_DYNAMIC,
    Endpoint,
    Voter,
    VoterSet,
    decode_voters,
    encode_voters,
)

BOOTSTRAP_FILE = "bootstrap.checkpoint"
VOTERS_SNAPSHOT_KEY = b"\x00kraft/voters"
CONTROLLER_LISTENER = "CONTROLLER"


class InitialControllersError(ValueError):
    """`--initial-controllers` that cannot be the first voter set; the message says why."""


def parse_voter(spec: str) -> Voter:
    """``id@host:port:directory-id`` (Kafka's `--initial-controllers` entry)."""
    node, at, rest = spec.strip().partition("@")
    host, _, tail = rest.rpartition(":")  # directory id last (it holds no colon)
    host, _, port = host.rpartition(":")
    if not at or not host or not tail:
        raise InitialControllersError(f"{spec!r} is not id@host:port:directory-id")
    try:
        voter_id, port_number = int(node), int(port)
    except ValueError as err:
        raise InitialControllersError(f"{spec!r}: id and port must be integers") from err
    if voter_id < 0 or not 0 < port_number < 65536:
        raise InitialControllersError(f"{spec!r}: id or port out of range")
    return Voter(voter_id, tail, (Endpoint(CONTROLLER_LISTENER, host, port_number),))


def parse_initial_controllers(text: str) -> VoterSet:
    voters = [parse_voter(part) for part in text.split(",") if part.strip()]
    if not voters:
        raise InitialControllersError("--initial-controllers names no controller")
    ids = [v.voter_id for v in voters]
    if len(set(ids)) != len(ids):
        raise InitialControllersError(f"--initial-controllers names an id twice: {ids}")
    return VoterSet(tuple(sorted(voters, key=lambda v: v.voter_id)))


def initial_voters_batch(voters: VoterSet) -> Batch:
    """The log's first entry: equal on every initial controller, byte for byte."""
    return Batch(0, 0, (encode_voters(voters),), 0, control=True)


def write_kraft_version(metadata_log_dir: Path) -> None:
    path = metadata_log_dir / BOOTSTRAP_FILE
    temporary = path.with_suffix(".tmp")
    temporary.write_text(f"kraft.version={KRAFT_VERSION_DYNAMIC}\n")
    with temporary.open("rb") as handle:
        os.fsync(handle.fileno())
    temporary.replace(path)


def read_kraft_version(metadata_log_dir: Path) -> int:
    """0 without a bootstrap checkpoint; raises ValueError for an unreadable one."""
    path = metadata_log_dir / BOOTSTRAP_FILE
    if not path.exists():
        return 0
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "kraft.version":
            version = int(value)
            if version not in (0, KRAFT_VERSION_DYNAMIC):
                raise ValueError(f"{path}: unsupported kraft.version {version}")
            return version
    raise ValueError(f"{path} names no kraft.version")


def voters_from_snapshot_record(key: bytes, value: bytes) -> VoterSet | None:
    return decode_voters(value) if key == VOTERS_SNAPSHOT_KEY else None


__all__ = [
    "BOOTSTRAP_FILE",
    "VOTERS_SNAPSHOT_KEY",
    "InitialControllersError",
    "initial_voters_batch",
    "parse_initial_controllers",
    "parse_voter",
    "read_kraft_version",
    "voters_from_snapshot_record",
    "write_kraft_version",
]
