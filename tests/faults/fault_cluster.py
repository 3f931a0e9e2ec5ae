"""A real cluster (controllers and broker agents as processes, tests/integration's
`Cluster`) whose every link goes through a proxy of its own.

Each controller's `controller.quorum.voters` names itself at its real listener
(the config insists its own entry match `listeners`) and every peer at the
proxy of the link from it to that peer; each broker's names every controller at
the proxy of its link to it. Clients of the test talk to real addresses.
"""

from __future__ import annotations

import asyncio
import base64
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

from checkers import CommittedLog, check_acknowledged, check_linearizable
from controller_cluster import Cluster, quorumctl
from netfaults import Network
from toxiproxy import Toxiproxy
from workload import REGISTER_INITIAL, Workload

from quorum.client import QuorumClient
from quorum.common.config import read_properties, render_properties
from quorum.gen import raft_pb2 as pb


def name(node: int) -> str:
    return f"c{node}" if node < 100 else f"b{node}"


NetT = TypeVar("NetT")


@dataclass
class FaultCluster(Generic[NetT]):
    """`net` drives the faults: the proxies' `Network` here, the namespaces' links
    in tests/faults/netns."""

    cluster: Cluster
    net: NetT

    @classmethod
    def create(
        cls,
        root: Path,
        toxiproxy: Toxiproxy,
        brokers: tuple[int, ...] = (),
        extra: dict[str, str] | None = None,
        broker_extra: dict[str, str] | None = None,
    ) -> FaultCluster[Network]:
        cluster = Cluster.create(root, extra=extra)
        if brokers:
            cluster.add_brokers(*brokers, **(broker_extra or {}))
        net = Network(toxiproxy)
        for src, proc in [*cluster.procs.items(), *cluster.brokers.items()]:
            voters = []
            for dst, peer in sorted(cluster.procs.items()):
                address = (
                    peer.address if dst == src else net.link(name(src), name(dst), peer.address)
                )
                voters.append(f"{dst}@{address}")
            props = read_properties(proc.config)
            props["controller.quorum.voters"] = ",".join(voters)
            proc.config.write_text(render_properties(props))
        return cls(cluster, net)

    @property
    def ids(self) -> list[int]:
        return sorted(self.cluster.procs)

    def workload(self, **kwargs: Any) -> Workload:
        addresses = {n: p.address for n, p in self.cluster.procs.items()}
        return Workload(self.cluster.cluster_id, addresses, **kwargs)

    def leader(self, among: list[int] | None = None, timeout_s: float = 20.0) -> int:
        return int(self.cluster.wait_for_leader(among, timeout_s=timeout_s).leader_id)

    def views(self) -> dict[int, pb.DescribeQuorumResponse]:
        out = {}
        for node in self.ids:
            if self.cluster.procs[node].alive():
                try:
                    out[node] = self.cluster.describe(node)
                except Exception:
                    continue
        return out

    def wait_converged(self, timeout_s: float = 30.0) -> dict[int, pb.DescribeQuorumResponse]:
        """Every controller up, one leader, all at the same high watermark and log end."""
        deadline = time.monotonic() + timeout_s
        views: dict[int, pb.DescribeQuorumResponse] = {}
        while time.monotonic() < deadline:
            views = self.views()
            leaders = {v.leader_id for v in views.values()}
            marks = {(v.high_watermark, v.log_end_offset, v.applied_offset) for v in views.values()}
            if len(views) == len(self.ids) and len(leaders) == 1 and len(marks) == 1:
                return views
            time.sleep(0.1)
        raise AssertionError(f"no convergence in {timeout_s}s: {views}\n{self.cluster.logs()}")

    def wait_caught_up(self, node: int, timeout_s: float = 30.0) -> None:
        """`node` follows a leader and has reached the leader's high watermark as it
        stood when we started waiting (writes may go on meanwhile)."""
        leader = self.cluster.wait_for_leader(timeout_s=timeout_s)
        target = leader.high_watermark

        def caught_up() -> bool:
            view = self.cluster.describe(node)
            return view.leader_id >= 0 and view.high_watermark >= target

        self.cluster.wait_until(caught_up, timeout_s, f"node {node} to catch up to {target}")

    def committed_logs(self) -> list[CommittedLog]:
        """Each controller's committed records, read by `quorumctl log dump` beside it."""
        views = self.wait_converged()
        logs = []
        for node, view in views.items():
            result = quorumctl(
                "log", "dump", "--dir", str(self.cluster.procs[node].data_dir), "--output", "json"
            )
            assert result.returncode == 0, result.stderr
            records: dict[int, bytes | None] = {}
            for batch in json.loads(result.stdout):
                for record in batch["Records"]:
                    offset = record["Offset"]
                    if record["Type"] == "no_op":
                        payload = base64.b64decode(record["Record"].get("payload", ""))
                        records[offset] = payload if payload.startswith(b"w") else None
                    else:
                        body = json.dumps(record, sort_keys=True)
                        records[offset] = f"#{batch['Epoch']}:{body}".encode()
            logs.append(CommittedLog(node, view.log_start_offset, view.high_watermark, records))
        return logs

    def check(self, workload: Workload, label: str, fault: tuple[float, float]) -> dict[str, Any]:
        """Run both checkers after the scenario healed; print and return its figures."""
        problems = check_acknowledged(workload.appends, self.committed_logs())
        verdict = check_linearizable(workload.register, REGISTER_INITIAL)
        stats = workload.stats()
        lost = sum("is missing" in p for p in problems)
        figures = {
            "scenario": label,
            "writes_attempted": stats.attempted,
            "writes_acknowledged": stats.acknowledged,
            "writes_refused": stats.failed,
            "writes_in_doubt": stats.in_doubt,
            "writes_lost": lost,
            "register_ops": len(workload.register),
            "unavailable_s": round(workload.unavailable_s(*fault), 3),
        }
        print(json.dumps(figures))
        if problems or not verdict.ok:  # kept beside the cluster's logs for a post-mortem
            history = [op.__dict__ for op in workload.register]
            (self.cluster.root / "register-history.json").write_text(json.dumps(history))
        assert not problems, "\n".join(problems[:20])
        assert verdict.ok, verdict.message
        return figures

    def stop(self) -> None:
        self.cluster.stop_all()


async def to_thread(fn: Any, *args: Any) -> Any:
    """A blocking call (the toxiproxy client, a describe) off the workload's loop."""
    return await asyncio.to_thread(fn, *args)


async def describe(address: str, cluster_id: str) -> pb.DescribeQuorumResponse:
    client = QuorumClient([address], cluster_id)
    try:
        return await client.describe_quorum(address, timeout_s=1)
    finally:
        await client.close()
