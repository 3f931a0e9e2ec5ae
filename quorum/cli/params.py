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


def _fold(text: str) -> str:
    return text.replace("-", "").replace("_", "").lower()


class KafkaChoice(click.Choice):  # type: ignore[type-arg]
    """A choice matched as Kafka's tools match enum names: case-insensitively and
    ignoring `-` and `_`, so `Read`, `PREFERRED`, `ClusterAction` and
    `cluster-action` all work. The value passed on is this CLI's own spelling."""

    def __init__(self, choices: list[str]) -> None:
        super().__init__(choices, case_sensitive=False)
        self._by_fold = {_fold(c): c for c in choices}

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        if isinstance(value, str) and _fold(value) in self._by_fold:
            return self._by_fold[_fold(value)]
        return str(super().convert(value, param, ctx))


def split_config_list(text: str) -> list[str]:
    """`k=v,k2=[a,b]` as kafka-configs.sh splits it: commas inside square brackets
    belong to a list value, which reaches the controller as `a,b` (Kafka's list
    syntax on the wire). An unclosed bracket is a ValueError."""
    items: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"{text!r} closes a bracket it never opened")
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
            continue
        current.append(char)
    if depth:
        raise ValueError(f"{text!r} has an unclosed '['")
    items.append("".join(current))
    return [i.strip() for i in items if i.strip()]


def config_pair(pair: str, option: str) -> tuple[str, str]:
    """`key=value` with a `[a,b]` list value unwrapped to `a,b`."""
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"{pair!r} is not key=value", param_hint=option)
    value = value.strip()
    if value.startswith("[") and value.endswith("]"):
        value = ",".join(v.strip() for v in value[1:-1].split(",") if v.strip())
    return key.strip(), value
