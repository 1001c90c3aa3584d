"""Where a stream's rows come from: Spark's file and rate sources for ``CREATE STREAM``, and the tick
folder that lets sqlwin ask Spark for a micro-batch without new rows.

Spark runs a micro-batch only when a source has new offsets (or one of its own stateful operators
wants a no-data batch). sqlwin's operator decides lateness and fires windows itself, so it needs the
same no-data batches Spark gives its native aggregation: after a micro-batch that moved the watermark
past a window's timer, and when a processing-time timer or an idle deadline comes. It asks by writing a
one-row file into a tick folder that the query also reads (Spark's own file source, so the ticks' offsets
live in Spark's checkpoint like any source's and a restart replays exactly the batches that ran); a timer
thread of the driver writes the file of a wake-up when its time comes. Tick rows are dropped on arrival.
"""

from __future__ import annotations

import json
import re
import threading
import time
from typing import Any

from sqlwin.diagnostics import is_spark_error
from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import CreateStream
from sqlwin.streaming import storage

TICK_COLUMN = "__sqlwin_tick"
SOURCE_COLUMN = "__sqlwin_source"  # which stream a row came from, when a query reads several
FILE_FORMATS = ("json", "csv", "parquet", "orc", "xml", "avro")  # read with the declared schema
RATE_FORMATS = ("rate", "rate-micro-batch")  # (timestamp, value) taken by position
VALUE_FORMAT = "value.format"  # OPTIONS key: parse the declared columns from the source's value column
VALUE_FORMATS = ("json", "csv")
PARSED_FORMATS = ("json", "csv", "xml")  # text parsed into the declared columns: a ``mode`` decides bad text


def failing_on_malformed(fmt: str, options: dict[str, str]) -> dict[str, str]:
    """``options`` with ``mode`` FAILFAST unless the user gave one, for formats that parse text: a row whose
    text does not fit the declared columns (a truncated line, ``"v": "abc"`` for an INT) fails the table with
    Spark's error, as Flink's json and csv formats fail the job (``ignore-parse-errors`` is false by default),
    where Spark's PERMISSIVE default would silently make the row's values NULL (in no window, in no LATE ROWS
    TO). ``OPTIONS (mode 'PERMISSIVE')`` asks for Spark's behaviour."""
    if fmt in PARSED_FORMATS and not any(k.lower() == "mode" for k in options):
        return {**options, "mode": "FAILFAST"}
    return options


