"""Metadata records on the log: one versioned protobuf envelope per record.

A replica that meets a record it cannot understand (a newer envelope version, or
a record type this build does not know, which parses as an empty `oneof`) must
stop rather than skip it: a skipped record silently forks its image from the
other replicas'.
"""

from __future__ import annotations

import base64
import random
import uuid

from google.protobuf.message import DecodeError

from quorum.gen import metadata_pb2 as md

RECORD_VERSION = 1


class MetadataRecordError(Exception):
    """A committed record this replica cannot apply; the replica must stop."""


class UnsupportedRecordVersion(MetadataRecordError):
    pass


class UnknownRecordType(MetadataRecordError):
    pass


def wrap(**one: object) -> md.MetadataRecord:
    """`wrap(topic=md.TopicRecord(...))`: the envelope at the current version."""
    return md.MetadataRecord(version=RECORD_VERSION, **one)  # type: ignore[arg-type]


def encode(record: md.MetadataRecord) -> bytes:
    return record.SerializeToString()


def decode(data: bytes, offset: int) -> md.MetadataRecord:
    record = md.MetadataRecord()
    try:
        record.ParseFromString(data)
    except DecodeError as err:
        raise MetadataRecordError(f"record at offset {offset} is not a metadata record") from err
    kind = record.WhichOneof("record")
    if kind is None:
        raise UnknownRecordType(
            f"record at offset {offset} (version {record.version}) has a type this controller "
            "does not know; upgrade before applying"
        )
    if record.version < 1 or record.version > RECORD_VERSION:
        raise UnsupportedRecordVersion(
            f"record at offset {offset}: {kind} version {record.version} is not understood "
            f"here (versions 1..{RECORD_VERSION}); upgrade before applying"
        )
    return record


def record_type(record: md.MetadataRecord) -> str:
    return record.WhichOneof("record") or "unknown"


def new_uuid(rng: random.Random | None = None) -> str:
    """A UUID printed as Kafka prints topic ids: base64url, no padding, 22 chars."""
    raw = rng.randbytes(16) if rng is not None else uuid.uuid4().bytes
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def noop(payload: bytes = b"") -> bytes:
    return encode(wrap(no_op=md.NoOpRecord(payload=payload)))


def only_noop(data: bytes) -> str | None:
    """The rule for raw QuorumLog writes: a NoOp record this build understands."""
    try:
        record = decode(data, -1)
    except MetadataRecordError as err:
        return str(err)
    if record_type(record) != "no_op":
        return f"only NoOp records may be written directly, not {record_type(record)}"
    return None
