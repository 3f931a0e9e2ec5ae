"""`CountedHistogram` (a value observed with its count) exposes what prometheus_client's
own Histogram exposes for the same observations made one at a time."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from broker_agent.metrics import CountedHistogram
from quorum.common.metrics_endpoint import LATENCY_BUCKETS

OBSERVED = [(0.0, 3), (0.001, 2), (0.0123, 5), (LATENCY_BUCKETS[3], 4), (100.0, 1), (0.3, 0)]


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    found = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for s in family.samples:
            if not s.name.endswith("_created"):
                found[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return found


def test_it_exposes_what_one_observe_per_value_exposes() -> None:
    ours, stock = CollectorRegistry(), CollectorRegistry()
    counted = CountedHistogram("lag_seconds", "A lag.", LATENCY_BUCKETS)
    ours.register(counted)
    one_by_one = Histogram("lag_seconds", "A lag.", buckets=LATENCY_BUCKETS, registry=stock)
    for value, count in OBSERVED:
        counted.observe(value, count)
        for _ in range(count):
            one_by_one.observe(value)
    got, want = samples(ours), samples(stock)
    assert got.keys() == want.keys()
    for key, value in want.items():
        assert got[key] == pytest.approx(value), key
    assert got[("lag_seconds_count", ())] == 15
    assert got[("lag_seconds_bucket", (("le", "0.005"),))] == 9  # the bound itself counts in


def test_a_value_on_a_bound_lands_in_that_bound() -> None:
    counted = CountedHistogram("lag_seconds", "A lag.", [1.0, 2.0])
    counted.observe(1.0)
    counted.observe(2.0000001)
    (family,) = counted.collect()
    buckets = {s.labels["le"]: s.value for s in family.samples if s.name.endswith("_bucket")}
    assert buckets == {"1.0": 1, "2.0": 1, "+Inf": 2}
