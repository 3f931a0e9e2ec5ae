"""Every field of a broker registration is checked at the edge (registration_rules)."""

from __future__ import annotations

from typing import Any

import pytest

from quorum.controller.api_errors import ApiError, ControllerError
from quorum.controller.request_limits import RequestLimits
from quorum.controller.validation import check_request
from quorum.gen import broker_pb2 as bpb

INCARNATION = "kBQU2BQmSje3Vyfi1RiIdg"
DIRECTORY = "79SmW-qfT4mx3cyTwnGKUA"

REG, REQ = ApiError.INVALID_REGISTRATION, ApiError.INVALID_REQUEST


def listener(**fields: Any) -> dict[str, Any]:
    return {
        "name": "PLAINTEXT",
        "host": "127.0.0.1",
        "port": 9092,
        "security_protocol": "PLAINTEXT",
        **fields,
    }


def registration(**fields: Any) -> bpb.RegisterBrokerRequest:
    """A valid registration with `fields` replaced."""
    base: dict[str, Any] = {
        "broker_id": 11,
        "incarnation_id": INCARNATION,
        "listeners": [listener()],
        "features": [{"name": "metadata.version", "max_supported_version": 1}],
        "log_dirs": [DIRECTORY],
        "rack": "rack-a",
    }
    base.update(fields)
    return bpb.RegisterBrokerRequest(
        broker_id=base["broker_id"],
        incarnation_id=base["incarnation_id"],
        listeners=[bpb.Listener(**lst) for lst in base["listeners"]],
        features=[bpb.SupportedFeature(**f) for f in base["features"]],
        log_dirs=base["log_dirs"],
        rack=base["rack"],
    )


# (what is wrong, the fields, the error, a word the message must hold)
MALFORMED: list[tuple[str, dict[str, Any], ApiError, str]] = [
    ("incarnation not a uuid", {"incarnation_id": "not-a-uuid\n"}, REG, "incarnation_id"),
    ("incarnation hex uuid", {"incarnation_id": "0" * 31 + "1"}, REG, "incarnation_id"),
    ("incarnation zero uuid", {"incarnation_id": "A" * 22}, REG, "reserved"),
    ("incarnation padded", {"incarnation_id": INCARNATION + "=="}, REG, "incarnation_id"),
    ("directory not a uuid", {"log_dirs": ["nope"]}, REG, "log_dirs[0]"),
    ("directory reserved", {"log_dirs": ["AAAAAAAAAAAAAAAAAAAAAQ"]}, REG, "reserved"),
    ("directory twice", {"log_dirs": [DIRECTORY, DIRECTORY]}, REG, "twice"),
    ("port 0", {"listeners": [listener(port=0)]}, REQ, "listeners[0].port"),
    ("port 65536", {"listeners": [listener(port=65536)]}, REQ, "listeners[0].port"),
    ("port negative", {"listeners": [listener(port=-1)]}, REQ, "listeners[0].port"),
    ("host empty", {"listeners": [listener(host="")]}, REQ, "listeners[0].host"),
    ("host newline", {"listeners": [listener(host="h\n")]}, REQ, "listeners[0].host"),
    ("host nul", {"listeners": [listener(host="h\x00x")]}, REQ, "listeners[0].host"),
    ("name empty", {"listeners": [listener(name="")]}, REQ, "listeners[0].name"),
    (
        "names repeated",
        {"listeners": [listener(), listener(port=9093)]},
        REG,
        "listeners[1].name",
    ),
    (
        "protocol unknown",
        {"listeners": [listener(security_protocol="TLS")]},
        REQ,
        "security_protocol",
    ),
    (
        "protocol empty",
        {"listeners": [listener(security_protocol="")]},
        REQ,
        "security_protocol",
    ),
    (
        "protocol lower case",
        {"listeners": [listener(security_protocol="plaintext")]},
        REQ,
        "security_protocol",
    ),
    ("rack newline", {"rack": "\n"}, REQ, "rack"),
    ("rack empty", {"rack": ""}, REQ, "rack"),
    ("rack too long", {"rack": "r" * 256}, REQ, "rack"),
    ("rack escape", {"rack": "r\x1b[31m"}, REQ, "rack"),
    ("feature unknown", {"features": [{"name": "no.such.feature"}]}, REQ, "features[0].name"),
    (
        "feature range inverted",
        {"features": [{"name": "metadata.version", "min_supported_version": 2}]},
        REQ,
        "features[0]",
    ),
]


@pytest.mark.parametrize(("fields", "error", "says"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])  # fmt: skip
def test_each_malformed_registration_field_is_refused_naming_the_field(
    fields: dict[str, Any], error: ApiError, says: str
) -> None:
    with pytest.raises(ControllerError) as caught:
        check_request(registration(**fields), RequestLimits())
    assert caught.value.error is error
    assert says in caught.value.message, caught.value.message


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"rack": "r" * 255},
        {
            "listeners": [
                listener(port=1),
                listener(name="SSL", port=65535, security_protocol="SSL"),
            ]
        },
        {
            "listeners": [
                listener(security_protocol=p, name=p) for p in ("SASL_PLAINTEXT", "SASL_SSL")
            ]
        },
        {"log_dirs": []},
        {"features": [{"name": "kraft.version"}]},
    ],
)
def test_a_valid_registration_passes(fields: dict[str, Any]) -> None:
    check_request(registration(**fields), RequestLimits())


def test_a_registration_without_a_rack_passes() -> None:
    request = registration()
    request.ClearField("rack")
    check_request(request, RequestLimits())
