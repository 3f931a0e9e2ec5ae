"""The three systems `bench/writes.py` drives: this quorum, etcd and ZooKeeper.

Each runs as three real processes on loopback with default settings (only
names, ports and data directories are set), and each offers the same small
interface: start, stop, which member leads, kill -9 a member, restart it, and an
asyncio client whose `write` returns once the write is durable on a majority.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Client(Protocol):
    async def write(self, key: bytes, value: bytes, attempt_timeout_s: float | None) -> None: ...

    async def close(self) -> None: ...


class System(Protocol):
    name: str
    members: Members
    fails_over: bool  # False: no leader to kill (the floor), so no failover line

    def start(self) -> None: ...

    def stop(self) -> None: ...

    def leader(self) -> int: ...

    def kill(self, member: int) -> None: ...

    def restart(self, member: int) -> None: ...

    async def client(self) -> Client: ...


class Members:
    """Three processes, each in its own process group so a kill takes all of it."""

    def __init__(self, root: Path, name: str) -> None:
        self.root = root
        self.name = name
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.commands: dict[int, list[str]] = {}

    def launch(self, member: int, command: list[str]) -> None:
        self.commands[member] = command
        log = (self.root / f"{self.name}-{member}.log").open("ab")
        self.procs[member] = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root
        )
        log.close()

    def kill(self, member: int) -> None:
        proc = self.procs[member]
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()

    def restart(self, member: int) -> None:
        self.launch(member, self.commands[member])

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except Exception:
            pass
        time.sleep(0.05)
    raise RuntimeError(f"timed out after {timeout_s}s waiting for {what}")


class _ProcessSystem:
    """Kill, restart and stop act on the member processes, the same for every system."""

    members: Members
    fails_over = True

    def kill(self, member: int) -> None:
        self.members.kill(member)

    def restart(self, member: int) -> None:
        self.members.restart(member)

    def stop(self) -> None:
        self.members.stop()


# --------------------------------------------------------------------- quorum


class QuorumSystem(_ProcessSystem):
    name = "quorum"

    def __init__(self, root: Path, extra_props: dict[str, str] | None = None) -> None:
        self.root = root
        self.extra_props = extra_props or {}
        self.members = Members(root, "controller")
        self.ports = {i: free_port() for i in (1, 2, 3)}
        self.cluster_id = ""
        self.client_tls: Any = None  # TlsSettings when the members require mTLS

    def start(self) -> None:
        from quorum.common.config import render_properties

        self.cluster_id = _check_output([str(VENV_BIN / "quorumctl"), "storage", "random-uuid"])
        for node in self.ports:
            voters = ",".join(f"{peer}@{self.peer_address(node, peer)}" for peer in self.ports)
            config = self.root / f"controller-{node}.properties"
            props = {
                "node.id": str(node),
                "process.roles": "controller",
                "controller.quorum.voters": voters,
                "listeners": f"CONTROLLER://{self.address(node)}",
                "metadata.log.dir": str(self.root / f"controller-{node}"),
                "log.level": os.environ.get("BENCH_QUORUM_LOG_LEVEL", "WARNING"),
                **self.extra_props,
            }
            config.write_text(render_properties(props))
            _check_output(
                [str(VENV_BIN / "quorumctl"), "storage", "format", "--cluster-id",
                 self.cluster_id, "--config", str(config)]
            )  # fmt: skip
            command = [str(VENV_BIN / "quorum-controller"), "--config", str(config)]
            self.members.launch(node, [*self.launch_prefix(node), *command])
        wait_for(lambda: self.leader() > 0, 30, "a quorum leader")

    # Where members listen, how they reach each other and how they are started:
    # the fault benches put proxies or network namespaces in between.
    def address(self, node: int) -> str:
        return f"127.0.0.1:{self.ports[node]}"

    def peer_address(self, node: int, peer: int) -> str:
        """The address `node` dials to reach `peer` (its own listener for itself)."""
        return self.address(peer)

    def launch_prefix(self, node: int) -> list[str]:
        return []

    def addresses(self) -> list[str]:
        return [self.address(n) for n in self.ports]

    def leader(self) -> int:
        from quorum.client import QuorumClient

        async def ask() -> int:
            client = QuorumClient(self.addresses(), self.cluster_id, tls=self.client_tls)
            try:
                reply = await client.describe_quorum(timeout_s=0.5)
                return int(reply.leader_id) if reply.high_watermark > 0 else -1
            finally:
                await client.close()

        return asyncio.run(ask())

    async def client(self) -> Client:
        from quorum.client import QuorumClient

        return _QuorumClient(QuorumClient(self.addresses(), self.cluster_id, tls=self.client_tls))


class QuorumMtlsSystem(QuorumSystem):
    """The same quorum with every listener requiring mTLS (one certificate from a
    throw-away CA for the members, another for the client): the cost of TLS."""

    name = "quorum-mtls"

    def __init__(self, root: Path) -> None:
        from quorum.common.local_ca import LocalCa
        from quorum.common.tls import TlsSettings

        ca = LocalCa("bench CA")
        member = ca.write(root / "certs", "controller")
        client = ca.write(root / "certs", "bench-client")
        super().__init__(
            root,
            {
                "listener.security.protocol.map": "CONTROLLER:SSL",
                "ssl.certificate.location": str(member.certificate),
                "ssl.key.location": str(member.key),
                "ssl.ca.location": str(member.ca),
                "ssl.client.auth": "required",
            },
        )
        self.client_tls = TlsSettings(
            certificate_chain=client.certificate.read_bytes(),
            private_key=client.key.read_bytes(),
            ca=client.ca.read_bytes(),
        )


class _QuorumClient:
    def __init__(self, client: Any) -> None:
        self._client = client

    async def write(self, key: bytes, value: bytes, attempt_timeout_s: float | None) -> None:
        from quorum.controller.record_codec import noop  # the raw write path takes NoOp records

        record = noop(key + b"=" + value)
        await self._client.write([record], attempt_timeout_s=attempt_timeout_s or 10.0)

    async def close(self) -> None:
        await self._client.close()


# ---------------------------------------------------------------------- floor


class FloorSystem(_ProcessSystem):
    """`bench/replication_floor.py`: the write path with no consensus logic, driven
    by the quorum's own client. Its leader is fixed, so it has no failover."""

    name = "floor"
    fails_over = False

    def __init__(self, root: Path) -> None:
        self.root = root
        self.members = Members(root, "floor")
        self.port = free_port()

    def start(self) -> None:
        script = str(ROOT / "bench" / "replication_floor.py")
        self.members.launch(1, [sys.executable, script, "leader", str(self.port), "log"])
        for replica in (2, 3):
            log, port = f"log-{replica}", str(self.port)
            self.members.launch(
                replica, [sys.executable, script, "follower", port, log, str(replica)]
            )
        wait_for(self._writes, 30, "the floor's first write")

    def _writes(self) -> bool:
        async def one() -> None:
            client = await self.client()
            try:
                await client.write(b"probe", b"x", 0.5)
            finally:
                await client.close()

        asyncio.run(one())
        return True

    def leader(self) -> int:
        return 1

    async def client(self) -> Client:
        from quorum.client import QuorumClient

        return _QuorumClient(QuorumClient([f"127.0.0.1:{self.port}"], "floor"))


