"""What `make run` runs: three controllers and three brokers on loopback.

It does what an operator would do by hand, with the same commands: writes
`data/config/controller-N.properties` and `data/config/broker-N.properties` (kept
if already there, so edits stick), formats `data/controller-N` and
`data/broker-N` with `quorumctl storage format` on first use (one cluster id,
kept in `data/config/cluster.id`), starts each controller with
`quorum-controller --config FILE` and, once a leader is elected, each broker
with `broker-agent --config FILE` (output in `data/logs/`), waits until the
brokers are ONLINE and prints the endpoints, metrics URLs and the quorum and
broker status. Ctrl-C stops the brokers first (a controlled shutdown each), then
the controllers (SIGTERM, so a leader hands over first). Running it again
resumes from the same data.

`--tls` (`make run TLS=1`, data under `data/tls/`) runs the same cluster over
mTLS: on first use it makes a local CA with the `cryptography` package and one
certificate per controller, broker and the operator (`data/tls/certs/`), writes
`listener.security.protocol.map=CONTROLLER:SSL`, the `ssl.*` keys and
`ssl.client.auth=required` into every properties file, turns on Kafka's
StandardAuthorizer with the controllers and the operator as `super.users`, gives
each broker a CLUSTER_ACTION ACL before it starts (a broker's certificate can
fetch metadata, not call admin APIs), and prints the `QUORUMCTL_SSL_*`
variables that let `quorumctl` in as `User:CN=admin`.
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

from quorum.admin_client import AdminClient, AdminError, NoControllerError
from quorum.authz.authorizer import (
    CLUSTER_NAME,
    STANDARD_AUTHORIZER,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from quorum.client import QuorumClient, QuorumUnavailableError
from quorum.common.local_ca import IssuedFiles, LocalCa
from quorum.common.node_identity import load_broker_storage
from quorum.common.tls import TlsSettings
from quorum.controller_config import load_config, render_properties
from quorum.gen import admin_pb2 as api
from quorum.gen import raft_pb2 as pb

CONTROLLER_IDS = (1, 2, 3)
BROKER_IDS = (101, 102, 103)
FIRST_CONTROLLER_PORT = 9093
FIRST_METRICS_PORT = 9193
FIRST_BROKER_PORT = 9092  # broker 101 listens on 9092, 102 on 9192, 103 on 9292
FIRST_BROKER_METRICS_PORT = 9293
STATUS_EVERY_S = 10.0
OPERATOR = "admin"  # the operator's certificate: CN=admin


@dataclass
class Member:
    node_id: int
    config: Path
    log_file: Path
    process: subprocess.Popen[bytes] | None = None
    command: str = "quorum-controller"


def bin_dir() -> Path:
    """The console scripts live next to this interpreter (the project's venv)."""
    return Path(sys.executable).parent


def controller_voters() -> str:
    return ",".join(f"{n}@127.0.0.1:{FIRST_CONTROLLER_PORT + n - 1}" for n in CONTROLLER_IDS)


def tls_properties(files: IssuedFiles, listener: bool) -> dict[str, str]:
    """The keys that put a controller (`listener`) or a broker on mTLS."""
    props = {
        "listener.security.protocol.map": (
            "CONTROLLER:SSL" if listener else "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL"
        ),
        "ssl.certificate.location": str(files.certificate.resolve()),
        "ssl.key.location": str(files.key.resolve()),
        "ssl.ca.location": str(files.ca.resolve()),
    }
    if listener:
        props["ssl.client.auth"] = "required"
        props["authorizer.class.name"] = STANDARD_AUTHORIZER
        props["super.users"] = ";".join(
            [f"User:CN=controller-{n}" for n in CONTROLLER_IDS] + [f"User:CN={OPERATOR}"]
        )
    return props


async def allow_brokers(admin: AdminClient) -> None:
    """A CLUSTER_ACTION ACL per broker principal (creating one twice changes nothing)."""
    bindings = [
        api.AclBinding(
            resource_type=ResourceType.CLUSTER, resource_name=CLUSTER_NAME,
            pattern_type=PatternType.LITERAL, principal=f"User:CN=broker-{b}", host="*",
            operation=Operation.CLUSTER_ACTION, permission_type=Permission.ALLOW,
        )
        for b in BROKER_IDS
    ]  # fmt: skip
    reply = await admin.admin("CreateAcls", api.CreateAclsRequest(creations=bindings))
    failed = [r.error.message for r in reply.results if r.error.error_code]
    if failed:
        raise SystemExit(f"cannot give the brokers their ACLs: {failed}")


def make_certificates(data_dir: Path) -> dict[str, IssuedFiles]:
    """A local CA and certificates for every process and the operator, made once
    (kept in `certs/`, so a second run reuses them)."""
    certs = data_dir / "certs"
    names = [f"controller-{n}" for n in CONTROLLER_IDS]
    names += [f"broker-{b}" for b in BROKER_IDS] + [OPERATOR]
    if not (certs / "ca.pem").exists():
        ca = LocalCa("kraft-quorum make run CA")
        for name in names:
            ca.write(certs, name)
        print(f"generated a local CA and certificates in {certs}")
    return {
        name: IssuedFiles(certs / f"{name}.pem", certs / f"{name}.key", certs / "ca.pem")
        for name in names
    }


def operator_tls(files: IssuedFiles) -> TlsSettings:
    return TlsSettings(
        certificate_chain=files.certificate.read_bytes(),
        private_key=files.key.read_bytes(),
        ca=files.ca.read_bytes(),
    )


def controller_properties(data_dir: Path, node_id: int) -> dict[str, str]:
    return {
        "node.id": str(node_id),
        "process.roles": "controller",
        "controller.quorum.voters": controller_voters(),
        "listeners": f"CONTROLLER://127.0.0.1:{FIRST_CONTROLLER_PORT + node_id - 1}",
        "metadata.log.dir": str((data_dir / f"controller-{node_id}").resolve()),
        "metrics.listener": f"http://127.0.0.1:{FIRST_METRICS_PORT + node_id - 1}",
    }


def broker_port(broker_id: int) -> int:
    return FIRST_BROKER_PORT + 100 * (broker_id - BROKER_IDS[0])


def broker_metrics_port(broker_id: int) -> int:
    return FIRST_BROKER_METRICS_PORT + 100 * (broker_id - BROKER_IDS[0])


def broker_properties(data_dir: Path, broker_id: int) -> dict[str, str]:
    return {
        "node.id": str(broker_id),
        "process.roles": "broker",
        "controller.quorum.voters": controller_voters(),
        "listeners": f"PLAINTEXT://127.0.0.1:{broker_port(broker_id)}",
        "metadata.log.dir": str((data_dir / f"broker-{broker_id}").resolve()),
        "metrics.listener": f"http://127.0.0.1:{broker_metrics_port(broker_id)}",
    }


def prepare_brokers(
    data_dir: Path, cluster_id: str, certs: dict[str, IssuedFiles] | None = None
) -> list[Member]:
    members = []
    for broker_id in BROKER_IDS:
        path = data_dir / "config" / f"broker-{broker_id}.properties"
        if not path.exists():
            header = f"broker {broker_id} of the local cluster written by `make run`"
            props = broker_properties(data_dir, broker_id)
            if certs is not None:
                props.update(tls_properties(certs[f"broker-{broker_id}"], listener=False))
            path.write_text(render_properties(props, header))
        _format_once(path, load_broker_storage(path).metadata_log_dir, cluster_id)
        members.append(
            Member(broker_id, path, data_dir / "logs" / f"broker-{broker_id}.log",
                   command="broker-agent")
        )  # fmt: skip
    return members


def _format_once(config: Path, directory: Path, cluster_id: str) -> None:
    if (directory / "meta.properties").exists():
        return
    command = [str(bin_dir() / "quorumctl"), "storage", "format", "--cluster-id", cluster_id]
    print(_run([*command, "--config", str(config)]).strip())


def prepare(
    data_dir: Path, certs: dict[str, IssuedFiles] | None = None
) -> tuple[str, list[Member]]:
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
            props = controller_properties(data_dir, node_id)
            if certs is not None:
                props.update(tls_properties(certs[f"controller-{node_id}"], listener=True))
            path.write_text(render_properties(props, header))
        _format_once(path, load_config(path).metadata_log_dir, cluster_id)
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
            [str(bin_dir() / member.command), "--config", str(member.config)],
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


async def supervise(data_dir: Path, tls: bool = False) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    certs = make_certificates(data_dir) if tls else None
    cluster_id, members = prepare(data_dir, certs)
    brokers = prepare_brokers(data_dir, cluster_id, certs)
    client_tls = operator_tls(certs[OPERATOR]) if certs else None
    for member in members:
        start(member)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    client = QuorumClient(addresses(members), cluster_id, tls=client_tls)
    admin = AdminClient(addresses(members), cluster_id, tls=client_tls)
    try:
        print(f"cluster {cluster_id}: starting controllers {list(CONTROLLER_IDS)}")
        reply = await _wait_for_leader(client, stop)
        if reply is None:
            return 0 if stop.is_set() else 1
        if certs is not None:
            await allow_brokers(admin)
        print(f"starting brokers {list(BROKER_IDS)}", flush=True)
        for broker in brokers:
            start(broker)
        for member in members:
            print(
                f"  controller {member.node_id}: grpc 127.0.0.1:"
                f"{FIRST_CONTROLLER_PORT + member.node_id - 1}  metrics "
                f"http://127.0.0.1:{FIRST_METRICS_PORT + member.node_id - 1}/metrics  "
                f"config {member.config}  log {member.log_file}"
            )
        for broker in brokers:
            print(
                f"  broker {broker.node_id}: Kafka PLAINTEXT://127.0.0.1:"
                f"{broker_port(broker.node_id)}  "
                f"metrics http://127.0.0.1:{broker_metrics_port(broker.node_id)}/metrics  "
                f"config {broker.config}  log {broker.log_file}"
            )
        print(status_table(cluster_id, members, reply), flush=True)
        print(await _wait_for_brokers(admin, stop), flush=True)
        if certs is not None:
            print(quorumctl_environment(certs[OPERATOR]), flush=True)
        print(
            "Kafka clients: bootstrap.servers="
            + ",".join(f"127.0.0.1:{broker_port(b.node_id)}" for b in brokers)
            + f" (e.g. kcat -b 127.0.0.1:{broker_port(brokers[0].node_id)} -L)",
            flush=True,
        )
        print(
            "Ctrl-C stops everything. Restart one process by hand with:\n"
            f"  {bin_dir() / 'quorum-controller'} --config {members[0].config}\n"
            f"  {bin_dir() / 'broker-agent'} --config {brokers[0].config}",
            flush=True,
        )
        exited: set[str] = set()
        while not stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), STATUS_EVERY_S)
            for member in [*members, *brokers]:
                code = member.process.poll() if member.process else None
                name = f"{member.command} {member.node_id}"
                if code is not None and name not in exited:
                    exited.add(name)
                    print(f"{name} exited with code {code}", flush=True)
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
        print("stopping brokers, then controllers", flush=True)
        await client.close()
        await admin.close()
        stop_all(brokers, timeout_s=35.0)
        stop_all(members)


