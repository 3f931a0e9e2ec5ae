"""Dependencies by purpose: the main list is what the product imports (what
`make run` needs), and bench-, fault- and test-only packages are extras. Scans
every import of the shipped packages, so a new import without its dependency,
or a dependency the product never imports, fails here."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
SHIPPED = ("quorum", "broker_agent", "snapshots")
# The distribution that provides each top-level module the product imports.
PROVIDER = {
    "grpc": "grpcio",
    "grpc_tools": "grpcio-tools",
    "grpc_health": "grpcio-health-checking",
    "grpc_reflection": "grpcio-reflection",
    "grpc_status": "grpcio-status",
    "google": "protobuf",  # google.protobuf; google.rpc comes with grpcio-status
    "rocksdict": "rocksdict",
    "google_crc32c": "google-crc32c",
    "prometheus_client": "prometheus-client",
    "javaproperties": "javaproperties",
    "click": "click",
    "cryptography": "cryptography",
    "pyarrow": "pyarrow",  # quorumctl log export writes Parquet
    "kio": "kio",  # Kafka protocol types and error codes (the data plane)
    "uvloop": "uvloop",  # the broker's event loop
    "lz4": "lz4",  # Kafka's batch codecs (broker_agent/partitions/compression.py)
    "cramjam": "cramjam",
}
# First-party packages the product may import besides the shipped ones:
# `quorumctl log export` writes in the schema the analytics package defines.
FIRST_PARTY = {"analytics"}
# Main dependencies imported only indirectly: protoc runs at build time (`make setup`).
BUILD_ONLY = {"grpcio-tools"}


def _name(requirement: str) -> str:
    for stop in "<>=!~[; ":
        requirement = requirement.split(stop, 1)[0]
    return requirement.strip().lower()


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def imported_top_levels() -> set[str]:
    found: set[str] = set()
    for package in SHIPPED:
        for path in (ROOT / package).rglob("*.py"):
            if "gen" in path.relative_to(ROOT).parts:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found - set(sys.stdlib_module_names) - set(SHIPPED) - FIRST_PARTY - {"__future__"}


def test_the_product_imports_only_main_dependencies_and_uses_them_all() -> None:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    main = {_name(r) for r in project["dependencies"]}
    third_party = imported_top_levels()
    unknown = third_party - set(PROVIDER)
    assert not unknown, f"imports with no known provider: {sorted(unknown)}"
    needed = {PROVIDER[m] for m in third_party}
    assert needed <= main, f"imported but not a main dependency: {sorted(needed - main)}"
    assert main - needed <= BUILD_ONLY, f"main but never imported: {sorted(main - needed)}"


def test_bench_fault_and_test_packages_are_extras() -> None:
    project = pyproject()["project"]
    assert isinstance(project, dict)
    main = {_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    for extra in ("bench", "faults", "dev", "analytics"):
        assert not {_name(r) for r in extras[extra]} & main, extra
    assert {"pyspark", "kazoo"} <= {_name(r) for r in extras["bench"]}
    assert "toxiproxy-python" in {_name(r) for r in extras["faults"]}
    makefile = (ROOT / "Makefile").read_text()
    assert "'.[dev,bench,faults,analytics]'" in makefile  # `make test` has every extra
    assert "pyspark" in {_name(r) for r in extras["analytics"]}
