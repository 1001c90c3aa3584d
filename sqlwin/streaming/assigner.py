"""The window assigner role of the micro-batch operator (Flink's ``WindowAssigner``, with what follows from it).

Which windows a row belongs to decides the rest of a micro-batch's first step: when a row is late, what the
state keeps, whether windows merge. So one assigner per kind of window, chosen once when the operator is
made, does that step whole: it assigns the micro-batch's rows, classifies the late ones (LATE ROWS TO), stores
the others and returns the new-row counts per window for the pane engine, which it chooses too:

- ``timewindows.TimeWindowAssigner``: TUMBLE, HOP, CUMULATE and the global window;
- ``sessions.SessionAssigner``: SESSION windows, merged across micro-batches;
- ``maxsessions.MaxDurationSessions``: SESSION with MAX_DURATION, cut again as rows arrive;
- ``countwindows.CountWindowAssigner``: count windows, numbered as the watermark passes their rows.

This base class is what the operator sees of each, with the defaults of an assigner that keeps no state and
no timer of its own (count windows and max-duration sessions keep some, committed with the operator's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlwin.core.panes import PaneDriver
from sqlwin.streaming.committer import Durable
from sqlwin.streaming.context import OperatorContext, PaneEngine
from sqlwin.streaming.engines import WindowStates

# what reads a data micro-batch in one Spark job: (spark, data, batch, watermark, processing time) ->
# (rows, largest time per stream, accepted counts per window)
Scanner = Callable[[Any, Any, int, int, int], tuple[int, list[int | None], Any]]


class WindowAssigner(Durable):
    changed = False  # the last micro-batch changed the assigner's state, rows or panes aside (it must commit)
    state_rows = 0  # rows the assigner keeps of its own (beside the stored rows)

    def __init__(self, operator: OperatorContext):
        self.op = operator

    def assign(self, spark: Any, batch: int, watermark: int, with_rows: bool) -> Any:
        """Assign, classify and store the micro-batch's rows (``with_rows``: it has some; the batch's rows are
        its views) at the watermark in force; returns the new-row counts per window, as the engine takes them."""
        return self.assign_rows(spark, batch, watermark) if with_rows else self.op.panes.accepted()

    def assign_rows(self, spark: Any, batch: int, watermark: int) -> Any:
        raise NotImplementedError

    def scanner(self) -> Scanner | None:
        """What reads a data micro-batch in one Spark job (statistics and assignment together), if anything."""
        return None

    def panes_find_rows(self) -> bool:
        """Whether a pane that reads a micro-batch always finds rows of its window there (then the pane relation
        is an inner join, which Spark may broadcast): windows that neither move nor wait to be numbered."""
        return False

    def keeps_partials(self) -> bool:
        """Whether partial aggregates can be the state (where every aggregate splits)."""
        return True

    def pane_engine(self, driver: PaneDriver, columnar: bool, committed: dict | None) -> PaneEngine:
        """The engine that drives the panes of these windows (``columnar``: the columnar one may, the
        counts coming from a fused scan), continuing the ``committed`` state."""
        return WindowStates(driver)

    def event_timers(self) -> list[int]:
        """Event times at which the assigner has work without new rows (count windows: rows to number)."""
        return []

    def due(self, watermark: int) -> bool:
        """Whether a micro-batch at ``watermark`` has such work (so one must run)."""
        return False


def rows_of(df: Any) -> list[tuple]:
    """A small result's rows as tuples, through Arrow: Spark's ``Row`` per row (pickled, then read by name) cost
    seconds per micro-batch at the 100,000 count windows a micro-batch of Nexmark's bids touches."""
    table = df.toArrow()
    return list(zip(*(column.to_pylist() for column in table.columns), strict=True))


def records_of(df: Any) -> list[dict[str, Any]]:
    """``rows_of``, each row a dict by column name (for results whose columns vary: a union with a summary)."""
    return df.toArrow().to_pylist()
