"""Named fault mixes: what the simulated network and machines do wrong."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FaultMix:
    name: str
    min_delay_ms: float = 0.2
    max_delay_ms: float = 5.0
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0
    partitions: bool = False
    crashes: bool = False
    max_clock_drift: float = 0.0  # fraction, e.g. 0.02 = a node's clock runs up to 2% off
    max_flush_ms: float = 2.0


MIXES: dict[str, FaultMix] = {
    mix.name: mix
    for mix in (
        FaultMix("calm"),
        FaultMix("lossy", max_delay_ms=30.0, drop_rate=0.15, duplicate_rate=0.05),
        FaultMix("partitions", max_delay_ms=10.0, partitions=True),
        FaultMix("crashes", crashes=True, max_clock_drift=0.02, max_flush_ms=8.0),
        FaultMix(
            "chaos",
            max_delay_ms=20.0,
            drop_rate=0.05,
            duplicate_rate=0.03,
            partitions=True,
            crashes=True,
            max_clock_drift=0.05,
            max_flush_ms=8.0,
        ),
    )
}


def mix_for_seed(seed: int) -> FaultMix:
    names = sorted(MIXES)
    return MIXES[names[seed % len(names)]]
