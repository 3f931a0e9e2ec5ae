"""No hand-written module over 600 lines in the product's packages (issue 28):
past that a module usually holds more than one job, and the next change makes it
worse. Generated code (quorum/gen) is not counted."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("quorum", "broker_agent", "snapshots", "analytics")
LIMIT = 600


def oversized(root: Path) -> list[str]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "gen" in path.relative_to(root).parts[:2]:
                continue
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > LIMIT:
                found.append(f"{path.relative_to(root)}: {lines} lines")
    return found


def test_no_module_is_over_600_lines() -> None:
    assert oversized(ROOT) == []


def test_the_check_finds_a_planted_long_module(tmp_path: Path) -> None:
    (tmp_path / "quorum" / "gen").mkdir(parents=True)
    (tmp_path / "quorum" / "long.py").write_text("x = 1\n" * (LIMIT + 1))
    (tmp_path / "quorum" / "gen" / "big_pb2.py").write_text("x = 1\n" * (LIMIT + 1))
    for package in PACKAGES[1:]:
        (tmp_path / package).mkdir()
    assert oversized(tmp_path) == [f"quorum/long.py: {LIMIT + 1} lines"]