# ----------------------------------------------------------------------- etcd


def ensure_etcd() -> str:
    """Debian's etcd-server, installed on first use (the bench's own set-up)."""
    found = shutil.which("etcd")
    if found:
        return found
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    prefix = [] if os.geteuid() == 0 else ["sudo", "-n"]
    subprocess.run([*prefix, "apt-get", "update", "-qq"], env=env, check=False)
    subprocess.run([*prefix, "apt-get", "install", "-y", "-qq", "etcd-server"], env=env, check=True)
    found = shutil.which("etcd")
    if not found:
        raise RuntimeError("etcd-server installed but `etcd` is not on PATH")
    return found


def etcd_stubs() -> Any:
    """Generate Python code for bench/proto/etcd_kv.proto into a temp dir."""
    from grpc_tools import protoc

    out = Path(tempfile.mkdtemp(prefix="etcd-proto-"))
    proto_dir = Path(__file__).resolve().parent / "proto"
    code = protoc.main(
        ["protoc", f"-I{proto_dir}", f"--python_out={out}", f"--grpc_python_out={out}",
         str(proto_dir / "etcd_kv.proto")]
    )  # fmt: skip
    if code != 0:
        raise RuntimeError("protoc failed on bench/proto/etcd_kv.proto")
    sys.path.insert(0, str(out))
    import etcd_kv_pb2
    import etcd_kv_pb2_grpc

    return etcd_kv_pb2, etcd_kv_pb2_grpc


