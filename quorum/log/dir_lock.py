"""One process per log directory: an exclusive lock held while the log is open."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from quorum.log.errors import LogDirectoryLockedError


def lock_directory(directory: Path) -> int:
    """Take an exclusive flock on the directory itself (so locking creates no
    file); closing the returned descriptor, or the process dying, releases it."""
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise LogDirectoryLockedError(f"{directory} is in use by another process") from None
    return fd
