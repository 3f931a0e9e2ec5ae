"""What a broker registration may say, checked at the edge before anything is written.

A registration becomes a RegisterBrokerRecord that every controller and broker
applies and that clients read back (Metadata's endpoints, rack-aware
placement), so a value nobody could use must never reach the log: an
incarnation id that is not an id, a port nobody can dial, a host or rack that
corrupts a log line or a terminal, two listeners of one name.

Ids follow Kafka's Uuid rules (22 characters of URL-safe base64, none
reserved) and their refusals are INVALID_REGISTRATION, as Kafka refuses
reserved or repeated directory ids (KIP-858); a malformed listener, rack or
feature is INVALID_REQUEST. Each message names the field.
"""

from __future__ import annotations

from quorum.common.meta_properties import kafka_uuid_problem
from quorum.controller.api_errors import ApiError, ControllerError
from quorum.gen import broker_pb2 as bpb

# Kafka's SecurityProtocol names.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MAX_RACK_LENGTH = 255


def _shown(value: str) -> str:
    return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"


def _printable(value: str) -> bool:
    """No control, format or unassigned code points (str.isprintable also
    refuses every space but ' ', which no host, name or rack needs)."""
    return value.isprintable()


def check_registration(r: bpb.RegisterBrokerRequest, known_features: frozenset[str]) -> None:
    """Refuse (ControllerError) a registration whose fields are unusable."""
    _incarnation(r.incarnation_id)
    _log_dirs(r.log_dirs)
    names: set[str] = set()
    for i, listener in enumerate(r.listeners):
        _listener(i, listener)
        if listener.name in names:
            raise ControllerError(
                ApiError.INVALID_REGISTRATION,
                f"listeners[{i}].name {_shown(listener.name)} is given twice",
            )
        names.add(listener.name)
    if r.HasField("rack"):
        _rack(r.rack)
    for i, feature in enumerate(r.features):
        _feature(i, feature, known_features)


def _incarnation(incarnation_id: str) -> None:
    if not incarnation_id:
        raise ControllerError(ApiError.INVALID_REQUEST, "incarnation_id is required")
    problem = kafka_uuid_problem(incarnation_id)
    if problem is not None:
        raise ControllerError(
            ApiError.INVALID_REGISTRATION,
            f"incarnation_id {_shown(incarnation_id)} is not a Kafka Uuid: {problem}",
        )


def _log_dirs(log_dirs: list[str]) -> None:
    seen: set[str] = set()
    for i, directory_id in enumerate(log_dirs):
        problem = kafka_uuid_problem(directory_id)
        if problem is not None:
            raise ControllerError(
                ApiError.INVALID_REGISTRATION,
                f"log_dirs[{i}] directory id {_shown(directory_id)}: {problem}",
            )
        if directory_id in seen:
            raise ControllerError(
                ApiError.INVALID_REGISTRATION,
                f"log_dirs[{i}] directory id {directory_id} is listed twice",
            )
        seen.add(directory_id)


def _listener(i: int, listener: bpb.Listener) -> None:
    field = f"listeners[{i}]"
    if not listener.name or not _printable(listener.name):
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"{field}.name {_shown(listener.name)} must be non-empty and printable",
        )
    if not listener.host or not _printable(listener.host) or " " in listener.host:
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"{field}.host {_shown(listener.host)} must be non-empty, without spaces "
            "or control characters",
        )
    if not 1 <= listener.port <= 65535:
        raise ControllerError(
            ApiError.INVALID_REQUEST, f"{field}.port {listener.port} is not in 1..65535"
        )
    if listener.security_protocol not in SECURITY_PROTOCOLS:
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"{field}.security_protocol {_shown(listener.security_protocol)} is not one of "
            f"{', '.join(SECURITY_PROTOCOLS)}",
        )


def _rack(rack: str) -> None:
    if not rack or len(rack) > MAX_RACK_LENGTH or not _printable(rack):
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"rack {_shown(rack)} must be 1 to {MAX_RACK_LENGTH} printable characters",
        )


def _feature(i: int, feature: bpb.SupportedFeature, known: frozenset[str]) -> None:
    field = f"features[{i}]"
    if feature.name not in known:
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"{field}.name {_shown(feature.name)} is not a feature this cluster knows "
            f"({', '.join(sorted(known))})",
        )
    low, high = feature.min_supported_version, feature.max_supported_version
    if low < 0 or high < low:
        raise ControllerError(
            ApiError.INVALID_REQUEST,
            f"{field} {feature.name} supports versions {low}..{high}: need 0 <= min <= max",
        )
