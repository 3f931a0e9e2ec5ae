"""Every test fails on errors nobody explained in the logs of the processes it
started (see `process_logs.py`; declare expected ones with
`@pytest.mark.expected_log_errors(regex, ...)`).

The suite runs in a random order (pytest-randomly): the seed is printed at the
start and the end of a run, and `--randomly-seed=N` (`make test SEED=N`) replays it."""

from __future__ import annotations

from collections.abc import Iterator

import process_logs
import pytest
from slowest_first import (  # noqa: F401  (hooks: the slowest modules handed out first)
    pytest_runtest_logreport,
    pytest_sessionfinish,
    pytest_xdist_make_scheduler,
)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "expected_log_errors(*regexes): ERROR lines or tracebacks the test causes on "
        "purpose in the logs of processes it starts (each regex searched per line)",
    )


def _order_seed(config: pytest.Config) -> int | None:
    """The shuffle's seed, or None when pytest-randomly is off (`-p no:randomly`)."""
    if not config.pluginmanager.hasplugin("randomly"):
        return None
    seed = config.getoption("randomly_seed", None)
    return seed if isinstance(seed, int) else None


def _say_seed(config: pytest.Config) -> None:
    seed = _order_seed(config)
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if seed is None or reporter is None or hasattr(config, "workerinput"):
        return
    reporter.write_line(
        f"test order: --randomly-seed={seed} (replay with `make test SEED={seed}` "
        f"or `pytest -p randomly --randomly-seed={seed} ...`)"
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    """Printed even under `-q`, which hides pytest-randomly's own header line."""
    _say_seed(session.config)


def pytest_terminal_summary(config: pytest.Config) -> None:
    _say_seed(config)


def _expected(node: pytest.Item | pytest.Collector) -> list[str]:
    return [p for mark in node.iter_markers("expected_log_errors") for p in mark.args]


def _fail_on_unexplained(node: pytest.Item | pytest.Collector) -> None:
    report = process_logs.check_watched(_expected(node))
    if report is not None:
        pytest.fail(report, pytrace=False)


@pytest.fixture(autouse=True, scope="module")
def _module_process_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    """After the module's own fixtures stopped their processes."""
    yield
    _fail_on_unexplained(request.node)


@pytest.fixture(autouse=True)
def _process_logs(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    _fail_on_unexplained(request.node)
