"""Exactly-once sinks: each micro-batch's output goes to its own folder ``micro_batch=<n>``, in any file format.

Spark re-runs an unfinished micro-batch after a crash with the same batch id and the same input, and
sqlwin's operator recomputes the same output from the same committed state; writing a batch replaces
its folder, so a batch written twice is still there once. Readers see the folders as a table with a
``micro_batch`` column (Spark's partition discovery), which is also the pane log's ``micro_batch``.

Formats: Spark's own writer and reader, so any file format the session has: parquet (the default), json, orc,
csv (with a header line; read back with the sink's schema, never inferred), and any other file source Spark
resolves (``DataSource.lookupDataSource`` in the JVM, e.g. ``xml``, or ``avro`` with spark-avro). ``memory``
keeps Spark's name for a table of this process, stored as parquet files. A name Spark has no source for, or
one that is no file format, is a ``SqlwinError`` at CREATE STREAMING TABLE; a column type the format cannot
hold (an array in csv) one at its start. The format is recorded in ``_sqlwin_sink/sink.json`` when the sink is
made, so INSERT INTO and a restart continue in it.

A micro-batch with no row leaves no folder: the write counts its rows as it writes them (a pyspark
``Observation`` on the written DataFrame: the same Spark job, whatever the format) and removes the folder when
the count is 0.

Compaction (``sqlwin.streaming.compaction``, on by default for streaming tables): the committed micro-batches'
folders are merged into few files listed by a manifest; the sink's view is those files plus the folders the
newest manifest does not cover.
"""

from __future__ import annotations

from typing import Any

from sqlwin.diagnostics import read_failure
from sqlwin.errors import SqlwinError
from sqlwin.streaming import storage, tableviews
from sqlwin.streaming.compaction import META, CompactionPolicy, Compactor, SinkLog, batch_numbers
from sqlwin.streaming.connect import is_connect
from sqlwin.streaming.stopping import CatalogGate

FILE_FORMATS = ("parquet", "json", "orc", "csv")  # tested; any other file source Spark resolves works too
# written and read with each format (json: a column null in every row of a file is still in it, for the catalog view)
_OPTIONS = {"csv": {"header": "true"}, "json": {"ignoreNullFields": "false"}}


def sink_format(spark: Any, fmt: str, table: str) -> str:
    """``USING fmt`` of streaming table ``table``, checked: memory, a known file format, or a file source Spark
    resolves (asked of the JVM where there is one; over Spark Connect, of the server by analysing a read)."""
    name = fmt.lower()
    if name == "memory" or name in FILE_FORMATS:
        return name
    jvm = None if is_connect(spark) else spark.sparkContext._jvm
    if jvm is not None:
        _check_in_jvm(spark, jvm, name, table)
    else:
        _check_on_server(spark, name, table)
    return name


def _check_in_jvm(spark: Any, jvm: Any, name: str, table: str) -> None:
    try:
        source = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            name, spark._jsparkSession.sessionState().conf())
    except Exception as err:  # py4j's error, or pyspark's AnalysisException (avro without spark-avro)
        raise SqlwinError(f"CREATE STREAMING TABLE {table} USING {name}: Spark has no data source {name} "
                          f"({_java_message(err)})") from None
    if not _file_source(jvm, source):
        raise SqlwinError(f"CREATE STREAMING TABLE {table} USING {name}: Spark's {name} source "
                          f"({source.getName()}) is not a file format; a streaming table's sink writes each "
                          "micro-batch's files to a folder and reads them back: parquet, json, orc, csv, or "
                          "another file format")


def _check_on_server(spark: Any, name: str, table: str) -> None:
    """No JVM here: the server resolves the name when it analyses a read of it (no job runs)."""
    try:
        spark.read.format(name).schema("x int").load("/__sqlwin_no_such_folder__").schema  # noqa: B018
    except Exception as err:
        text = str(err)
        if "DATA_SOURCE_NOT_FOUND" in text or "Failed to find" in text:
            raise SqlwinError(f"CREATE STREAMING TABLE {table} USING {name}: Spark has no data source {name} "
                              f"({read_failure(text).message})") from None


