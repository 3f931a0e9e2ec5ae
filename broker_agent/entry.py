"""The `broker-agent` console script: a SIGTERM at any point of start-up ends it cleanly.

The agent's modules take about a second to import (gRPC, RocksDB), and until the
event loop installs its own handlers a SIGTERM would kill the process with
status -15 halfway through opening its cache. This entry point installs a
handler first and imports the agent after: a stop before the agent could
register has nothing to hand over, so it exits 0.
"""

from __future__ import annotations

import os
import signal
from types import FrameType


def _stopped_while_starting(signum: int, frame: FrameType | None) -> None:
    # Not sys.exit: raised inside a starting event loop, SystemExit would run gRPC's
    # teardown half-built, which can hang. Nothing is registered or written that
    # needs flushing yet (the cache is crash-safe), so leave at once.
    os._exit(0)


def main() -> int:
    signal.signal(signal.SIGTERM, _stopped_while_starting)
    signal.signal(signal.SIGINT, _stopped_while_starting)
    from broker_agent.main import main as run_agent

    return run_agent()