def quorumctl_environment(files: IssuedFiles) -> str:
    """What an operator pastes into a shell so `quorumctl` uses mTLS as CN=admin."""
    return (
        "mTLS: every listener requires a client certificate. For quorumctl:\n"
        f"  export QUORUMCTL_SSL_CA_LOCATION={files.ca.resolve()}\n"
        f"  export QUORUMCTL_SSL_CERTIFICATE_LOCATION={files.certificate.resolve()}\n"
        f"  export QUORUMCTL_SSL_KEY_LOCATION={files.key.resolve()}"
    )


async def _wait_for_brokers(admin: AdminClient, stop: asyncio.Event) -> str:
    """Until every broker is ONLINE (or 30 s); the broker table either way."""
    deadline = time.monotonic() + 30
    table = "brokers: no answer from the active controller"
    while not stop.is_set() and time.monotonic() < deadline:
        with contextlib.suppress(AdminError, NoControllerError):
            reply = await admin.admin("DescribeCluster", api.DescribeClusterRequest(), deadline_s=2)
            table = broker_table(reply)
            states = {b.broker_id: b.state for b in reply.brokers}
            if all(states.get(b) == "ONLINE" for b in BROKER_IDS):
                return table
        await asyncio.sleep(0.2)
    return table


def broker_table(reply: api.DescribeClusterResponse) -> str:
    lines = [f"{'BrokerId':<10}{'State':<10}{'Epoch':>8}{'MetadataOffset':>16}  Endpoint"]
    for b in reply.brokers:
        offset = b.metadata_offset if b.reported_state else -1
        lines.append(
            f"{b.broker_id:<10}{b.state:<10}{b.broker_epoch:>8}{offset:>16}  {b.host}:{b.port}"
        )
    return "\n".join(lines)


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
    parser = argparse.ArgumentParser(
        description="Run a local cluster: three controllers and three brokers."
    )
    parser.add_argument("--data-dir", default="data", type=Path)
    parser.add_argument(
        "--tls",
        action="store_true",
        help="run over mTLS with a generated local CA (use its own --data-dir, e.g. data/tls)",
    )
    args = parser.parse_args(argv)
    return asyncio.run(supervise(args.data_dir, args.tls))


if __name__ == "__main__":
    sys.exit(main())
