"""One Spark session for every analytics test that needs one (a cold one costs
seconds): they all live in `test_convergence_spark.py`, so with `--dist loadscope`
one worker, one JVM. Spark binds to loopback only."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from analytics.convergence import session

    s = session("local[2]", app_name="quorum-analytics-tests")
    try:
        yield s
    finally:
        s.stop()