def _java_message(err: Any) -> str:
    java = getattr(err, "java_exception", None)
    text = str(java.getMessage() or java.toString()) if java is not None else str(err)
    return read_failure(text).message if text.strip() else type(err).__name__


def _file_source(jvm: Any, source: Any) -> bool:
    kinds = ("org.apache.spark.sql.execution.datasources.FileFormat",
             "org.apache.spark.sql.execution.datasources.v2.FileDataSourceV2")
    return any(jvm.java.lang.Class.forName(kind).isAssignableFrom(source) for kind in kinds)


def _unsupported_columns(fmt: str, schema: Any) -> list[str]:
    """Columns of ``schema`` whose type the file format cannot write (Spark's ``FileFormat.supportDataType``),
    asked of this process's JVM; none known without one."""
    from pyspark import SparkContext

    context = SparkContext._active_spark_context
    if context is None or fmt in ("parquet", "orc"):
        return []
    jvm = context._jvm
    try:
        source = jvm.org.apache.spark.sql.execution.datasources.DataSource.lookupDataSource(
            fmt, jvm.org.apache.spark.sql.internal.SQLConf.get())
        v2 = jvm.java.lang.Class.forName("org.apache.spark.sql.execution.datasources.v2.FileDataSourceV2")
        file_format = (source.newInstance().fallbackFileFormat() if v2.isAssignableFrom(source) else source) \
            .newInstance()
        data_type = jvm.org.apache.spark.sql.types.DataType
        return [f"{f.name} {f.dataType.simpleString()}" for f in schema.fields
                if not file_format.supportDataType(data_type.fromJson(f.dataType.json()))]
    except Exception:  # not a FileFormat we can ask: Spark's writer decides
        return []


def windows_of(bounds: tuple[str, str]) -> Any:
    """The aggregate of the distinct windows (start, end in microseconds) of rows whose bounds are ``bounds``."""
    from pyspark.sql import functions as F

    return F.collect_set(F.array(*(F.unix_micros(F.col(b)) for b in bounds)))


