"""One table of errors: the controller's `ApiError` (what the gRPC admin API
answers) is Kafka's own list of names and codes, so the brokers hand a
controller's refusal to Kafka clients unchanged, with no second mapping."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from broker_agent.kafka.forwarding import deadline_ms, kafka_error, kafka_error_named
from quorum.controller.api_errors import ApiError


@pytest.mark.parametrize("error", list(ApiError), ids=lambda e: e.name)
def test_every_controller_error_is_kafkas_by_name_and_code(error: ApiError) -> None:
    assert ErrorCode[error.name.lower()].value == error.value
    assert kafka_error(error.value) is ErrorCode[error.name.lower()]
    assert kafka_error_named(error.name) is ErrorCode[error.name.lower()]


def test_unknown_codes_and_names_are_unknown_server_errors() -> None:
    assert kafka_error(12345) is ErrorCode.unknown_server_error
    assert kafka_error_named("NO_SUCH_ERROR") is ErrorCode.unknown_server_error
    # a Raft-side name the controllers may send is still Kafka's
    assert kafka_error_named("INVALID_RECORD") is ErrorCode.invalid_record


def test_a_forwarded_request_gets_its_timeout_or_kafkas_default() -> None:
    assert deadline_ms(15_000) == 15_000
    assert deadline_ms(0) == 30_000  # no timeout sent: Kafka's request.timeout.ms
    assert deadline_ms(-1) == 30_000
    assert deadline_ms(5) == 1_000  # never less than a second to find the controller
