"""A broker installs the controller's snapshot and builds its image in one pass.

The image is built from the records as they are written into the broker's own
snapshot store, aside from the image in use: only a published snapshot (its
checksum matched) replaces it, and a corrupt transfer leaves the broker exactly
as it was, image, log and snapshots. A real cache over real files; the
controller's side is a store that serves the archive, as a controller's does.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.metadata_cache import MetadataCache
from quorum.controller.metadata_image import MetadataImage
from quorum.controller.record_codec import wrap
from quorum.gen import metadata_pb2 as md
from quorum.raft.records import SnapshotId
from snapshots.errors import SnapshotCorruptionError
from snapshots.policy import SnapshotPolicy
from snapshots.store import FileSnapshotStore

SNAPSHOT = SnapshotId(1_000, 3)
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def controller_image() -> MetadataImage:
    image = MetadataImage()
    image.apply_record(wrap(topic=md.TopicRecord(name="orders", topic_id=TOPIC_ID)), 0)
    for pid in range(500):
        record = md.PartitionRecord(
            partition_id=pid, topic_id=TOPIC_ID, replicas=[1, 2, 3], isr=[1, 2], leader=pid % 3 + 1
        )
        image.apply_record(wrap(partition=record), 1 + pid)
    image.advance_to(SNAPSHOT.end_offset)
    return image


def served_archive(tmp_path: Path) -> tuple[bytes, MetadataImage]:
    image = controller_image()
    store = FileSnapshotStore(tmp_path / "controller", archive_on_write=True)
    store.write(SNAPSHOT, image.snapshot_records())
    size = store.archive_size(SNAPSHOT)
    return store.read_chunk(SNAPSHOT, 0, size).data, image


def open_cache(tmp_path: Path) -> MetadataCache:
    return MetadataCache(tmp_path / "broker", SnapshotPolicy(1 << 30, 3_600_000), 1 << 20, 0)


def test_the_installed_snapshot_is_the_new_image_and_survives_a_restart(tmp_path: Path) -> None:
    archive, expected = served_archive(tmp_path)
    cache = open_cache(tmp_path)
    before = cache.image
    receiver = cache.snapshots.begin_install(SNAPSHOT, len(archive))
    receiver.write_chunk(0, archive)
    cache.install(receiver, SNAPSHOT)
    assert cache.image is not before
    assert cache.image.digest() == expected.digest()
    assert cache.next_offset == SNAPSHOT.end_offset
    assert cache.image.partition_count == 500
    cache.close()

    reopened = open_cache(tmp_path)  # from the broker's own store, not the transfer
    try:
        assert reopened.image.digest() == expected.digest()
        assert reopened.next_offset == SNAPSHOT.end_offset
    finally:
        reopened.close()


def test_a_corrupt_transfer_leaves_the_image_in_use_untouched(tmp_path: Path) -> None:
    archive, _ = served_archive(tmp_path)
    damaged = bytearray(archive)
    damaged[len(archive) // 2] ^= 0x01
    cache = open_cache(tmp_path)
    before = cache.image
    digest = before.digest()
    receiver = cache.snapshots.begin_install(SNAPSHOT, len(damaged))
    receiver.write_chunk(0, bytes(damaged))
    with pytest.raises(SnapshotCorruptionError):
        cache.install(receiver, SNAPSHOT)
    try:
        assert cache.image is before and before.digest() == digest
        assert cache.next_offset == 0
        assert cache.snapshots.snapshot_ids() == []
    finally:
        cache.close()