class BatchSink:
    """A table of per-micro-batch folders under ``path``, shown to the session as temp view ``name``.

    ``fmt``: the file format (``sink_format``'s result), or None for the one recorded in the folder (else
    parquet). ``compaction``: the table's policy; None (replay's scratch sinks) never compacts. Readers always
    follow the folder's manifests, also when this run does not compact. ``options``: the format's own options
    (Spark's: ``compression``, csv's ``sep``, xml's ``rowTag``), given to its writer and its reader. ``shown``:
    whether ``register`` shows it as a view; False for the sinks nobody reads by name (a replay's, whose panes
    are read once at its end, and a staged query's inner stages, read by folder): listing the folder and
    replacing the view after every micro-batch cost each replayed micro-batch Spark work for nothing."""

    def __init__(self, name: str, path: str, fmt: str | None = None, compaction: CompactionPolicy | None = None,
                 options: dict[str, str] | None = None, shown: bool = True):
        self.name = name
        self.shown = shown
        self.path = storage.qualify(path)  # any URI, kept as given (sqlwin.streaming.storage)
        storage.makedirs(self.path)
        self.format = self._settle_format(fmt)
        self.options = {**_OPTIONS.get(self.format, {}), **(options or {})}  # Spark's, for writer and reader
        self.schema: Any = None
        self.log = SinkLog(self.path)
        self.compactor = Compactor(self, compaction) if compaction is not None and compaction.enabled else None
        self.writes_here = False  # this process writes the sink (its disk is the sink's: see ``read``)
        # a streaming table's output: a view of the catalog (qualified name, what it is), not a temp view
        self.catalog_view: tuple[str, tableviews.Entry] | None = None
        self._view_sql: str | None = None  # the definition last given to the catalog
        self.stop_gate = CatalogGate()  # see sqlwin.streaming.stopping; a table's sinks share one
        self._whole: set[int] = set()  # micro-batch folders seen whole (a write or a clear forgets its own)
        # the TIMESTAMP columns of a window's bounds, whose windows each write also finds, with its row count: a
        # window join reads its sides' panes by them (``written``: this process's writes, by micro-batch)
        self.window_bounds: tuple[str, str] | None = None
        self.written: dict[int, tuple[int, list[tuple[int, int]]]] = {}

    def __getstate__(self) -> dict:
        return {**self.__dict__, "writes_here": False}  # pickled to a Spark Connect server: it writes there

    def _settle_format(self, fmt: str | None) -> str:
        """``fmt`` (``memory``: parquet files), recorded with the sink; None: the recorded one, else parquet.
        A format other than the recorded one would mix formats in one folder: an error."""
        wanted = "parquet" if fmt in (None, "memory") else fmt
        record = storage.join(self.path, META, "sink.json")
        recorded = (storage.read_json(record) or {}).get("format")
        if recorded is None:
            storage.write_json(record, {"format": wanted})
            return wanted
        if fmt is not None and recorded != wanted:
            raise SqlwinError(f"the sink {self.name} at {self.path} holds {recorded} files written before: continue "
                              f"it USING {recorded}, or give the table another path")
        return recorded

    def batch_path(self, batch: int) -> str:
        return storage.join(self.path, f"micro_batch={batch}")

    def writer(self, df: Any) -> Any:
        return df.write.format(self.format).options(**self.options).mode("overwrite")

    def reader(self, spark: Any) -> Any:
        return spark.read.format(self.format).options(**self.options).schema(self.schema)

    def write(self, df: Any, batch: int) -> None:
        """Micro-batch ``batch``'s rows, replacing its folder; none: no folder. Then compact, if due."""
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        self.writes_here = True
        self._whole.discard(batch)
        target = self.batch_path(batch)
        observation = Observation()  # counted by the writing job itself: no second job, any format
        measures = [F.count(F.lit(1)).alias("rows")]
        if self.window_bounds is not None:
            measures.append(windows_of(self.window_bounds).alias("windows"))
        self.writer(df.observe(observation, *measures)).save(target)
        measured = observation.get
        if self.window_bounds is not None:
            self.written[batch] = (int(measured["rows"]), sorted(tuple(w) for w in measured["windows"]))
        if int(measured["rows"]) == 0:  # most no-data micro-batches of the native path emit nothing
            self.clear(batch)
        elif self.compactor is not None:
            self.compactor.wrote(batch)
        if self.compactor is not None:
            self.compactor.after_write(df.sparkSession, batch)

    def clear(self, batch: int) -> None:
        """Remove a batch's folder left by an attempt that crashed (the retry may write nothing)."""
        self.writes_here = True
        self._whole.discard(batch)
        storage.delete(self.batch_path(batch))
        if self.compactor is not None:
            self.compactor.cleared(batch)

    def set_schema(self, schema: Any) -> None:
        from pyspark.sql.types import IntegerType, StructField, StructType

        fields = [f for f in schema.fields if f.name != "micro_batch"]
        self.schema = StructType([*fields, StructField("micro_batch", IntegerType(), True)])
        unsupported = _unsupported_columns(self.format, self.schema)
        if unsupported:
            raise SqlwinError(f"the sink {self.name} is {self.format}, which cannot hold column "
                              f"{', '.join(unsupported)}: choose another format (USING parquet, orc, json)")

    def register(self, spark: Any) -> None:
        """(Re)define the view: a fresh file listing, so it shows every committed batch. A streaming table's
        output is a view of the catalog, replaced only when the files to read changed
        (``sqlwin.streaming.tableviews``); a replay's, a temp view."""
        if self.schema is None or not self.shown:
            return
        if self.catalog_view is None:
            self.read(spark).createOrReplaceTempView(self.name)
            return
        view, entry = self.catalog_view
        manifest = self.log.newest()
        folders, compacted = tableviews.listing(self.path, manifest, self.log.compacted_path, self._whole)
        sql = tableviews.view_query(self.format, self.options, self.schema, self.path, folders, compacted)
        if sql != self._view_sql:
            with self.stop_gate.passage(spark):
                tableviews.define(spark, view, entry, sql, first=self._view_sql is None)
            self._view_sql = sql

    def read(self, spark: Any) -> Any:
        """The sink's rows: the newest manifest's compacted files and the folders above its ``through``, listed
        by name (the folders compaction superseded, kept a while for older readers, are not even listed)."""
        from pyspark.sql import functions as F

        # a Spark Connect client may not see the server's disk: Spark reads the manifests and lists the folders
        remote = is_connect(spark) and not self.writes_here
        manifest = self.log.newest_through_spark(spark) if remote else self.log.newest()
        if manifest is None:
            return self.reader(spark).load(self.path)
        parts = [self.reader(spark).load([self.log.compacted_path(f.name) for f in manifest.files])] \
            if manifest.files else []
        if remote:
            parts.append(self.reader(spark).load(self.path).where(F.col("micro_batch") > manifest.through))
        else:
            folders = [self.batch_path(m) for m in batch_numbers(self.path) if m > manifest.through]
            if folders:
                parts.append(self.reader(spark).option("basePath", self.path).load(folders))
        if not parts:
            return spark.createDataFrame([], self.schema)
        rows = parts[0]
        for part in parts[1:]:
            rows = rows.unionByName(part)
        return rows


