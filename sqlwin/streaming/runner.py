"""Start the custom path: the stream's source plus the tick source, into sqlwin's micro-batch operator."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from sqlwin.errors import SqlwinError
from sqlwin.streaming import connect, storage
from sqlwin.streaming.alignment import StreamAdmission, aligned_streams
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.sources import SOURCE_COLUMN, TickFile, stream_dataframe, tick_dataframe
from sqlwin.streaming.staged import StagedOperator
from sqlwin.streaming.stages import StagedShape
from sqlwin.streaming.stopping import NEVER


def table_tag(name: str) -> str:
    return re.sub(r"\W", "_", name.lower())


class InjectedClockTicks(TickFile):
    """Ticks for a query on an injected clock: the no-data batch after a watermark move is still asked for,
    but no wake-up by processing time, since the tick source waits on the wall clock, which a test clock does
    not follow; whoever moves the test clock asks for the micro-batch (a new file)."""

    def request(self, tick: int, wake_at: int | None = None, wake_tick: int | None = None) -> None:
        super().request(tick)


class CatchUpTicks(TickFile):
    """Ticks of an ``available-now`` table (``sqlwin run --available-now``): the no-data micro-batch after a
    watermark move is asked for (the table's query starts again to read it: ``StreamingTable.catching_up``),
    no wake-up by processing time, which a catch-up run does not wait for."""

    def request(self, tick: int, wake_at: int | None = None, wake_tick: int | None = None) -> None:
        super().request(tick)


def _admission(table: Any, streams: list[Any], remote: bool) -> StreamAdmission | None:
    """The admission of the query's aligned streams (None: none is)."""
    aligned = aligned_streams(streams)
    if not aligned:
        return None
    if remote:
        raise SqlwinError(f"streaming table {table.name}: watermark alignment (WITH WATERMARK ALIGNMENT GROUP) runs on "
                          "a classic Spark session, not over Spark Connect yet")
    location = storage.join(table.location, "alignment")
    if not storage.reachable_without_jvm(location):
        raise SqlwinError(f"streaming table {table.name}: watermark alignment keeps its admitted files' log in the "
                          f"table's folder, read by a Python process without Spark's JVM through pyarrow, which does "
                          f"not reach {table.location}; give the table a local, s3://, gs://, hdfs:// or abfs:// "
                          "checkpoint")
    return StreamAdmission(table.spark, streams, aligned, table.location)


def start_custom(table: Any, clock: Callable[[], int] | None = None) -> Any:
    """``clock``: the processing-time clock (epoch microseconds) for tests; default the wall clock."""
    from pyspark.sql import functions as F

    spark = table.spark
    shape = table.shape
    path = storage.join(table.location, "ticks")
    ticks = InjectedClockTicks(path) if clock is not None else CatchUpTicks(path) if table.available_now \
        else TickFile(path)
    extra = {} if clock is None else {"clock": clock}
    kind = StagedOperator if isinstance(shape, StagedShape) else MicroBatchOperator
    operator = kind(spark, shape, table.location, table.sink, table.late_sink, table_tag(table.name), ticks=ticks,
                    **extra)
    table.operator = operator
    streams = shape.streams or [shape.stream]
    remote = connect.is_connect(spark)  # the operator runs on the server, pickled (sqlwin.streaming.connect)
    admission = _admission(table, streams, remote)
    operator.admission = admission

    def read(i: int) -> Any:
        if admission is not None and i in admission.aligned:  # its admitted files' names (GRAMMAR 3 alignment)
            return admission.source(streams[i])
        return stream_dataframe(spark, streams[i], with_proctime=False)

    source = read(0)
    if len(streams) > 1:  # one source of micro-batches; each row says which stream it came from
        source = source.withColumn(SOURCE_COLUMN, F.lit(0))
        for i in range(1, len(streams)):
            source = source.unionByName(read(i).withColumn(SOURCE_COLUMN, F.lit(i)), allowMissingColumns=True)
    tick_rows = tick_dataframe(spark, ticks.path)
    data = source.unionByName(tick_rows, allowMissingColumns=True)
    function = connect.ServerBatchFunction(operator.run_batch, operator) if remote else operator.run_batch
    writer = data.writeStream.foreachBatch(function) \
        .option("checkpointLocation", storage.join(table.location, "checkpoint")) \
        .queryName(f"sqlwin_{table_tag(table.name)}")
    writer = table.apply_trigger(writer)
    if remote:
        query = connect.start_query(writer, table.name)
    else:
        try:
            query = writer.start()
        except Exception as err:
            raise SqlwinError(f"cannot start streaming table {table.name}: {str(err).splitlines()[0]}") from None

    def restart() -> Any:
        """A catch-up run asked for a micro-batch after its end: the same writer, a new run of its query."""
        operator.query_stop = NEVER  # bound to the new run at its first micro-batch (the old one is inactive)
        return connect.start_query(writer, table.name) if remote else writer.start()

    table.restart_query = restart
    if remote:  # the server restarted the operator's timers; the client reads what it commits through Spark
        table.committed_state = connect.CommittedState(spark, operator.store.root)
    else:
        operator.wake_after_restart()
    return query
