"""KIP-853 voter changes on real controllers: how long a change takes, and what
the writers see while it happens.

Three controllers formatted with `--initial-controllers` (kraft.version 1) and
two observers (`--no-initial-controllers`, `process.roles=broker`, as a joining
controller runs on main today), on loopback with default settings. Measured:

- `add_voter_ms` / `remove_voter_ms`: one AddRaftVoter (of an observer that has
  caught up) or RemoveRaftVoter, from the request to its answer, which comes
  once the new voter set is committed (`--runs` of each, observers 4 and 5 in
  turn, each removed again after its add).
- `writes_per_s` and `write_gap_max_s` with `changing` false and true: the same
  writers (`--concurrency`, 100-byte records, 100 ms per attempt) for
  `--seconds` without any change, then for `--seconds` while observers are
  added and removed back to back. The goal: no gap beyond one election.
- `leader_self_remove_gap_s`: one writer at concurrency 1 while the active
  controller removes itself (it keeps leading until the change commits, then
  resigns): the longest gap between two acknowledged writes around it; the
  removed controller is added back before the next run. `kill_failover_gap_s`
  is the same gap when the leader is killed with SIGKILL instead (restarted
  after), measured in the same run for the ratio.

    .venv/bin/python bench/membership.py [--runs 5] [--seconds 5] [--concurrency 8]

One JSON object per measurement on stdout (the load average beside each);
progress on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from report import emit, say
from write_systems import VENV_BIN, Members, free_port, wait_for

from quorum.admin_client import AdminClient, AdminError
from quorum.client import QuorumClient
from quorum.common.config import render_properties
from quorum.common.meta_properties import random_uuid, read_meta_properties
from quorum.controller.record_codec import noop
from quorum.gen import admin_pb2 as api

VOTERS = (1, 2, 3)
OBSERVERS = (4, 5)
ATTEMPT_S = 0.1  # per write attempt, so a gap is not rounded up to a client timeout
RECORD_BYTES = 100


def load() -> float:
    return round(os.getloadavg()[0], 2)


def summary(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
    }


class Controllers:
    """Five controller processes: three initial voters, two observers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.members = Members(root, "controller")
        self.ports = {n: free_port() for n in (*VOTERS, *OBSERVERS)}
        self.cluster_id = random_uuid()
        self.directory_ids: dict[int, str] = {}

    def address(self, node: int) -> str:
        return f"127.0.0.1:{self.ports[node]}"

    def addresses(self) -> list[str]:
        return [self.address(n) for n in self.ports]

    def start(self) -> None:
        static = ",".join(f"{n}@{self.address(n)}" for n in VOTERS)
        ids = {n: random_uuid() for n in VOTERS}
        initial = ",".join(f"{n}@{self.address(n)}:{ids[n]}" for n in VOTERS)
        for node in self.ports:
            config = self.root / f"controller-{node}.properties"
            config.write_text(
                render_properties(
                    {
                        "node.id": str(node),
                        "process.roles": "controller" if node in VOTERS else "broker",
                        "controller.quorum.voters": static,
                        "listeners": f"CONTROLLER://{self.address(node)}",
                        "metadata.log.dir": str(self.root / f"controller-{node}"),
                        "log.level": os.environ.get("BENCH_QUORUM_LOG_LEVEL", "WARNING"),
                    }
                )
            )
            flags = (
                ["--initial-controllers", initial]
                if node in VOTERS
                else ["--no-initial-controllers"]
            )
            _run(
                [str(VENV_BIN / "quorumctl"), "storage", "format", "--cluster-id",
                 self.cluster_id, "--config", str(config), *flags]
            )  # fmt: skip
            self.directory_ids[node] = (
                read_meta_properties(self.root / f"controller-{node}").directory_id or ""
            )
            self.members.launch(
                node, [str(VENV_BIN / "quorum-controller"), "--config", str(config)]
            )
        wait_for(lambda: asyncio.run(self.describe()).high_watermark > 0, 60, "a quorum leader")

    async def describe(self) -> Any:
        """The active controller's view (only it lists the voters and observers)."""
        client = QuorumClient(self.addresses(), self.cluster_id)
        try:
            return await client.describe_quorum(timeout_s=0.5)
        except Exception as err:
            raise RuntimeError(f"no leader answered: {err}") from err
        finally:
            await client.close()

    def stop(self) -> None:
        self.members.stop()


