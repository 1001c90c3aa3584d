"""Watermark alignment (GRAMMAR 3; Flink's ``withWatermarkAlignment(group, maxDrift)``): which streams of a group
may read further.

A stream of a group is *paused* while its watermark is more than the group's drift ahead of the group's lowest
watermark; its source then admits nothing new until the others catch up, so the rows it would bring wait in the
source, not in the query's state. A stream that is idle (its IDLE TIMEOUT passed without a row) does not hold the
group back; a stream that has no watermark yet does (it is at the beginning of time), as a Flink source that has
emitted no watermark. The stream with the lowest watermark is never paused, so the group always moves.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from sqlwin.core.panes import MIN_TIME


@dataclass(frozen=True)
class StreamMark:
    """A stream's watermark after a micro-batch (None: no row yet) and whether it is idle."""

    watermark: int | None
    idle: bool = False


def paused(marks: Mapping[str, StreamMark], drift: int) -> frozenset[str]:
    """The streams of one group that must not read further: their watermark is past the lowest watermark of the
    group's streams that are not idle, plus ``drift`` (microseconds)."""
    holding = [MIN_TIME if m.watermark is None else m.watermark for m in marks.values() if not m.idle]
    if not holding:
        return frozenset()
    low = min(holding)
    return frozenset(name for name, m in marks.items() if m.watermark is not None and m.watermark > low + drift)
