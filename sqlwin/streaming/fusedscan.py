"""The fused scan: one Spark job reads a data micro-batch whose state is partial aggregates.

Used by the time-window assigner's ``scan`` (partial aggregates per window) and by the session assigner's
``scan`` (per micro-batch session); both hand it the operator as an ``OperatorContext``.
"""

from __future__ import annotations

from typing import Any

from sqlwin.streaming.context import OperatorContext


class FusedScan:
    """The one Spark job that reads a data micro-batch with partial-aggregate state: the partial rows (one per
    group) and the summary row (statistics, late count), collected together as Arrow. The partial rows the
    state keeps are then written from that Arrow table; where a column's type does not round-trip through
    pyarrow's parquet (the operator's ``arrow_rows``), Spark writes them from the persisted result."""

    def __init__(self, op: OperatorContext, partials: Any, summary: Any):
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        self.op = op
        frame = partials.unionByName(summary.withColumn("__summary", F.lit(True)), allowMissingColumns=True)
        # persisted, not checkpointed, when Spark reads it again: released at once, not when the driver's GC runs
        self.frame = frame if op.arrow_rows else frame.persist()
        # written by Spark, the partial columns stay there (a type pyarrow's parquet cannot keep may have no Arrow form)
        skipped = set() if op.arrow_rows else set(op.query.decomposition.columns)
        table = self.frame.select(*[f"`{c}`" for c in self.frame.columns if c not in skipped]).toArrow()
        is_summary = pc.fill_null(table["__summary"], False)
        self.summary = table.filter(is_summary).to_pylist()[0]
        self.groups = table.filter(pc.invert(is_summary))  # the partial rows

    def store(self, groups: Any, kept: Any, batch: int, count: int) -> None:
        """Keep the partial rows ``groups`` (``self.groups`` filtered by the Spark condition ``kept``)."""
        from pyspark.sql import functions as F

        if self.op.arrow_rows:
            self.op.rows.write_arrow(groups, batch, count)
        else:
            self.op.rows.write(self.frame.where(F.col("__summary").isNull() & kept), batch, count)

    def release(self) -> None:
        if not self.op.arrow_rows:
            self.frame.unpersist()
