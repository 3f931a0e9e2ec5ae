"""`meta.properties`: the identity `quorumctl storage format` gives a directory.

As with ``kafka-storage.sh format``, a metadata directory is formatted once for
one cluster and one node before a controller may use it. A controller refuses to
start on an unformatted directory or on one formatted for another node id, so a
mistyped path or a copied directory cannot join a quorum under a false
identity. (A directory formatted for another *cluster* is caught on the wire:
peers reject its requests with INCONSISTENT_CLUSTER_ID.)

The file is Kafka's version 1 (KRaft) layout, a Java properties file::

    #
    # written by quorumctl storage format
    #Sun Nov 22 21:14:37 UTC 2026
    version=1
    cluster.id=MkU3OEVBNTcwNTJENDM2Qg
    node.id=1
    directory.id=J8iyX0bCRYmvK5QWpWQ5Zg

Decisions where Kafka is silent or lax, each to protect existing data:

- Formatting never overwrites ``meta.properties``. With ``ignore_formatted`` a
  directory already formatted for the *same* cluster and node is accepted (so
  scripts can format idempotently); one formatted for another cluster or node
  is still an error, because "already done" would then be a lie.
- A directory that holds anything besides ``meta.properties`` (and
  ``lost+found`` or our own interrupted temporary file) is refused: it holds a
  log whose identity is unknown, and stamping a fresh identity onto it could
  let a node vote with another node's or another cluster's Raft state. Restore
  its original ``meta.properties`` instead, or empty it deliberately.
- Cluster ids must be canonical: the one spelling `random_uuid` produces.
  Peers compare cluster ids as strings, so two spellings of the same 16 bytes
  would be two different clusters.
"""

from __future__ import annotations

import base64
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import javaproperties

from quorum.common.fsutil import fsync_dir, write_atomically

__all__ = [
    "META_FILE",
    "AlreadyFormattedError",
    "MetaProperties",
    "NodeIdMismatchError",
    "NotFormattedError",
    "StorageFormatError",
    "check_directory",
    "directory_id_problem",
    "ensure_directory_id",
    "format_directory",
    "random_uuid",
    "read_meta_properties",
    "validate_cluster_id",
]

META_FILE = "meta.properties"
VERSION = 1
HEADER = "\n written by quorumctl storage format"
# What may already sit in a directory we format: a file system's lost+found (a
# dedicated disk's mount point) and the temporary file of an interrupted format.
_IGNORED_ENTRIES = frozenset({"lost+found", META_FILE + ".tmp"})
_BASE64URL_22 = re.compile(r"[A-Za-z0-9_-]{22}")
# Kafka reserves the all-zero id and the ids just above it (Uuid.ZERO_UUID,
# Uuid.ONE_UUID = the metadata topic's id, and the DirectoryId sentinels).
_RESERVED_BELOW = 100


class StorageFormatError(Exception):
    """A metadata directory that cannot be used as it is; the message names it."""


class NotFormattedError(StorageFormatError):
    """The directory has no meta.properties: `quorumctl storage format` was not run."""


class NodeIdMismatchError(StorageFormatError):
    """The directory was formatted for another node.id than the configuration's."""


class AlreadyFormattedError(StorageFormatError):
    """Formatting would replace an existing meta.properties."""


@dataclass(frozen=True)
class MetaProperties:
    """The identity stored in a formatted directory."""

    cluster_id: str
    node_id: int
    version: int = VERSION
    directory_id: str | None = None  # KIP-858: tells one disk of a node from another

    def as_properties(self) -> dict[str, str]:
        """The file's keys, in the order they are written."""
        props = {
            "version": str(self.version),
            "cluster.id": self.cluster_id,
            "node.id": str(self.node_id),
        }
        if self.directory_id is not None:
            props["directory.id"] = self.directory_id
        return props


def random_uuid() -> str:
    """A new Kafka-style id: a random (version 4) UUID's 16 bytes as URL-safe
    base64 without padding, 22 characters.

    Like Kafka, it never returns an id starting with ``-`` (it would read as a
    command-line flag when pasted after ``--cluster-id``) nor a reserved one.
    """
    while True:
        raw = uuid.uuid4().bytes
        text = _encode(raw)
        if not text.startswith("-") and not _is_reserved(raw):
            return text


