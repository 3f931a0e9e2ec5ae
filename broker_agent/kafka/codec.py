"""Kafka's wire format, in one place: frames, request headers, request bodies and
responses, all through kio's classes (generated from Kafka's own message schemas).

Nothing else in the broker touches bytes of the protocol. Handlers receive kio
request objects and return plain mappings; `build` turns a mapping into the
response class of the version the client asked for, keeping only the fields
that version has (a field added in v9 is simply dropped for a v3 client), so
no handler is written per version and no byte offset appears outside here.
"""

from __future__ import annotations

import base64
import datetime
import io
import struct
import types
import typing
import uuid
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass
from functools import cache, lru_cache
from typing import Any

from kio.index import load_entity_module
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from broker_agent.kafka import response_writer

SIZE = struct.Struct(">i")
# Every request header starts with api_key (int16), api_version (int16), correlation_id (int32).
HEADER_PREFIX = struct.Struct(">hhi")
NULL_UUID = uuid.UUID(int=0)


class MalformedRequest(Exception):
    """The bytes of a request do not parse as the API and version its header names."""


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request class of (api_key, api_version)


def api_name(api_key: int) -> str:
    """kio's module name of an API (``produce``), or ``api_<key>`` for one it lacks."""
    return api_key_map.get(api_key, f"api_{api_key}")


@cache
def entity_class(api_key: int, api_version: int, kind: EntityType) -> Any:
    module = load_entity_module(api_key_map[api_key], api_version, kind)  # type: ignore[arg-type]
    suffix = "Request" if kind is EntityType.request else "Response"
    for name in dir(module):
        value = getattr(module, name)
        if (
            isinstance(value, type)
            and name.endswith(suffix)
            and getattr(value, "__type__", None) is kind
        ):
            return value
    raise LookupError(f"no {suffix} class in {module.__name__}")


def request_class(api_key: int, api_version: int) -> Any:
    return entity_class(api_key, api_version, EntityType.request)


def response_class(api_key: int, api_version: int) -> Any:
    return entity_class(api_key, api_version, EntityType.response)


def peek_header(frame: bytes | memoryview) -> tuple[int, int, int]:
    """api_key, api_version, correlation_id: readable in every header version."""
    if len(frame) < HEADER_PREFIX.size:
        raise MalformedRequest(f"a request of {len(frame)} bytes has no header")
    api_key, api_version, correlation_id = HEADER_PREFIX.unpack_from(frame, 0)
    return api_key, api_version, correlation_id


def decode_request(frame: bytes, api_key: int, api_version: int) -> DecodedRequest:
    """Parse a whole request frame (without its size prefix) of a served version."""
    cls = request_class(api_key, api_version)
    try:
        header, header_size = entity_reader(cls.__header_schema__)(frame, 0)
        body, _ = entity_reader(cls)(frame, header_size)
    except Exception as err:  # kio raises struct/Value/Unicode/Index errors on bad bytes
        raise MalformedRequest(
            f"{api_name(api_key)} v{api_version}: {type(err).__name__}: {err}"
        ) from None
    # Bytes after the last field are ignored, as Kafka's parser ignores them:
    # librdkafka 2.x sends three extra bytes after a Metadata v12 request for all topics.
    return DecodedRequest(
        api_key, api_version, header.correlation_id, getattr(header, "client_id", None), body
    )


# Produce v0-2 (Kafka removed them in 4.0; kio has no schema): header v1, then acks.
LEGACY_PRODUCE_VERSIONS = range(3)
_ACKS = struct.Struct(">h")


def produce_acks(frame: bytes, api_version: int) -> int | None:
    """The `acks` of a Produce request of any version, served or not: from its schema
    when kio has one, else from the legacy layout (acks first in the body); None
    when the bytes do not say."""
    try:
        if api_version in LEGACY_PRODUCE_VERSIONS:
            _, header_size = entity_reader(RequestHeaderV1)(frame, 0)
            return int(_ACKS.unpack_from(frame, header_size)[0])
        return int(decode_request(frame, 0, api_version).body.acks)
    except Exception:  # no schema of this version, or bytes that do not parse
        return None


@dataclass(frozen=True, slots=True)
class Encoded:
    """A response body already written: by `write_response`, or once for answers
    built from the metadata image and sent many times (`answer_cache.py`)."""

    cls: Any
    body: bytes


def write_response(cls: Any, values: Mapping[str, Any]) -> Encoded:
    """The response of class `cls` for a handler's mapping, written by the writer
    compiled for `cls` (`response_writer.py`): the bytes `build` and kio would
    give, without building kio's entities."""
    return Encoded(cls, response_writer.write_body(cls, values))


def encode_response(correlation_id: int, response: Any) -> bytes:
    """The response frame, size prefix included, with the header its class names
    (v0 for ApiVersions at every version, as Kafka does).

    The header is a template per header class (encoded by kio once, the
    correlation id, its first field in every version, packed in), and the bodies
    of answers that repeat (`REPEATING_ANSWERS`) are encoded once each: kio's
    writer costs tens of microseconds per entity, and a coordinator sends the same
    few OffsetCommit and Heartbeat answers thousands of times a second."""
    if isinstance(response, Encoded):
        cls, body = response.cls, response.body
    elif (cls := type(response)).__api_key__ in REPEATING_ANSWERS:
        try:
            body = _repeated_body(cls, response)
        except TypeError:  # a field that cannot be hashed: encoded as any other
            body = _encode_entity(response)
    else:
        body = _encode_entity(response)
    tail = _header_tail(cls.__header_schema__)
    return _SIZE_AND_CORRELATION.pack(4 + len(tail) + len(body), correlation_id) + tail + body


