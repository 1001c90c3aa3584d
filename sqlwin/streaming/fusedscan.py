"""The fused scan: one Spark job reads a data micro-batch whose state is partial aggregates.

Used by the time-window assigner's ``scan`` (partial aggregates per window) and by the session assigner's
``scan`` (per micro-batch session); both hand it the operator as an ``OperatorContext``.
"""

from __future__ import annotations

from typing import Any

from sqlwin.streaming.batchinput import with_statistics
from sqlwin.streaming.context import OperatorContext


class FusedScan:
    """The one Spark job that reads a data micro-batch with partial-aggregate state: the partial rows (one per
    group), collected as Arrow, and the statistics ``stats`` over the micro-batch's ``rows``, observed as the job
    reads them (``with_statistics``). The partial rows the state keeps are then written from that Arrow
    table; where a column's type does not round-trip through pyarrow's parquet (the operator's ``arrow_rows``),
    Spark writes them from the persisted result."""

    def __init__(self, op: OperatorContext, partials: Any, rows: Any, stats: list):
        self.op = op
        frame, observation = with_statistics(partials, rows, stats)
        # persisted, not checkpointed, when Spark reads it again: released at once, not when the driver's GC runs
        self.frame = frame if op.arrow_rows else frame.persist()
        # written by Spark, the partial columns stay there (a type pyarrow's parquet cannot keep may have no Arrow form)
        skipped = set() if op.arrow_rows else set(op.query.decomposition.columns)
        self.groups = self.frame.select(*[f"`{c}`" for c in self.frame.columns if c not in skipped]).toArrow()
        self.summary = observation.get  # the statistics: ``n``, ``m<i>`` (``BatchInput.register``), ...

    def store(self, groups: Any, kept: Any, batch: int, count: int) -> None:
        """Keep the partial rows ``groups`` (``self.groups`` filtered by the Spark condition ``kept``)."""
        if self.op.arrow_rows:
            self.op.rows.write_arrow(groups, batch, count)
        else:
            self.op.rows.write(self.frame.where(kept), batch, count)

    def release(self) -> None:
        if not self.op.arrow_rows:
            self.frame.unpersist()
