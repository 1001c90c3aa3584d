"""A streaming statement analysed in full before anything starts, with the batch query's errors.

A streaming query is the batch query run over the rows as they arrive, so its mistakes (an unknown column
or function, a column missing from GROUP BY, a type mismatch, ...) are the batch query's. Before a replay
or a streaming table plans its panes, the user's query is compiled as the batch query (streaming clauses
dropped, as batch queries do) and Spark analyses it, nothing run, over an *empty* relation with each
stream's columns: a CTE named like the stream, so the user's names resolve as written. Spark's error then
goes through the batch path's mapping (``sqlwin.diagnostics``): the same message and position the same
mistake gets in the batch query, naming only the user's tables and columns.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlglot import exp

from sqlwin import diagnostics
from sqlwin.backends.spark_batch import SparkBatchCompiler
from sqlwin.errors import SqlwinError
from sqlwin.plan.statements import WindowedQuery
from sqlwin.plan.windows import WindowSpec
from sqlwin.planner.grouping import spell_out_query


def query_of(node: exp.Expr) -> exp.Expr:
    """The query of a streaming statement (INSERT INTO's SELECT)."""
    return node.expression if isinstance(node, exp.Insert) else node


def check_as_batch(spark: Any, text: str, query: WindowedQuery, streams: dict[str, Any]) -> None:
    """Analyse ``query`` as the batch query over empty relations shaped like ``streams`` (name -> stream);
    a mistake is a ``SqlwinError`` positioned in ``text``, as the batch query reports it."""
    with in_user_terms(text):  # a stream's view dropped behind sqlwin's back
        schemas = {name: spark.table(name).schema for name in sorted(streams)}
    sql = batch_sql(spark, query_of(query.node).copy(), query.windows, schemas)
    # an error Spark gives no place for is at the query's start, as in the batch query (not at CREATE or INSERT)
    diagnostics.run_sql(spark, sql, text, sql, after=diagnostics.query_start(text))


def spell_out_keys(spark: Any, query: WindowedQuery, streams: dict[str, Any]) -> None:
    """``query``'s GROUP BY ordinals, SELECT aliases and ALL replaced by what they stand for, as Spark reads them
    (``planner.grouping``; after ``check_as_batch``, which reports what Spark refuses): the streaming analysis
    reads the keys as expressions."""
    tables = {name: {c.lower() for c in spark.table(name).columns} for name in streams}
    spell_out_query(query.node, query.windows, tables)


def batch_sql(spark: Any, node: exp.Expr, windows: list[WindowSpec], schemas: dict[str, Any]) -> str:
    """``node`` (changed in place) compiled as the batch query over empty relations with ``schemas`` (stream
    name -> schema), each a CTE named like its stream."""
    compiler = SparkBatchCompiler(spark)  # the batch query's own compiler (pipeline.make_compiler's)
    ctes = [exp.CTE(this=empty_relation(schema), alias=exp.TableAlias(this=exp.to_identifier(name)))
            for name, schema in schemas.items()]
    return compiler.render(_with_ctes(compiler.compile(node, windows), ctes))


def batch_names(spark: Any, node: exp.Expr, windows: list[WindowSpec], streams: list[str]) -> list[str]:
    """The names Spark gives the columns of ``node`` (changed in place) as the batch query over ``streams``
    (analysed over empty relations shaped like them, never run)."""
    schemas = {name: spark.table(name).schema for name in sorted(set(streams))}
    return spark.sql(batch_sql(spark, node, windows, schemas)).columns


def empty_relation(schema: Any) -> exp.Select:
    """``SELECT CAST(NULL AS type) AS col, ... WHERE FALSE``: no row, the columns and types of ``schema``."""
    columns = [exp.alias_(exp.cast(exp.null(), exp.DataType.build(ddl_type(f.dataType), dialect="spark", udt=True)),
                          exp.to_identifier(f.name, quoted=True)) for f in schema.fields]
    return exp.select(*columns).where(exp.false())


def ddl_type(data_type: Any) -> str:
    """Spark SQL's name of a pyspark data type, with struct field names quoted (``simpleString`` leaves them
    bare)."""
    from pyspark.sql import types as T

    if isinstance(data_type, T.StructType):
        fields = ", ".join(f"`{f.name.replace('`', '``')}`: {ddl_type(f.dataType)}" for f in data_type.fields)
        return f"STRUCT<{fields}>"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{ddl_type(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{ddl_type(data_type.keyType)}, {ddl_type(data_type.valueType)}>"
    return data_type.simpleString()


def _with_ctes(query: exp.Expr, ctes: list[exp.CTE]) -> exp.Expr:
    """``query`` with ``ctes`` first in its WITH (the user's own CTEs may read the streams)."""
    if not ctes:
        return query
    if not isinstance(query, exp.Query):
        query = exp.select("*").from_(exp.Subquery(this=query))
    with_ = query.args.get("with_")
    if with_ is None:
        query.set("with_", exp.With(expressions=ctes))
    else:
        with_.set("expressions", [*ctes, *with_.expressions])
    return query


@contextmanager
def in_user_terms(text: str) -> Iterator[None]:
    """Spark errors raised inside (analysis of the SQL sqlwin generated, or a failing job) as SqlwinErrors
    in the user's terms; sqlwin's own errors pass."""
    try:
        yield
    except SqlwinError:
        raise
    except Exception as err:
        if not diagnostics.is_spark_error(err):
            raise
        raise diagnostics.from_spark(err, text, "") from None


def start_cleanly(make: Callable[[], Any], location: str, text: str) -> Any:
    """``make()`` a streaming table and start it. Should that fail (Spark refusing the SQL sqlwin generated,
    which the analysis above leaves for sqlwin's own mistakes), the error is in the user's terms, no query is
    left running and the table's folder (``location``) is removed if this start made it."""
    from sqlwin.streaming import storage

    fresh = not storage.exists(location)
    table = None
    try:
        with in_user_terms(text):
            table = make()
            return table.start()
    except BaseException:
        if table is not None and table.query is not None:
            with contextlib.suppress(Exception):  # the start's own error is the one to report
                table.query.stop()
        if fresh and table is not None:
            with contextlib.suppress(Exception):
                drop_views(table)
        if fresh and storage.exists(location):
            storage.delete(location)
        raise


def drop_views(table: Any) -> None:
    """The catalog views a first start of ``table`` made before it failed: no table answers to them."""
    from sqlwin.streaming import tableviews

    for sink in table.outputs():
        if sink.catalog_view is not None:
            view, entry = sink.catalog_view
            found = tableviews.find_entry(table.spark, table.database, sink.name)
            if found is not None and found.location == entry.location:
                table.spark.sql(f"DROP VIEW IF EXISTS {view}")
