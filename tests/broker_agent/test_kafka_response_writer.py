"""The compiled response writer (`response_writer.py`) against kio's: for every
response class the broker serves, at every version, mappings of the kinds the
handlers return (seeded random values: ints for error codes and durations, topic
ids as base64 text or UUIDs, None where a field may be null, nested entries,
tagged fields set and unset) must give the very bytes of `codec.build` + kio."""

from __future__ import annotations

import base64
import datetime
import random
import uuid
from dataclasses import MISSING, Field, fields
from typing import Any

import pytest
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)

from broker_agent.kafka import codec
from broker_agent.kafka.response_writer import write_body
from broker_agent.kafka.versions import SERVED, ApiKey

_INTS = {
    "int8": (-128, 127),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 255),
    "uint16": (0, 65535),
    "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**64 - 1),
}


def response_classes() -> list[tuple[ApiKey, int]]:
    return [(k, v) for k, (low, high) in SERVED.items() for v in range(low, high + 1)]


def primitive(rng: random.Random, kafka_type: str) -> Any:
    if kafka_type in _INTS:
        low, high = _INTS[kafka_type]
        return rng.choice([0, -1 if low < 0 else 1, low, high, rng.randint(low, high)])
    if kafka_type == "float64":
        return rng.choice([0.0, 1.5, -2.25])
    if kafka_type == "bool":
        return rng.choice([True, False])
    if kafka_type == "error_code":
        return rng.choice([0, 3, 36, 41])
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        ms = rng.choice([0, 5, 30_000])
        return ms if rng.random() < 0.5 else datetime.timedelta(milliseconds=ms)
    if kafka_type == "datetime_i64":
        return rng.choice([0, 1_700_000_000_123])
    if kafka_type == "string":
        return rng.choice(["", "t-00001", "é-topic", "x" * 200])
    if kafka_type in ("bytes", "records"):
        return rng.choice([b"", b"\x00\x01", bytes(range(200))])
    if kafka_type == "uuid":
        value = uuid.UUID(int=rng.getrandbits(128))
        text = base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()
        return rng.choice([value, text, codec.NULL_UUID])
    raise AssertionError(kafka_type)


def value_for(rng: random.Random, f: Field[Any], depth: int) -> Any:
    kind = classify_field(f)
    if is_optional(f) and rng.random() < 0.25:
        return None
    if isinstance(kind, EntityTupleField):
        return [mapping(rng, kind.type_, depth + 1) for _ in range(rng.randint(0, 2))]
    if isinstance(kind, EntityField):
        return mapping(rng, kind.type_, depth + 1)
    kafka_type = f.metadata["kafka_type"]
    if isinstance(kind, PrimitiveTupleField):
        return [primitive(rng, kafka_type) for _ in range(rng.randint(0, 3))]
    return primitive(rng, kafka_type)


def mapping(rng: random.Random, cls: Any, depth: int = 0) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in fields(cls):
        has_default = f.default is not MISSING or f.default_factory is not MISSING
        if has_default and rng.random() < (0.5 if get_field_tag(f) is not None else 0.15):
            continue  # left to its default, as handlers leave fields a version lacks
        values[f.name] = value_for(rng, f, depth)
    values["a_key_no_version_has"] = 1  # dropped by both writers
    return values


def kio_bytes(cls: Any, values: dict[str, Any]) -> bytes:
    return codec._encode_entity(codec.build(cls, values))


@pytest.mark.parametrize(("api", "version"), response_classes())
def test_the_compiled_writer_writes_kios_bytes(api: ApiKey, version: int) -> None:
    cls = codec.response_class(api, version)
    rng = random.Random(f"{api}-{version}")
    for _ in range(30):
        values = mapping(rng, cls)
        assert write_body(cls, values) == kio_bytes(cls, values), values


def test_a_missing_field_without_a_default_is_named() -> None:
    cls = codec.response_class(ApiKey.CREATE_TOPICS, 7)
    with pytest.raises(KeyError, match="topics"):
        write_body(cls, {"throttle_time": 0})


def test_a_missing_fixed_width_field_without_a_default_is_named() -> None:
    cls = codec.response_class(ApiKey.CREATE_TOPICS, 7)
    topic = {"name": "t", "topic_id": None, "error_message": None, "configs": []}
    with pytest.raises(KeyError, match="error_code"):  # of a run packed in one struct
        write_body(cls, {"throttle_time": 0, "topics": [topic]})


def test_entries_given_as_kio_entities_are_written_by_kio() -> None:
    cls = codec.response_class(ApiKey.CREATE_TOPICS, 5)
    values = mapping(random.Random(1), cls)
    built = codec.build(cls, values)
    assert write_body(cls, {"throttle_time": 0, "topics": list(built.topics)}) == kio_bytes(
        cls, {"throttle_time": 0, "topics": list(built.topics)}
    )


def test_an_encoded_response_frames_like_a_kio_one() -> None:
    cls = codec.response_class(ApiKey.DELETE_TOPICS, 6)
    values = mapping(random.Random(2), cls)
    assert codec.encode_response(9, codec.write_response(cls, values)) == codec.encode_response(
        9, codec.build(cls, values)
    )
