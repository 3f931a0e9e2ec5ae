"""The logs of the processes tests start, checked for errors nobody explained.

Every helper that starts a process (controllers and broker agents in
tests/integration/controller_cluster.py, the fault proxy, ...) names its log
file with `watch()`. After each test (and each module, for module-scoped
clusters) the fixture in tests/conftest.py reads what the watched logs gained
and fails the test on any record holding a traceback, gRPC's `Unexpected`,
`StatusCode.UNKNOWN`, or logged at ERROR or CRITICAL (gRPC core's `E...`
lines too), unless the test declared it:

    @pytest.mark.expected_log_errors(r"flush failed: .*No space left")

Each argument is a regular expression searched in every line of a record (a
record is a log line with its continuation lines, e.g. its traceback); one
match anywhere explains the whole record. Mark a module (`pytestmark`) when
its module-scoped cluster causes the errors.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

# Where a record begins: our processes' `asctime [node N] LEVEL name: ...`,
# Python's default `LEVEL:name:...`, or gRPC core's `E1125 17:20:11.123 ...`.
_RECORD_START = re.compile(
    r"^(?:\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[,.]\d+ (?:\[[^\]]*\] )?(?P<level>[A-Z]+)\b"
    r"|(?P<plain>DEBUG|INFO|WARNING|ERROR|CRITICAL):"
    r"|(?P<core>[DIWEF])\d{4} \d\d:\d\d:\d\d)"
)
_FAILING_LEVELS = {"ERROR", "CRITICAL", "FATAL", "E", "F"}
_ALWAYS_SUSPECT = ("Traceback (most recent call last)", "Unexpected", "StatusCode.UNKNOWN")
SHOWN_LINES = 12


@dataclass
class _Watched:
    path: Path
    label: str
    offset: int


_WATCHED: dict[Path, _Watched] = {}


def watch(path: Path, label: str | None = None) -> None:
    """Check what `path` gains from now on (a restarted process appending to the
    same file keeps its place)."""
    path = Path(path).resolve()
    if path not in _WATCHED:
        offset = path.stat().st_size if path.exists() else 0
        _WATCHED[path] = _Watched(path, label or path.name, offset)


def records(text: str) -> list[list[str]]:
    """`text` cut into records: each a log line with the lines that continue it."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if _RECORD_START.match(line) or not out:
            out.append([line])
        else:
            out[-1].append(line)
    return out


def _suspect(record: list[str]) -> bool:
    match = _RECORD_START.match(record[0])
    if match is not None:
        level = match.group("level") or match.group("plain") or match.group("core")
        if level in _FAILING_LEVELS:
            return True
    return any(marker in line for line in record for marker in _ALWAYS_SUSPECT)


def unexplained(text: str, expected: Sequence[str] = ()) -> list[list[str]]:
    """The records of `text` that fail a test: suspect, and matched by no pattern."""
    patterns = [re.compile(p) for p in expected]
    return [
        record
        for record in records(text)
        if _suspect(record) and not any(p.search(line) for p in patterns for line in record)
    ]


def _new_text(watched: _Watched) -> str:
    """What the file gained since the last read, whole lines only."""
    try:
        with watched.path.open("rb") as f:
            f.seek(watched.offset)
            data = f.read()
    except FileNotFoundError:
        return ""
    end = data.rfind(b"\n") + 1
    watched.offset += end
    return data[:end].decode(errors="replace")


def check_watched(expected: Iterable[str] = ()) -> str | None:
    """Read every watched log's new lines; a report of the unexplained records,
    or None when there are none."""
    expected = list(expected)
    parts = []
    for watched in list(_WATCHED.values()):
        bad = unexplained(_new_text(watched), expected)
        if bad:
            shown = "\n".join(
                "\n".join(record[:SHOWN_LINES])
                + (
                    f"\n  ... ({len(record) - SHOWN_LINES} more lines)"
                    if len(record) > SHOWN_LINES
                    else ""
                )
                for record in bad
            )
            parts.append(f"--- {watched.label} ({watched.path}) ---\n{shown}")
    if not parts:
        return None
    return (
        "unexplained errors in the logs of processes this test started (declare the "
        "expected ones with @pytest.mark.expected_log_errors(regex, ...)):\n" + "\n".join(parts)
    )


def forget(path: Path) -> None:
    """Stop watching `path` (the checker's own tests)."""
    _WATCHED.pop(Path(path).resolve(), None)