class TickFile:
    """A folder of tick files ``tick-<n>.json``; ``n`` only grows, and a new ``n`` is one more micro-batch.

    Spark deletes tick files once read (``tick_dataframe``), so the highest ``n`` ever written is also kept in
    ``_wanted-<n>.json`` (Spark's file source skips names starting with ``_``), written before the tick itself:
    a new tick's name is then always new to the file source, which ignores a name it has read before."""

    MARK = "_wanted-"

    def __init__(self, path: str):
        self.path = storage.qualify(path)
        storage.makedirs(self.path)
        self._timer: threading.Timer | None = None
        self._lock = threading.Lock()
        self.asked = 0  # ticks written by this object: micro-batches asked for

    def read(self) -> dict:
        return {"wanted": max(self._numbers()[0], default=0)}

    def _numbers(self) -> tuple[list[int], list[int]]:
        """(every tick number on disk, marks included; the marks alone)."""
        names = storage.listdir(self.path)
        marks = [m for m in (numbered(n, self.MARK) for n in names) if m is not None]
        ticks = [t for t in (numbered(n, "tick-") for n in names) if t is not None]
        return [*ticks, *marks], marks

    def _write(self, tick: int) -> None:
        with self._lock:
            numbers, marks = self._numbers()
            if tick <= max(numbers, default=0):
                return
            storage.write_once(storage.join(self.path, f"{self.MARK}{tick}.json"), b"{}")
            for mark in marks:
                storage.delete(storage.join(self.path, f"{self.MARK}{mark}.json"))
            # the file source lists whole files only: written under a hidden name, then renamed
            line = json.dumps({TICK_COLUMN: tick}) + "\n"
            storage.publish(storage.join(self.path, f"tick-{tick}.json"), line.encode())
            self.asked += 1

    def request(self, tick: int, wake_at: int | None = None, wake_tick: int | None = None) -> None:
        """Ask for a micro-batch now (a ``tick`` above the last one), and/or once the wall clock reaches
        ``wake_at`` (epoch microseconds), as tick ``wake_tick``."""
        self._write(tick)
        self.close()
        if wake_at is not None and wake_tick is not None:
            delay = max(0.0, (wake_at - time.time() * 1_000_000) / 1_000_000)
            self._timer = threading.Timer(delay, self._write, args=(wake_tick,))
            self._timer.daemon = True
            self._timer.start()

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def __getstate__(self) -> dict:
        """Pickled to a Spark Connect server (``sqlwin.streaming.connect``): no lock, no timer thread."""
        return {k: v for k, v in self.__dict__.items() if k not in ("_lock", "_timer")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()
        self._timer = None
        storage.makedirs(self.path)  # the folder is on the file system of the process that writes ticks


def numbered(name: str, prefix: str) -> int | None:
    """``n`` of ``<prefix><n>.json``, else None."""
    digits = name[len(prefix):-len(".json")] if name.startswith(prefix) and name.endswith(".json") else ""
    return int(digits) if digits.isdigit() else None


def tick_dataframe(spark: Any, folder: str) -> Any:
    """The tick folder as a stream. Spark deletes a tick file once the micro-batch that read it is committed
    (``cleanSource``), so a stream that runs for hours keeps a handful of tick files, not one per no-data
    micro-batch; a deleted name is never read again (tick numbers only grow, and the file source remembers
    what it read)."""
    return spark.readStream.schema(f"{TICK_COLUMN} bigint").option("cleanSource", "delete").json(folder)


def schema_ddl(stream: CreateStream) -> str:
    """The declared (typed) columns as a Spark DDL schema; computed columns come later."""
    typed = [c for c in stream.columns if c.type is not None]
    return ", ".join(f"`{c.name}` {c.type}" for c in typed)


_VARIABLE = re.compile(r"\$\{(?:spark:|sparkconf:)?([^}:]+)\}")


def expand_conf(spark: Any, options: dict[str, str]) -> dict[str, str]:
    """OPTIONS values with ``${key}`` replaced by the session conf's value (``${sqlwin.file_dir}``: the folder of
    the script ``sqlwin run`` reads), as Spark substitutes variables in the SQL it runs itself; an unset key is
    left as written, as Spark leaves it."""
    def value(match: re.Match[str]) -> str:
        found = spark.conf.get(match.group(1), None)
        return match.group(0) if found is None else str(found)

    return {k: _VARIABLE.sub(value, v) if isinstance(v, str) and "${" in v else v for k, v in options.items()}


def source_dataframe(spark: Any, stream: CreateStream) -> Any:
    """The raw streaming DataFrame of a ``CREATE STREAM`` (declared columns only, no PROCTIME): a file folder
    (json, csv, parquet, ...: new files are new rows), the rate source, or any other Spark streaming source."""
    given = expand_conf(spark, stream.options)
    options = {k: v for k, v in given.items() if k.lower() != "path"}
    path = next((v for k, v in given.items() if k.lower() == "path"), None)
    typed = [c for c in stream.columns if c.type is not None]
    if stream.format in RATE_FORMATS:
        reader = spark.readStream.format(stream.format).options(**options)
        try:  # Spark checks the rate source's options here (rowsPerSecond 'abc': a NumberFormatException)
            df = reader.load()
        except Exception as err:
            if not is_spark_error(err):
                raise
            raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name} USING {stream.format}: "
                                              f"{_first_line(err)}") from None
        rate_cols = [("timestamp", "timestamp"), ("value", "bigint")]
        if len(typed) > 2:
            raise SqlwinError.at(stream.node, f"USING {stream.format} gives two columns (a TIMESTAMP and a "
                                              f"BIGINT); declare at most two, got {len(typed)}")
        exprs = [f"CAST(`{src}` AS {c.type}) AS `{c.name}`" for (src, _), c in zip(rate_cols, typed, strict=False)]
        return df.selectExpr(*exprs)
    if not typed:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name}: declare the columns and their types")
    if stream.format not in FILE_FORMATS:
        return any_source(spark, stream, options, path)
    if path is None:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name} USING {stream.format} needs "
                                          "OPTIONS (path '<directory>'): new files there are new data")
    if stream.format == "csv":
        options.setdefault("header", "true")
    options = failing_on_malformed(stream.format, options)
    check_pattern(stream, path)
    # a relative path is this process's (storage.qualify): Spark would resolve it against the folder its JVM
    # started in, not the one Python works in now (a notebook's %cd, os.chdir), and read another folder
    located = storage.qualify(path)
    if not storage.glob_characters(path):  # a pattern is no folder to make
        storage.makedirs(located)  # a stream over a folder that does not exist yet is empty, not an error
    return spark.readStream.format(stream.format).schema(schema_ddl(stream)).options(**options).load(located)


