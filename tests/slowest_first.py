"""`--dist loadscope`, slowest modules first (hooks imported by tests/conftest.py).

Why: xdist hands out modules in the order of their test counts, so the modules
that take longest (one Spark session, one 20-kill run, each only a test or a
few) were handed out last; a worker given one near the end ran it alone while
the other had nothing left, up to a minute of the suite's wall time. Handing
out the longest first (the classic longest-processing-time rule) leaves the
short modules to even out the end.

The seconds per module come from `module_seconds.json` beside this file, and
from `.pytest_cache` when a run on this checkout recorded newer ones (every
distributed run records what its modules took). A module in neither counts as
short; the shuffle (pytest-randomly) still orders each module's tests and
breaks ties. `python tests/slowest_first.py` copies the cached figures into
the JSON file.
"""

from __future__ import annotations

import json
import sys
from collections import OrderedDict, defaultdict
from pathlib import Path
from typing import Any

import pytest

SECONDS_FILE = Path(__file__).with_name("module_seconds.json")
CACHE_KEY = "quorum/module_seconds"


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def known_seconds(config: pytest.Config | None) -> dict[str, float]:
    seconds: dict[str, float] = {}
    if SECONDS_FILE.exists():
        seconds.update(json.loads(SECONDS_FILE.read_text()))
    cache = getattr(config, "cache", None)
    if cache is not None:
        seconds.update(cache.get(CACHE_KEY, {}))
    return seconds


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    seconds = known_seconds(config)

    class SlowestFirst(LoadScopeScheduling):  # type: ignore[misc]
        ordered = False

        def _assign_work_unit(self, node: Any) -> None:
            if not self.ordered:  # the queue is complete at the first assignment
                self.ordered = True
                units = sorted(
                    self.workqueue.items(), key=lambda u: -seconds.get(module_of(u[0]), 0.0)
                )
                self.workqueue = OrderedDict(units)
            super()._assign_work_unit(node)

    return SlowestFirst(config, log)


_TOOK: defaultdict[str, float] = defaultdict(float)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _TOOK[module_of(report.nodeid)] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """On the controller of a distributed run: what each module took, cached."""
    config = session.config
    distributed = config.pluginmanager.hasplugin("dsession")
    if hasattr(config, "workerinput") or not distributed or not _TOOK:
        return
    cache = getattr(config, "cache", None)
    if cache is None:
        return
    merged = dict(cache.get(CACHE_KEY, {}))
    merged.update({m: round(s, 1) for m, s in _TOOK.items()})
    cache.set(CACHE_KEY, merged)


def _write_file_from_cache(root: Path) -> None:
    cached = root / ".pytest_cache" / "v" / CACHE_KEY
    figures = {**json.loads(SECONDS_FILE.read_text()), **json.loads(cached.read_text())}
    kept = {m: s for m, s in sorted(figures.items()) if (root / m).exists()}
    SECONDS_FILE.write_text(json.dumps(kept, indent=1) + "\n")
    print(f"{len(kept)} modules written to {SECONDS_FILE}")


if __name__ == "__main__":
    _write_file_from_cache(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd())
