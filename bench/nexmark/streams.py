"""The streaming columns of the suite: the same persons, auctions and bids as streams of files, run three ways
(and on Apache Flink: ``flink_stream``), checked against one independent expectation.

- ``sqlwin-stream``: a ``CREATE STREAM`` per table the query reads, each over a folder of parquet files
  (``maxFilesPerTrigger 1``), and ``CREATE STREAMING TABLE ... AS <the query's streaming text>``; micro-batch
  ``k``'s files (every table's events of ``seq DIV <file> = k``) are dropped in together, each step processed
  with the no-data micro-batches it causes before the next (``bench.streaming``'s ``settle``), then a one-row
  file per stream far in the future moves every stream's watermark past every window.
- ``native-stream``: the hand-written Structured Streaming job of ``native_stream`` over the same files, fed
  the same way.
- ``replay``: ``CREATE STREAM ... FROM TABLE <t> ARRIVAL ORDER BY seq MICRO BATCH BY seq DIV <file>`` per table,
  the same micro-batches replayed as a batch job (two streams replay side by side).

A stream's result is its *final panes*: with the default emission, every ON_TIME pane; with early and late
firings (accumulating), the last pane of each window and key. They must equal ``expected``: DuckDB (through
sqlwin's DuckDB backend) running the query's streaming text over the (row, window) pairs that GRAMMAR 4 keeps,
where the watermark in force for the rows of a stream's file ``f`` is the largest ``date_time`` of that
stream's files before ``f`` minus the delay (each stream its own: a window join's sides drop their own late
rows): a pair is kept when ``window_end + lateness > W``, a SESSION row when ``ts + gap + lateness > W``, and a
count-window row when ``ts > W`` (README, "Count windows ... in streaming": a row at or behind the watermark in
force when it arrives is dropped, since numbering it would renumber every later window; lateness must be 0).
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.nexmark.engines import Context, DuckDB, Engine

if TYPE_CHECKING:
    from bench.nexmark.suite import Query

DELAY_S = 5  # the streams' watermark delay: above the generator's disorder (4 s), so only late bids are late
EXPECTED = "expected"
STREAM_TABLES = ("bids", "persons", "auctions")  # every table a stream is fed of (``engines.TABLES``)
PANE_COLUMNS = ("pane_index", "pane_timing", "is_final", "micro_batch")
_runs = itertools.count()


def columns_ddl(table: str) -> str:
    """A table's columns as Spark DDL (``generator.SCHEMAS``)."""
    import pyarrow as pa

    from bench.nexmark.generator import SCHEMAS

    def ddl(t: pa.DataType) -> str:
        if pa.types.is_timestamp(t):
            return "TIMESTAMP"
        return {pa.int64(): "BIGINT", pa.string(): "STRING"}[t]

    return ", ".join(f"{f.name} {ddl(f.type)}" for f in SCHEMAS[table])


BIDS_COLUMNS = columns_ddl("bids")


def tables_of(text: str) -> list[str]:
    """The stream tables a query reads, in ``STREAM_TABLES`` order."""
    from sqlglot import exp

    from sqlwin import dialect

    read = {t.name.lower() for t in dialect.parse_one(text).find_all(exp.Table)}
    return [t for t in STREAM_TABLES if t in read]


