"""The order every append keeps, whatever form its batches come in."""

from __future__ import annotations

from collections.abc import Sequence

from quorum.log.segment import Placed


def check_order(
    batches: Sequence[Placed], end_offset: int, last_epoch: int, *, offset_gaps: bool
) -> None:
    """Each batch starts where the previous one (the first: the log) ends, or past
    it in a compacted log (`offset_gaps`), at an epoch no lower. Raises ValueError."""
    expected = end_offset
    for batch in batches:
        if batch.base_offset != expected and not (offset_gaps and batch.base_offset > expected):
            raise ValueError(f"append at {batch.base_offset}, log end is {expected}")
        if batch.epoch < last_epoch:
            raise ValueError(f"batch epoch {batch.epoch} is below the last epoch {last_epoch}")
        expected = batch.next_offset
        last_epoch = batch.epoch