class ReplaySink(BatchSink):
    """A stepped replay's output (its panes, its late rows): each micro-batch's rows kept in Spark's block
    manager (``localCheckpoint``: memory, spilling to disk) instead of a folder of files listed and read back at
    the end. A replay is a batch job that restores nothing and reads its output once; a file write and its commit
    cost a micro-batch ~100 ms more than the checkpoint (measured: a stepped replay of 6 micro-batches, 5.7 s ->
    4.3 s). Every ``MERGE`` micro-batches are checkpointed again as one part, so the output is a union of at most
    ``2 * MERGE`` parts however many micro-batches a replay has (a union of 500 took Spark 20 s to plan, of 2000
    it failed). Its folder stays a scratch folder's (the format's record)."""

    MERGE = 32

    def __init__(self, name: str, path: str):
        super().__init__(name, path, shown=False)
        self.parts: dict[int, Any] = {}  # the latest micro-batches' rows, each with its ``micro_batch``
        self.merged: list[Any] = []  # earlier micro-batches', ``MERGE`` (or ``MERGE`` merged parts) in each

    def write(self, df: Any, batch: int) -> None:
        from pyspark.sql import functions as F

        if len(self.parts) >= self.MERGE:  # the micro-batches before this one, which no clear() touches again
            self.merged.append(union_of(df.sparkSession, list(self.parts.values())))
            self.parts.clear()
            if len(self.merged) >= self.MERGE:
                self.merged = [union_of(df.sparkSession, self.merged)]
        self.parts[batch] = df.withColumn("micro_batch", F.lit(batch).cast("int")).localCheckpoint()

    def clear(self, batch: int) -> None:
        self.parts.pop(batch, None)

    def read(self, spark: Any) -> Any:
        """Every micro-batch's rows with its number (``micro_batch``, as the files' folders give it), as the
        schema says."""
        from pyspark.sql import functions as F

        frames = [*self.merged, *self.parts.values()]
        if not frames:
            return spark.createDataFrame([], self.schema)
        return union_of(spark, frames).select(*[F.col(f"`{f.name}`").cast(f.dataType) for f in self.schema.fields])


def union_of(spark: Any, parts: list[Any]) -> Any:
    """The union of micro-batches' results, each computed (checkpointed) on its own, checkpointed. Spark 4.3
    infers a union's constraints from its children's, and fails ("key not found") on a part's constraint over
    a column the query selects twice (``v AS x, v``) or a window function's output: the parts are data, nothing
    to infer."""
    result = parts[0]
    for part in parts[1:]:
        result = result.unionByName(part)
    conf = "spark.sql.constraintPropagation.enabled"
    before = spark.conf.get(conf, "true")
    spark.conf.set(conf, "false")
    try:
        return result.localCheckpoint()
    finally:
        spark.conf.set(conf, before)
