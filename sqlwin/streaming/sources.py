"""Where a stream's rows come from: Spark's file and rate sources for ``CREATE STREAM``, and the tick
source that lets sqlwin ask Spark for a micro-batch without new rows.

Spark runs a micro-batch only when a source has new offsets (or one of its own stateful operators
wants a no-data batch). sqlwin's operator decides lateness and fires windows itself, so it needs the
same no-data batches Spark gives its native aggregation: after a micro-batch that advanced the
watermark, and when a processing-time timer or an idle timeout is due. The tick source is a Python
streaming data source whose latest offset is read from a small file that the operator writes
(``TickFile``): writing a larger number asks for one more micro-batch. Its offsets live in Spark's
checkpoint like any source's, so a restart replays exactly the batches that ran.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader

from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import CreateStream

TICK_SOURCE = "sqlwin_ticks"
TICK_COLUMN = "__sqlwin_tick"
SOURCE_COLUMN = "__sqlwin_source"  # which stream a row came from, when a query reads several
FILE_FORMATS = ("json", "csv", "parquet")


class TickFile:
    """``{"wanted": n, "wake_at": epoch_us, "wake_tick": n2}``: the operator's wishes for the next batch."""

    def __init__(self, path: str):
        self.path = path

    def read(self) -> dict:
        try:
            with open(self.path) as f:
                return json.load(f)
        except (FileNotFoundError, ValueError):
            return {}

    def request(self, tick: int, wake_at: int | None = None, wake_tick: int | None = None) -> None:
        """Ask for a no-data micro-batch now (``tick``), and/or once the wall clock reaches ``wake_at``."""
        data = {"wanted": tick, "wake_at": wake_at, "wake_tick": wake_tick}
        tmp = f"{self.path}.tmp"
        with open(tmp, "w") as f:
            json.dump(data, f)
        os.replace(tmp, self.path)

    def latest(self, now_us: int | None = None) -> int:
        data = self.read()
        tick = int(data.get("wanted") or 0)
        wake_at, wake_tick = data.get("wake_at"), data.get("wake_tick")
        now = now_us if now_us is not None else int(time.time() * 1_000_000)
        if wake_at is not None and wake_tick is not None and now >= int(wake_at):
            tick = max(tick, int(wake_tick))
        return tick


class _TickReader(DataSourceStreamReader):
    def __init__(self, path: str):
        self.ticks = TickFile(path)

    def initialOffset(self) -> dict:
        return {"tick": 0}

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        latest = self.ticks.latest()
        return {"tick": max(latest, int((start or {}).get("tick", 0)))}

    def partitions(self, start: dict, end: dict) -> list:
        return []  # a tick carries no rows: the micro-batch it causes is a no-data batch

    def read(self, partition: Any):
        return iter(())

    def commit(self, end: dict) -> None:
        pass


class TickSource(DataSource):
    """``spark.readStream.format("sqlwin_ticks").option("path", tick_file)``: no rows, only batches."""

    @classmethod
    def name(cls) -> str:
        return TICK_SOURCE

    def schema(self) -> str:
        return f"{TICK_COLUMN} bigint"

    def streamReader(self, schema: Any) -> DataSourceStreamReader:
        return _TickReader(self.options["path"])


def register_tick_source(spark: Any) -> None:
    spark.dataSource.register(TickSource)


def schema_ddl(stream: CreateStream) -> str:
    """The declared (typed) columns as a Spark DDL schema; computed columns come later."""
    typed = [c for c in stream.columns if c.type is not None]
    return ", ".join(f"`{c.name}` {c.type}" for c in typed)


def source_dataframe(spark: Any, stream: CreateStream) -> Any:
    """The raw streaming DataFrame of a ``CREATE STREAM`` (declared columns only, no PROCTIME)."""
    options = {k: v for k, v in stream.options.items() if k.lower() != "path"}
    path = next((v for k, v in stream.options.items() if k.lower() == "path"), None)
    typed = [c for c in stream.columns if c.type is not None]
    if stream.format == "rate":
        reader = spark.readStream.format("rate").options(**options)
        df = reader.load()
        rate_cols = [("timestamp", "timestamp"), ("value", "bigint")]
        if len(typed) > 2:
            raise SqlwinError.at(stream.node, "USING rate gives two columns (a TIMESTAMP and a BIGINT); "
                                              f"declare at most two, got {len(typed)}")
        exprs = [f"CAST(`{src}` AS {c.type}) AS `{c.name}`" for (src, _), c in zip(rate_cols, typed, strict=False)]
        return df.selectExpr(*exprs)
    if stream.format not in FILE_FORMATS:
        raise SqlwinError.at(stream.node, f"USING {stream.format}: expected json, csv, parquet or rate")
    if path is None:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name} USING {stream.format} needs "
                                          "OPTIONS (path '<directory>'): new files there are new data")
    if not typed:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name}: declare the columns and their types")
    if stream.format == "csv":
        options.setdefault("header", "true")
    os.makedirs(path, exist_ok=True)  # a stream over a folder that does not exist yet is empty, not an error
    return spark.readStream.format(stream.format).schema(schema_ddl(stream)).options(**options).load(path)


def stream_dataframe(spark: Any, stream: CreateStream, with_proctime: bool = True) -> Any:
    """The stream as queries see it: declared columns, then computed ones. PROCTIME() is Spark's batch
    time here (for the view and the native path); sqlwin's operator sets it to its own micro-batch clock."""
    df = source_dataframe(spark, stream)
    for column in stream.columns:
        if column.expr is None:
            continue
        if column.name == stream.proctime_column:
            if with_proctime:
                df = df.selectExpr("*", f"current_timestamp() AS `{column.name}`")
        else:
            df = df.selectExpr("*", f"{column.expr.sql(dialect='spark')} AS `{column.name}`")
    return df
