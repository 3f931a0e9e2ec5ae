"""The arrows of DESIGN.md, enforced: who may import whom.

raft imports nothing of the project; common (the floor) imports nothing above
it; the authorizer (one home for "may this principal do this") sits below the
controller and the broker, reading only the floor; log and snapshots never
import controller or server; controller never imports server or grpc, and of
the Raft core only its client seam; the quorum never imports the broker agent;
clients, the CLI, the broker agent and the shared plumbing never import server;
analytics reads exports, never live internals. Every import statement is read
with `ast`, including those inside functions, so a lazy import cannot slip past.
A test module never imports another: what tests share lives in helper modules,
so no test depends on how, or whether, a neighbour's module was loaded.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Rule:
    modules: tuple[str, ...]  # path prefixes, relative to the repository
    forbidden: tuple[str, ...]  # module name prefixes
    allowed: tuple[str, ...] = ()  # exceptions to `forbidden`


RULES = {
    "raft imports nothing of the project": Rule(
        ("quorum/raft/",),
        ("quorum", "snapshots", "broker_agent", "analytics", "grpc"),
        allowed=("quorum.raft",),
    ),
    "common imports nothing above it": Rule(
        ("quorum/common/",),
        ("quorum", "snapshots", "broker_agent", "analytics"),
        allowed=("quorum.common",),
    ),
    "the controller imports only raft.client_api of the core": Rule(
        ("quorum/controller/",), ("quorum.raft",), allowed=("quorum.raft.client_api",)
    ),
    "the authorizer sits below the controller and the broker": Rule(
        ("quorum/authz/",),
        ("quorum", "snapshots", "broker_agent", "analytics", "grpc"),
        # the floor, and the table of Kafka's error names a refusal is named by
        allowed=("quorum.authz", "quorum.common", "quorum.controller.api_errors"),
    ),
    "quorum never imports broker_agent": Rule(("quorum/",), ("broker_agent",)),
    "segment files are read only through the log's one reader": Rule(
        ("quorum/cli/", "quorum/server/", "broker_agent/partitions/compare.py", "analytics/"),
        ("quorum.log.scan", "quorum.log.segment", "quorum.log.batch_format"),
        allowed=("quorum.log.segment_reader",),
    ),
    "log never imports controller or server": Rule(
        ("quorum/log/",), ("quorum.controller", "quorum.server", "grpc")
    ),
    "snapshots never import controller or server": Rule(
        ("snapshots/",), ("quorum.controller", "quorum.server", "grpc")
    ),
    "controller never imports server or grpc": Rule(
        ("quorum/controller/",), ("quorum.server", "grpc")
    ),
    "clients, CLI, broker agent and shared plumbing never import server": Rule(
        (
            "quorum/client.py",
            "quorum/client_writes.py",
            "quorum/admin_client.py",
            "quorum/cli/",
            "quorum/common/",
            "quorum/launcher.py",
            "broker_agent/",
        ),
        ("quorum.server",),
    ),
    "the Kafka edge reads the image, never the server or the controller's write side": Rule(
        ("broker_agent/kafka/",),
        ("quorum.server", "quorum.controller", "grpc"),
        # the image (read side); api_errors: the one table of Kafka's error names and
        # codes, shared with the gRPC side; config_schema: the config keys' types and
        # defaults (DescribeConfigs synonyms), never used to validate on the broker.
        # The ACL decisions come from quorum.authz, below both edges.
        allowed=(
            "quorum.controller.metadata_image",
            "quorum.controller.api_errors",
            "quorum.controller.config_schema",
        ),
    ),
    "replication rules import nothing of the project": Rule(
        ("broker_agent/replication/",),
        ("quorum", "snapshots", "broker_agent", "analytics", "grpc"),
        allowed=("broker_agent.replication",),
    ),
    "partitions use the log and the image's read side, never server or controller writes": Rule(
        ("broker_agent/partitions/",),
        ("quorum.server", "quorum.controller", "quorum.raft.node", "broker_agent.kafka", "grpc"),
        allowed=("quorum.controller.metadata_image",),
    ),
    "the group coordinator uses partitions and the image's read side, never server or grpc": Rule(
        ("broker_agent/groups/",),
        ("quorum.server", "quorum.controller", "quorum.raft.node", "grpc", "broker_agent.kafka"),
        allowed=("quorum.controller.metadata_image",),
    ),
    "analytics reads exports, never live internals": Rule(
        ("analytics/",), ("quorum.server", "quorum.controller.controller", "broker_agent")
    ),
}


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """(line, module name) for every import in `source`; relative imports resolved
    against `module` (dotted name of the file's package)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = module.split(".")[: -node.level]
                base = ".".join([*package, base] if base else package)
            found.append((node.lineno, base))
    return found


def violations(rule: Rule, path: str, source: str) -> list[str]:
    module = path.removesuffix(".py").replace("/", ".")
    bad = []
    for line, name in imported_modules(source, module):
        if any(name == a or name.startswith(a + ".") for a in rule.allowed):
            continue
        if any(name == f or name.startswith(f + ".") for f in rule.forbidden):
            bad.append(f"{path}:{line} imports {name}")
    return bad


def files_of(rule: Rule) -> list[Path]:
    out: list[Path] = []
    for prefix in rule.modules:
        target = ROOT / prefix
        if target.is_file():
            out.append(target)
        elif target.is_dir():
            out.extend(sorted(target.rglob("*.py")))
    return out


@pytest.mark.parametrize("name", list(RULES))
def test_no_forbidden_arrow(name: str) -> None:
    rule = RULES[name]
    files = files_of(rule)
    assert files or name.startswith("analytics"), f"rule {name!r} matches no file"
    bad: list[str] = []
    for path in files:
        relative = path.relative_to(ROOT).as_posix()
        bad.extend(violations(rule, relative, path.read_text()))
    assert not bad, f"{name}:\n" + "\n".join(bad)


@pytest.mark.parametrize(
    ("name", "path", "source"),
    [
        ("raft imports nothing of the project", "quorum/raft/x.py", "import quorum.log.api\n"),
        ("raft imports nothing of the project", "quorum/raft/x.py", "from ..log import api\n"),
        ("controller never imports server or grpc", "quorum/controller/x.py", "import grpc\n"),
        (
            "controller never imports server or grpc",
            "quorum/controller/x.py",
            "def f():\n    from quorum.server.driver import RaftDriver\n",
        ),
        (
            "replication rules import nothing of the project",
            "broker_agent/replication/x.py",
            "from quorum.log.epoch_cache import LeaderEpochCache\n",
        ),
        (
            "partitions use the log and the image's read side, never server or controller writes",
            "broker_agent/partitions/x.py",
            "from quorum.controller.controller import Controller\n",
        ),
        (
            "common imports nothing above it",
            "quorum/common/x.py",
            "from quorum.authz.authorizer import AuthorizerConfig\n",
        ),
        ("common imports nothing above it", "quorum/common/x.py", "from ..raft import messages\n"),
        (
            "common imports nothing above it",
            "quorum/common/x.py",
            "def f():\n    import quorum.log.fsutil\n",
        ),
        (
            "the controller imports only raft.client_api of the core",
            "quorum/controller/x.py",
            "from quorum.raft.node import NotLeaderError\n",
        ),
        (
            "the controller imports only raft.client_api of the core",
            "quorum/controller/x.py",
            "from quorum.raft.records import Batch\n",
        ),
        (
            "the authorizer sits below the controller and the broker",
            "quorum/authz/x.py",
            "from quorum.controller.metadata_image import AclEntry\n",
        ),
        (
            "the authorizer sits below the controller and the broker",
            "quorum/authz/x.py",
            "def f():\n    from quorum.server.access import AccessControl\n",
        ),
        (
            "the Kafka edge reads the image, never the server or the controller's write side",
            "broker_agent/kafka/x.py",
            "from quorum.controller.acl_actions import requirements\n",
        ),
        (
            "segment files are read only through the log's one reader",
            "quorum/cli/x.py",
            "from quorum.log.batch_format import parse_header\n",
        ),
        (
            "segment files are read only through the log's one reader",
            "quorum/cli/x.py",
            "from quorum.log.scan import scan_segment\n",
        ),
        (
            "quorum never imports broker_agent",
            "quorum/launcher.py",
            "from broker_agent.config import load_broker_config\n",
        ),
        (
            "quorum never imports broker_agent",
            "quorum/cli/x.py",
            "def f():\n    import broker_agent.config\n",
        ),
        (
            "clients, CLI, broker agent and shared plumbing never import server",
            "broker_agent/x.py",
            "from quorum.server import transport\n",
        ),
    ],
)
def test_the_checker_catches_a_planted_forbidden_import(name: str, path: str, source: str) -> None:
    assert violations(RULES[name], path, source)


def test_the_checker_lets_allowed_imports_pass() -> None:
    rule = RULES["raft imports nothing of the project"]
    assert not violations(rule, "quorum/raft/x.py", "from quorum.raft.log import RaftLog\n")
    assert not violations(rule, "quorum/raft/x.py", "from .log import RaftLog\n")
    common = RULES["common imports nothing above it"]
    assert not violations(common, "quorum/common/x.py", "from quorum.common.tls import CA_KEY\n")
    seam = RULES["the controller imports only raft.client_api of the core"]
    assert not violations(
        seam, "quorum/controller/x.py", "from quorum.raft.client_api import Batch\n"
    )


def imports_of_test_modules(path: str, source: str) -> list[str]:
    """Imports of a test module (`test_*`) in `source`: shared set-up belongs in a
    helper module, never in a module of tests."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):  # `from pkg import test_x` names a module too
            names = [node.module or "", *(alias.name for alias in node.names)]
        else:
            continue
        if any(p.startswith("test_") for name in names for p in name.split(".")):
            found.append(f"{path}:{node.lineno} imports {', '.join(n for n in names if n)}")
    return found


def test_no_test_module_imports_another() -> None:
    bad: list[str] = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        bad.extend(imports_of_test_modules(relative, path.read_text()))
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    "source",
    [
        "from test_dynamic_voters import Writer\n",
        "import tests.server.test_grpc_quorum\n",
        "def f():\n    from .test_grpc_quorum import make_nodes\n",
        "from tests.server import test_grpc_quorum\n",
    ],
)
def test_the_checker_catches_a_planted_test_module_import(source: str) -> None:
    assert imports_of_test_modules("tests/server/x.py", source)
    assert not imports_of_test_modules("tests/server/x.py", "from grpc_nodes import running\n")