def check_pattern(stream: CreateStream, path: str) -> None:
    """Spark's file source reads ``path`` as a glob pattern: one with glob characters that also names a folder
    literally (``in[1]``, ``in*``) would not read that folder (the pattern ``in[1]`` is ``in1``) or read more
    than it (``in*``): refused, naming it. A pattern that names no folder is the user's glob, read as Spark reads
    it."""
    found = storage.glob_characters(path)
    if found and storage.exists(storage.qualify(path)):
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name}: its path {path} is a folder with "
                                          f"{' '.join(found)} in its name, which Spark's file source reads as a "
                                          "glob pattern, not as that folder; rename the folder (or give a pattern "
                                          "that names no folder literally)")


def read_files(spark: Any, stream: CreateStream, files: list[str]) -> Any:
    """Some of a file stream's files, read as its file source reads them (declared schema, format, options), with
    its computed columns but PROCTIME (the operator sets that): an aligned stream's admitted files."""
    given = expand_conf(spark, stream.options)
    options = {k: v for k, v in given.items() if k.lower() not in ("path", "maxfilespertrigger")}
    if stream.format == "csv":
        options.setdefault("header", "true")
    options = failing_on_malformed(stream.format, options)
    df = spark.read.format(stream.format).schema(schema_ddl(stream)).options(**options).load(files)
    return with_computed(df, stream, with_proctime=False)


def any_source(spark: Any, stream: CreateStream, options: dict[str, str], path: str | None) -> Any:
    """Any other Spark streaming source (kafka, socket, delta, rate-micro-batch, a Python data source registered
    with ``spark.dataSource.register``), its options passed through. The declared columns are the source's
    columns of those names, cast to the declared types; with ``OPTIONS ('value.format' 'json'|'csv')`` they
    are parsed from the source's ``value`` (Kafka's bytes, a socket's lines) instead, as Flink's ``value.format``.
    A source that wants a schema (a Python data source without one of its own) gets the declared columns."""
    fmt = stream.format
    value_format = options.pop(VALUE_FORMAT, None)
    reader = spark.readStream.format(fmt).options(**options)
    try:
        df = reader.load(path) if path is not None else reader.load()
    except Exception as err:  # some sources need the schema they read with (file-like and Python sources)
        try:
            df = reader.schema(schema_ddl(stream)).load(path) if path is not None else \
                reader.schema(schema_ddl(stream)).load()
        except Exception:
            raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name} USING {fmt}: "
                                              f"{_first_line(err)}") from None
    typed = [c for c in stream.columns if c.type is not None]
    if value_format is not None:
        return _parsed_value(stream, df, value_format.lower())
    have = {f.name.lower(): f.name for f in df.schema.fields}
    missing = [c.name for c in typed if c.name.lower() not in have]
    if missing:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name} USING {fmt}: the source has no column "
                                          f"{', '.join(missing)} (its columns: {', '.join(have.values())}); to "
                                          f"parse the columns from its value, add OPTIONS ('{VALUE_FORMAT}' 'json')")
    return df.selectExpr(*[f"CAST(`{have[c.name.lower()]}` AS {c.type}) AS `{c.name}`" for c in typed])


