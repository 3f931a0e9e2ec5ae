"""The test-only truncation switch: off unless asked for and allowed, never by accident."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_agent.main import main
from broker_agent.replication.follower import TruncationMode
from broker_agent.switches_for_tests import (
    ALLOW_ENV,
    ALLOW_VALUE,
    TRUNCATION_MODE_ENV,
    SwitchError,
    truncation_mode,
)
from quorum.common.config import render_properties


def test_without_the_switch_a_broker_truncates_by_leader_epoch() -> None:
    assert truncation_mode({}) is TruncationMode.LEADER_EPOCH
    assert truncation_mode({ALLOW_ENV: ALLOW_VALUE}) is TruncationMode.LEADER_EPOCH


@pytest.mark.parametrize("allow", [None, "", "1", "true", "YES"])
def test_the_hw_mode_is_refused_unless_test_only_switches_are_allowed(allow: str | None) -> None:
    environ = {TRUNCATION_MODE_ENV: "high-watermark"}
    if allow is not None:
        environ[ALLOW_ENV] = allow
    with pytest.raises(SwitchError, match=f"test-only switch.*{ALLOW_ENV}={ALLOW_VALUE}"):
        truncation_mode(environ)


def test_both_switches_select_the_hw_mode() -> None:
    environ = {TRUNCATION_MODE_ENV: "high-watermark", ALLOW_ENV: ALLOW_VALUE}
    assert truncation_mode(environ) is TruncationMode.HIGH_WATERMARK


def test_an_unknown_mode_is_refused_with_the_known_ones() -> None:
    environ = {TRUNCATION_MODE_ENV: "hw", ALLOW_ENV: ALLOW_VALUE}
    with pytest.raises(SwitchError, match="'hw': expected one of leader-epoch, high-watermark"):
        truncation_mode(environ)


def test_a_broker_given_the_mode_alone_refuses_to_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """What an operator who sets the mode alone gets: the broker's entry point
    exits at once, before it opens, binds or registers anything."""
    config = tmp_path / "broker.properties"
    config.write_text(render_properties({
        "node.id": "7", "process.roles": "broker",
        "controller.quorum.voters": "1@127.0.0.1:1",
        "listeners": "PLAINTEXT://127.0.0.1:1",
        "metadata.log.dir": str(tmp_path / "data"),
    }))  # fmt: skip
    monkeypatch.setenv(TRUNCATION_MODE_ENV, "high-watermark")
    monkeypatch.delenv(ALLOW_ENV, raising=False)
    assert main(["--config", str(config)]) == 1
    stderr = capsys.readouterr().err
    assert f"cannot start: {TRUNCATION_MODE_ENV} is a test-only switch" in stderr
    assert f"unless {ALLOW_ENV}={ALLOW_VALUE}" in stderr
    assert not (tmp_path / "data").exists()
