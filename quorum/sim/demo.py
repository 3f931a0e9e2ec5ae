"""`make run` until the controller process exists: a simulated three-node quorum,
paced to the wall clock, narrating elections, crashes and commits.

The trace of every run is appended to DATA_DIR/sim-trace.log. Ctrl-C stops it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from quorum.sim.cluster import Simulation
from quorum.sim.faults import MIXES


class PacedSimulation(Simulation):
    """Runs simulated time no faster than `speed` times the wall clock."""

    def __init__(self, *args: Any, speed: float = 1.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._speed = speed
        self._wall_start = time.monotonic()
        self._next_status_us = 1_000_000

    def _dispatch(self, kind: str, args: tuple[Any, ...]) -> None:
        due = self._wall_start + self.now_us / 1e6 / self._speed
        pause = due - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        super()._dispatch(kind, args)
        if self.now_us >= self._next_status_us:
            self._next_status_us += 1_000_000
            self._log("status: " + "; ".join(self._describe(n) for n in sorted(self.nodes)))

    def _describe(self, node_id: int) -> str:
        core = self.nodes[node_id].core
        if core is None:
            return f"node {node_id} down"
        return (
            f"node {node_id} {core.role.value} epoch {core.epoch} "
            f"hw {core.high_watermark} end {core.log.end_offset}"
        )


def _version() -> str:
    """The installed distribution's version (the simulator imports nothing of the
    server or clients, so it asks importlib directly)."""
    from importlib import metadata

    try:
        return metadata.version("kraft-quorum")
    except metadata.PackageNotFoundError:
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--version", action="version", version=f"quorum-sim {_version()} (kraft-quorum)"
    )
    parser.add_argument("--data-dir", default="data")
    parser.add_argument("--mix", default="chaos", choices=sorted(MIXES))
    parser.add_argument("--speed", type=float, default=1.0, help="simulated seconds per second")
    parser.add_argument("--runs", type=int, default=0, help="stop after N runs (0: forever)")
    args = parser.parse_args(argv)
    data = Path(args.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    trace_path = data / "sim-trace.log"
    print(
        "Simulated three-node Raft quorum (sans-I/O core, seeded faults). "
        f"Trace: {trace_path}. Ctrl-C to stop."
    )
    seed = int(time.time())
    runs = 0
    with trace_path.open("a") as trace_file:

        def say(line: str) -> None:
            print(line, flush=True)
            trace_file.write(line + "\n")

        try:
            while args.runs == 0 or runs < args.runs:
                say(f"--- run with seed {seed}, fault mix {args.mix}")
                sim = PacedSimulation(seed, MIXES[args.mix], trace=say, speed=args.speed)
                result = sim.run()
                say(
                    f"--- seed {seed}: {result.acked} writes acknowledged, "
                    f"{result.elections} elections up to epoch {result.max_epoch}, every "
                    f"invariant held, writes resumed {result.recovery_ms:.0f} ms after faults"
                )
                seed += 1
                runs += 1
        except KeyboardInterrupt:
            print("\nstopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
