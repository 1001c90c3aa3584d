"""The streaming columns of the suite: the same bids as a stream of files, run three ways (and on Apache Flink:
``flink_stream``), checked against one independent expectation.

- ``sqlwin-stream``: ``CREATE STREAM`` over a folder of parquet files (``maxFilesPerTrigger 1``) and
  ``CREATE STREAMING TABLE ... AS <the query>``; the files are dropped in one at a time, each processed with
  the no-data micro-batch it causes before the next (``bench.streaming``'s ``Workload`` and ``settle``), then
  a one-row file far in the future moves the watermark past every window.
- ``native-stream``: the hand-written Structured Streaming job of ``native_stream`` over the same files, fed
  the same way.
- ``replay``: ``CREATE STREAM ... FROM TABLE bids ARRIVAL ORDER BY seq MICRO BATCH BY seq DIV <file>``, the
  same micro-batches replayed as a batch job (compared with the batch ``sqlwin`` engine).

A stream's result is its *final panes*: with the default emission, every ON_TIME pane; with early and late
firings (accumulating), the last pane of each window and key. They must equal ``expected``: DuckDB (through
sqlwin's DuckDB backend) running the query over the (row, window) pairs that GRAMMAR 4 keeps, where the
watermark in force for the rows of file ``f`` is the largest ``date_time`` of the files before ``f`` minus the
delay: a pair is kept when ``window_end + lateness > W``, a SESSION row when ``ts + gap + lateness > W``.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.nexmark.engines import Context, DuckDB, Engine

if TYPE_CHECKING:
    from bench.nexmark.suite import Query

DELAY_S = 5  # the streams' watermark delay: above the generator's disorder (4 s), so only late bids are late
EXPECTED = "expected"
BIDS_COLUMNS = ("auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, url STRING, date_time TIMESTAMP, "
                "seq BIGINT")
PANE_COLUMNS = ("pane_index", "pane_timing", "is_final", "micro_batch")
_runs = itertools.count()


# -- the input: the bids in arrival order, one file per micro-batch ----------------------------------------
@dataclass
class Feed:
    """The bids cut into files of ``events`` events (file ``f`` holds ``seq DIV events = f``), and the flush
    file: one bid a day after the last, on a minute boundary, whose windows never close (it is in no result)."""

    folder: Path
    events: int
    files: list[Path]
    flush: Path
    flush_time: pd.Timestamp  # the flush bid's date_time (UTC)

    @classmethod
    def build(cls, root: Path, events: int) -> Feed:
        """Written once beside the data set (``root``), reused while it is."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from bench.nexmark.generator import SCHEMAS

        folder = root / f"bids_feed_{events}"
        marker = folder / "feed.json"
        if not marker.exists():
            shutil.rmtree(folder, ignore_errors=True)
            (folder / "files").mkdir(parents=True)
            pending: list[pa.Table] = []
            current, last_seq, last_ts = None, -1, None
            for part in sorted((root / "bids").glob("*.parquet")):  # chunks in arrival order, rows in seq order
                table = pq.read_table(part)
                which = pc.divide(table["seq"], events).to_numpy()
                for f in sorted(set(which.tolist())):
                    piece = table.filter(pa.array(which == f))
                    if current is not None and f != current:
                        cls._write(folder, current, pending)
                        pending = []
                    current = f
                    pending.append(piece)
                last_seq = max(last_seq, pc.max(table["seq"]).as_py())
                top = pc.max(table["date_time"]).as_py()
                last_ts = top if last_ts is None else max(last_ts, top)
            cls._write(folder, current, pending)
            flush_ts = (pd.Timestamp(last_ts).ceil("min") + pd.Timedelta(days=1)).to_pydatetime()
            flush = pa.table({"auction": [0], "bidder": [0], "price": [0], "channel": ["flush"], "url": [""],
                              "date_time": pa.array([flush_ts], SCHEMAS["bids"].field("date_time").type),
                              "seq": [last_seq + 1]}, schema=SCHEMAS["bids"])
            pq.write_table(flush, folder / "flush.parquet")
            marker.write_text(json.dumps({"events": events, "flush_time": flush_ts.isoformat()}))
        flush_time = pd.Timestamp(json.loads(marker.read_text())["flush_time"])
        return cls(folder, events, sorted((folder / "files").glob("*.parquet")), folder / "flush.parquet",
                   flush_time.tz_convert("UTC") if flush_time.tzinfo else flush_time.tz_localize("UTC"))

    @staticmethod
    def _write(folder: Path, index: int, pieces: list) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.concat_tables(pieces), folder / "files" / f"part-{index:05d}.parquet")

    def workload(self, scratch: Path) -> Any:
        """``bench.streaming``'s feeding (hard links, one file at a time) over these files."""
        from bench.streaming import Workload

        return Workload(scratch, self.files, self.flush, rows=0)


