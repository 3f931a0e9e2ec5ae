"""The broker's translation of Kafka's config resources and types (no processes)."""

from __future__ import annotations

import quorum.controller.config_schema as cs
from broker_agent.kafka.admin_configs import (
    BOOLEAN,
    BROKER,
    BROKER_LOGGER,
    INT,
    LIST,
    LONG,
    STRING,
    TOPIC,
    config_type,
    to_controller,
)


def test_kafkas_resources_become_the_controllers() -> None:
    assert to_controller(TOPIC, "orders") == (cs.TOPIC, "orders")
    assert to_controller(BROKER, "101") == (cs.BROKER, "101")
    assert to_controller(BROKER, "") == (cs.CLUSTER, "")  # the cluster-wide defaults
    assert to_controller(BROKER_LOGGER, "101") is None


def test_config_types_follow_the_keys() -> None:
    assert config_type(cs.TOPIC, "cleanup.policy") == LIST
    assert config_type(cs.TOPIC, "unclean.leader.election.enable") == BOOLEAN
    assert config_type(cs.TOPIC, "retention.ms") == LONG
    assert config_type(cs.TOPIC, "min.insync.replicas") == INT
    assert config_type(cs.TOPIC, "compression.type") == STRING
    assert config_type(cs.TOPIC, "no.such.key") == STRING


def test_every_key_has_documentation() -> None:
    keys = {k for table in cs.KEYS.values() for k in table}
    assert keys <= set(cs.DOCS)
    assert all(cs.DOCS[k].endswith(".") for k in keys)