def validate_cluster_id(cluster_id: str) -> None:
    """Raise StorageFormatError unless `cluster_id` is a canonical 22-character
    URL-safe base64 encoding of 16 bytes that Kafka does not reserve."""
    raw = _decode(cluster_id)
    if raw is None:
        raise StorageFormatError(
            f"invalid cluster id {cluster_id!r}: expected 22 characters of URL-safe base64 "
            "encoding 16 bytes, as `quorumctl storage random-uuid` prints"
        )
    if _is_reserved(raw):
        raise StorageFormatError(f"invalid cluster id {cluster_id!r}: it is a reserved id")


def format_directory(directory: Path, meta: MetaProperties, ignore_formatted: bool = False) -> bool:
    """Create `directory` if needed and write its meta.properties atomically.

    Returns True when it wrote the file, False when the directory was already
    formatted for the same cluster and node and `ignore_formatted` is set.
    Raises AlreadyFormattedError for any other already formatted directory and
    StorageFormatError for an invalid identity or a directory that is in use
    by something else (see the module docstring for why).
    """
    validate_cluster_id(meta.cluster_id)
    if meta.node_id < 0:
        raise StorageFormatError(f"invalid node.id {meta.node_id}: must be >= 0")
    if meta.version != VERSION:
        raise StorageFormatError(f"cannot write meta.properties version {meta.version}")
    if meta.directory_id is not None and (problem := directory_id_problem(meta.directory_id)):
        raise StorageFormatError(f"invalid directory.id {meta.directory_id!r}: {problem}")
    path = directory / META_FILE
    try:
        if directory.exists() and not directory.is_dir():
            raise StorageFormatError(f"{directory} exists and is not a directory")
        if path.exists():
            return _already_formatted(directory, meta, ignore_formatted)
        if directory.exists():
            others = sorted(p.name for p in directory.iterdir() if p.name not in _IGNORED_ENTRIES)
            if others:
                shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
                raise StorageFormatError(
                    f"{directory} is not empty ({shown}) but has no {META_FILE}: it may hold "
                    f"a log of unknown identity. Restore its {META_FILE}, or empty it to "
                    "start this node afresh"
                )
        _make_directory(directory)
        if meta.directory_id is None:
            meta = MetaProperties(meta.cluster_id, meta.node_id, meta.version, random_uuid())
        text = javaproperties.dumps(meta.as_properties(), comments=HEADER, timestamp=True)
        write_atomically(path, text.encode("utf-8"))
    except OSError as err:
        raise StorageFormatError(f"cannot format {directory}: {err.strerror or err}") from err
    return True


