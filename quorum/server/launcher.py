"""What `make run` runs: a local three-controller quorum on loopback.

It does what an operator would do by hand, with the same commands: writes
`data/config/controller-N.properties` (kept if already there, so edits stick),
formats `data/controller-N` with `quorumctl storage format` on first use (one
cluster id, kept in `data/config/cluster.id`), starts each controller with
`quorum-controller --config FILE` (output in `data/logs/controller-N.log`), waits
for a leader and prints the endpoints, metrics URLs and the quorum status. Ctrl-C
stops every process gracefully (SIGTERM, so a leader hands over first). Running it
again resumes from the same data.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from quorum.client import QuorumClient, QuorumUnavailableError
from quorum.gen import raft_pb2 as pb
from quorum.server.config import load_config, render_properties

CONTROLLER_IDS = (1, 2, 3)
FIRST_CONTROLLER_PORT = 9093
FIRST_METRICS_PORT = 9193
STATUS_EVERY_S = 10.0


@dataclass
class Member:
    node_id: int
    config: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None


def bin_dir() -> Path:
    """The console scripts live next to this interpreter (the project's venv)."""
    return Path(sys.executable).parent


def controller_properties(data_dir: Path, node_id: int) -> dict[str, str]:
    voters = ",".join(f"{n}@127.0.0.1:{FIRST_CONTROLLER_PORT + n - 1}" for n in CONTROLLER_IDS)
    return {
        "node.id": str(node_id),
        "process.roles": "controller",
        "controller.quorum.voters": voters,
        "listeners": f"CONTROLLER://127.0.0.1:{FIRST_CONTROLLER_PORT + node_id - 1}",
        "metadata.log.dir": str((data_dir / f"controller-{node_id}").resolve()),
        "metrics.listener": f"http://127.0.0.1:{FIRST_METRICS_PORT + node_id - 1}",
    }


def prepare(data_dir: Path) -> tuple[str, list[Member]]:
    """Configs and formatted directories; idempotent."""
    config_dir = data_dir / "config"
    logs_dir = data_dir / "logs"
    config_dir.mkdir(parents=True, exist_ok=True)
    logs_dir.mkdir(parents=True, exist_ok=True)
    cluster_file = config_dir / "cluster.id"
    if not cluster_file.exists():
        cluster_id = _run([str(bin_dir() / "quorumctl"), "storage", "random-uuid"]).strip()
        cluster_file.write_text(cluster_id + "\n")
    cluster_id = cluster_file.read_text().strip()
    members = []
    for node_id in CONTROLLER_IDS:
        path = config_dir / f"controller-{node_id}.properties"
        if not path.exists():
            header = f"controller {node_id} of the local quorum written by `make run`"
            path.write_text(render_properties(controller_properties(data_dir, node_id), header))
        config = load_config(path)
        if not (config.metadata_log_dir / "meta.properties").exists():
            print(
                _run(
                    [
                        str(bin_dir() / "quorumctl"),
                        "storage",
                        "format",
                        "--cluster-id",
                        cluster_id,
                        "--config",
                        str(path),
                    ]
                ).strip()
            )
        members.append(Member(node_id, path, logs_dir / f"controller-{node_id}.log"))
    return cluster_id, members


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed: {result.stderr.strip()}")
    return result.stdout


def start(member: Member) -> None:
    with member.log_file.open("ab") as out:
        member.process = subprocess.Popen(
            [str(bin_dir() / "quorum-controller"), "--config", str(member.config)],
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # Ctrl-C reaches us; we stop them in order
        )


def stop_all(members: list[Member], timeout_s: float = 10.0) -> None:
    for member in members:
        if member.process and member.process.poll() is None:
            member.process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    for member in members:
        if member.process is None:
            continue
        try:
            member.process.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            member.process.kill()
            member.process.wait()


def addresses(members: list[Member]) -> list[str]:
    return [f"127.0.0.1:{FIRST_CONTROLLER_PORT + m.node_id - 1}" for m in members]


def status_table(cluster_id: str, members: list[Member], r: pb.DescribeQuorumResponse) -> str:
    """kafka-metadata-quorum.sh's status plus its per-voter replication view."""
    lines = [
        f"ClusterId:      {cluster_id}",
        f"LeaderId:       {r.leader_id}",
        f"LeaderEpoch:    {r.leader_epoch}",
        f"HighWatermark:  {r.high_watermark}",
        "",
        f"{'NodeId':<8}{'LogEndOffset':>14}{'Lag':>6}{'LastFetchMsAgo':>16}  Status",
    ]
    now_ms = int(time.time() * 1000)
    alive = {m.node_id for m in members if m.process and m.process.poll() is None}
    for voter in r.current_voters:
        lag = max(0, r.high_watermark - voter.log_end_offset)
        ago = now_ms - voter.last_fetch_timestamp_ms if voter.last_fetch_timestamp_ms > 0 else -1
        role = "Leader" if voter.replica_id == r.leader_id else "Follower"
        state = role if voter.replica_id in alive else "stopped"
        lines.append(f"{voter.replica_id:<8}{voter.log_end_offset:>14}{lag:>6}{ago:>16}  {state}")
    return "\n".join(lines)


async def supervise(data_dir: Path) -> int:
    cluster_id, members = prepare(data_dir)
    for member in members:
        start(member)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    client = QuorumClient(addresses(members), cluster_id)
    try:
        print(f"cluster {cluster_id}: starting controllers {list(CONTROLLER_IDS)}")
        reply = await _wait_for_leader(client, stop)
        if reply is None:
            return 0 if stop.is_set() else 1
        for member in members:
            print(
                f"  controller {member.node_id}: grpc 127.0.0.1:"
                f"{FIRST_CONTROLLER_PORT + member.node_id - 1}  metrics "
                f"http://127.0.0.1:{FIRST_METRICS_PORT + member.node_id - 1}/metrics  "
                f"config {member.config}  log {member.log_file}"
            )
        print(status_table(cluster_id, members, reply), flush=True)
        print(
            "Ctrl-C stops everything. Restart one controller by hand with:\n"
            f"  {bin_dir() / 'quorum-controller'} --config {members[0].config}",
            flush=True,
        )
        exited: set[int] = set()
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), STATUS_EVERY_S)
            for member in members:
                code = member.process.poll() if member.process else None
                if code is not None and member.node_id not in exited:
                    exited.add(member.node_id)
                    print(f"controller {member.node_id} exited with code {code}", flush=True)
            if not stop.is_set():
                with contextlib.suppress(QuorumUnavailableError):
                    reply = await client.describe_quorum()
                    print(
                        f"leader {reply.leader_id} epoch {reply.leader_epoch} "
                        f"high watermark {reply.high_watermark}",
                        flush=True,
                    )
        return 0
    finally:
        print("stopping controllers", flush=True)
        await client.close()
        stop_all(members)


async def _wait_for_leader(
    client: QuorumClient, stop: asyncio.Event
) -> pb.DescribeQuorumResponse | None:
    deadline = time.monotonic() + 30
    while not stop.is_set() and time.monotonic() < deadline:
        with contextlib.suppress(QuorumUnavailableError):
            reply = await client.describe_quorum(timeout_s=0.5)
            if reply.high_watermark > 0:  # the new leader has committed its epoch
                return reply
        await asyncio.sleep(0.2)
    if not stop.is_set():
        print("no leader was elected within 30 s; see data/logs/", file=sys.stderr)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a local three-controller quorum.")
    parser.add_argument("--data-dir", default="data", type=Path)
    args = parser.parse_args(argv)
    return asyncio.run(supervise(args.data_dir))


if __name__ == "__main__":
    sys.exit(main())
