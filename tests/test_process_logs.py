"""The suite fails on errors nobody explained in its processes' logs."""

from __future__ import annotations

import sys
from pathlib import Path

import process_logs
import pytest

pytest_plugins = ["pytester"]

HERE = Path(__file__).resolve().parent

PLANTED = """\
2026-11-25 17:00:00,001 [node 1] INFO quorum.server.driver: node 1 is leader in epoch 2 (leader 1)
2026-11-25 17:00:00,002 [node 1] WARNING quorum.server.transport: cannot reach 1 of 2 peers
2026-11-25 17:00:00,003 [node 1] ERROR grpc._cython.cygrpc: Unexpected [TimeoutError] raised
Traceback (most recent call last):
  File "quorum/server/driver.py", line 1, in handle_request
TimeoutError: no answer in time
2026-11-25 17:00:00,004 [node 1] INFO quorum.server.driver: all is well
2026-11-25 17:00:00,005 [broker 11] ERROR broker_agent.agent: the disk is full
"""


def test_the_checker_finds_each_planted_error_with_its_traceback() -> None:
    bad = process_logs.unexplained(PLANTED)
    assert [record[0].split(": ", 1)[1] for record in bad] == [
        "Unexpected [TimeoutError] raised",
        "the disk is full",
    ]
    assert bad[0][-1] == "TimeoutError: no answer in time"  # the traceback comes along


def test_a_declared_pattern_explains_a_record_anywhere_in_it() -> None:
    bad = process_logs.unexplained(PLANTED, [r"no answer in time$"])
    assert [record[0].split(": ", 1)[1] for record in bad] == ["the disk is full"]
    assert process_logs.unexplained(PLANTED, ["no answer in time", "disk is full"]) == []


def test_a_bare_traceback_a_grpc_core_error_and_unknown_statuses_are_caught() -> None:
    text = (
        'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: x\n'
        "E1125 17:00:00.123456  4242 chttp2_transport.cc:1] a core error\n"
        "2026-11-25 17:00:00,001 [node 2] WARNING quorum.server.transport: node 1 "
        "rejected Fetch: StatusCode.UNKNOWN\n"
        "2026-11-25 17:00:00,001 [node 2] INFO x: fine\n"
    )
    assert len(process_logs.unexplained(text)) == 3


def test_the_fixture_fails_a_test_whose_process_logged_a_planted_traceback(
    pytester: pytest.Pytester,
) -> None:
    """A real process logs a traceback; the test that started it passes its own
    asserts and still fails, with the lines shown; declared, it passes."""
    pytester.makeconftest((HERE / "conftest.py").read_text())
    pytester.makepyfile(process_logs=(HERE / "process_logs.py").read_text())
    pytester.makepyfile(slowest_first=(HERE / "slowest_first.py").read_text())
    pytester.makepyfile(
        test_planted=f"""
import subprocess, sys
import process_logs
import pytest

def crash(tmp_path):
    log = tmp_path / "crasher.log"
    process_logs.watch(log, "crasher")
    with log.open("ab") as out:
        subprocess.run([{sys.executable!r}, "-c", "raise RuntimeError('planted')"],
                       stdout=out, stderr=subprocess.STDOUT, check=False)

def test_undeclared(tmp_path):
    crash(tmp_path)

@pytest.mark.expected_log_errors("RuntimeError: planted")
def test_declared(tmp_path):
    crash(tmp_path)
"""
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(
        [
            "*ERROR at teardown of test_undeclared*",
            "*unexplained errors*",
            "*RuntimeError: planted*",
        ]
    )
    assert "ERROR at teardown of test_declared" not in result.stdout.str()


def test_a_watched_log_is_read_once(tmp_path: Path) -> None:
    log = tmp_path / "p.log"
    log.write_text("before watching: ERROR x\n")
    process_logs.watch(log)
    try:
        with log.open("a") as f:
            f.write("2026-11-25 17:00:00,005 [node 1] ERROR x: boom\npartial ERROR")
        report = process_logs.check_watched()
        assert report is not None and "boom" in report and "before" not in report
        assert process_logs.check_watched() is None  # read once; the partial line waits
    finally:
        process_logs.forget(log)
