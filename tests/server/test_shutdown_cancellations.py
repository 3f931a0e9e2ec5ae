"""gRPC's own record of a call cancelled twice at shutdown is dropped once the
process mutes it; any other unhandled servicer exception is still logged."""

from __future__ import annotations

import asyncio
import logging

import pytest

from quorum.rpc import servers
from quorum.rpc.servers import mute_shutdown_cancellations

GRPC_LOGGER = "grpc._cython.cygrpc"


def log_unhandled(exc: BaseException) -> None:
    try:
        raise exc
    except BaseException:
        logging.getLogger(GRPC_LOGGER).exception(
            "Exception not handled by _handle_exceptions in servicer method [%s]",
            "/quorum.raft.v1.RaftQuorum/EndQuorumEpoch",
        )


def test_only_cancellations_are_muted_and_only_once_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    logger = logging.getLogger(GRPC_LOGGER)
    before = list(logger.filters)
    try:
        with caplog.at_level(logging.ERROR, logger=GRPC_LOGGER):
            log_unhandled(asyncio.CancelledError())
            assert "EndQuorumEpoch" in caplog.text  # not muted until the process asks
            caplog.clear()
            mute_shutdown_cancellations()
            log_unhandled(asyncio.CancelledError())
            assert caplog.text == ""
            log_unhandled(ValueError("a real bug"))
            assert "a real bug" in caplog.text
            logger.error("Exception not handled by _handle_exceptions: ...\nCancelledError")
            logger.error("Unexpected [TimeoutError] raised by servicer method")
            assert "TimeoutError" in caplog.text
            assert caplog.text.count("Exception not handled") == 1  # the ValueError's
    finally:
        logger.filters[:] = before


def test_the_filter_is_installed_by_processes_not_by_servers() -> None:
    before = list(logging.getLogger(GRPC_LOGGER).filters)

    async def build() -> None:
        await servers.stop_server(servers.new_server(), 0)

    asyncio.run(build())
    assert logging.getLogger(GRPC_LOGGER).filters == before