# -- the input: every table in arrival order, one file per micro-batch ---------------------------------------
@dataclass
class Feed:
    """The tables cut into files of ``events`` events: file ``k`` of every table holds its events of
    ``seq DIV events = k`` (micro-batch ``k`` is the same range of arrival for every stream), and one flush file
    per table: one row a day after the last event, on a minute boundary, whose windows never close (it is in no
    result: the flush bid's auction, person and seller are ids no other row has)."""

    folder: Path
    events: int
    files: dict[str, dict[int, Path]]  # table -> micro-batch -> file (a table may have no rows in a micro-batch)
    flush: dict[str, Path]
    flush_time: pd.Timestamp  # the flush rows' date_time (UTC)

    @property
    def batches(self) -> list[int]:
        return sorted({k for files in self.files.values() for k in files})

    @classmethod
    def build(cls, root: Path, events: int) -> Feed:
        """Written once beside the data set (``root``), reused while it is."""
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.parquet as pq

        from bench.nexmark.generator import SCHEMAS

        folder = root / f"feed_{events}"
        marker = folder / "feed.json"
        if not marker.exists():
            shutil.rmtree(folder, ignore_errors=True)
            last_seq, last_ts = -1, None
            for table in STREAM_TABLES:
                (folder / table).mkdir(parents=True)
                pending: list[pa.Table] = []
                current = None
                for part in sorted((root / table).glob("*.parquet")):  # chunks in arrival order, rows in seq order
                    data = pq.read_table(part)
                    which = pc.divide(data["seq"], events).to_numpy()
                    for f in sorted(set(which.tolist())):
                        piece = data.filter(pa.array(which == f))
                        if current is not None and f != current:
                            cls._write(folder / table, current, pending)
                            pending = []
                        current = f
                        pending.append(piece)
                    last_seq = max(last_seq, pc.max(data["seq"]).as_py())
                    top = pc.max(data["date_time"]).as_py()
                    last_ts = top if last_ts is None else max(last_ts, top)
                if current is not None:
                    cls._write(folder / table, current, pending)
            flush_ts = (pd.Timestamp(last_ts).ceil("min") + pd.Timedelta(days=1)).to_pydatetime()
            when = pa.array([flush_ts], SCHEMAS["bids"].field("date_time").type)
            flush_rows = {
                "bids": {"auction": [0], "bidder": [0], "price": [0], "channel": ["flush"], "url": [""],
                         "date_time": when, "seq": [last_seq + 1]},
                "persons": {"id": [0], "name": ["flush"], "email_address": [""], "credit_card": [""], "city": [""],
                            "state": [""], "date_time": when, "seq": [last_seq + 2]},
                "auctions": {"id": [0], "item_name": ["flush"], "initial_bid": [0], "reserve": [0], "date_time": when,
                             "expires": when, "seller": [-1], "category": [0], "seq": [last_seq + 3]},
            }
            (folder / "flush").mkdir()
            for table, rows in flush_rows.items():
                pq.write_table(pa.table(rows, schema=SCHEMAS[table]), folder / "flush" / f"{table}.parquet")
            marker.write_text(json.dumps({"events": events, "flush_time": flush_ts.isoformat()}))
        flush_time = pd.Timestamp(json.loads(marker.read_text())["flush_time"])
        files = {t: {int(p.stem.split("-")[1]): p for p in sorted((folder / t).glob("*.parquet"))}
                 for t in STREAM_TABLES}
        return cls(folder, events, files, {t: folder / "flush" / f"{t}.parquet" for t in STREAM_TABLES},
                   flush_time.tz_convert("UTC") if flush_time.tzinfo else flush_time.tz_localize("UTC"))

    @staticmethod
    def _write(folder: Path, index: int, pieces: list) -> None:
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.concat_tables(pieces), folder / f"part-{index:05d}.parquet")

    def feed(self, folders: dict[str, Path], process: Callable[[], None]) -> None:
        """Drop micro-batch ``k``'s file of every stream in (hard links), process, next ``k``; then the flush files.

        One step at a time, as files arriving over time are (``bench.streaming.Workload.feed`` says why)."""
        for k in self.batches:
            for table, folder in folders.items():
                if (path := self.files[table].get(k)) is not None:
                    os.link(path, folder / path.name)
            process()
        for table, folder in folders.items():
            os.link(self.flush[table], folder / "part-99999.parquet")
        process()


def feed_of(ctx: Context) -> Feed:
    if "feed" not in ctx.cache:
        ctx.cache["feed"] = Feed.build(ctx.root, ctx.feed_events)
    return ctx.cache["feed"]


