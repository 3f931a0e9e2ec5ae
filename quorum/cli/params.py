"""Numbers on quorumctl's command line: ASCII digits, in the wire type's range.

click's own `int` takes whatever Python's int() takes ("1_000", Arabic-Indic or
fullwidth digits) and any size, and an int32 field then fails deep inside
protobuf with a traceback. These types refuse such input as a usage error
(exit code 2) naming the option, as Kafka's tools refuse non-positive counts.
"""

from __future__ import annotations

import re

import click

INT32_MAX = (1 << 31) - 1
_ASCII_INTEGER = re.compile(r"-?[0-9]+")


def parse_int(text: str, low: int, high: int = INT32_MAX) -> int:
    """`text` as an integer in [low, high]; ValueError with the reason otherwise."""
    if not _ASCII_INTEGER.fullmatch(text.strip()):
        raise ValueError(f"{text!r} is not an integer in ASCII digits")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{value} is not in the range {low}..{high}")
    return value


class Int32(click.ParamType):
    """An int32 in [low, high], written in ASCII digits."""

    name = "integer"

    def __init__(self, low: int, high: int = INT32_MAX) -> None:
        self.low, self.high = low, high

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            text = str(value)
        elif isinstance(value, str):
            text = value
        else:
            self.fail(f"{value!r} is not an integer", param, ctx)
        try:
            return parse_int(text, self.low, self.high)
        except ValueError as err:
            self.fail(str(err), param, ctx)


COUNT = Int32(1)  # partitions, replication factor: Kafka's tools refuse 0 and below
BROKER_ID = Int32(0)
PARTITION = Int32(0)
