"""Hypothesis strategies for any protobuf request, built from its descriptor.

Every field gets hostile values: integers at and past the int32/int64 edges
(negative, zero, overflowing), small epochs around the cluster's current ones
(stale and future), strings empty, huge, with control characters or wildcards,
enum values that are not in the enum, repeated fields empty or very long,
nested messages set or unset. `cluster_id` is mostly the cluster's own (so the
request goes deeper than the first check), else empty, wrong or huge. Fields
named in `overrides` take the given strategy instead (the Raft senders, which
must not be voters: a voter's vote is legitimately obeyed without mTLS).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass
from hypothesis import strategies as st

RIGHT_CLUSTER_ID = "\x00right-cluster-id"  # replaced by the real id before sending
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT32 = (0, 2**32 - 1)
UINT64 = (0, 2**64 - 1)
_EDGES = (-(2**63), -(2**31), -1000, -1, 0, 1, 2, 3, 4, 5, 1000, 10**9, 2**31 - 1)


def _integers(bounds: tuple[int, int]) -> st.SearchStrategy[int]:
    low, high = bounds
    edges = sorted({max(low, min(high, e)) for e in (*_EDGES, low, high)})
    return st.one_of(st.sampled_from(edges), st.integers(0, 8), st.integers(low, high))


_HUGE_SIZES = st.sampled_from([1 << 12, 1 << 16, 1 << 20])
STRINGS = st.one_of(
    st.text(max_size=24),
    st.sampled_from(["", "*", "kafka-cluster", "User:*", "User:", ":", ".", "..", "_", "-1",
                     "orders", "__consumer_offsets", "metadata.version", "min.insync.replicas",
                     "retention.ms", "127.0.0.1", "\u0663", "a\nb", "\x00", "x" * 250]),
    st.builds(lambda n, c: c * n, _HUGE_SIZES, st.sampled_from(["x", "\u00e9", "\u4e2d"])),
)  # fmt: skip
BYTES = st.one_of(st.binary(max_size=48), st.builds(lambda n: b"\xff" * n, _HUGE_SIZES))
CLUSTER_IDS = st.sampled_from(
    [RIGHT_CLUSTER_ID] * 6 + ["", "wrong-cluster-id-123456", "x" * 100_000]
)

_SCALARS: dict[int, st.SearchStrategy[Any]] = {
    FieldDescriptor.TYPE_INT32: _integers(INT32),
    FieldDescriptor.TYPE_SINT32: _integers(INT32),
    FieldDescriptor.TYPE_SFIXED32: _integers(INT32),
    FieldDescriptor.TYPE_INT64: _integers(INT64),
    FieldDescriptor.TYPE_SINT64: _integers(INT64),
    FieldDescriptor.TYPE_SFIXED64: _integers(INT64),
    FieldDescriptor.TYPE_UINT32: _integers(UINT32),
    FieldDescriptor.TYPE_FIXED32: _integers(UINT32),
    FieldDescriptor.TYPE_UINT64: _integers(UINT64),
    FieldDescriptor.TYPE_FIXED64: _integers(UINT64),
    FieldDescriptor.TYPE_BOOL: st.booleans(),
    FieldDescriptor.TYPE_STRING: STRINGS,
    FieldDescriptor.TYPE_BYTES: BYTES,
    FieldDescriptor.TYPE_DOUBLE: st.floats(allow_nan=True),
    FieldDescriptor.TYPE_FLOAT: st.floats(width=32, allow_nan=True),
}


_SMALL_SCALARS = {
    **_SCALARS,
    FieldDescriptor.TYPE_STRING: st.text(max_size=12),
    FieldDescriptor.TYPE_BYTES: st.binary(max_size=12),
}


def _enum(field: FieldDescriptor) -> st.SearchStrategy[int]:
    known = [v.number for v in field.enum_type.values]
    return st.one_of(st.sampled_from(known), st.sampled_from([-1, 99, 2**31 - 1, -(2**31)]))


def _repeated(
    element: st.SearchStrategy[Any], small: st.SearchStrategy[Any], count: int
) -> st.SearchStrategy[list[Any]]:
    """Mostly short lists; sometimes one small element `count` times (a request's
    item limits). The repeated element is never huge itself, so a request stays
    within tens of megabytes."""
    return st.one_of(
        st.lists(element, max_size=4),
        st.builds(lambda x: [x] * count, small),
    )


def message_strategy(
    descriptor: Descriptor,
    overrides: Mapping[str, st.SearchStrategy[Any]] | None = None,
    depth: int = 0,
    huge: bool = True,
) -> st.SearchStrategy[Message]:
    """Messages of `descriptor`'s type with hostile values in every field
    (`huge`: strings, bytes and lists may be very large)."""
    cls = GetMessageClass(descriptor)
    overrides = dict(overrides or {})
    fields: dict[str, st.SearchStrategy[Any]] = {}
    for field in descriptor.fields:
        if field.name in overrides:
            strategy: st.SearchStrategy[Any] | None = overrides[field.name]
        else:
            strategy = _field(field, overrides, depth, huge)
        if strategy is not None:
            fields[field.name] = st.one_of(st.none(), strategy) if depth else strategy
    return st.fixed_dictionaries({}, optional=fields).map(lambda kw: _build(cls, kw))


def _build(cls: type[Message], values: dict[str, Any]) -> Message:
    message = cls()
    for name, value in values.items():
        if value is None:
            continue
        target = getattr(message, name)
        if isinstance(value, dict):
            target.update(value)
        elif isinstance(value, list):
            target.extend(value)
        elif isinstance(value, Message):
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


def _field(
    field: FieldDescriptor,
    overrides: Mapping[str, st.SearchStrategy[Any]],
    depth: int,
    huge: bool,
) -> st.SearchStrategy[Any] | None:
    if field.name == "cluster_id":
        return CLUSTER_IDS if huge else st.just(RIGHT_CLUSTER_ID)
    scalars = _SCALARS if huge else _SMALL_SCALARS
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        entry = field.message_type
        if entry.GetOptions().map_entry:
            key = scalars[entry.fields_by_name["key"].type]
            value = scalars[entry.fields_by_name["value"].type]
            return st.dictionaries(key, value, max_size=4)
        if depth >= 3:
            return None
        element: st.SearchStrategy[Any] = st.deferred(
            lambda: message_strategy(entry, overrides, depth + 1, huge)
        )
        small: st.SearchStrategy[Any] = st.deferred(
            lambda: message_strategy(entry, overrides, depth + 1, huge=False)
        )
        count = 2_000
    elif field.type == FieldDescriptor.TYPE_ENUM:
        element = small = _enum(field)
        count = 20_000
    else:
        element, small, count = scalars[field.type], _SMALL_SCALARS[field.type], 20_000
    if field.is_repeated:
        return _repeated(element, small, count) if huge else st.lists(element, max_size=3)
    return element


def with_cluster_id(message: Message, cluster_id: str) -> Message:
    """Put the real cluster id where the strategy chose "the right one"."""
    if getattr(message, "cluster_id", None) == RIGHT_CLUSTER_ID:
        message.cluster_id = cluster_id  # type: ignore[attr-defined]
    return message


__all__ = ["RIGHT_CLUSTER_ID", "message_strategy", "with_cluster_id"]