def over(text: str, names: dict[str, str]) -> str:
    """The query with each table of ``names`` read from its name there instead (a stream, or a view)."""
    from sqlglot import exp

    from sqlwin import dialect

    node = dialect.parse_one(text)
    for t in node.find_all(exp.Table):
        if t.name.lower() in names:
            t.set("this", exp.to_identifier(names[t.name.lower()]))
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
    """The batch query (its streaming text) over the (row, window) pairs a stream keeps (GRAMMAR 4), on DuckDB:
    the streaming engines' reference, not timed. Each window TVF reads its own stream's rows with that stream's
    watermark in force, so each side of a window join drops its own late rows."""

    name = EXPECTED
    mode = "streaming"
    timed = False

    def _sql(self, query: Query, ctx: Context) -> str:
        from sqlglot import exp

        import sqlwin
        from sqlwin import dialect
        from sqlwin.plan.windows import WindowKind
        from sqlwin.planner import plan_statement

        text = query.stream_sql
        tables = tables_of(text)
        for table in tables:
            self._watermarks(ctx, table)
        node = dialect.parse_one(text)
        plan = plan_statement(node, None)
        lateness = plan.lateness.allowed
        views: dict[str, str] = {}
        kinds = {spec.relation.node.name.lower(): spec for spec in plan.windows}
        for table in tables:
            spec = kinds[table]
            view = views[table] = f"{query.name}__{table}__in_time"
            if spec.is_count_based:  # a row is kept when it arrives ahead of the watermark: ts > W
                if lateness:
                    raise ValueError(f"{query.name}: count windows take no ALLOWED LATENESS")
                ctx.duck.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * EXCLUDE (__wm) FROM {table}__in_force "
                                 f"WHERE __wm IS NULL OR {spec.time_col} > __wm")
                continue
            keep = (f"WHERE __cut IS NULL OR {spec.time_col} + to_microseconds({spec.gap}) > __cut"
                    if spec.kind is WindowKind.SESSION else "")
            ctx.duck.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM (SELECT *, __wm - to_microseconds("
                             f"{lateness}) AS __cut FROM {table}__in_force) {keep}")
        for spec in plan.windows:
            if spec.kind is WindowKind.SESSION or spec.is_count_based:
                continue
            # a (row, window) pair counts while W < window_end + lateness; the SELECT reading the TVF reads only it
            select = spec.node.find_ancestor(exp.Select)
            reads = [n for n in select.find_all(type(spec.node)) if n.find_ancestor(exp.Select) is select]
            if len(reads) != 1:
                raise ValueError(f"{query.name}: write each window TVF in a SELECT of its own (a subquery)")
            select.where("__cut IS NULL OR window_end > __cut", dialect="sqlwin", copy=False)
        for t in node.find_all(exp.Table):
            if t.name.lower() in views:
                t.set("this", exp.to_identifier(views[t.name.lower()]))
        return sqlwin.rewrite(dialect.generate(node), target="duckdb", catalog=ctx.duck)

    @staticmethod
    def _watermarks(ctx: Context, table: str) -> None:
        """``<table>__in_force``: the rows with ``__wm``, the watermark in force for their file (NULL: none yet):
        the largest ``date_time`` of the same table's earlier files, minus the delay."""
        key = f"in_force_{table}"
        if ctx.cache.get(key) == ctx.feed_events:
            return
        n = ctx.feed_events
        ctx.duck.execute(f"""CREATE OR REPLACE VIEW {table}__in_force AS
            WITH files AS (SELECT seq // {n} AS f, MAX(date_time) AS top FROM {table} GROUP BY 1),
                 marks AS (SELECT f, MAX(top) OVER (ORDER BY f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                                     - INTERVAL {DELAY_S} SECOND AS wm FROM files)
            SELECT t.*, marks.wm AS __wm FROM {table} t JOIN marks ON t.seq // {n} = marks.f""")
        ctx.cache[key] = n


# -- the engines ---------------------------------------------------------------------------------------------
class StreamEngine(Engine):
    """Each run gets fresh input folders (one per stream) and checkpoint (removed after it); ``run`` times the
    whole stream: start, every micro-batch's files, the flush."""

    mode = "streaming"
    reference = EXPECTED

    def run(self, query: Query, ctx: Context) -> None:
        self._once(query, ctx, keep=False)

    def result(self, query: Query, ctx: Context) -> pd.DataFrame:
        return self._once(query, ctx, keep=True)

    def _once(self, query: Query, ctx: Context, keep: bool) -> pd.DataFrame | None:
        tag = f"{self.name.replace('-', '_')}_{os.getpid()}_{next(_runs)}"  # unique beside an interrupted run's
        scratch = ctx.root / "stream_runs" / "runs" / tag
        folders = {t: scratch / "in" / t for t in tables_of(query.stream_sql)}
        for folder in folders.values():
            folder.mkdir(parents=True)
        try:
            return self.stream(query, ctx, folders, tag, keep)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def stream(self, query: Query, ctx: Context, folders: dict[str, Path], tag: str,
               keep: bool) -> pd.DataFrame | None:
        raise NotImplementedError


class SqlwinStream(StreamEngine):
    name = "sqlwin-stream"

    def stream(self, query: Query, ctx: Context, folders: dict[str, Path], tag: str,
               keep: bool) -> pd.DataFrame | None:
        import sqlwin
        from bench.streaming import settle
        from sqlwin.streaming import catalog

        spark = ctx.spark
        sources = {t: f"nx_{t}_{tag}" for t in folders}
        out = f"nx_out_{tag}"
        try:
            for table, source in sources.items():
                sqlwin.sql(spark, f"CREATE STREAM {source} ({columns_ddl(table)}, WATERMARK FOR date_time AS "
                                  f"date_time - INTERVAL '{DELAY_S}' SECONDS) USING parquet OPTIONS (path "
                                  f"'{folders[table]}', maxFilesPerTrigger '1')")
            scratch = next(iter(folders.values())).parent.parent
            sqlwin.sql(spark, f"CREATE STREAMING TABLE {out} OPTIONS (checkpoint '{scratch / 'table'}') AS "
                              f"{over(query.stream_sql, sources)}")
            table = catalog.find_table(out)
            try:
                feed_of(ctx).feed(folders, functools.partial(settle, table.query))
            finally:
                table.stop()
                catalog.remove_table(out)
            return final_panes(spark.table(out), query) if keep else None
        finally:
            spark.catalog.dropTempView(out)
            for source in sources.values():
                spark.catalog.dropTempView(source)
                catalog.drop_stream(spark, source)


class NativeStream(StreamEngine):
    """The hand-written job: Spark's parquet file sink, or ``foreachBatch`` (the batch persisted, the per-batch
    step applied, appended to parquet with its batch id) when the query has a step around its aggregation."""

    name = "native-stream"

    def skip(self, query: Query) -> str | None:
        return query.stream.native_skip if query.stream and query.stream.native is None else None

    def stream(self, query: Query, ctx: Context, folders: dict[str, Path], tag: str,
               keep: bool) -> pd.DataFrame | None:
        from pyspark.sql import functions as F

        from bench.streaming import settle

        spark = ctx.spark
        scratch = next(iter(folders.values())).parent.parent
        out, checkpoint = scratch / "out", scratch / "checkpoint"
        frames = {t: spark.readStream.schema(columns_ddl(t)).option("maxFilesPerTrigger", 1).parquet(str(folder))
                  for t, folder in folders.items()}
        job = query.stream.native(frames, DELAY_S)
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
            feed_of(ctx).feed(folders, functools.partial(settle, running))
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
    """The same micro-batches replayed from the tables (several streams side by side)."""

    name = "replay"

    def stream(self, query: Query, ctx: Context, folders: dict[str, Path], tag: str,
               keep: bool) -> pd.DataFrame | None:
        import sqlwin
        from sqlwin.streaming import catalog

        spark = ctx.spark
        sources = {t: f"nx_replay_{t}_{tag}" for t in folders}
        try:
            for table, source in sources.items():
                sqlwin.sql(spark, f"CREATE STREAM {source} FROM TABLE {table} ARRIVAL ORDER BY seq MICRO BATCH BY "
                                  f"seq DIV {ctx.feed_events} WATERMARK FOR date_time AS date_time - INTERVAL "
                                  f"'{DELAY_S}' SECONDS")
            panes = sqlwin.sql(spark, over(query.stream_sql, sources))
            if keep:
                return final_panes(panes, query)
            panes.write.format("noop").mode("overwrite").save()
            return None
        finally:
            for source in sources.values():
                spark.catalog.dropTempView(source)
                catalog.drop_stream(spark, source)


ENGINES: dict[str, Engine] = {e.name: e for e in (SqlwinStream(), NativeStream(), Replay(), InTime())}
