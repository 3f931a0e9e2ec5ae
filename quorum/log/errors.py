"""Storage faults a node cannot work around: it must stop rather than guess.

Every error names the file (and, for the log, the byte position and offset) so
an operator can inspect the damage; none of them is raised after something on
disk was changed to "fix" it.
"""

from __future__ import annotations

from pathlib import Path


class StorageError(Exception):
    """An unrecoverable storage fault."""


class StorageCorruptionError(StorageError):
    """Bytes on disk are not what this code wrote; nothing was repaired."""

    def __init__(
        self,
        path: str | Path,
        detail: str,
        *,
        position: int | None = None,
        offset: int | None = None,
    ) -> None:
        self.path = Path(path)
        self.detail = detail
        self.position = position
        self.offset = offset
        where = ""
        if position is not None:
            where += f" at byte position {position}"
        if offset is not None:
            where += f" (log offset {offset})"
        super().__init__(f"{self.path}{where}: {detail}")


class LogCorruptionError(StorageCorruptionError):
    """A segment, index or checkpoint of the metadata log is damaged."""


class QuorumStateCorruptionError(StorageCorruptionError):
    """The quorum-state file cannot be parsed; votes cannot be trusted."""


class InconsistentClusterIdError(StorageError):
    """The data directory belongs to another cluster: refuse to join it."""

    def __init__(
        self, path: str | Path, expected: str, found: str, message: str | None = None
    ) -> None:
        self.path = Path(path)
        self.expected = expected
        self.found = found
        super().__init__(
            message
            or f"{self.path}: cluster id is {found!r}, this node is configured for {expected!r}"
        )


class InconsistentNodeIdError(StorageError):
    """The data directory belongs to another node: using it would double-vote."""

    def __init__(self, path: str | Path, expected: int, found: int) -> None:
        self.path = Path(path)
        self.expected = expected
        self.found = found
        super().__init__(f"{self.path}: node id is {found}, this node is configured as {expected}")


class LogDirectoryLockedError(StorageError):
    """Another process has the log directory open; two writers would corrupt it."""
