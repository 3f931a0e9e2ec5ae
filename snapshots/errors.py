"""Snapshot faults; all are storage errors so a driver can stop on any of them."""

from __future__ import annotations

from quorum.log.errors import StorageCorruptionError, StorageError


class SnapshotCorruptionError(StorageCorruptionError):
    """A snapshot (or a transferred archive of one) does not match its checksum."""


class SnapshotNotFoundError(StorageError, KeyError):
    """No snapshot with that id is stored."""


class SnapshotExistsError(StorageError):
    """A snapshot id names exactly one image; writing it twice is a bug."""


class SnapshotTransferError(StorageError):
    """A chunk arrived out of order or the transfer's size does not add up."""
