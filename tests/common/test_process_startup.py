"""The start-up steps both server processes share (quorum/common/process.py)."""

from __future__ import annotations

import pytest

from quorum.common.config import ConfigError, Endpoint
from quorum.common.process import (
    EXIT_STARTUP,
    argument_parser,
    cannot_start,
    load_config,
    start_metrics,
)


def refuse(path: str) -> int:
    raise ConfigError("node.id", f"node.id is missing in {path}")


def test_a_bad_config_is_one_line_naming_the_process(capsys: pytest.CaptureFixture[str]) -> None:
    assert load_config("broker-agent", refuse, "b.properties") is None
    assert capsys.readouterr().err == (
        "broker-agent: invalid configuration: node.id is missing in b.properties\n"
    )
    assert load_config("quorum-controller", lambda path: path.upper(), "x") == "X"


def test_cannot_start_tells_why_and_gives_the_start_up_exit_code(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert cannot_start("quorum-controller", "port 1 in use", "\n(hint)") == EXIT_STARTUP == 1
    assert capsys.readouterr().err == "quorum-controller: cannot start: port 1 in use\n(hint)\n"


def test_the_parser_wants_a_config_and_names_an_example() -> None:
    parser = argument_parser("broker-agent", "Run a broker.", "its file", "b.properties")
    assert parser.parse_args(["--config", "f"]).config == "f"
    assert "broker-agent --config b.properties" in parser.format_help()
    with pytest.raises(SystemExit):
        parser.parse_args([])


class FakeMetrics:
    def start(self, host: str, port: int, tls: object = None) -> int:
        return 9404


def test_metrics_are_disabled_without_a_listener_and_say_where_with_one() -> None:
    assert start_metrics(FakeMetrics(), None, None) == "disabled"
    endpoint = Endpoint("127.0.0.1", 0)
    assert start_metrics(FakeMetrics(), endpoint, None) == "http://127.0.0.1:9404/metrics"
