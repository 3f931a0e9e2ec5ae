"""Switches that exist only for the tests, read from the environment.

One today: the pre-KIP-101 truncation rule (a follower cuts its log to its own
HW), with which the tests show seed 001's lost record and diverged replicas on
real broker processes. It loses acknowledged data, so it is not a property (an
operator copying a properties file cannot carry it along), it is not in the
configuration reference, and it is refused unless a second variable says
outright that test-only switches are allowed:

    BROKER_AGENT_TEST_ONLY_TRUNCATION_MODE=high-watermark
    BROKER_AGENT_ALLOW_TEST_ONLY_SWITCHES=yes

Without either the broker runs with leader-epoch truncation, the only
production mode. docs/data-plane.md ("Truncation by leader epoch") names them.
"""

from __future__ import annotations

from collections.abc import Mapping

from broker_agent.replication.follower import TruncationMode

TRUNCATION_MODE_ENV = "BROKER_AGENT_TEST_ONLY_TRUNCATION_MODE"
ALLOW_ENV = "BROKER_AGENT_ALLOW_TEST_ONLY_SWITCHES"
ALLOW_VALUE = "yes"


class SwitchError(ValueError):
    """A test-only switch set where it may not be, or to an unknown value."""


def truncation_mode(environ: Mapping[str, str]) -> TruncationMode:
    """The follower truncation rule this broker runs with (leader epoch unless the
    tests asked for the HW rule and allowed test-only switches)."""
    value = environ.get(TRUNCATION_MODE_ENV)
    if value is None:
        return TruncationMode.LEADER_EPOCH
    if environ.get(ALLOW_ENV) != ALLOW_VALUE:
        raise SwitchError(
            f"{TRUNCATION_MODE_ENV} is a test-only switch (it can lose acknowledged "
            f"records) and is refused unless {ALLOW_ENV}={ALLOW_VALUE} is also set"
        )
    try:
        return TruncationMode(value)
    except ValueError:
        known = ", ".join(m.value for m in TruncationMode)
        raise SwitchError(f"{TRUNCATION_MODE_ENV}={value!r}: expected one of {known}") from None
