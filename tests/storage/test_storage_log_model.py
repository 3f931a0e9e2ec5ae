"""FileLogStore and MemoryLogStore honour the same LogStore contract: driven by
the same random operations, they report the same offsets and recover the same
batches (the file store also across reopens)."""

from __future__ import annotations

import inspect
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from storage_helpers import make_batch

from quorum.log.api import LogStore, QuorumStateStore
from quorum.log.file_log import FileLogStore
from quorum.log.memory import MemoryLogStore, MemoryQuorumStateStore
from quorum.log.quorum_state import FileQuorumStateStore
from quorum.raft.records import Batch, SnapshotId
from snapshots.api import SnapshotStore
from snapshots.memory import MemorySnapshotStore
from snapshots.store import FileSnapshotStore

OPERATIONS = ["append", "append", "append", "flush", "truncate", "advance", "reset", "reopen"]


def conforms_to_log_store(store: FileLogStore | MemoryLogStore) -> LogStore:
    return store  # mypy checks the protocol here


def conforms_to_state_store(
    store: FileQuorumStateStore | MemoryQuorumStateStore,
) -> QuorumStateStore:
    return store


def conforms_to_snapshot_store(store: FileSnapshotStore | MemorySnapshotStore) -> SnapshotStore:
    return store


def test_implementations_have_the_protocol_signatures() -> None:
    """The same check at run time, for readers who do not run mypy."""
    pairs = [
        (LogStore, [FileLogStore, MemoryLogStore]),
        (QuorumStateStore, [FileQuorumStateStore, MemoryQuorumStateStore]),
        (SnapshotStore, [FileSnapshotStore, MemorySnapshotStore]),
    ]
    for protocol, implementations in pairs:
        members = [n for n in vars(protocol) if not n.startswith("_")]
        assert members
        for implementation in implementations:
            for name in members:
                expected = getattr(protocol, name)
                actual = getattr(implementation, name)
                if isinstance(expected, property):
                    assert isinstance(actual, property), f"{implementation.__name__}.{name}"
                else:
                    assert list(inspect.signature(actual).parameters) == list(
                        inspect.signature(expected).parameters
                    ), f"{implementation.__name__}.{name}"


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(st.tuples(st.sampled_from(OPERATIONS), st.integers(0, 10_000)), max_size=40))
def test_file_log_matches_the_memory_log(tmp_path: Path, steps: list[tuple[str, int]]) -> None:
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    memory = MemoryLogStore()
    files = FileLogStore(directory, segment_bytes=300, index_interval_bytes=50)
    epoch = 1
    snapshot_end = 0
    try:
        for operation, n in steps:
            end = memory.end_offset
            if operation == "append":
                epoch += n % 2
                batches: list[Batch] = []
                for i in range(1 + n % 3):
                    base = batches[-1].next_offset if batches else end
                    batches.append(make_batch(base, epoch, count=1 + (n + i) % 4, size=n % 50))
                memory.append(batches)
                files.append(batches)
            elif operation == "flush":
                memory.flush(end)
                files.flush(end)
            elif operation == "truncate":
                _, batches = memory.recover()
                allowed = [b for b in batches if b.base_offset >= snapshot_end]
                if allowed:
                    target = allowed[n % len(allowed)]
                    cut = target.base_offset + n % len(target.records)
                    memory.truncate(cut)
                    files.truncate(cut)
            elif operation == "advance" and end > snapshot_end:
                snapshot_end += 1 + n % (end - snapshot_end)
                _, batches = memory.recover()
                at = next(b for b in batches if b.base_offset <= snapshot_end - 1 < b.next_offset)
                memory.advance_start(SnapshotId(snapshot_end, at.epoch))
                files.advance_start(SnapshotId(snapshot_end, at.epoch))
            elif operation == "reset":
                snapshot_end = end + n % 7
                epoch += 1
                memory.reset_to_snapshot(SnapshotId(snapshot_end, epoch))
                files.reset_to_snapshot(SnapshotId(snapshot_end, epoch))
            elif operation == "reopen":
                files.close()
                files = FileLogStore(directory, segment_bytes=300, index_interval_bytes=50)
            assert (files.start_offset, files.end_offset) == (
                memory.start_offset,
                memory.end_offset,
            )
            assert files.recover() == memory.recover()
    finally:
        files.close()
        shutil.rmtree(directory)
