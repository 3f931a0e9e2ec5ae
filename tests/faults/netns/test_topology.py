"""Nothing the namespace fixtures make outlives them: leaving the context removes
every namespace, veth and route of the run (the wire stopped first), and a run
killed before its finalizers is swept by the next one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from links import namespaced_links
from topology import CLIENT, NamespacesUnavailable, refusal, sh, sweep_stale


def test_leaving_the_context_removes_namespaces_links_and_routes(tmp_path: Path) -> None:
    try:
        with namespaced_links(("a", "b"), tmp_path) as links:
            topology = links.topology
            names = [n for n in sh("ip", "netns", "list").split() if topology.tag in n]
            assert len(names) == len(topology.created) >= 2
            assert topology.ifname(CLIENT, "a") in sh("ip", "link")
            assert f"{topology.subnet}." in sh("ip", "-4", "route")
    except NamespacesUnavailable as err:
        pytest.skip(f"network namespaces unavailable: {err}")
    assert topology.tag not in sh("ip", "netns", "list")
    assert f"q{topology.tag}" not in sh("ip", "link")
    assert f"{topology.subnet}." not in sh("ip", "-4", "route") + sh("ip", "-4", "addr")
    if (tmp_path / "wire.log").exists():
        assert "Traceback" not in (tmp_path / "wire.log").read_text()


def test_a_dead_runs_namespaces_are_swept() -> None:
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # its pid now names no process
    stale = f"qn{dead.pid}-000000-a"
    try:
        sh("ip", "netns", "add", stale)
    except subprocess.CalledProcessError as err:
        pytest.skip(f"network namespaces unavailable: {refusal(err)}")
    except FileNotFoundError:
        pytest.skip("network namespaces unavailable: no `ip` command (iproute2) on PATH")
    try:
        sweep_stale()
        assert stale not in sh("ip", "netns", "list").split()
    finally:
        subprocess.run(["ip", "netns", "del", stale], capture_output=True, check=False)
