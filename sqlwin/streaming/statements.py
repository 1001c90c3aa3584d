"""Run the streaming statements of GRAMMAR 3 and 5 (the pipeline hands them here, from every entry
point: Python API, CLI scripts, the JDBC server)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from sqlglot import exp

from sqlwin.diagnostics import at_name, locate, read_failure, statement_start
from sqlwin.errors import SqlwinError
from sqlwin.plan import statements as st
from sqlwin.planner.streams import column_named
from sqlwin.planner.windows import TIME_TYPES
from sqlwin.results import StatementResult
from sqlwin.streaming import alignment, catalog, registry, storage, tablefolders, tableviews, trace
from sqlwin.streaming.analysis import check_as_batch, in_user_terms, spell_out_keys, start_cleanly
from sqlwin.streaming.compaction import CompactionPolicy
from sqlwin.streaming.names import check_outputs, check_replay_outputs, check_stream_name
from sqlwin.streaming.shape import StreamingShape, without_window
from sqlwin.streaming.sinks import sink_format
from sqlwin.streaming.sources import expand_conf, stream_dataframe
from sqlwin.streaming.stages import StagedShape, analyse_query
from sqlwin.streaming.tables import StreamingTable, latest_view_sql, sink_folders, table_location

STREAMING_PLANS = (st.CreateStream, st.CreateReplayStream, st.CreateStreamingTable, st.ShowStreamingTables,
                   st.StopStreamingTable, st.DropStreamingTable)


def streams_read(spark: Any, node: exp.Expr) -> dict[str, catalog.StreamDef]:
    found: dict[str, catalog.StreamDef] = {}
    for table in node.find_all(exp.Table):
        stream = catalog.find_stream(spark, table.name)
        if stream is not None:
            found[table.name.lower()] = stream
    refuse_stream_views(spark, node)
    return found


def refuse_stream_views(spark: Any, node: exp.Expr) -> None:
    """A temp view over a stream read by ``node``: an error at the view's name. The view holds the stream's rows
    but not its watermark, replay order or micro-batches, so a window over it would be a batch query over a
    streaming DataFrame (a live stream: it fails once read) or over the replayed table (a replay: no late rows,
    one pane): the stream has to be named in the query itself."""
    for table in session_tables(node):
        if catalog.find_stream(spark, table.name) is not None:
            continue
        stream = catalog.stream_behind_view(spark, table.name)
        if stream is not None:
            raise SqlwinError.at(table, f"{table.name} is a view over the stream {stream}: sqlwin reads a stream "
                                        f"(its watermark, its arrival order) only where a query names it; write "
                                        f"the view's query in its place, as in TUMBLE(TABLE (SELECT ... FROM "
                                        f"{stream}), DESCRIPTOR(...), ...)")
        if is_streaming_view(spark, table):
            raise SqlwinError.at(table, f"{table.name} is a view over a streaming DataFrame that sqlwin did not "
                                        f"make (spark.readStream ... createOrReplaceTempView): sqlwin reads a stream "
                                        f"declared with CREATE STREAM, whose WATERMARK says when its windows "
                                        f"close; declare its source as CREATE STREAM name (columns, WATERMARK FOR "
                                        f"ts AS ts - INTERVAL ...) USING format OPTIONS (...) and read that stream")


def is_streaming_view(spark: Any, table: exp.Table) -> bool:
    """Whether the table or view ``table`` reads a streaming source (Spark analyses it, nothing is read): a view
    the user made of a streaming DataFrame (``spark.readStream``), or a SQL view over one. sqlwin knows no
    watermark for it, so a window over it would be a batch query over a streaming DataFrame (which Spark refuses
    once read, or with its own error in sqlwin's generated SQL), and plain SQL the same DataFrame."""
    if not table.name:
        return False
    name = exp.Table(**{k: table.args[k].copy() for k in ("this", "db", "catalog") if table.args.get(k)})
    try:  # the table as named, its database included (not a same-named table of the current database)
        return bool(spark.table(name.sql(dialect="spark")).isStreaming)
    except Exception:  # no such table (a name Spark reports itself), or one it cannot read
        return False


def is_streaming(spark: Any, plan: object) -> bool:
    if isinstance(plan, STREAMING_PLANS):
        return True
    return isinstance(plan, st.WindowedQuery) and bool(streams_read(spark, plan.node))


def check_plain_query(spark: Any, plan: object) -> None:
    """Plain Spark SQL (nothing of sqlwin's in it: Spark would run it as written) whose query reads a stream:
    with neither a window TVF nor EMIT it has no streaming meaning (README, Limits), and Spark would answer it
    with the replayed table's rows as a batch, or with a streaming DataFrame that fails once read. An error at
    the stream's name instead, saying what to write. Names a CTE of the statement takes are not streams. A view
    over a streaming DataFrame made outside sqlwin is refused too (``refuse_stream_views``), in a session with no
    stream of sqlwin's as well."""
    if not isinstance(plan, st.Passthrough) or plan.node is None:
        return
    check_plain_node(spark, plan.node)


def check_plain_node(spark: Any, node: exp.Expr) -> None:
    """``check_plain_query`` of a parsed statement. A temp view's definition reads nothing (DDL), but a view over
    a stream is noted, so that a query reading it is refused (``refuse_stream_views``); DROP VIEW forgets it."""
    kind = str(node.args.get("kind") or "").upper()
    if isinstance(node, exp.Drop) and kind == "VIEW" and isinstance(node.this, exp.Table):
        catalog.set_stream_view(spark, node.this.name, None)
        return
    if isinstance(node, exp.Create) and kind != "TABLE":
        if kind == "VIEW" and isinstance(node.this, (exp.Table, exp.Schema)) and node.expression is not None:
            view = node.this if isinstance(node.this, exp.Table) else node.this.this
            catalog.set_stream_view(spark, view.name, _stream_of(spark, node.expression))
        return
    query = node.expression if isinstance(node, (exp.Insert, exp.Create)) else node
    if not isinstance(query, exp.Query):
        return
    for table in session_tables(query):
        stream = catalog.find_stream(spark, table.name)
        if stream is not None:
            raise without_window(table, stream, started=False)
    refuse_stream_views(spark, query)


def session_tables(query: exp.Expr) -> list[exp.Table]:
    """The tables ``query`` names that may be a stream or a temporary view: no database given, not a CTE's."""
    ctes = {cte.alias_or_name.lower() for cte in query.find_all(exp.CTE)}
    return [t for t in query.find_all(exp.Table) if t.args.get("db") is None and t.name.lower() not in ctes]


def _stream_of(spark: Any, query: exp.Expr) -> str | None:
    """The stream a view's query reads, by name or through another view over one (its CTEs' names aside)."""
    for table in session_tables(query):
        stream = catalog.find_stream(spark, table.name)
        if stream is not None:
            return stream.name
        behind = catalog.stream_behind_view(spark, table.name)
        if behind is not None:
            return behind
    return None


def check_plain_text(spark: Any, text: str) -> None:
    """Spark SQL that the JDBC server sends sqlwin only because it names a stream or a view over one (no sqlwin
    keyword in it): checked as ``check_plain_query`` checks ``sqlwin.sql``'s; text sqlwin cannot read is left to
    Spark, whose own error it is."""
    if not catalog.stream_names():
        return
    from sqlwin import dialect

    try:
        nodes = [n for n in dialect.parse(text) if n is not None]
    except Exception:
        return
    if len(nodes) == 1:
        check_plain_node(spark, nodes[0])


def execute(spark: Any, text: str, plan: object) -> StatementResult:
    """Run a streaming statement. An error of sqlwin's that knows no place in the SQL (a folder that cannot be
    made, a sink format Spark lacks) is placed at the name the statement makes (or at its start)."""
    try:
        return _execute(spark, text, plan)
    except SqlwinError as err:
        if err.line is not None:
            raise
        name = getattr(plan, "name", None)
        where = locate(text, [name]) if isinstance(name, str) else None
        raise SqlwinError(err.message, *(where or statement_start(text))) from None


def _execute(spark: Any, text: str, plan: object) -> StatementResult:
    if isinstance(plan, st.CreateStream):
        return _create_stream(spark, text, plan)
    if isinstance(plan, st.CreateReplayStream):
        return _create_replay_stream(spark, text, plan)
    if isinstance(plan, st.ShowStreamingTables):
        return StatementResult(text, dataframe=show_tables(spark))
    if isinstance(plan, st.StopStreamingTable):
        table = catalog.find_table(plan.name)
        if table is None:
            raise at_name(text, plan.name, f"STOP STREAMING TABLE {plan.name}: no such streaming table")
        table.stop()
        registry.set_running(table.name, False)  # a server started again does not resume it
        return StatementResult(text, message=f"streaming table {table.name} stopped")
    if isinstance(plan, st.DropStreamingTable):
        return StatementResult(text, message=drop_table(spark, plan.name, plan.purge, text))
    create = plan.node if isinstance(plan, st.WindowedQuery) and isinstance(plan.node, exp.Create) else None
    prepared = prepare(spark, text, replace(plan, node=create.expression) if create is not None else plan)
    if isinstance(prepared, (StreamingShape, StagedShape)):  # a replay
        from sqlwin.streaming.replay import replay

        with trace.replayed(prepared, text) as run, in_user_terms(text):
            panes = replay(spark, prepared)
            if run is not None:
                run.result = panes
        if create is not None or isinstance(plan.node, exp.Insert):
            return StatementResult(text, dataframe=store_replayed(spark, create or plan.node, panes, text))
        return StatementResult(text, dataframe=panes)
    table = prepared.start()
    query = plan.query.node if isinstance(plan, st.CreateStreamingTable) else plan.node
    registry.record(spark, table.name, text, [t for t in (catalog.stream_text(spark, s) for s in
                                                           streams_read(spark, query)) if t is not None],
                    list(table.folders().values()),
                    [r for r in map(registry.output_record, table.outputs()) if r is not None])
    registry.watch(table)  # a failure marks it failed: a server started again lists it, does not start it
    if isinstance(plan, st.CreateStreamingTable):
        return StatementResult(text, message=f"streaming table {table.name} started ({table.path} path: {table.why})")
    return StatementResult(text, message=f"streaming insert into {table.name} started ({table.path} path)")


def store_replayed(spark: Any, statement: exp.Create | exp.Insert, panes: Any, text: str) -> Any:
    """``CREATE TABLE/VIEW ... AS`` or ``INSERT INTO`` a replay: the statement as written (its format, options,
    location, columns) over the replay's panes, as the batch statement over its query."""
    is_view = str(statement.args.get("kind") or "").upper() == "VIEW"
    if is_view and (statement.find(exp.TemporaryProperty) is None or statement.find(exp.GlobalProperty)):
        raise SqlwinError.at(statement.this, "a view over a replay: the replay's panes are computed once, for this "
                                             "session; CREATE TEMPORARY VIEW (this session) or CREATE TABLE (kept)")
    view = f"__sqlwin_replayed_{uuid.uuid4().hex[:12]}"
    panes.createOrReplaceTempView(view)  # kept for a temporary view over it; a table's rows are written once
    over = statement.copy()
    over.set("expression", exp.select("*").from_(exp.to_identifier(view)))
    try:
        with in_user_terms(text):
            result = spark.sql(over.sql(dialect="spark"))
    except BaseException:
        spark.catalog.dropTempView(view)
        raise
    if not is_view:
        spark.catalog.dropTempView(view)
    return result


def prepare(spark: Any, text: str, plan: object) -> StreamingShape | StagedShape | PreparedTable:
    """Everything a streaming query statement (a replay, CREATE STREAMING TABLE, INSERT INTO) is checked for,
    before anything runs: its output names, the user's query analysed as the batch query (the batch query's
    errors, in the user's terms: ``sqlwin.streaming.analysis``), then the streaming rules (``shape.analyse``).
    Gives the replay's shape, or the streaming table to start; nothing is written or run."""
    if isinstance(plan, st.CreateStreamingTable):
        return prepare_table(spark, plan.name, plan.query, plan.format, plan.options, name_node=plan.node, text=text)
    if not isinstance(plan, st.WindowedQuery):
        raise SqlwinError(f"{type(plan).__name__} is not a streaming query statement")
    streams = streams_read(spark, plan.node)
    if any(isinstance(s, st.CreateReplayStream) for s in streams.values()):
        check_replay_outputs(spark, plan, streams)
        check_as_batch(spark, text, plan, streams)
        spell_out_keys(spark, plan, streams)
        return analyse_query(plan, streams, text)
    if isinstance(plan.node, exp.Insert):
        target = plan.node.this
        name = (target.this if isinstance(target, exp.Schema) else target).name
        return prepare_table(spark, name, plan, None, {}, name_node=target, insert=True, text=text)
    # at the stream the query reads (not the query, whose position is its first column's)
    at = next((t for t in plan.node.find_all(exp.Table) if t.name.lower() in streams), plan.node)
    raise SqlwinError.at(at, f"this query reads the stream {', '.join(sorted(streams))}: it runs "
                                    "continuously; start it with CREATE STREAMING TABLE name AS <query> (or "
                                    "INSERT INTO name <query>), or replay it over a table with CREATE STREAM ... "
                                    "FROM TABLE")


def start_table(spark: Any, name: str, query: st.WindowedQuery, fmt: str | None,
                options: dict[str, str], *, clock: Callable[[], int] | None = None,
                name_node: exp.Expr | None = None, insert: bool = False, text: str | None = None) -> StreamingTable:
    """``clock``: a test's processing-time clock (``StreamingTable``), never set from SQL; ``name_node``:
    where the SQL names the table; ``insert``: INSERT INTO, which continues an existing sink; ``text``: the
    statement as written (errors are positioned in it). Everything is checked before the table starts: a
    statement that fails leaves no table running and no folder behind."""
    text = text if text is not None else query.node.sql(dialect="sqlwin")
    return prepare_table(spark, name, query, fmt, options, clock=clock, name_node=name_node, insert=insert,
                         text=text).start()


@dataclass
class PreparedTable:
    """A streaming table statement checked in full, its table not made yet: no folder, no view, no query."""

    spark: Any
    name: str
    shape: StreamingShape
    fmt: str | None
    options: dict[str, str]
    clock: Callable[[], int] | None = None
    query_sql: str = ""  # the query, as its folder records it (``tablefolders``)

    def start(self) -> StreamingTable:
        """Make and start the table; if that fails, nothing is left running and the folder it made is gone."""
        location = table_location(self.spark, self.name, self.options)
        table = start_cleanly(lambda: StreamingTable(self.spark, self.name, self.shape, self.fmt, self.options,
                                                     clock=self.clock), location, self.shape.text)
        tablefolders.record_query(location, self.query_sql)
        return table


def prepare_table(spark: Any, name: str, query: st.WindowedQuery, fmt: str | None, options: dict[str, str], *,
                  text: str, clock: Callable[[], int] | None = None, name_node: exp.Expr | None = None,
                  insert: bool = False) -> PreparedTable:
    """The streaming table of a statement, checked in full and not started (nothing written, nothing run)."""
    options = expand_conf(spark, options)  # ${sqlwin.file_dir} in a path or checkpoint
    check_outputs(spark, name, query, name_node, insert)
    if fmt:
        sink_format(spark, fmt, name)  # a format Spark has no file source for
    CompactionPolicy.from_options({k.lower(): v for k, v in options.items()}, name)  # its options' errors
    streams = streams_read(spark, query.node)
    refuse_replay_streams(query.node, streams, name)
    alignment.aligned_streams(list(streams.values()))  # a group's streams agree on their drift
    check_as_batch(spark, text, query, streams)
    spell_out_keys(spark, query, streams)
    shape = analyse_query(query, streams, text)
    latest = {k.lower(): v for k, v in options.items()}.get("latest")
    if latest:
        latest_view_sql(spark, shape, name, latest)  # its errors before anything starts
    location = table_location(spark, name, options)
    sql = tablefolders.query_sql(query.node)
    tablefolders.check_query(name, location, sql, name_node)
    tablefolders.check_folders(name, {"checkpoint": location, **sink_folders(location, options, shape)}, name_node)
    return PreparedTable(spark, name, shape, fmt, options, clock, sql)


def refuse_replay_streams(node: exp.Expr, streams: dict[str, catalog.StreamDef], name: str) -> None:
    """A streaming table runs continuously over live streams; a replay stream's rows are a table's, replayed at
    once: the query itself returns every pane it emits (stored with CREATE TABLE ... AS). A query that reads both
    kinds is refused as such by the analysis (``stages.analyse_staged``)."""
    replays = {k for k, s in streams.items() if isinstance(s, st.CreateReplayStream)}
    if len(replays) < len(streams):  # a live stream too: the analysis says a query cannot join the two kinds
        return
    at = next((t for t in node.find_all(exp.Table) if t.name.lower() in replays), None)
    if at is not None:
        raise SqlwinError.at(at, f"{at.name} is a replay stream (CREATE STREAM ... FROM TABLE): a query over it "
                                 f"runs at once and returns every pane the live run would emit; run the query "
                                 f"itself (or CREATE TABLE {name} AS <query> to keep its panes), not as a "
                                 "streaming table")


def _create_stream(spark: Any, text: str, plan: st.CreateStream) -> StatementResult:
    check_stream_name(spark, plan.name, plan.node)
    path = next((v for k, v in expand_conf(spark, plan.options).items() if k.lower() == "path"), None)
    alignment.check_stream(plan, catalog.session_streams(spark), path)
    df = stream_dataframe(spark, plan)
    check_punctuation(df, plan.watermark)
    df.createOrReplaceTempView(plan.name)
    catalog.add_stream(spark, plan, text)
    return StatementResult(text, message=f"stream {plan.name} created")


def _create_replay_stream(spark: Any, text: str, plan: st.CreateReplayStream) -> StatementResult:
    check_stream_name(spark, plan.name, plan.node)
    source = plan.source
    sql = source.sql(dialect="spark") if isinstance(source, exp.Table) else f"SELECT * FROM {source.sql('spark')}"
    if isinstance(source, exp.Table):
        sql = f"SELECT * FROM {sql}"
    try:
        df = spark.sql(sql)
    except Exception as err:
        raise SqlwinError.at(plan.node, f"CREATE STREAM {plan.name} FROM TABLE: {str(err).splitlines()[0]}") \
            from None
    check_replay_clauses(df, plan)
    check_punctuation(df, plan.watermark)
    df.createOrReplaceTempView(plan.name)
    catalog.add_stream(spark, plan)
    return StatementResult(text, message=f"replay stream {plan.name} created")


def check_replay_clauses(rows: Any, plan: st.CreateReplayStream) -> None:
    """A replay stream's clauses over its table's columns (analysed by Spark, nothing read), as a live stream's
    are over the columns it declares: the WATERMARK column is one of them, a TIMESTAMP; ARRIVAL ORDER BY and
    MICRO BATCH BY analyse and order; PROCESSING TIME BY is a TIMESTAMP. Else a SqlwinError at the clause, not
    a later query's error in the text sqlwin generates from them."""
    source = plan.source
    owner = f"table {source.sql('spark')}" if isinstance(source, exp.Table) else "the FROM TABLE query"
    fields = {f.name.lower(): f for f in rows.schema.fields}
    wm_node = plan.node.args["watermark"].this if plan.node is not None else exp.to_identifier(plan.watermark.column)
    column = column_named(wm_node, f"WATERMARK FOR {plan.watermark.column}", [f.name for f in rows.schema.fields],
                          owner)
    _time_typed(wm_node, f"WATERMARK FOR {column}: the event-time column", fields[column.lower()].dataType)
    for item in plan.arrival_order:
        _analysed(rows, item.this if isinstance(item, exp.Ordered) else item, "ARRIVAL ORDER BY", ordered=True)
    if plan.micro_batch_by is not None:
        _analysed(rows, plan.micro_batch_by, "MICRO BATCH BY", ordered=True)
    if plan.processing_time_by is not None:
        clock = plan.processing_time_by
        _time_typed(clock, f"PROCESSING TIME BY {clock.sql('spark')}: the clock of each micro-batch",
                    _analysed(rows, clock, "PROCESSING TIME BY"))


def _analysed(rows: Any, node: exp.Expr, what: str, ordered: bool = False) -> Any:
    """The data type of ``node`` over ``rows`` (analysed, nothing read); ``ordered``: rows can be sorted by it.
    Spark's error is a SqlwinError at the column it names (else at ``node``), prefixed with ``what``."""
    try:
        data_type = rows.selectExpr(node.sql("spark")).schema.fields[0].dataType
    except Exception as err:  # Spark's first line, without SQLSTATE or its own position
        failure = read_failure(err)
        named = failure.params.get("objectName", "").split(".")[-1].strip("`").lower()
        at = next((c for c in node.find_all(exp.Column) if named and c.name.lower() == named), node)
        raise SqlwinError.at(at, f"{what}: {failure.message}") from None
    if ordered and not _orderable(data_type):  # (a constant such as MICRO BATCH BY 0 is one micro-batch)
        raise SqlwinError.at(node, f"{what}: {node.sql('spark')} is {data_type.simpleString().upper()}, which has "
                                   "no order")
    return data_type


def _orderable(data_type: Any) -> bool:
    """Whether Spark orders values of ``data_type`` (not a MAP or VARIANT, nor one inside an array or struct)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.ArrayType):
        return _orderable(data_type.elementType)
    if isinstance(data_type, T.StructType):
        return all(_orderable(f.dataType) for f in data_type.fields)
    return not isinstance(data_type, T.MapType) and data_type.typeName() != "variant"


def _time_typed(node: exp.Expr, what: str, data_type: Any) -> None:
    if data_type.simpleString() not in TIME_TYPES:
        raise SqlwinError.at(node, f"{what} must be TIMESTAMP or TIMESTAMP_NTZ, but {node.sql('spark')} is "
                                   f"{data_type.simpleString().upper()}; cast it first")


def check_punctuation(rows: Any, watermark: st.WatermarkSpec | None) -> None:
    """A punctuated watermark's condition is a boolean and its value has the type of the watermark column,
    over the stream's columns (analysed by Spark, nothing read): else a SqlwinError at the expression."""
    from pyspark.sql import types as T

    if watermark is None or not watermark.punctuated:
        return
    assert watermark.where is not None and watermark.expression is not None
    column_type = next((f.dataType for f in rows.schema.fields if f.name.lower() == watermark.column.lower()), None)
    for node, what in ((watermark.where, "ON ROWS WHERE"), (watermark.expression, f"WATERMARK FOR {watermark.column}")):
        try:
            data_type = rows.selectExpr(node.sql("spark")).schema.fields[0].dataType
        except Exception as err:  # Spark's first line, without SQLSTATE or its own position
            raise SqlwinError.at(node, f"{what}: {read_failure(err).message}") from None
        if node is watermark.where and not isinstance(data_type, T.BooleanType):
            raise SqlwinError.at(node, f"ON ROWS WHERE expects a condition (BOOLEAN); "
                                       f"{node.sql('spark')} is {data_type.simpleString().upper()}")
        if node is watermark.expression and data_type != column_type:
            wanted = column_type.simpleString().upper() if column_type is not None else "TIMESTAMP"
            raise SqlwinError.at(node, f"WATERMARK FOR {watermark.column} AS {node.sql('spark')}: the watermark of "
                                       f"a marker row must be a {wanted}, as {watermark.column} is; got "
                                       f"{data_type.simpleString().upper()}")


def drop_table(spark: Any, name: str, purge: bool, text: str = "") -> str:
    """``DROP STREAMING TABLE name [PURGE]``: stop it if it runs, forget it, drop its catalog views; PURGE deletes
    its folder and its outputs' folders (through the storage layer). A table this process does not run is found by
    its views in the current database (their properties name its folders)."""
    table = catalog.find_table(name)
    views: list[str] = []
    folders: list[str] = []
    if isinstance(table, StreamingTable):
        table.stop()
        catalog.remove_table(table.name)
        views += [sink.catalog_view[0] for sink in table.outputs() if sink.catalog_view is not None]
        folders += table.folders().values()
    elif table is not None:  # a table a server's registry marked failed, listed but not started
        catalog.remove_table(table.name)
    database = tableviews.current_database(spark)
    for view, entry in tableviews.entries_of(spark, database, name):
        views.append(tableviews.qualified(database, view))
        folders += [entry.location, entry.sink]
    known = registry.remove(name)
    if known:  # a table a server ran: its folders, even where no view of a catalog names them (an in-memory one)
        folders += known.get("folders", [])
    if table is None and not views and known is None:
        raise at_name(text, name, f"DROP STREAMING TABLE {name}: no such streaming table (neither running in this "
                                  f"server or process nor in the catalog's database {database})")
    for view in dict.fromkeys(views):
        tableviews.drop(spark, view)
    if purge:
        for folder in dict.fromkeys(f for f in folders if f):
            storage.delete(folder)
    return f"streaming table {name} dropped" + (" and its files deleted" if purge else "")


def show_tables(spark: Any) -> Any:
    rows = [s.__dict__ for s in (t.status() for t in catalog.all_tables())]
    schema = ("name string, status string, path string, micro_batches bigint, rows_in bigint, watermark string, "
              "state_rows bigint, open_windows bigint, late_rows_dropped bigint, error string, "
              "input_rows_per_second double, last_micro_batch string")
    return spark.createDataFrame([tuple(r.values()) for r in rows], schema)


RESULT_VIEW = "__sqlwin_result"  # a JDBC session's last statement result (one view, replaced each time)


def result_sql(spark: Any, result: StatementResult) -> str:
    """A statement's result as one SQL query (the JDBC server runs SQL text): a view of its rows, the session's
    one result view, replaced by the next result (the server runs the query at once, in this session: a view per
    statement would pile up in a client that polls SHOW STREAMING TABLES)."""
    if result.dataframe is None:
        return exp.select(exp.alias_(exp.Literal.string(result.message or "OK"), "result")).sql(dialect="spark")
    result.dataframe.createOrReplaceTempView(RESULT_VIEW)
    return f"SELECT * FROM {RESULT_VIEW}"
