"""Errors on the wire: a proper gRPC status plus an explicit Kafka error code.

A rejected call fails with a non-OK gRPC status whose rich details
(`grpc-status-details-bin`, a `google.rpc.Status`) carry an `ErrorInfo`: its
`reason` is the Kafka error name (`NOT_LEADER_OR_FOLLOWER`, ...), its metadata the
numeric `error_code` and, when known, `leader_id`, `leader_address` and `epoch`.
When the protocol's own answer matters to the caller (a Fetch fenced by a newer
epoch tells the follower who leads now), that answer is packed beside it as an
`Any`, so a Raft peer can still feed it to its core.

One module owns both directions so servers and clients cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import grpc
from google.protobuf import any_pb2
from google.protobuf.message import Message as ProtoMessage
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from quorum.controller.api_errors import ApiError
from quorum.raft.messages import ErrorCode

DOMAIN = "kraft-quorum"

# Which gRPC status each Kafka error travels under.
STATUS_FOR: dict[ErrorCode, grpc.StatusCode] = {
    ErrorCode.INCONSISTENT_CLUSTER_ID: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.FENCED_LEADER_EPOCH: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.UNKNOWN_LEADER_EPOCH: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.INCONSISTENT_VOTER_SET: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.INVALID_VOTER_KEY: grpc.StatusCode.FAILED_PRECONDITION,
    ErrorCode.INVALID_REQUEST: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.INVALID_RECORD: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.BROKER_NOT_AVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: grpc.StatusCode.DEADLINE_EXCEEDED,
}

# The admin API's errors (quorum/controller/api_errors.py): not-found, conflict,
# precondition and invalid-argument families, as a gRPC client would expect.
_API_STATUS: dict[grpc.StatusCode, tuple[ApiError, ...]] = {
    grpc.StatusCode.NOT_FOUND: (
        ApiError.UNKNOWN_TOPIC_OR_PARTITION,
        ApiError.UNKNOWN_TOPIC_ID,
        ApiError.BROKER_ID_NOT_REGISTERED,
        ApiError.SNAPSHOT_NOT_FOUND,
    ),
    grpc.StatusCode.ALREADY_EXISTS: (
        ApiError.TOPIC_ALREADY_EXISTS,
        ApiError.DUPLICATE_BROKER_REGISTRATION,
    ),
    grpc.StatusCode.FAILED_PRECONDITION: (
        ApiError.NOT_CONTROLLER,
        ApiError.INCONSISTENT_CLUSTER_ID,
        ApiError.STALE_BROKER_EPOCH,
        ApiError.FENCED_LEADER_EPOCH,
        ApiError.NOT_LEADER_OR_FOLLOWER,
        ApiError.INVALID_UPDATE_VERSION,
    ),
    grpc.StatusCode.DEADLINE_EXCEEDED: (ApiError.REQUEST_TIMED_OUT,),
    grpc.StatusCode.OUT_OF_RANGE: (ApiError.OFFSET_OUT_OF_RANGE, ApiError.POSITION_OUT_OF_RANGE),
    grpc.StatusCode.UNAVAILABLE: (ApiError.BROKER_NOT_AVAILABLE,),
    grpc.StatusCode.PERMISSION_DENIED: (
        ApiError.TOPIC_AUTHORIZATION_FAILED,
        ApiError.CLUSTER_AUTHORIZATION_FAILED,
    ),
    grpc.StatusCode.RESOURCE_EXHAUSTED: (ApiError.THROTTLING_QUOTA_EXCEEDED,),
    grpc.StatusCode.INTERNAL: (ApiError.UNKNOWN_SERVER_ERROR,),
}
API_STATUS_FOR: dict[ApiError, grpc.StatusCode] = {
    error: status for status, errors in _API_STATUS.items() for error in errors
}


@dataclass(frozen=True)
class WireError:
    """What a caller learns from a rejected call."""

    error: ErrorCode | ApiError | None
    status: grpc.StatusCode
    message: str
    metadata: dict[str, str] = field(default_factory=dict)
    answer: any_pb2.Any | None = None

    @property
    def leader_id(self) -> int | None:
        value = self.metadata.get("leader_id")
        return int(value) if value not in (None, "", "-1") else None

    @property
    def leader_address(self) -> str | None:
        return self.metadata.get("leader_address") or None

    def unpack(self, message: ProtoMessage) -> bool:
        """Fill `message` from the packed protocol answer, if there is one of its type."""
        return self.answer is not None and self.answer.Unpack(message)


MAX_MESSAGE_CHARS = 1000


def rich_status(
    error: ErrorCode | ApiError,
    message: str,
    metadata: dict[str, str] | None = None,
    answer: ProtoMessage | None = None,
) -> grpc.Status:
    """The status a servicer aborts with (`await context.abort_with_status(...)`).

    The message is cut to `MAX_MESSAGE_CHARS`: it travels twice in the trailers
    (grpc-message and the rich details), and a request with 20,000 bad items
    once made a message past gRPC's 8 KiB metadata limit, which the caller
    received as RESOURCE_EXHAUSTED instead of the refusal (found by fuzzing)."""
    if len(message) > MAX_MESSAGE_CHARS:
        message = f"{message[:MAX_MESSAGE_CHARS]}... ({len(message)} characters)"
    if isinstance(error, ApiError):
        code = API_STATUS_FOR.get(error, grpc.StatusCode.INVALID_ARGUMENT)
    else:
        code = STATUS_FOR.get(error, grpc.StatusCode.FAILED_PRECONDITION)
    info = error_details_pb2.ErrorInfo(
        reason=error.name,
        domain=DOMAIN,
        metadata={"error_code": str(error.value), **(metadata or {})},
    )
    details = [any_pb2.Any()]
    details[0].Pack(info)
    if answer is not None:
        packed = any_pb2.Any()
        packed.Pack(answer)
        details.append(packed)
    status = status_pb2.Status(code=code.value[0], message=message, details=details)
    return rpc_status.to_status(status)


def exception_status(err: Exception) -> grpc.Status:
    """The status of a call whose servicer ended in an exception instead of an
    answer (see `unexpected.py`): gRPC's own mapping would send UNKNOWN
    ("Unexpected <class ...>"), which this project never answers.

    A wait that ran out (TimeoutError: the answer the call waited for did not
    come in time) is DEADLINE_EXCEEDED with REQUEST_TIMED_OUT; a connection or
    OS failure under the call is UNAVAILABLE with BROKER_NOT_AVAILABLE (ask
    again, here or elsewhere); anything else is a defect of this node, INTERNAL
    with UNKNOWN_SERVER_ERROR, each with the reason in the message."""
    reason = str(err) or type(err).__name__
    if isinstance(err, TimeoutError):
        return rich_status(ErrorCode.REQUEST_TIMED_OUT, f"no answer in time: {reason}")
    if isinstance(err, OSError):
        return rich_status(ErrorCode.BROKER_NOT_AVAILABLE, f"unavailable: {reason}")
    return rich_status(
        ApiError.UNKNOWN_SERVER_ERROR,
        f"the server failed to answer: {type(err).__name__}: {reason}",
    )


SHOWN_CHARS = 40


def foreign_cluster_status(received: str, ours: str) -> grpc.Status:
    """The one refusal of a request for another cluster. The received id is cut
    short: a huge one would otherwise overflow gRPC's metadata limit on the way
    back, and the caller would see RESOURCE_EXHAUSTED instead of the reason."""
    shown = received if len(received) <= SHOWN_CHARS else received[:SHOWN_CHARS] + "..."
    return rich_status(
        ErrorCode.INCONSISTENT_CLUSTER_ID,
        f"request for cluster {shown!r} ({len(received)} characters), this is cluster {ours!r}",
    )


def wire_error(err: grpc.RpcError) -> WireError:
    """Decode a failed call (sync or aio) back into a `WireError`."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    text = err.details() if hasattr(err, "details") else str(err)
    trailing = err.trailing_metadata() if hasattr(err, "trailing_metadata") else None
    raw = None
    for key, value in trailing or ():
        if key == "grpc-status-details-bin":
            raw = value
    if raw is None:
        return WireError(None, code, text or "")
    status = status_pb2.Status.FromString(raw)
    error: ErrorCode | ApiError | None = None
    metadata: dict[str, str] = {}
    answer: any_pb2.Any | None = None
    for detail in status.details:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            metadata = dict(info.metadata)
            error = ErrorCode.__members__.get(info.reason) or ApiError.__members__.get(info.reason)
        else:
            answer = detail
    return WireError(error, code, status.message, metadata, answer)
