"""A log that a hostile client cannot flood: at most `per_second` lines a second,
the rest counted and summed up in one line when the next second starts."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable


class RateLimitedLog:
    def __init__(
        self,
        logger: logging.Logger,
        level: int,
        per_second: int = 5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._logger = logger
        self._level = level
        self._per_second = per_second
        self._clock = clock
        self._second = 0
        self._logged = 0
        self._unlogged = 0

    def __call__(self, line: str) -> None:
        second = int(self._clock())
        if second != self._second:
            if self._unlogged:
                self._logger.log(self._level, "%d more such lines not logged", self._unlogged)
            self._second, self._logged, self._unlogged = second, 0, 0
        if self._logged < self._per_second:
            self._logged += 1
            self._logger.log(self._level, "%s", line)
        else:
            self._unlogged += 1
