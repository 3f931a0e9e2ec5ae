"""`--rewrite` regenerates the golden transcripts in testdata/ (see test_golden.py)."""

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--rewrite",
        action="store_true",
        default=False,
        help="rewrite tests/raft/testdata/*.txt with the core's current output",
    )
