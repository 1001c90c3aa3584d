"""The operator's two outputs, each written as micro-batch ``n`` of its sink (replaced if ``n`` runs again).

- The panes: Flink's window operator hands a fired window's contents to the window function, through the
  evictor when there is one (``EvictingWindowOperator``); here Spark computes every pane a micro-batch fired
  with the user's own query (``PaneQuery.pane_sql``) over the stored rows each pane reads (``rowstore``),
  the evictor evicting over the panes' contents first (``evictors``).
- The dropped rows (LATE ROWS TO, Flink's side output for late data): every (row, window) an assigner
  dropped, with the watermark then and the reason.
"""

from __future__ import annotations

from typing import Any

from sqlwin.core.panes import FIRED_COLUMNS, MAX_TIME, MIN_TIME, FiredPaneList
from sqlwin.streaming.context import OperatorContext
from sqlwin.streaming.engines import Fired
from sqlwin.streaming.keyedstate import KeyedFired

FIRED_SCHEMA = ("__key string, __ws bigint, __we bigint, pane_index int, pane_timing string, is_final boolean, "
                "tokens array<bigint>")


def fired_table(fired: Fired, batch: int) -> Any:
    """``fired`` as Arrow, in ``FIRED_SCHEMA``'s names: each pane with the micro-batches whose rows it reads."""
    return fired.to_arrow(batch).rename_columns(["__key", "__ws", "__we", *FIRED_COLUMNS[3:]])


class Outputs:
    def __init__(self, operator: OperatorContext, evictor: Any, sink: Any, late_sink: Any):
        self.op = operator
        self.evictor = evictor
        self.sink = sink
        self.late_sink = late_sink  # None: no LATE ROWS TO

    def prepare(self, spark: Any) -> None:
        """At start, once the operator's schemas are fixed: each sink's schema, and its view."""
        self.register_inputs(spark, FiredPaneList(), None)
        self.sink.set_schema(spark.sql(self.op.pane_sql).schema)
        if self.late_sink is not None:
            self.late_sink.set_schema(self._late_schema())
        self.register(spark)

    def register(self, spark: Any) -> None:
        """The sinks' views, with every committed micro-batch."""
        self.sink.register(spark)
        if self.late_sink is not None:
            self.late_sink.register(spark)

    # -- the panes ------------------------------------------------------------------------------
    def panes(self, spark: Any, fired: Fired, batch: int) -> None:
        """Micro-batch ``batch`` of the sink: the panes ``fired`` (none: an empty micro-batch)."""
        if not fired:
            self.sink.clear(batch)
            return
        self.register_inputs(spark, fired, fired.batches(batch), batch)
        self.evictor.at_firing(spark, fired, batch)
        self.sink.write(spark.sql(self.op.pane_sql), batch)

    def register_inputs(self, spark: Any, fired: Fired, batches: set[int] | None, batch: int = 0) -> None:
        """The views the pane query reads: the fired panes, the stored rows of ``batches``, the pane relation."""
        views = self.op.views
        self._fired_frame(spark, fired, batch).createOrReplaceTempView(views.fired)
        self.op.rows.read(spark, batches).createOrReplaceTempView(views.rows)
        spark.sql(self.op.relation_sql).createOrReplaceTempView(views.relation)

    def _fired_frame(self, spark: Any, fired: Fired, batch: int) -> Any:
        """The fired panes as Spark reads them, each with the micro-batches (``tokens``) whose rows it reads: a
        parquet file of the micro-batch (``StateStore.scratch_frame``), not a local DataFrame."""
        if isinstance(fired, KeyedFired):  # written by Spark where the keyed engine stepped the windows
            return fired.frame(spark, batch)
        return self.op.store.scratch_frame(spark, "fired", batch, fired_table(fired, batch), FIRED_SCHEMA)

    # -- the dropped rows -----------------------------------------------------------------------
    def late(self, parts: list, batch: int, watermark: int) -> None:
        """Micro-batch ``batch`` of LATE ROWS TO: ``parts`` (DataFrames of the relation's columns, the window's
        bounds and the reason), with the watermark then."""
        from pyspark.sql import functions as F

        if self.late_sink is None:
            return
        if not parts:
            self.late_sink.clear(batch)
            return
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        columns = [*self.op.relation_columns, "window_start", "window_end"]
        # at the end of input the watermark is +infinity, which no TIMESTAMP holds: NULL
        mark = F.timestamp_micros(F.lit(watermark)) if MIN_TIME < watermark < MAX_TIME else \
            F.lit(None).cast("timestamp")  # no watermark yet, or the end of input: NULL
        self.late_sink.write(union.select(*[F.col(f"`{c}`") for c in columns], mark.alias("watermark"), "reason"),
                             batch)

    def _late_schema(self) -> Any:
        from pyspark.sql.types import StringType, StructField, StructType, TimestampType

        by_name = {f.name: f for f in self.op.assigned_schema.fields}
        fields = [by_name[c] for c in self.op.relation_columns if c in by_name]
        fields += [by_name.get(c, StructField(c, TimestampType())) for c in ("window_start", "window_end")]
        fields += [StructField("watermark", TimestampType()), StructField("reason", StringType())]
        return StructType(fields)
