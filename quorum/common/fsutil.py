"""The few file-system moves durability depends on, in one place (the log,
snapshots, meta.properties and the brokers' partition logs all use them).

`sync_file` uses fdatasync where available: it persists the data and the file
size (all that reading the log back needs) without forcing timestamp updates.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def sync_file(fd: int) -> None:
    """Make a file's data (and its size) durable."""
    if hasattr(os, "fdatasync"):
        os.fdatasync(fd)
    else:  # pragma: no cover - macOS / Windows
        os.fsync(fd)


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(directory: Path) -> None:
    """Make creations, renames and deletions inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    """os.write may write less than asked; loop until everything is written."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


IOV_MAX = 1024  # Linux's limit on buffers per writev call


def writev_all(fd: int, parts: Sequence[bytes]) -> None:
    """Write `parts` back to back, in as few system calls as the kernel allows."""
    for start in range(0, len(parts), IOV_MAX):
        group = parts[start : start + IOV_MAX]
        written = os.writev(fd, group)
        expected = sum(len(p) for p in group)
        if written < expected:  # rare: finish with plain writes
            write_all(fd, b"".join(group)[written:])


def pread_exact(fd: int, size: int, position: int) -> bytes:
    """Read `size` bytes at `position`, or fewer only at end of file."""
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.pread(fd, size, position)
        if not chunk:
            break
        chunks.append(chunk)
        size -= len(chunk)
        position += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` so that a crash leaves either the old or the new content.

    Temp file in the same directory, fsync, rename over the target, fsync the
    directory so the rename itself survives a power loss.
    """
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_dir(path.parent)