def feed_of(ctx: Context) -> Feed:
    if "feed" not in ctx.cache:
        ctx.cache["feed"] = Feed.build(ctx.root, ctx.feed_events)
    return ctx.cache["feed"]


def over(text: str, table: str, name: str) -> str:
    """The query with ``table`` read from ``name`` instead (a stream, or a view)."""
    from sqlglot import exp

    from sqlwin import dialect

    node = dialect.parse_one(text)
    for t in node.find_all(exp.Table):
        if t.name.lower() == table:
            t.set("this", exp.to_identifier(name))
    return dialect.generate(node)


def final_panes(panes: Any, query: Query, order: tuple[str, ...] = ("micro_batch", "pane_index")) -> pd.DataFrame:
    """The result of a stream: each window's last pane (per ``final_keys``, else every pane), without pane columns."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    keys = query.stream.final_keys if query.stream else ()
    if keys:
        last = Window.partitionBy(*keys).orderBy(*[F.desc(c) for c in order])
        panes = panes.withColumn("__last", F.row_number().over(last)).where("__last = 1").drop("__last")
    return panes.drop(*PANE_COLUMNS, "__batch").toPandas()


# -- the expectation ------------------------------------------------------------------------------------------
class InTime(DuckDB):
    """The batch query over the (row, window) pairs a stream keeps (GRAMMAR 4), on DuckDB: the streaming
    engines' reference, not timed."""

    name = EXPECTED
    mode = "streaming"
    timed = False

    def _sql(self, query: Query, ctx: Context) -> str:
        from sqlglot import exp

        import sqlwin
        from sqlwin import dialect
        from sqlwin.plan.windows import WindowKind
        from sqlwin.planner import plan_statement

        self._watermarks(ctx)
        node = dialect.parse_one(query.sql)
        plan = plan_statement(node, None)
        spec = plan.windows[0]
        session = spec.kind is WindowKind.SESSION
        view = f"{query.name}__in_time"
        keep = f"WHERE __cut IS NULL OR {spec.time_col} + to_microseconds({spec.gap}) > __cut" if session else ""
        ctx.duck.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM (SELECT *, __wm - to_microseconds("
                         f"{plan.lateness.allowed}) AS __cut FROM bids__in_force) {keep}")
        if not session:  # a (row, window) pair counts while W < window_end + lateness
            spec.node.find_ancestor(exp.Select).where("__cut IS NULL OR window_end > __cut", dialect="sqlwin",
                                                      copy=False)
        for table in node.find_all(exp.Table):
            if table.name.lower() == "bids":
                table.set("this", exp.to_identifier(view))
        return sqlwin.rewrite(dialect.generate(node), target="duckdb", catalog=ctx.duck)

    @staticmethod
    def _watermarks(ctx: Context) -> None:
        """``bids__in_force``: the bids with ``__wm``, the watermark in force for their file (NULL: none yet)."""
        if ctx.cache.get("in_force") == ctx.feed_events:
            return
        n = ctx.feed_events
        ctx.duck.execute(f"""CREATE OR REPLACE VIEW bids__in_force AS
            WITH files AS (SELECT seq // {n} AS f, MAX(date_time) AS top FROM bids GROUP BY 1),
                 marks AS (SELECT f, MAX(top) OVER (ORDER BY f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                                     - INTERVAL {DELAY_S} SECOND AS wm FROM files)
            SELECT b.*, marks.wm AS __wm FROM bids b JOIN marks ON b.seq // {n} = marks.f""")
        ctx.cache["in_force"] = n


# -- the engines ---------------------------------------------------------------------------------------------
class StreamEngine(Engine):
    """Each run gets a fresh input folder and checkpoint (removed after it); ``run`` times the whole stream:
    start, every file, the flush."""

    mode = "streaming"
    reference = EXPECTED

    def run(self, query: Query, ctx: Context) -> None:
        self._once(query, ctx, keep=False)

    def result(self, query: Query, ctx: Context) -> pd.DataFrame:
        return self._once(query, ctx, keep=True)

    def _once(self, query: Query, ctx: Context, keep: bool) -> pd.DataFrame | None:
        work = feed_of(ctx).workload(ctx.root / "stream_runs")
        tag = f"{self.name.replace('-', '_')}_{os.getpid()}_{next(_runs)}"  # unique beside an interrupted run's
        folder = work.fresh_input(tag)
        try:
            return self.stream(query, ctx, work, folder, tag, keep)
        finally:
            shutil.rmtree(folder.parent, ignore_errors=True)

    def stream(self, query: Query, ctx: Context, work: Any, folder: Path, tag: str, keep: bool) -> pd.DataFrame | None:
        raise NotImplementedError


class SqlwinStream(StreamEngine):
    name = "sqlwin-stream"

    def stream(self, query: Query, ctx: Context, work: Any, folder: Path, tag: str, keep: bool) -> pd.DataFrame | None:
        import sqlwin
        from bench.streaming import settle
        from sqlwin.streaming import catalog

        spark = ctx.spark
        source, out = f"nx_bids_{tag}", f"nx_out_{tag}"
        sqlwin.sql(spark, f"CREATE STREAM {source} ({BIDS_COLUMNS}, WATERMARK FOR date_time AS date_time - "
                          f"INTERVAL '{DELAY_S}' SECONDS) USING parquet OPTIONS (path '{folder}', "
                          "maxFilesPerTrigger '1')")
        try:
            sqlwin.sql(spark, f"CREATE STREAMING TABLE {out} OPTIONS (checkpoint '{folder.parent / 'table'}') AS "
                              f"{over(query.sql, 'bids', source)}")
            table = catalog.find_table(out)
            try:
                process = functools.partial(settle, table.query)
                work.feed(folder, None, process)
                work.flush_all(folder, process)
            finally:
                table.stop()
                catalog.remove_table(out)
            return final_panes(spark.table(out), query) if keep else None
        finally:
            spark.catalog.dropTempView(source)
            spark.catalog.dropTempView(out)
            catalog.drop_stream(spark, source)


class NativeStream(StreamEngine):
    """The hand-written job: Spark's parquet file sink, or ``foreachBatch`` (the batch persisted, the per-batch
    step applied, appended to parquet with its batch id) when the query has a step around its aggregation."""

    name = "native-stream"

    def stream(self, query: Query, ctx: Context, work: Any, folder: Path, tag: str, keep: bool) -> pd.DataFrame | None:
        from pyspark.sql import functions as F

        from bench.streaming import settle

        spark = ctx.spark
        out, checkpoint = folder.parent / "out", folder.parent / "checkpoint"
        bids = spark.readStream.schema(BIDS_COLUMNS).option("maxFilesPerTrigger", 1).parquet(str(folder))
        job = query.stream.native(bids, DELAY_S)
        writer = job.frame.writeStream.outputMode(job.output_mode).option("checkpointLocation", str(checkpoint))
        if job.per_batch is None:
            writer = writer.format("parquet").option("path", str(out))
        else:
            step = job.per_batch

            def write(batch: Any, batch_id: int) -> None:
                batch.persist()
                try:
                    step(batch).withColumn("__batch", F.lit(batch_id)).write.mode("append").parquet(str(out))
                finally:
                    batch.unpersist()

            writer = writer.foreachBatch(write)
        running = writer.start()
        try:
            process = functools.partial(settle, running)
            work.feed(folder, None, process)
            work.flush_all(folder, process)
        finally:
            running.stop()
        if not keep:
            return None
        rows = spark.read.parquet(str(out))
        if job.output_mode == "update":  # it also emits windows still open after the flush: not results yet
            closed = feed_of(ctx).flush_time - pd.Timedelta(seconds=job.delay_s)
            rows = rows.where(F.col("window_end") <= F.lit(closed.to_pydatetime()))
        return final_panes(rows, query, order=("__batch",))


class Replay(StreamEngine):
    """The same micro-batches replayed from the table: compared with the batch query (``sqlwin``)."""

    name = "replay"

    def stream(self, query: Query, ctx: Context, work: Any, folder: Path, tag: str, keep: bool) -> pd.DataFrame | None:
        import sqlwin
        from sqlwin.streaming import catalog

        spark = ctx.spark
        source = f"nx_replay_{tag}"
        sqlwin.sql(spark, f"CREATE STREAM {source} FROM TABLE bids ARRIVAL ORDER BY seq MICRO BATCH BY seq DIV "
                          f"{ctx.feed_events} WATERMARK FOR date_time AS date_time - INTERVAL '{DELAY_S}' SECONDS")
        try:
            panes = sqlwin.sql(spark, over(query.sql, "bids", source))
            if keep:
                return final_panes(panes, query)
            panes.write.format("noop").mode("overwrite").save()
            return None
        finally:
            spark.catalog.dropTempView(source)
            catalog.drop_stream(spark, source)


ENGINES: dict[str, Engine] = {e.name: e for e in (SqlwinStream(), NativeStream(), Replay(), InTime())}
