"""Committed records/s through an in-process three-node cluster of the Raft core alone.

No I/O: messages are delivered and flushes complete at once, so this measures
the core's own cost per batch. Usage: python bench/raft_core.py [--seconds S]
"""

from __future__ import annotations

import argparse
import json
import time

from quorum.sim.instant import InstantCluster


def measure(batch: int, seconds: float) -> dict[str, object]:
    cluster = InstantCluster(voters=3)
    leader = cluster.elect()
    records = [b"x" * 100] * batch
    start_hw = leader.high_watermark
    start = time.perf_counter()
    deadline = start + seconds
    proposals = 0
    while time.perf_counter() < deadline:
        for _ in range(50):
            leader.propose(records, cluster.now)
            cluster.process(leader.node_id)
            cluster.settle()
            proposals += 1
    elapsed = time.perf_counter() - start
    committed = leader.high_watermark - start_hw
    if committed != proposals * batch:
        raise AssertionError(f"committed {committed}, proposed {proposals * batch}")
    return {
        "metric": "core_committed_records_per_s",
        "batch": batch,
        "voters": 3,
        "value": round(committed / elapsed),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0, help="per batch size")
    args = parser.parse_args()
    for batch in (1, 10, 100):
        print(json.dumps(measure(batch, args.seconds)), flush=True)


if __name__ == "__main__":
    main()
