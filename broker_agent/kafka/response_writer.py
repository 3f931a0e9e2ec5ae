"""Response bodies written straight from the handlers' mappings, one writer
compiled per kio response class (so per API and version).

`codec.build` turns a handler's mapping into kio's frozen dataclasses and kio's
writer then walks them field by field, looking up a writer per field and value
on every call: tens of microseconds per entry, which for a forwarded
CreateTopics of 100 topics was more than the forwarding itself
(docs/benchmarks.md). Here the same walk is worked out once per class from
kio's own schema (its dataclass fields and their `kafka_type`): runs of
fixed-width fields are packed by one `struct.Struct`, and each field converts
only what a handler may hand it (an int for an error code or a millisecond
duration, a topic id as the image's base64 text). The bytes are kio's, field for
field (tests compare both writers on every response version of the APIs that
use this one); a nested value that already is a kio entity, and tagged fields,
are written by kio's own writer.
"""

from __future__ import annotations

import base64
import datetime
import io
import struct
from collections.abc import Callable, Mapping
from dataclasses import MISSING, Field, fields, is_dataclass
from functools import cache, partial
from typing import Any

from kio.serial import entity_writer
from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.serial.writers import write_tagged_field

Write = Callable[[bytes], Any]
Step = Callable[[Write, Mapping[str, Any]], None]
EntityWrite = Callable[[Write, Any], None]

_ABSENT = object()
_NO_DEFAULT = object()
_ZERO_UUID = bytes(16)
_MS = datetime.timedelta(milliseconds=1)

