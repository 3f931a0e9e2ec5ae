"""The core stays sans-I/O: no clocks, sockets, threads, files or randomness."""

import ast
from pathlib import Path

import quorum.raft

FORBIDDEN = {"asyncio", "socket", "time", "random", "threading", "os", "subprocess", "select"}


def test_core_imports_no_io_modules() -> None:
    root = Path(quorum.raft.__file__).parent
    offenders = []
    for path in sorted(root.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [f"{path.name}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert offenders == []
