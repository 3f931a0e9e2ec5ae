"""One Spark session for every analytics test that needs one (a cold one costs
seconds): they all live in `test_convergence_spark.py`, so with `--dist loadscope`
one worker, one JVM. Spark binds to loopback only."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import pytest

os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pyspark.errors import PySparkRuntimeError

    from analytics.convergence import session

    # The JVM is launched by fork+exec from a worker that has run gRPC tests
    # before (random order); once, under load, it exited before reporting its
    # port with nothing on stderr. A second launch is not a second chance for
    # the code under test, only for the test's JVM, so it is tried again once.
    for attempt in (1, 2):
        try:
            s = session("local[2]", app_name="quorum-analytics-tests")
            break
        except PySparkRuntimeError as err:
            if attempt == 2:
                raise
            print(f"Spark's JVM did not start ({err}); launching it again", file=sys.stderr)
            time.sleep(1)
    try:
        yield s
    finally:
        s.stop()