def _parsed_value(stream: CreateStream, df: Any, value_format: str) -> Any:
    from pyspark.sql import functions as F

    if value_format not in VALUE_FORMATS:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name}: OPTIONS ('{VALUE_FORMAT}' "
                                          f"'{value_format}'): expected {' or '.join(VALUE_FORMATS)}")
    if "value" not in {f.name.lower() for f in df.schema.fields}:
        raise SqlwinError.at(stream.node, f"CREATE STREAM {stream.name} USING {stream.format}: "
                                          f"'{VALUE_FORMAT}' parses the source's value column, and it has none "
                                          f"(its columns: {', '.join(f.name for f in df.schema.fields)})")
    parse = F.from_json if value_format == "json" else F.from_csv
    value = F.col("value").cast("string")
    mode = failing_on_malformed(value_format, {k: v for k, v in stream.options.items() if k.lower() == "mode"})
    parsed = df.select(parse(value, schema_ddl(stream), mode).alias("__sqlwin_value"))
    return parsed.select("__sqlwin_value.*")


def _first_line(err: BaseException) -> str:
    """Spark's message without the JVM's stack (a py4j error over a Java exception pyspark does not convert)."""
    java = getattr(err, "java_exception", None)
    text = str(java.getMessage() or java.toString()) if java is not None else str(err)
    text = text.strip()
    return text.splitlines()[0] if text else type(err).__name__


def stream_dataframe(spark: Any, stream: CreateStream, with_proctime: bool = True) -> Any:
    """The stream as queries see it: declared columns, then computed ones. PROCTIME() is Spark's batch
    time here (for the view and the native path); sqlwin's operator sets it to its own micro-batch clock."""
    return with_computed(source_dataframe(spark, stream), stream, with_proctime)


def with_computed(df: Any, stream: CreateStream, with_proctime: bool) -> Any:
    """The stream's computed columns added to its declared ones."""
    for column in stream.columns:
        if column.expr is None:
            continue
        if column.name == stream.proctime_column:
            if with_proctime:
                df = df.selectExpr("*", f"current_timestamp() AS `{column.name}`")
        else:
            df = df.selectExpr("*", f"{column.expr.sql(dialect='spark')} AS `{column.name}`")
    return df


def without_ticks(batch_df: Any) -> Any:
    """A micro-batch's rows without the tick rows (they only cause the micro-batch)."""
    from pyspark.sql import functions as F

    if TICK_COLUMN not in batch_df.columns:
        return batch_df
    return batch_df.where(F.col(TICK_COLUMN).isNull()).drop(TICK_COLUMN)


def batch_rows(spark: Any, batch_df: Any, batch_id: int) -> Any:
    """The micro-batch's rows without the ticks, or None when it provably has none: a no-data micro-batch,
    which the operator then steps as one (as replay does) instead of running Spark jobs over nothing."""
    return None if only_ticks(spark, batch_id) else without_ticks(batch_df)


def only_ticks(spark: Any, batch_id: int) -> bool:
    """Whether micro-batch ``batch_id`` of the query running in this thread read no row from any stream, known
    without a Spark job: Spark plans a source with no new offsets as an empty ``LocalRelation`` (its other
    sources read files or their own relations), and the micro-batch's plan is the query's ``lastExecution``
    (``foreachBatch`` gets it already planned, as an RDD). Anything unexpected (another Spark, a Spark Connect
    server's worker, another batch's plan) answers False: the micro-batch is then read as a data batch."""
    try:
        query_id = spark.sparkContext.getLocalProperty("sql.streaming.queryId")
        if query_id is None:
            return False
        execution = spark._jsparkSession.streams().get(query_id).streamingQuery().lastExecution()
        if execution.currentBatchId() != batch_id:
            return False
        leaves = execution.logical().collectLeaves()
        for i in range(leaves.size()):
            leaf = leaves.apply(i)
            if leaf.getClass().getSimpleName() == "LocalRelation":
                if not leaf.data().isEmpty():
                    return False
                continue
            output = leaf.output()  # the tick source reads files; it alone has just the tick column
            if output.size() != 1 or output.apply(0).name() != TICK_COLUMN:
                return False
        return True
    except Exception:  # any doubt: the micro-batch is read as a data batch
        return False