def _run(command: list[str]) -> None:
    import subprocess

    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {done.stderr}")


class Writers:
    """`concurrency` writers, each write after write; the time of every acknowledgement."""

    def __init__(self, controllers: Controllers, concurrency: int) -> None:
        self.controllers = controllers
        self.concurrency = concurrency
        self.acked: list[float] = []
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._counter = itertools.count()

    async def __aenter__(self) -> Writers:
        self._tasks = [asyncio.create_task(self._writer()) for _ in range(self.concurrency)]
        return self

    async def __aexit__(self, *_: object) -> None:
        self._stop.set()
        await asyncio.gather(*self._tasks)

    async def _writer(self) -> None:
        client = QuorumClient(self.controllers.addresses(), self.controllers.cluster_id)
        try:
            while not self._stop.is_set():
                key = b"m%012d=" % next(self._counter)
                try:
                    await client.write(
                        [noop(key + b"v" * (RECORD_BYTES - len(key)))],
                        attempt_timeout_s=ATTEMPT_S,
                        deadline_s=30,
                    )
                except Exception:  # unacknowledged: the gap goes on
                    continue
                self.acked.append(time.monotonic())
        finally:
            await client.close()

    def window(self, start: float, end: float) -> tuple[int, float]:
        """Writes acknowledged in [start, end) and the longest gap between two of
        them (the window's edges count as acknowledgements)."""
        times = [start, *sorted(t for t in self.acked if start <= t < end), end]
        return len(times) - 2, max(b - a for a, b in itertools.pairwise(times))


async def change(admin: AdminClient, method: str, request: Any) -> tuple[float, int]:
    """Seconds from request to answer of the accepted attempt, and how many were
    refused first (REQUEST_TIMED_OUT: the observer not yet caught up, or the
    previous change not yet committed)."""
    refused = 0
    while True:
        started = time.perf_counter()
        try:
            await admin.admin(method, request, deadline_s=30)
        except AdminError as err:
            if err.name != "REQUEST_TIMED_OUT" or refused > 200:
                raise
            refused += 1
            await asyncio.sleep(0.05)
            continue
        return time.perf_counter() - started, refused


def add_request(controllers: Controllers, node: int) -> Any:
    host, port = controllers.address(node).split(":")
    return api.AddRaftVoterRequest(
        voter_id=node,
        voter_directory_id=controllers.directory_ids[node],
        listeners=[api.RaftVoterEndpoint(name="CONTROLLER", host=host, port=int(port))],
    )


def remove_request(controllers: Controllers, node: int) -> Any:
    return api.RemoveRaftVoterRequest(
        voter_id=node, voter_directory_id=controllers.directory_ids[node]
    )