# kio's fixed-width types as struct codes.
_FIXED = {
    "int8": "b",
    "int16": "h",
    "int32": "i",
    "int64": "q",
    "uint8": "B",
    "uint16": "H",
    "uint32": "I",
    "uint64": "Q",
    "float64": "d",
    "bool": "?",
    "error_code": "h",
    "timedelta_i32": "i",
    "timedelta_i64": "q",
    "datetime_i64": "q",
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(0x80 | (value & 0x7F))
        value >>= 7
    out.append(value)
    return bytes(out)


_SMALL_VARINTS = tuple(_varint(n) for n in range(128))


def varint(value: int) -> bytes:
    """An unsigned varint (compact lengths)."""
    return _SMALL_VARINTS[value] if value < 128 else _varint(value)


# ------------------------------------------------------------- conversions


def _as_int(value: Any) -> int:
    return int(value)


def _as_millis(value: Any) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _as_epoch_millis(value: Any) -> int:
    if value is None:
        return -1
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    return int(value)


def _as_is(value: Any) -> Any:
    return value


def _converter(kafka_type: str) -> Callable[[Any], Any]:
    if kafka_type == "error_code":
        return _as_int
    if kafka_type in ("timedelta_i32", "timedelta_i64"):
        return _as_millis
    if kafka_type == "datetime_i64":
        return _as_epoch_millis
    return _as_is


def uuid_bytes(value: Any) -> bytes:
    """A topic id as its 16 bytes: a UUID, the image's base64url text, or None (zeros)."""
    if value is None:
        return _ZERO_UUID
    if isinstance(value, str):
        return base64.urlsafe_b64decode(value + "==")
    return value.bytes  # type: ignore[no-any-return]


def _default(field: Field[Any]) -> Any:
    if field.default is not MISSING:
        return field.default
    if field.default_factory is not MISSING:
        return field.default_factory()
    return _NO_DEFAULT


def _get(values: Mapping[str, Any], name: str, default: Any, owner: type) -> Any:
    value = values.get(name, _ABSENT)
    if value is _ABSENT:
        if default is _NO_DEFAULT:
            raise KeyError(f"{owner.__module__}.{owner.__name__} needs {name!r}")
        return default
    return value


# ------------------------------------------------------------------ writers


def _string_writer(flexible: bool, nullable: bool, binary: bool) -> Callable[[Write, Any], None]:
    null = varint(0) if flexible else (_I32 if binary else _I16).pack(-1)
    length = _I32 if binary else _I16

    def write(w: Write, value: Any) -> None:
        if value is None:
            if not nullable:
                raise TypeError("Unexpectedly received None value")
            w(null)
            return
        data = value.encode() if isinstance(value, str) else bytes(value)
        w(varint(len(data) + 1) if flexible else length.pack(len(data)))
        w(data)

    return write


def _primitive_writer(
    kafka_type: str, flexible: bool, nullable: bool
) -> Callable[[Write, Any], None]:
    """One value of a primitive type (an item of a primitive array, or a lone field)."""
    if kafka_type in _FIXED:
        packer = struct.Struct(">" + _FIXED[kafka_type])
        convert = _converter(kafka_type)
        if kafka_type == "datetime_i64" and nullable:
            return lambda w, value: w(packer.pack(_as_epoch_millis(value)))
        return lambda w, value: w(packer.pack(convert(value)))
    if kafka_type == "string":
        return _string_writer(flexible, nullable, binary=False)
    if kafka_type in ("bytes", "records"):
        return _string_writer(flexible, nullable, binary=not flexible)
    if kafka_type == "uuid":
        return lambda w, value: w(uuid_bytes(value))
    raise NotImplementedError(f"no writer for kafka_type {kafka_type!r}")


def _array_writer(
    item: Callable[[Write, Any], None], flexible: bool
) -> Callable[[Write, Any], None]:
    def write(w: Write, items: Any) -> None:
        if items is None:
            w(varint(0) if flexible else _I32.pack(-1))
            return
        w(varint(len(items) + 1) if flexible else _I32.pack(len(items)))
        for value in items:
            item(w, value)

    return write


def _fixed_run(owner: type, run: list[Field[Any]]) -> Step:
    """A run of fixed-width fields: one struct pack for all of them, by a function
    generated for the run (a lookup and a conversion per field, inline: a third of
    the per-entry cost of a 100-topic CreateTopics answer went to a loop of calls)."""
    names: dict[str, Any] = {
        "_pack": struct.Struct(">" + "".join(_FIXED[f.metadata["kafka_type"]] for f in run)).pack,
        "_NO_DEFAULT": _NO_DEFAULT,
        "_missing": partial(_missing, owner),
    }
    lines = ["def step(w, values):", "    get = values.get"]
    args = []
    for i, f in enumerate(run):
        convert = _converter(f.metadata["kafka_type"])
        if f.metadata["kafka_type"] == "datetime_i64" and is_optional(f):
            convert = _as_epoch_millis
        names[f"_d{i}"], names[f"_c{i}"] = _default(f), convert
        lines.append(f"    v{i} = get({f.name!r}, _d{i})")
        lines.append(f"    if v{i} is _NO_DEFAULT: _missing({f.name!r})")
        args.append(f"v{i}" if convert is _as_is else f"_c{i}(v{i})")
    lines.append(f"    w(_pack({', '.join(args)}))")
    exec("\n".join(lines), names)  # the source holds only the schema's field names
    return names["step"]  # type: ignore[no-any-return]


def _missing(owner: type, name: str) -> None:
    raise KeyError(f"{owner.__module__}.{owner.__name__} needs {name!r}")


def _field_step(owner: type, f: Field[Any]) -> Step:
    name, default = f.name, _default(f)
    write_value = _value_writer(f, owner.__flexible__)

    def step(w: Write, values: Mapping[str, Any]) -> None:
        write_value(w, _get(values, name, default, owner))

    return step


def _value_writer(f: Field[Any], flexible: bool) -> Callable[[Write, Any], None]:
    kind = classify_field(f)
    nullable = is_optional(f)
    if isinstance(kind, EntityTupleField):
        return _array_writer(entity_values_writer(kind.type_), flexible)
    if isinstance(kind, EntityField):
        write_entity = entity_values_writer(kind.type_)
        if not nullable:
            return write_entity
        not_null, null = struct.pack(">b", 1), struct.pack(">b", -1)

        def write_nullable(w: Write, value: Any) -> None:
            if value is None:
                w(null)
            else:
                w(not_null)
                write_entity(w, value)

        return write_nullable
    kafka_type = f.metadata["kafka_type"]
    if isinstance(kind, PrimitiveTupleField):
        return _array_writer(_primitive_writer(kafka_type, flexible, False), flexible)
    return _primitive_writer(kafka_type, flexible, nullable)


def _tagged_step(owner: type, tagged: list[tuple[int, Field[Any]]]) -> Step:
    """Kafka's tagged fields (KIP-482): written by kio's own field writers from
    kio values, as they are few and rarely set."""
    from broker_agent.kafka.codec import build_value

    plan = []
    for tag, f in sorted(tagged, key=lambda pair: pair[0]):
        kio_writer = get_field_writer(f, flexible=True, is_request_header=False, is_tag=True)
        plan.append((tag, f, kio_writer, get_tagged_field_default(f)))

    def step(w: Write, values: Mapping[str, Any]) -> None:
        count = 0
        tags: io.BytesIO | None = None
        for tag, f, kio_writer, implicit in plan:
            raw = values.get(f.name, _ABSENT)
            if raw is _ABSENT or (f.default is not MISSING and raw == f.default):
                continue  # the field's default: never written
            value = build_value(owner, f.name, raw)
            if value == f.default or (f.default is MISSING and value == implicit):
                continue
            if tags is None:
                tags = io.BytesIO()
            write_tagged_field(tags, tag, kio_writer, value)
            count += 1
        if tags is None:  # the usual case: every tagged field at its default
            w(b"\0")
            return
        w(varint(count))
        w(tags.getvalue())

    return step


@cache
def entity_values_writer(cls: type) -> EntityWrite:
    """The writer of kio entity class `cls` from a mapping of its field names
    (or from a `cls` instance itself, written by kio)."""
    steps: list[Step] = []
    run: list[Field[Any]] = []
    tagged: list[tuple[int, Field[Any]]] = []
    for f in fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            tagged.append((int(tag), f))
            continue
        kind = classify_field(f)
        fixed = not kind.is_array and not isinstance(kind, EntityField)
        if fixed and f.metadata.get("kafka_type") in _FIXED:
            run.append(f)
            continue
        if run:
            steps.append(_fixed_run(cls, run))
            run = []
        steps.append(_field_step(cls, f))
    if run:
        steps.append(_fixed_run(cls, run))
    if cls.__flexible__:  # type: ignore[attr-defined]
        steps.append(_tagged_step(cls, tagged) if tagged else (lambda w, values: w(b"\0")))
    kio_write = entity_writer(cls)

    def write(w: Write, values: Any) -> None:
        if type(values) is not dict and is_dataclass(values):
            buffer = io.BytesIO()
            kio_write(buffer, values)
            w(buffer.getvalue())
            return
        for step in steps:
            step(w, values)

    return write


def write_body(cls: type, values: Mapping[str, Any]) -> bytes:
    """The body bytes of response (or request) class `cls` for a handler's mapping:
    what kio writes for `codec.build(cls, values)`."""
    parts: list[bytes] = []
    entity_values_writer(cls)(parts.append, values)
    return b"".join(parts)
