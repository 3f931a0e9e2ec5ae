"""The product's version, for every console script's `--version`."""

from __future__ import annotations

from importlib import metadata

DISTRIBUTION = "kraft-quorum"


def product_version() -> str:
    """The installed distribution's version ("unknown" when run from a bare checkout)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"


def version_line(program: str) -> str:
    """`quorumctl 0.1.0 (kraft-quorum)`, the line `--version` prints."""
    return f"{program} {product_version()} ({DISTRIBUTION})"