async def caught_up(controllers: Controllers, node: int, timeout_s: float = 60) -> None:
    """Until the leader sees `node` (an observer) at its log end."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            leader = await controllers.describe()
        except RuntimeError:
            await asyncio.sleep(0.05)
            continue
        for replica in [*leader.observers, *leader.current_voters]:
            if replica.replica_id == node and replica.log_end_offset >= leader.high_watermark:
                return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"controller {node} did not catch up in {timeout_s}s")


async def add_and_remove(
    controllers: Controllers, admin: AdminClient, nodes: Iterable[int]
) -> dict[str, list[float]]:
    took: dict[str, list[float]] = {"add": [], "remove": [], "refused": []}
    for node in nodes:
        await caught_up(controllers, node)
        seconds, refused = await change(admin, "AddRaftVoter", add_request(controllers, node))
        took["add"].append(seconds)
        took["refused"].append(refused)
        seconds, refused = await change(admin, "RemoveRaftVoter", remove_request(controllers, node))
        took["remove"].append(seconds)
        took["refused"].append(refused)
    return took


async def measure_changes(controllers: Controllers, runs: int) -> None:
    admin = AdminClient(controllers.addresses(), controllers.cluster_id)
    try:
        nodes = [OBSERVERS[i % len(OBSERVERS)] for i in range(runs)]
        took = await add_and_remove(controllers, admin, nodes)
    finally:
        await admin.close()
    for kind in ("add", "remove"):
        values = [s * 1000 for s in took[kind]]
        emit(
            metric=f"{kind}_voter_ms", value=round(statistics.median(values), 2),
            runs=len(values), **summary(values), goal_ms=100,
            within_goal=sum(v <= 100 for v in values), refused_first=sum(took["refused"]),
            load_average=load(),
        )  # fmt: skip
        say(f"   {kind}: median {statistics.median(values):.1f} ms over {len(values)}")


async def measure_throughput(controllers: Controllers, seconds: float, concurrency: int) -> None:
    admin = AdminClient(controllers.addresses(), controllers.cluster_id)
    try:
        async with Writers(controllers, concurrency) as writers:
            await asyncio.sleep(1.0)  # warm-up
            start = time.monotonic()
            await asyncio.sleep(seconds)
            quiet_end = time.monotonic()
            changes = 0
            while time.monotonic() < quiet_end + seconds:
                node = OBSERVERS[changes // 2 % len(OBSERVERS)]
                await caught_up(controllers, node)
                await change(admin, "AddRaftVoter", add_request(controllers, node))
                await change(admin, "RemoveRaftVoter", remove_request(controllers, node))
                changes += 2
            changing_end = time.monotonic()
    finally:
        await admin.close()
    for changing, (a, b) in ((False, (start, quiet_end)), (True, (quiet_end, changing_end))):
        count, gap = writers.window(a, b)
        common = {"changing": changing, "concurrency": concurrency, "seconds": round(b - a, 2)}
        if changing:
            common["changes"] = changes
        emit(metric="writes_per_s", value=round(count / (b - a), 1), **common, load_average=load())
        emit(metric="write_gap_max_s", value=round(gap, 4), **common, load_average=load())
        rate = count / (b - a)
        say(f"   changing={changing}: {rate:.0f} writes/s, longest gap {gap * 1000:.0f} ms")


async def gap_around(controllers: Controllers, action: Any) -> float:
    """The longest gap between acknowledged writes (concurrency 1) from 0.5 s
    before `action` until 0.5 s after writes resume."""
    async with Writers(controllers, 1) as writers:
        await asyncio.sleep(0.5)
        acted = time.monotonic()
        await action()
        while not writers.acked or writers.acked[-1] <= acted:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.5)
    _, gap = writers.window(acted - 0.5, writers.acked[-1])
    return gap


async def measure_leader_removal(controllers: Controllers, runs: int) -> None:
    admin = AdminClient(controllers.addresses(), controllers.cluster_id)
    removals: list[float] = []
    kills: list[float] = []
    try:
        for _ in range(runs):
            leader = (await controllers.describe()).leader_id

            async def remove_leader(leader: int = leader) -> None:
                await change(admin, "RemoveRaftVoter", remove_request(controllers, leader))

            removals.append(await gap_around(controllers, remove_leader))
            await caught_up(controllers, leader)  # now an observer: add it back
            await change(admin, "AddRaftVoter", add_request(controllers, leader))

            leader = (await controllers.describe()).leader_id

            async def kill_leader(leader: int = leader) -> None:
                controllers.members.kill(leader)

            kills.append(await gap_around(controllers, kill_leader))
            controllers.members.restart(leader)
            await caught_up(controllers, leader)
    finally:
        await admin.close()
    for metric, values in (("leader_self_remove_gap_s", removals), ("kill_failover_gap_s", kills)):
        emit(metric=metric, value=round(statistics.median(values), 4), runs=len(values),
             **summary(values), load_average=load())  # fmt: skip
        say(f"   {metric}: median {statistics.median(values) * 1000:.0f} ms over {len(values)}")
    ratio = statistics.median(removals) / statistics.median(kills)
    emit(metric="leader_self_remove_vs_failover", value=round(ratio, 2), load_average=load())


async def bench(controllers: Controllers, args: argparse.Namespace) -> None:
    say("== add and remove a caught-up voter")
    await measure_changes(controllers, args.runs)
    say("== writes without and during voter changes")
    await measure_throughput(controllers, args.seconds, args.concurrency)
    say("== the active controller removes itself (and a SIGKILL failover beside it)")
    await measure_leader_removal(controllers, args.runs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--dir", type=Path, default=None, help="Kept afterwards; default a temporary one."
    )
    args = parser.parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-membership-"))
    root.mkdir(parents=True, exist_ok=True)
    controllers = Controllers(root)
    say(f"== five controllers (three voters, two observers) under {root}")
    try:
        controllers.start()
        asyncio.run(bench(controllers, args))
    finally:
        controllers.stop()
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
