"""Voter changes under a stream of writes, shared by the KIP-853 tests on real
processes (dynamic voters, bootstrap servers, the kraft.version upgrade, voter
recovery, the chart's scaling).

A `Writer` writes unique records while the voters change and remembers the
offset each acknowledged one was given; `check_acknowledged` then reads every
controller's log back with `quorumctl log dump` and asserts that no acknowledged
write is missing or moved: the one promise a voter change must keep.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
import time
from collections.abc import Collection, Iterable

from controller_cluster import Cluster, ctl, quorumctl

from quorum.controller.record_codec import noop
from quorum.gen import raft_pb2 as pb


class Writer:
    """Writes one unique record at a time, remembering where each acknowledged one went."""

    def __init__(self, cluster: Cluster, prefix: bytes = b"w", pause_s: float = 0.0) -> None:
        self._cluster = cluster
        self._prefix = prefix
        self._pause_s = pause_s
        self.acknowledged: dict[bytes, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(60)

    async def _run(self) -> None:
        client = self._cluster.client()
        try:
            i = 0
            while not self._stop.is_set():
                payload = self._prefix + b"%08d" % i
                i += 1
                try:
                    result = await client.write([noop(payload)], deadline_s=5)
                except Exception:  # not acknowledged: it may or may not be in the log
                    continue
                self.acknowledged[payload] = result.last_offset
                if self._pause_s:
                    await asyncio.sleep(self._pause_s)
        finally:
            await client.close()

    def wait_for_more(self, than: int | None = None, timeout_s: float = 60) -> None:
        """Until more than `than` writes (by default: as many as now) are acknowledged."""
        than = len(self.acknowledged) if than is None else than
        deadline = time.monotonic() + timeout_s
        while len(self.acknowledged) <= than:
            assert time.monotonic() < deadline, "no write acknowledged"
            time.sleep(0.05)


def voters(cluster: Cluster, timeout_s: float = 15.0) -> dict[int, str]:
    """The voter set in force as the leader describes it: id -> directory id."""
    leader = cluster.wait_for_leader(timeout_s=timeout_s)
    return {r.replica_id: r.directory_id for r in leader.current_voters}


def membership(cluster: Cluster, *args: str) -> tuple[int, str]:
    done = ctl(cluster, "quorum", *args, "--timeout", "30")
    return done.returncode, done.stdout + done.stderr


def add_when_caught_up(cluster: Cluster, node: int, by_config: bool = False) -> str:
    """add-controller (with the ids and endpoint, or `--config` as Kafka's tool
    takes it); REQUEST_TIMED_OUT means not caught up yet (or the previous change
    still committing): asked again, as an operator would."""
    deadline = time.monotonic() + 60
    flags = (
        ("--config", str(cluster.procs[node].config))
        if by_config
        else (
            "--controller-id", str(node),
            "--controller-directory-id", cluster.directory_ids[node],
            "--endpoint", cluster.procs[node].address,
        )
    )  # fmt: skip
    while True:
        code, out = membership(cluster, "add-controller", *flags)
        if code == 0 or "REQUEST_TIMED_OUT" not in out or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


def remove(cluster: Cluster, node: int, directory_id: str) -> tuple[int, str]:
    return membership(
        cluster,
        "remove-controller",
        "--controller-id", str(node),
        "--controller-directory-id", directory_id,
    )  # fmt: skip


def committed_log(cluster: Cluster, node: int) -> dict[int, bytes]:
    """The workload's records in a controller's log (offset -> payload)."""
    done = quorumctl("log", "dump", "--dir", str(cluster.procs[node].data_dir), "--output", "json")
    assert done.returncode == 0, done.stderr
    return {
        record["Offset"]: base64.b64decode(record["Record"].get("payload", ""))
        for batch in json.loads(done.stdout)
        for record in batch["Records"]
        if record["Type"] == "no_op"
    }


def wait_caught_up(
    cluster: Cluster, nodes: Iterable[int], final: pb.DescribeQuorumResponse
) -> None:
    """Every one of `nodes` has the leader's high watermark `final` (their logs are
    then comparable up to it)."""
    nodes = tuple(nodes)
    cluster.wait_until(
        lambda: all(cluster.describe(n).high_watermark >= final.high_watermark for n in nodes),
        60,
        "every controller caught up",
    )


def check_acknowledged(
    cluster: Cluster,
    writer: Writer,
    nodes: Iterable[int],
    final: pb.DescribeQuorumResponse,
    *,
    lost_allowed: Collection[bytes] = frozenset(),
    logs_agree: bool = True,
) -> None:
    """Every acknowledged write (but `lost_allowed`) below `final`'s high watermark
    is in each of `nodes`' logs at the offset it was acknowledged at; with
    `logs_agree`, the logs are also the same below the high watermark."""
    logs = {n: committed_log(cluster, n) for n in nodes}
    assert len(writer.acknowledged) > 3
    for node, records in logs.items():
        where = {payload: offset for offset, payload in records.items()}
        lost = {
            p: o
            for p, o in writer.acknowledged.items()
            if o < final.high_watermark and where.get(p) != o and p not in lost_allowed
        }
        assert not lost, f"controller {node} lost acknowledged writes: {sorted(lost.items())[:5]}"
    if not logs_agree:
        return
    common = min(final.high_watermark, *(max(r, default=0) + 1 for r in logs.values()))
    first = next(iter(logs.values()))
    for node, records in logs.items():
        assert {o: p for o, p in records.items() if o < common} == {
            o: p for o, p in first.items() if o < common
        }, f"controller {node}'s log differs below offset {common}"
