"""Start the custom path: the stream's source plus the tick source, into sqlwin's micro-batch operator."""

from __future__ import annotations

import os
import re
from typing import Any

from sqlwin.errors import SqlwinError
from sqlwin.streaming.operator import MicroBatchOperator
from sqlwin.streaming.sources import TickFile, register_tick_source, stream_dataframe


def table_tag(name: str) -> str:
    return re.sub(r"\W", "_", name.lower())


def start_custom(table: Any) -> Any:
    spark = table.spark
    shape = table.shape
    register_tick_source(spark)
    ticks = TickFile(os.path.join(table.location, "ticks.json"))
    operator = MicroBatchOperator(spark, shape, table.location, table.sink, table.late_sink,
                                  table_tag(table.name), ticks=ticks)
    table.operator = operator
    source = stream_dataframe(spark, shape.stream, with_proctime=False)
    tick_rows = spark.readStream.format("sqlwin_ticks").option("path", ticks.path).load()
    data = source.unionByName(tick_rows, allowMissingColumns=True)
    writer = data.writeStream.foreachBatch(operator.run_batch) \
        .option("checkpointLocation", os.path.join(table.location, "checkpoint")) \
        .queryName(f"sqlwin_{table_tag(table.name)}")
    trigger = table.options.get("trigger")
    if trigger:
        writer = writer.trigger(processingTime=trigger)
    try:
        return writer.start()
    except Exception as err:
        raise SqlwinError(f"cannot start streaming table {table.name}: {str(err).splitlines()[0]}") from None
