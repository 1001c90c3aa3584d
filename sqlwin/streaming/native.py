"""The native path: Spark's own streaming aggregation, where it is provably the contract's.

``choose_path`` sends here a TUMBLE or HOP (slide <= size) aggregation with the default emission or EMIT
FINAL, no lateness, no LATE ROWS TO: each window has one pane (index 0, ON_TIME, final), emitted when
the watermark reaches its end, and a (row, window) with ``W >= window_end`` is dropped. That is Spark's
append mode over ``GROUP BY window(ts, ...)`` with ``withWatermark(ts, delay)``: it drops (row, window)
pairs with ``window.end <= W`` and evicts a window once ``W >= window.end``, with the watermark of the
previous micro-batch, computed as ``max(ts) - delay``. The query is the user's, with the window TVF
replaced by ``window()`` (whose struct carries the watermark, so append mode can evict it).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from sqlwin.backends.spark_groupby import renames_an_item, replace_window_bounds, struct_bound, window_bound
from sqlwin.dialect.nodes import TableArg
from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import WindowKind
from sqlwin.streaming import connect, storage
from sqlwin.streaming.panequery import item_names
from sqlwin.streaming.runner import table_tag
from sqlwin.streaming.shape import find_carrier, mark_carrier, reading, strip_clauses
from sqlwin.streaming.sources import stream_dataframe
from sqlwin.streaming.stopping import NEVER, StoppableBatches

D = "spark"


def _micros(us: int) -> str:
    return f"{us} microseconds"


def native_sql(shape: Any, view: str, spark: Any = None) -> str:
    """The user's statement over ``view`` (the watermarked stream), windowed by ``window()``. With ``spark``, an
    un-aliased item computed from a bound is aliased with the name Spark gives it in the batch query (the
    struct read in its place would name it ``__w.start + ...``)."""
    spec = shape.window
    alias = shape.source_alias
    mark_carrier(shape)
    root = shape.query.node
    if isinstance(root, exp.Insert):
        root = root.expression
    root = strip_clauses(root.copy())
    carrier = find_carrier(root)
    tvf = carrier.args["from_"].this
    data = reading(tvf.find(TableArg).this.copy(), {shape.stream.name.lower(): view})
    slide = spec.size if spec.kind is WindowKind.TUMBLE else spec.slide
    offset = spec.offset % slide
    window = (f"WINDOW(`{spec.time_col}`, '{_micros(spec.size)}', '{_micros(slide)}', '{_micros(offset)}')")
    source = data.sql(D) if isinstance(data, exp.Table) else f"({data.sql(D)}) AS __d"
    body = (f"SELECT __r.*, __r.__w.start AS window_start, __r.__w.end AS window_end, "
            f"__r.__w.end - INTERVAL 1 MILLISECOND AS window_time FROM (SELECT *, {window} AS __w FROM {source} "
            f"WHERE `{spec.time_col}` IS NOT NULL) AS __r")
    derived = exp.maybe_parse(f"SELECT * FROM ({body}) AS {exp.to_identifier(alias).sql(D)}",
                              dialect=D).args["from_"].this
    tvf.replace(derived)
    w = exp.column("__w", alias)
    if spark is not None and renames_an_item(carrier, alias, lambda _, per_row: not per_row):
        carrier.set("expressions", [item if name is None else exp.alias_(item, exp.to_identifier(name, quoted=True))
                                    for item, name in zip(carrier.expressions, item_names(spark, shape), strict=True)])
    group = carrier.args["group"]
    group.set("expressions", [g for g in group.expressions if not window_bound(g, alias)] + [w])
    replace_window_bounds(carrier, alias, lambda name, per_row: None if per_row else struct_bound(w, name))
    carrier.select("0 AS pane_index", "'ON_TIME' AS pane_timing", "TRUE AS is_final", dialect=D, copy=False)
    return root.sql(dialect=D)


def start_native(table: Any) -> Any:
    spark = table.spark
    shape = table.shape
    stream = shape.stream
    tag = table_tag(table.name)
    view = f"__sqlwin_wm_{tag}"
    source = stream_dataframe(spark, stream)
    source.withWatermark(stream.watermark.column, _micros(stream.watermark.delay)).createOrReplaceTempView(view)
    try:
        result = spark.sql(native_sql(shape, view, spark))
    except Exception as err:
        raise SqlwinError(f"cannot start streaming table {table.name}: {str(err).splitlines()[0]}") from None
    table.sink.set_schema(result.schema)
    table.sink.register(spark)
    write = NativeWrites(spark, table.sink).run_batch
    remote = connect.is_connect(spark)  # the writer runs on the server (sqlwin.streaming.connect)
    function = connect.ServerBatchFunction(write) if remote else write
    writer = result.writeStream.outputMode("append").foreachBatch(function) \
        .option("checkpointLocation", storage.join(table.location, "checkpoint")).queryName(f"sqlwin_{tag}")
    writer = table.apply_trigger(writer)
    # Spark judges late rows by the watermark of the micro-batch *before* the one in force when several stateful
    # operators may be chained; with one operator and that option off, it drops (row, window) with
    # window_end <= the watermark in force, as GRAMMAR 4 says, also when micro-batches follow with no
    # no-data batch between them. The option is read when the query starts (its session is a clone).
    option = "spark.sql.streaming.statefulOperator.allowMultiple"
    before = spark.conf.get(option, None)
    spark.conf.set(option, "false")
    try:
        return connect.start_query(writer, table.name) if remote else writer.start()
    finally:
        if before is None:
            spark.conf.unset(option)
        else:
            spark.conf.set(option, before)


class NativeWrites(StoppableBatches):
    """The native path's foreachBatch: the aggregation's output of a micro-batch written to the sink. A stop
    that lands in it ends it uncommitted, as on the custom path (``sqlwin.streaming.stopping``)."""

    def __init__(self, spark: Any, sink: Any):
        self.spark = spark
        self.sink = sink
        self.query_stop = NEVER

    def _run_batch(self, batch_df: Any, source_batch: int) -> None:
        # one action: the sink counts the rows as it writes them (an emptiness check of its own on the unpersisted
        # batch would run the aggregation twice); most no-data micro-batches evict no window and leave no folder.
        # It compacts committed micro-batches when due, before Spark commits this one (sqlwin.streaming.compaction)
        self.sink.write(batch_df, source_batch)
        self.sink.register(self.spark)
