"""Protobuf messages as JSON for the offline tools: every field, numbers as numbers.

`MessageToDict` leaves out fields at their default (partition 0, epoch 0, an empty
ISR) and writes int64 as strings, as proto3's JSON mapping says; an operator
reading a dump, or `jq '.partition_id == 0'`, needs neither surprise. Here every
field is present (an unset message or optional field as null, an unset oneof
member left out), int64 is a JSON number, an enum is its name, bytes are base64.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message


def proto_to_dict(message: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        value = getattr(message, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            out[field.name] = {str(k): _value(value_field, v) for k, v in value.items()}
        elif _is_repeated(field):
            out[field.name] = [_value(field, v) for v in value]
        elif field.containing_oneof is not None and not _synthetic(field):
            if message.HasField(field.name):
                out[field.name] = _value(field, value)
        elif _has_presence(field) and not message.HasField(field.name):
            out[field.name] = None
        else:
            out[field.name] = _value(field, value)
    return out


def _value(field: FieldDescriptor, value: Any) -> Any:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        return proto_to_dict(value)
    if field.type == FieldDescriptor.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(value)
        return named.name if named is not None else value
    if field.type == FieldDescriptor.TYPE_BYTES:
        return base64.b64encode(value).decode("ascii")
    return value


def _is_repeated(field: FieldDescriptor) -> bool:
    repeated = getattr(field, "is_repeated", None)
    if repeated is not None:
        return bool(repeated)
    return bool(field.label == FieldDescriptor.LABEL_REPEATED)


def _is_map(field: FieldDescriptor) -> bool:
    return (
        _is_repeated(field)
        and field.type == FieldDescriptor.TYPE_MESSAGE
        and field.message_type.GetOptions().map_entry
    )


def _synthetic(field: FieldDescriptor) -> bool:
    """proto3 `optional` puts a field in a oneof of its own; that is presence, not choice."""
    oneof = field.containing_oneof
    return oneof is not None and len(oneof.fields) == 1 and oneof.name == f"_{field.name}"


def _has_presence(field: FieldDescriptor) -> bool:
    return bool(field.has_presence)