class EtcdSystem(_ProcessSystem):
    name = "etcd"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.members = Members(root, "etcd")
        self.client_ports = {i: free_port() for i in (1, 2, 3)}
        self.peer_ports = {i: free_port() for i in (1, 2, 3)}
        self.pb, self.pb_grpc = etcd_stubs()
        self.member_ids: dict[int, int] = {}

    def start(self) -> None:
        etcd = ensure_etcd()
        cluster = ",".join(f"e{i}=http://127.0.0.1:{p}" for i, p in self.peer_ports.items())
        for i in (1, 2, 3):
            client_url = f"http://127.0.0.1:{self.client_ports[i]}"
            peer_url = f"http://127.0.0.1:{self.peer_ports[i]}"
            self.members.launch(
                i,
                [etcd, "--name", f"e{i}", "--data-dir", str(self.root / f"etcd-{i}"),
                 "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                 "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                 "--initial-cluster", cluster, "--initial-cluster-token", "bench",
                 "--initial-cluster-state", "new"],
            )  # fmt: skip
        wait_for(lambda: self.leader() > 0, 30, "an etcd leader")

    def _status(self, member: int) -> Any:
        import grpc

        with grpc.insecure_channel(f"127.0.0.1:{self.client_ports[member]}") as channel:
            stub = self.pb_grpc.MaintenanceStub(channel)
            return stub.Status(self.pb.StatusRequest(), timeout=0.5)

    def leader(self) -> int:
        for member in (1, 2, 3):
            if member in self.members.procs and self.members.procs[member].poll() is not None:
                continue
            try:
                status = self._status(member)
            except Exception:
                continue
            self.member_ids[member] = status.header.member_id
            if status.leader == status.header.member_id:
                return member
        return -1

    async def client(self) -> Client:
        first = max(self.leader(), 1)
        order = [first] + [m for m in (1, 2, 3) if m != first]
        return _EtcdClient(self, [f"127.0.0.1:{self.client_ports[m]}" for m in order])


class _EtcdClient:
    """Sends to the leader; on a failure, tries the next member at once."""

    def __init__(self, system: EtcdSystem, addresses: list[str]) -> None:
        import grpc

        self._pb = system.pb
        self._channels = [grpc.aio.insecure_channel(a) for a in addresses]
        self._stubs = [system.pb_grpc.KVStub(c) for c in self._channels]
        self._current = 0

    async def write(self, key: bytes, value: bytes, attempt_timeout_s: float | None) -> None:
        import grpc

        request = self._pb.PutRequest(key=key, value=value)
        while True:
            stub = self._stubs[self._current]
            try:
                await stub.Put(request, timeout=attempt_timeout_s or 10.0)
                return
            except grpc.aio.AioRpcError:
                if attempt_timeout_s is None:
                    raise
                self._current = (self._current + 1) % len(self._stubs)

    async def close(self) -> None:
        for channel in self._channels:
            await channel.close()


# ------------------------------------------------------------------ ZooKeeper