def read_meta_properties(directory: Path) -> MetaProperties:
    """The identity a directory was formatted with.

    NotFormattedError when meta.properties is missing; StorageFormatError,
    naming the file, when it cannot be read or does not hold a valid identity
    (never guessed at: a wrong identity is worse than none).
    """
    path = directory / META_FILE
    if not path.exists():
        what = "does not exist" if not directory.exists() else f"has no {META_FILE}"
        raise NotFormattedError(
            f"{directory} is not formatted ({what}): run "
            "`quorumctl storage format --cluster-id ID --config FILE` first"
        )
    try:
        props = javaproperties.loads(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise StorageFormatError(f"cannot read {path}: {err.strerror or err}") from err
    except ValueError as err:  # undecodable bytes, a bad \u escape
        raise StorageFormatError(f"{path} is not a properties file: {err}") from err
    for key in ("version", "cluster.id", "node.id"):
        if key not in props:
            raise StorageFormatError(f"{path} has no {key}")
    version = _int_property(path, props, "version")
    if version == 0:
        raise StorageFormatError(
            f"{path} has version 0 (a ZooKeeper-mode broker's); this build reads version 1"
        )
    if version != VERSION:
        raise StorageFormatError(f"{path} has version {version}; this build reads {VERSION}")
    node_id = _int_property(path, props, "node.id")
    cluster_id = props["cluster.id"]
    try:
        validate_cluster_id(cluster_id)
    except StorageFormatError as err:
        raise StorageFormatError(f"{path}: {err}") from None
    directory_id = props.get("directory.id")
    if directory_id is not None and (problem := directory_id_problem(directory_id)):
        raise StorageFormatError(f"{path} has an invalid directory.id {directory_id!r}: {problem}")
    return MetaProperties(cluster_id, node_id, version, directory_id)


def directory_id_problem(directory_id: str) -> str | None:
    """Why `directory_id` cannot name a log directory (KIP-858), or None when it can.

    It must be a canonical id, as `random_uuid` prints, and not one of the ids
    Kafka reserves: the all-zero id means "unassigned" and the next ones mean
    "lost" and "migrating", so a directory claiming one would be mistaken for
    such a state.
    """
    return kafka_uuid_problem(directory_id)


def kafka_uuid_problem(value: str) -> str | None:
    """Why `value` is not a canonical Kafka Uuid that may name something (a
    directory, a broker incarnation), or None. The reserved ids (all-zero and
    those just above it) are sentinels, never names."""
    raw = _decode(value)
    if raw is None:
        return "expected 22 characters of URL-safe base64 encoding 16 bytes"
    if _is_reserved(raw):
        return "it is a reserved id (the all-zero id and those just above it)"
    return None


def ensure_directory_id(directory: Path, meta: MetaProperties) -> MetaProperties:
    """`meta` with a directory.id, giving the directory one if it has none yet.

    A directory formatted before directory ids existed (or by a tool that does
    not write them) gets a random one, written back atomically to its
    meta.properties, once: every later start reads the same id, so the
    controllers see one directory under one id across restarts, as Kafka's
    nodes do when they start on such a directory.
    """
    if meta.directory_id is not None:
        return meta
    meta = MetaProperties(meta.cluster_id, meta.node_id, meta.version, random_uuid())
    text = javaproperties.dumps(meta.as_properties(), comments=HEADER, timestamp=True)
    try:
        write_atomically(directory / META_FILE, text.encode("utf-8"))
    except OSError as err:
        raise StorageFormatError(
            f"cannot write a directory.id to {directory / META_FILE}: {err.strerror or err}"
        ) from err
    return meta


def check_directory(directory: Path, node_id: int) -> MetaProperties:
    """The directory's identity, provided it was formatted for `node_id`."""
    meta = read_meta_properties(directory)
    if meta.node_id != node_id:
        raise NodeIdMismatchError(
            f"{directory / META_FILE} was formatted for node.id {meta.node_id}, but the "
            f"configuration says node.id {node_id}: wrong metadata.log.dir, or a copied "
            "directory?"
        )
    return meta


def _already_formatted(directory: Path, meta: MetaProperties, ignore_formatted: bool) -> bool:
    path = directory / META_FILE
    try:
        existing = read_meta_properties(directory)
    except StorageFormatError as err:
        raise AlreadyFormattedError(f"{path} exists but is unusable ({err})") from err
    same = existing.cluster_id == meta.cluster_id and existing.node_id == meta.node_id
    if ignore_formatted and same:
        return False
    found = f"cluster.id {existing.cluster_id}, node.id {existing.node_id}"
    if not ignore_formatted:
        raise AlreadyFormattedError(
            f"{directory} is already formatted ({found}) and is never formatted twice; "
            "pass --ignore-formatted to accept an identical format"
        )
    raise AlreadyFormattedError(
        f"{directory} is already formatted for another identity ({found}, not "
        f"cluster.id {meta.cluster_id}, node.id {meta.node_id})"
    )


def _make_directory(directory: Path) -> None:
    """mkdir -p, then fsync each new directory's parent so the new entries
    survive a power loss along with the file written into them."""
    missing: list[Path] = []
    probe = directory
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    directory.mkdir(parents=True, exist_ok=True)
    for created in reversed(missing):
        fsync_dir(created.parent)


def _int_property(path: Path, props: dict[str, str], key: str) -> int:
    raw = props[key].strip()
    if not re.fullmatch(r"[0-9]+", raw):
        raise StorageFormatError(f"{path} has {key}={raw!r}, expected a number >= 0")
    return int(raw)


def _encode(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode(text: str) -> bytes | None:
    """The 16 bytes of a canonical 22-character id, or None."""
    if not _BASE64URL_22.fullmatch(text):
        return None
    raw = base64.urlsafe_b64decode(text + "==")
    return raw if _encode(raw) == text else None


def _is_reserved(raw: bytes) -> bool:
    return int.from_bytes(raw, "big") < _RESERVED_BELOW
