"""Which topic a replica's directory belongs to: Kafka's `partition.metadata` (KIP-516).

A directory is named `<topic>-<partition>`, and a topic deleted and created again
under the same name gets the same name with another topic id. A broker that was
down (or behind) across the delete and the re-create would otherwise open the
dead topic's log as the new topic's replica and serve its records. So each
replica's directory records its topic id at creation, and a directory whose
file names another id is set aside for deletion (`LogDeleter`) before the new
replica's log is created, as Kafka's brokers treat such a log as stray.

A directory without the file (created before this file existed, or a crash
before it was written, when no record had been appended yet) is adopted.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Container, Mapping
from pathlib import Path

from broker_agent.partitions.assignments import PartitionAssignment
from broker_agent.partitions.log_deleter import LogDeleter
from quorum.common.fsutil import write_all

log = logging.getLogger("broker_agent.partitions.replica_manager")

PARTITION_METADATA = "partition.metadata"
VERSION = 0
MAX_FILE_BYTES = 4096


def read_topic_id(directory: Path) -> str | None:
    """The topic id the directory was created for; None when it has no readable file."""
    try:
        with open(directory / PARTITION_METADATA, "rb") as f:
            text = f.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError):
        return None
    fields = dict(line.partition(":")[::2] for line in text.splitlines())
    if fields.get("version", "").strip() != str(VERSION):
        return None
    topic_id = fields.get("topic_id", "").strip()
    return topic_id or None


def claim(directory: Path, topic_id: str, deleter: LogDeleter) -> bool:
    """Make `directory` the replica directory of `topic_id`, before its log is
    opened; True when it held another topic's log, which is now set aside.

    The file is synced before the log is created, the log's creation syncs the
    new directory (`open_segments`), and its first flush syncs the directory's
    entry in the log directory (`FileLogStore`): a flushed log says whose it is
    after a crash or a power loss. (Syncing the directory here as
    well cost each new replica two more fsyncs, measured in `bench/admin.py`'s
    brokers' CPU per topic.)"""
    found = read_topic_id(directory)
    if found == topic_id:
        return False
    stale = found is not None
    if stale:
        log.warning(
            "%s belongs to topic id %s, not %s (a deleted topic of the same name): "
            "deleting it", directory, found, topic_id,
        )  # fmt: skip
        deleter.delete(directory)
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / PARTITION_METADATA, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, f"version: {VERSION}\ntopic_id: {topic_id}\n".encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return stale


def remove_strays(
    log_dir: Path,
    wanted: Mapping[tuple[str, int], PartitionAssignment],
    hosted: Container[tuple[str, int]],
    deleter: LogDeleter,
) -> list[str]:
    """Set aside the replica directories whose topic id says they are no replica
    of this broker any more (the topic was deleted, or the partition moved away,
    while the broker was down); their names. Called once the broker's image has
    caught up (the replica manager's first image), as Kafka's brokers look for
    stray logs. A directory without a readable `partition.metadata` (older, or
    not a replica's), and one hosted or being opened, is left alone."""
    strays = []
    for path in log_dir.iterdir():
        topic, _, partition = path.name.rpartition("-")
        if not topic or not partition.isdigit() or not path.is_dir():
            continue  # also skips the `-delete` directories
        key = (topic, int(partition))
        if key in wanted or key in hosted:
            continue  # a wanted one is claimed when its log opens, whatever its id
        if read_topic_id(path) is not None:
            log.info("%s: a stray replica (its topic was deleted or it moved away)", path)
            deleter.delete(path)
            strays.append(path.name)
    return strays