def zookeeper_classpath() -> str:
    """ZooKeeper's server jar ships in the pyspark wheel's jars/ folder."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    if not list(jars.glob("zookeeper-*.jar")):
        raise RuntimeError(f"no zookeeper jar in {jars}")
    return f"{jars}/*"


class ZooKeeperSystem(_ProcessSystem):
    name = "zookeeper"

    def __init__(self, root: Path) -> None:
        self.root = root
        self.members = Members(root, "zookeeper")
        self.client_ports = {i: free_port() for i in (1, 2, 3)}
        self.quorum_ports = {i: (free_port(), free_port()) for i in (1, 2, 3)}

    def start(self) -> None:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java is not installed (make setup installs it for Spark)")
        classpath = zookeeper_classpath()
        servers = "\n".join(
            f"server.{i}=127.0.0.1:{a}:{b}" for i, (a, b) in self.quorum_ports.items()
        )
        for i in (1, 2, 3):
            data = self.root / f"zk-{i}"
            data.mkdir(parents=True, exist_ok=True)
            (data / "myid").write_text(f"{i}\n")
            config = self.root / f"zoo-{i}.cfg"
            config.write_text(
                "tickTime=2000\ninitLimit=10\nsyncLimit=5\n"
                f"dataDir={data}\nclientPort={self.client_ports[i]}\n"
                "clientPortAddress=127.0.0.1\nadmin.enableServer=false\n"
                "4lw.commands.whitelist=srvr\n" + servers + "\n"
            )
            self.members.launch(
                i,
                [java, "-cp", classpath, "-Dzookeeper.log.dir=" + str(self.root),
                 "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(config)],
            )  # fmt: skip
        wait_for(lambda: self.leader() > 0, 60, "a ZooKeeper leader")

    def _mode(self, member: int) -> str:
        with socket.create_connection(("127.0.0.1", self.client_ports[member]), 0.5) as s:
            s.sendall(b"srvr")
            s.settimeout(0.5)
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        for line in data.decode(errors="replace").splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return ""

    def leader(self) -> int:
        for member in (1, 2, 3):
            if member in self.members.procs and self.members.procs[member].poll() is not None:
                continue
            try:
                if self._mode(member) == "leader":
                    return member
            except OSError:
                continue
        return -1

    async def client(self) -> Client:
        hosts = ",".join(f"127.0.0.1:{p}" for p in self.client_ports.values())
        client = _ZooKeeperClient(hosts)
        await asyncio.get_running_loop().run_in_executor(None, client.connect)
        return client


class _ZooKeeperClient:
    """kazoo's async API, bridged to asyncio futures (no thread per write)."""

    def __init__(self, hosts: str) -> None:
        from kazoo.client import KazooClient

        self._zk = KazooClient(hosts=hosts, timeout=10.0)

    def connect(self) -> None:
        self._zk.start(timeout=30)
        self._zk.ensure_path("/bench")

    async def write(self, key: bytes, value: bytes, attempt_timeout_s: float | None) -> None:
        loop = asyncio.get_running_loop()
        path = "/bench/" + key.decode()
        while True:
            future: asyncio.Future[None] = loop.create_future()

            def done(result: Any, future: asyncio.Future[None] = future) -> None:
                def settle() -> None:
                    if future.done():
                        return
                    try:
                        result.get_nowait()
                        future.set_result(None)
                    except Exception as err:
                        future.set_exception(err)

                loop.call_soon_threadsafe(settle)

            async_result = self._zk.create_async(path, value)
            async_result.rawlink(done)
            try:
                await asyncio.wait_for(future, attempt_timeout_s or 10.0)
                return
            except Exception as err:
                from kazoo.exceptions import NodeExistsError

                if isinstance(err, NodeExistsError):
                    return  # an earlier attempt of this very write succeeded
                if attempt_timeout_s is None:
                    raise

    async def close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, self._zk.stop)
        await loop.run_in_executor(None, self._zk.close)


def _check_output(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)}: {result.stderr.strip()}")
    return result.stdout.strip()


SYSTEMS: dict[str, Callable[[Path], System]] = {
    "floor": FloorSystem,
    "quorum": QuorumSystem,
    "quorum-mtls": QuorumMtlsSystem,
    "etcd": EtcdSystem,
    "zookeeper": ZooKeeperSystem,
}
