"""Every test fails on errors nobody explained in the logs of the processes it
started (see `process_logs.py`; declare expected ones with
`@pytest.mark.expected_log_errors(regex, ...)`)."""

from __future__ import annotations

from collections.abc import Iterator

import process_logs
import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "expected_log_errors(*regexes): ERROR lines or tracebacks the test causes on "
        "purpose in the logs of processes it starts (each regex searched per line)",
    )


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
