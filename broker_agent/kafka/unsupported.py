"""The answer to a request for a Kafka API or version this broker does not serve.

Kafka answers an ApiVersions request of a version it does not know with an
ApiVersions v0 response carrying UNSUPPORTED_VERSION and its table, so a newer
client can pick a version (`listener.unsupported_api_versions`); for any other
API or version outside what it serves, Kafka's SocketServer closes the
connection. This broker answers those too, so no such request drops a
connection (the client, and every request it pipelined behind it, goes on):
the API's own response with UNSUPPORTED_VERSION (35) in every error code field
and empty or zero values elsewhere, at the version asked for when the codec has
that version's schema, else at the nearest one it has (the bytes of an empty
error response barely change between neighbouring versions). Nothing past the
header's api key, version and correlation id is read, nothing is dispatched,
nothing changes.

A key that is no Kafka API at all is not a Kafka request: like other bytes that
do not parse, it closes the connection (None here). An acks=0 Produce of a
version not served closes it too (the listener checks `codec.produce_acks`): its
client reads no answer, so one would be taken for its next request's, and a
failed acks=0 produce closes the connection in Kafka.
"""

from __future__ import annotations

import typing
from dataclasses import MISSING, fields, is_dataclass
from functools import cache
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map

from broker_agent.kafka import codec

# Versions probed for the codec's schemas of an API (Kafka's highest is below 20).
PROBED_VERSIONS = range(64)


@cache
def codec_versions(api_key: int) -> tuple[int, int] | None:
    """The lowest and highest version of `api_key` the codec can encode, or None
    when the key is no Kafka API."""
    if api_key not in api_key_map:
        return None
    found = []
    for version in PROBED_VERSIONS:
        try:
            codec.response_class(api_key, version)
        except Exception:  # kio has no schema of this version
            continue
        found.append(version)
    return (min(found), max(found)) if found else None


def answer_version(api_key: int, api_version: int) -> int | None:
    """The version the answer is encoded at: the one asked for, or the nearest the
    codec has; None for a key that is no Kafka API."""
    known = codec_versions(api_key)
    if known is None:
        return None
    low, high = known
    return min(max(api_version, low), high)


def unsupported_response(
    api_key: int, api_version: int, error: ErrorCode = ErrorCode.unsupported_version
) -> Any | None:
    """The kio response object answering an unserved request, or None (close)."""
    version = answer_version(api_key, api_version)
    if version is None:
        return None
    return error_entity(codec.response_class(api_key, version), error)


def error_entity(cls: Any, error: ErrorCode) -> Any:
    """An instance of kio class `cls` whose error codes are all `error`, with
    empty arrays, nulls where allowed, and zero values elsewhere."""
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type == "error_code":
            values[f.name] = int(error)
        elif f.default is MISSING and f.default_factory is MISSING:
            values[f.name] = _empty(hints[f.name], kafka_type, error)
    return codec.build(cls, values)


_ZERO: dict[str | None, Any] = {
    "string": "",
    "bool": False,
    "bytes": b"",
    "records": b"",
    "uuid": codec.NULL_UUID,
    "float64": 0.0,
}


def _empty(hint: Any, kafka_type: str | None, error: ErrorCode) -> Any:
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple:
        return ()
    if type(None) in args:
        return None
    if is_dataclass(hint):
        return error_entity(hint, error)
    # ints, and timedeltas and datetimes, which `codec.build` makes from milliseconds
    return _ZERO.get(kafka_type, 0)
