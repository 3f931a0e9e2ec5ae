"""Child process for the cleaner's crash tests: opens a partition log, runs one
cleaning round, and SIGKILLs itself at a named step of it (or is killed by the
parent at a random moment). Usage:

    python cleaner_crash_child.py <log dir> <now ms> step <hook name> <n>
    python cleaner_crash_child.py <log dir> <now ms> slow

`step` dies at the n-th call of the hook with that name: "writing" (the
.cleaned file part-written), "cleaned" (written and fsync'd), "committed"
(renamed to .swap), "deleted-old" (a replaced segment deleted), "renamed"
(the swap moved into place), "swapped" (the log switched to the new segment).
`slow` sleeps a little at every hook so a kill from outside lands mid-round.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from cleaner_helpers import open_log, producers_of

from broker_agent.partitions.log_cleaner import LogCleaner


def main() -> None:
    directory, now, mode = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    calls: dict[str, int] = {}

    def hook(name: str) -> None:
        calls[name] = calls.get(name, 0) + 1
        if mode == "step" and name == sys.argv[4] and calls[name] == int(sys.argv[5]):
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "slow":
            time.sleep(0.003)

    plog = open_log(directory)
    print("ready", flush=True)
    LogCleaner().clean(plog, plog.log_end_offset, now, producers_of(plog), hook)
    plog.close()
    print("done", " ".join(f"{k}={v}" for k, v in sorted(calls.items())), flush=True)


if __name__ == "__main__":
    main()
