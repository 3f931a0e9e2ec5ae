"""The chart's voter-change Jobs: make the quorum's voter set (KIP-853) the
controller pods the release has, one `quorumctl quorum` change at a time (the
voter set and each pod's directory id are read with DescribeQuorum in process,
as `quorumctl quorum describe --replication` reads them).

    voters.py remove    --voters 1@HOST:PORT,...   (pre-upgrade Job)
    voters.py reconcile --voters 1@HOST:PORT,...   (post-install, post-upgrade Job)
    voters.py retire --node-id N --directory-id D  (a new observer's init container)

`--voters` is every controller pod of the release as rendered (node id and
endpoint). `remove` takes voters that are not among them out of the set
(`remove-controller`), before a scale-down stops their pods, so the quorum
never counts a stopped voter. `reconcile` does that too, then for each pod:
- its own directory id (asked of it) is the voter's: nothing to do;
- it is not a voter (a scale-up): `add-controller` once it has caught up;
- its directory id differs from the voter's (its volume was lost, and it was
  formatted again as an observer): `remove-controller` of the old entry, then
  `add-controller` of the new one.
`retire` runs in the init container of a controller that formatted an empty
volume as an observer, before its process starts: a voter entry with its node
id and another directory id is the volume it replaces, and is removed first,
so the new process never reads that entry as its own (the leader matches a
fetching replica to a voter by node id alone) and never votes with an empty
quorum-state under it. Without an active controller it fails, and the kubelet
runs the init container again.

`add-controller` answers REQUEST_TIMED_OUT while the observer has not caught
up (or another change is committing): asked again until the deadline. Each
change is printed with the command that made it. Exit 1 when the deadline
passes first; the Job's backoffLimit runs it again.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import time
from typing import Any

DEADLINE_S = float(os.environ.get("VOTERS_DEADLINE_S", "540"))
PAUSE_S = float(os.environ.get("VOTERS_PAUSE_S", "2"))


def say(text: str) -> None:
    print(text, flush=True)


def parse_voters(text: str) -> dict[int, str]:
    voters = {}
    for entry in filter(None, text.split(",")):
        node, _, endpoint = entry.partition("@")
        voters[int(node)] = endpoint
    return voters


def quorumctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["quorumctl", "quorum", *args, "--timeout", "30"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip


def tls() -> Any:
    from quorum.common.tls import client_tls

    return client_tls(
        os.environ.get("QUORUMCTL_SSL_CA_LOCATION"),
        os.environ.get("QUORUMCTL_SSL_CERTIFICATE_LOCATION"),
        os.environ.get("QUORUMCTL_SSL_KEY_LOCATION"),
    )


def describe(addresses: list[str], address: str | None = None) -> Any:
    """DescribeQuorum: the active controller's view, or the node at `address`'s own."""
    from quorum.client import QuorumClient

    async def ask() -> Any:
        client = QuorumClient(addresses, "", tls=tls())
        try:
            return await client.describe_quorum(address=address, timeout_s=5)
        finally:
            await client.close()

    return asyncio.run(ask())


def current_voters(deadline: float) -> dict[int, str]:
    """node id -> directory id of the voter set in force, from the active controller
    (what `quorumctl quorum describe --replication` lists)."""
    bootstrap = [a for a in os.environ.get("QUORUMCTL_BOOTSTRAP", "").split(",") if a]
    while True:
        try:
            reply = describe(bootstrap)
            return {v.replica_id: v.directory_id for v in reply.current_voters}
        except Exception as err:
            check(deadline, f"no active controller answered: {err}")
        time.sleep(PAUSE_S)


def own_directory_id(endpoint: str, deadline: float) -> str:
    """The directory id in the pod's own meta.properties, asked of it (DescribeQuorum)."""
    while True:
        try:
            directory_id = str(describe([endpoint], endpoint).directory_id)
        except Exception as err:  # not started yet: its pod may still be scheduled
            check(deadline, f"controller at {endpoint} does not answer: {err}")
            time.sleep(PAUSE_S)
            continue
        if directory_id:
            return directory_id
        check(deadline, f"controller at {endpoint} has no directory id (kraft.version 0?)")
        time.sleep(PAUSE_S)


def change(deadline: float, *args: str, done_after_retry: str = "") -> None:
    """One membership change, asked again while the quorum answers REQUEST_TIMED_OUT
    (or no active controller). `done_after_retry`: the error that, after a retry,
    says an earlier attempt was made after all (its answer lost in a leader change)."""
    command = " ".join(["quorumctl", "quorum", *args])
    retried = False
    while True:
        done = quorumctl(*args)
        if done.returncode == 0:
            say(f"{command}: {done.stdout.strip()}")
            return
        out = (done.stdout + done.stderr).strip()
        if retried and done_after_retry and done_after_retry in out:
            say(f"{command}: made by an earlier attempt ({done_after_retry} now)")
            return
        if "REQUEST_TIMED_OUT" not in out and "no active controller" not in out:
            raise SystemExit(f"{command} failed: {out}")
        check(deadline, f"{command}: {out}")
        retried = True
        time.sleep(PAUSE_S)


def remove(node: int, directory_id: str, deadline: float) -> None:
    change(
        deadline, "remove-controller", "--controller-id", str(node),
        "--controller-directory-id", directory_id, done_after_retry="VOTER_NOT_FOUND",
    )  # fmt: skip


def check(deadline: float, what: str) -> None:
    if time.monotonic() > deadline:
        raise SystemExit(f"gave up after {DEADLINE_S:.0f}s: {what}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=["remove", "reconcile", "retire"])
    parser.add_argument("--voters", default="")
    parser.add_argument("--node-id", type=int, default=None)
    parser.add_argument("--directory-id", default="")
    args = parser.parse_args()
    deadline = time.monotonic() + DEADLINE_S
    if args.phase == "retire":
        if args.node_id is None or not args.directory_id:
            parser.error("retire needs --node-id and --directory-id")
        old = current_voters(deadline).get(args.node_id)
        if old is not None and old != args.directory_id:
            say(f"controller {args.node_id} has a new directory ({old} -> {args.directory_id}):")
            remove(args.node_id, old, deadline)
        return 0
    if not args.voters:
        parser.error(f"{args.phase} needs --voters")
    wanted = parse_voters(args.voters)
    voters = current_voters(deadline)
    say(f"voters in force: {sorted(voters)}; controller pods: {sorted(wanted)}")
    for node in sorted(set(voters) - set(wanted), reverse=True):
        remove(node, voters[node], deadline)
    if args.phase == "remove":
        return 0
    for node in set(voters) - set(wanted):
        del voters[node]
    for node, endpoint in sorted(wanted.items()):
        directory_id = own_directory_id(endpoint, deadline)
        old = voters.get(node)
        if old == directory_id:
            continue
        if old is not None:
            say(f"controller {node} has a new directory ({old} -> {directory_id}): replacing it")
            remove(node, old, deadline)
        change(
            deadline, "add-controller", "--controller-id", str(node),
            "--controller-directory-id", directory_id, "--endpoint", endpoint,
            done_after_retry="DUPLICATE_VOTER",
        )  # fmt: skip
        voters[node] = directory_id
    say(f"voters now: {sorted(voters)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
