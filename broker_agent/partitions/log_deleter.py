"""Deleting replicas' directories off the event loop, as Kafka's LogManager does.

Removing a replica's directory (its segments, indexes and checkpoints) costs a
syscall per file; a DeleteTopics of 100 topics used to remove ~33 directories on
the broker's event loop in one go, which held its Kafka listener and its
heartbeats (a third of the loop's busy time in `bench/admin.py`'s rounds). So a
deleted replica's directory is first renamed, on the loop, to
`<topic>-<partition>.<id>-delete` (Kafka's suffix): one rename frees the name at
once for a topic re-created under it, and the dead directory can no longer be
mistaken for a live replica. A worker thread then removes it. A directory still
marked when the broker stops is removed at the next start (`sweep`), so a crash
between the two steps leaves nothing behind for good.
"""

from __future__ import annotations

import logging
import shutil
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

log = logging.getLogger("broker_agent.partitions.replica_manager")

DELETE_SUFFIX = "-delete"


def marked_name(directory: Path) -> Path:
    """The name a replica's directory takes once deleted: unique, never a replica's
    (those end in `-<partition>`)."""
    return directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")


class LogDeleter:
    """One worker thread removes the renamed directories, in the order deleted."""

    def __init__(self, broker_id: int) -> None:
        self.broker_id = broker_id
        self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"log-deleter-{broker_id}")
        self._pending: set[Future[None]] = set()

    def delete(self, directory: Path) -> Path | None:
        """Rename now (on the caller's thread), remove later; the marked path, or
        None when the directory did not exist."""
        marked = marked_name(directory)
        try:
            directory.rename(marked)
        except FileNotFoundError:
            return None
        self._submit(marked)
        return marked

    def sweep(self, log_dir: Path) -> int:
        """Directories left marked by an earlier run are removed too."""
        marked = [p for p in log_dir.iterdir() if p.name.endswith(DELETE_SUFFIX) and p.is_dir()]
        for path in marked:
            self._submit(path)
        return len(marked)

    def _submit(self, path: Path) -> None:
        future = self._executor.submit(self._remove, path)
        self._pending.add(future)
        future.add_done_callback(self._pending.discard)

    def _remove(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)
        if path.exists():
            log.warning("broker %d: could not remove deleted log %s", self.broker_id, path)

    def wait(self) -> None:
        """Every removal submitted so far is done (tests, and close)."""
        for future in list(self._pending):
            future.result()

    def close(self) -> None:
        """Stops taking work; removals already queued finish in the background
        (whatever is left is swept at the next start)."""
        self._executor.shutdown(wait=False, cancel_futures=True)
