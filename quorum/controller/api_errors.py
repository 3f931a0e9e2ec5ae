"""Kafka's error names and codes for what the admin API can refuse.

A refusal is a value (`ApiError` in a per-item result) or, for a whole call, a
`ControllerError` the servicer turns into a gRPC status with the same name.
"""

from __future__ import annotations

from enum import Enum


class ApiError(Enum):
    NONE = 0
    UNKNOWN_SERVER_ERROR = -1
    OFFSET_OUT_OF_RANGE = 1
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    INVALID_TOPIC_EXCEPTION = 17
    TOPIC_AUTHORIZATION_FAILED = 29
    CLUSTER_AUTHORIZATION_FAILED = 31
    NOT_ENOUGH_REPLICAS = 19
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    THROTTLING_QUOTA_EXCEEDED = 89
    INVALID_UPDATE_VERSION = 95
    SNAPSHOT_NOT_FOUND = 98
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    POSITION_OUT_OF_RANGE = 99
    FEATURE_UPDATE_FAILED = 96
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    INVALID_REGISTRATION = 119


class ControllerError(Exception):
    """A request (or one item of it) the controller refuses; it changes nothing."""

    def __init__(self, error: ApiError, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
