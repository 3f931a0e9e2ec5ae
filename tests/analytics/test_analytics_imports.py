"""The analytics read exports only: no module under analytics/ imports the quorum."""

from __future__ import annotations

import ast
from pathlib import Path

ANALYTICS = Path(__file__).resolve().parents[2] / "analytics"
LIVE = ("quorum", "broker_agent", "snapshots")


def imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_analytics_imports_no_live_internals() -> None:
    modules = sorted(ANALYTICS.rglob("*.py"))
    assert len(modules) >= 4
    for path in modules:
        live = {n for n in imported(path) if n.split(".")[0] in LIVE}
        assert not live, f"{path.name} imports {live}"