# Answers that are the same bytes again and again (per group member or committed
# partition, error code and version): small, so a bounded cache of them is cheap.
REPEATING_ANSWERS = frozenset({8, 12})  # OffsetCommit, Heartbeat
_SIZE_AND_CORRELATION = struct.Struct(">ii")


def encode_body(response: Any) -> bytes:
    """A response body's bytes, without the header: what `Encoded` carries."""
    return _encode_entity(response)


def _encode_entity(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


@lru_cache(maxsize=1024)
def _repeated_body(cls: Any, response: Any) -> bytes:
    """Keyed by class and value: kio's entities are frozen dataclasses, equal
    only to an entity of the same class with equal fields."""
    return _encode_entity(response)


@cache
def _header_tail(header_cls: Any) -> bytes:
    """A response header's bytes after its correlation id (v1's empty tagged
    fields; nothing in v0)."""
    return _encode_entity(header_cls(correlation_id=0))[4:]


def encode_request(header: Any, request: Any) -> bytes:
    """A request frame, size prefix included (the broker's own client uses it)."""
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(type(header))(buffer, header)
    entity_writer(type(request))(buffer, request)
    data = buffer.getbuffer()
    SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


def decode_response(frame: bytes, api_key: int, api_version: int) -> tuple[int, Any]:
    """correlation_id and the kio response of a frame without its size prefix."""
    cls = response_class(api_key, api_version)
    header, header_size = entity_reader(cls.__header_schema__)(frame, 0)
    body, _ = entity_reader(cls)(frame, header_size)
    return header.correlation_id, body


# ------------------------------------------------------------------ building


@dataclass(frozen=True, slots=True)
class _FieldPlan:
    name: str
    kafka_type: str | None
    nested: Any  # a nested entity class, or None
    is_tuple: bool
    has_default: bool


@cache
def _plan(cls: Any) -> tuple[_FieldPlan, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in fields(cls):
        hint = hints[f.name]
        nested, is_tuple = _nested_entity(hint)
        out.append(
            _FieldPlan(
                f.name,
                f.metadata.get("kafka_type"),
                nested,
                is_tuple,
                f.default is not MISSING or f.default_factory is not MISSING,
            )
        )
    return tuple(out)


def _nested_entity(hint: Any) -> tuple[Any, bool]:
    """(entity class, is a tuple of them) for a field's type hint, or (None, False)."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    origin = typing.get_origin(hint)
    if origin is tuple:
        inner = args[0] if args else None
        return (inner if is_dataclass(inner) else None), True
    if origin in (typing.Union, types.UnionType) and args:
        return _nested_entity(args[0])
    if is_dataclass(hint):
        return hint, False
    return None, False


def build(cls: Any, values: Mapping[str, Any]) -> Any:
    """An instance of kio class `cls` from a plain mapping: keys the class lacks
    are dropped, nested mappings become nested entities, error codes become
    ErrorCode, millisecond ints become timedeltas, topic-id strings UUIDs."""
    kwargs: dict[str, Any] = {}
    for plan in _plan(cls):
        if plan.name not in values:
            if not plan.has_default:
                raise KeyError(f"{cls.__module__}.{cls.__name__} needs {plan.name!r}")
            continue
        kwargs[plan.name] = _value(plan, values[plan.name])
    return cls(**kwargs)


def _value(plan: _FieldPlan, value: Any) -> Any:
    if value is None:
        return None
    if plan.nested is not None:
        if plan.is_tuple:
            return tuple(v if is_dataclass(v) else build(plan.nested, v) for v in value)
        return value if is_dataclass(value) else build(plan.nested, value)
    if plan.is_tuple:
        return tuple(value)
    return _primitive(plan.kafka_type, value)


def build_value(cls: Any, name: str, value: Any) -> Any:
    """Field `name` of kio class `cls` as `build` makes it from a mapping's value."""
    for plan in _plan(cls):
        if plan.name == name:
            return _value(plan, value)
    raise KeyError(f"{cls.__module__}.{cls.__name__} has no field {name!r}")


def _primitive(kafka_type: str | None, value: Any) -> Any:
    if kafka_type == "error_code":
        return ErrorCode(int(value))
    if kafka_type in ("timedelta_i32", "timedelta_i64") and isinstance(value, int):
        return datetime.timedelta(milliseconds=value)
    if kafka_type == "datetime_i64" and isinstance(value, int):
        return datetime.datetime.fromtimestamp(value / 1000, tz=datetime.UTC)
    if kafka_type == "uuid" and isinstance(value, str):
        return topic_uuid(value)
    return value


def topic_uuid(topic_id: str) -> uuid.UUID:
    """The image's topic id (base64url, 22 characters, as Kafka prints it) as a UUID."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=="))


def topic_id_text(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).rstrip(b"=").decode()


def millis(value: datetime.timedelta | int) -> int:
    """A kio timedelta field (timeout, max wait) in milliseconds."""
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)
