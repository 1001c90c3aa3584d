"""parse -> plan -> backend, for one statement. The facade (``sqlwin.api``), the CLI and the
server all come through here, so every entry point accepts exactly the same SQL."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.tokens import TokenType

from sqlwin import diagnostics, dialect
from sqlwin.backends.base import WindowCompiler
from sqlwin.dialect import SPARK_SQL_MARK
from sqlwin.errors import SqlwinError
from sqlwin.gcpause import collector_paused
from sqlwin.plan import statements as st
from sqlwin.plan.windows import Column, WindowSpec
from sqlwin.planner import plan_statement
from sqlwin.planner.catalog import Catalog, SparkCatalog, as_catalog
from sqlwin.results import StatementResult


@dataclass
class Compiled:
    """The SQL a statement runs as on one target, and the plan it came from."""

    sql: str
    plan: object
    target: str


def make_compiler(target: str, spark: Any = None, plan: str = "auto") -> WindowCompiler:
    if target == "spark":
        from sqlwin.backends.spark_batch import SparkBatchCompiler

        return SparkBatchCompiler(spark, plan)
    if target == "duckdb":
        from sqlwin.backends.duckdb import DuckDBCompiler

        return DuckDBCompiler()
    raise SqlwinError(f"unknown target {target!r}; expected 'spark' or 'duckdb'")


def _resolver(catalog: Catalog | None, plan: str):
    """Schema look-ups compile the relation for the catalog's own engine, then ask it."""
    if catalog is None:
        return None
    spark = catalog.spark if isinstance(catalog, SparkCatalog) else None

    def resolve(query: exp.Expr, specs: list[WindowSpec]) -> tuple[Column, ...] | None:
        # the planner builds ``query`` for this look-up only: compiled and printed in place, no copy
        if specs:
            compiler = make_compiler(catalog.dialect, spark, plan)
            sql = compiler.render(compiler.compile(query, specs))
        else:  # no window inside: nothing to compile (and no compiler to build per TVF)
            sql = query.sql(dialect=catalog.dialect, copy=False)
        try:
            return catalog.schema_of(sql)
        except LookupError:
            return None

    return resolve


def split_statements(text: str) -> list[str]:
    """The statements of a script, as written (split at top-level semicolons, comments kept)."""
    try:
        tokens = dialect.Sqlwin().tokenize(text)
    except Exception as err:
        raise SqlwinError(f"cannot read the script: {err}") from None
    pieces, start = [], 0
    for tok in tokens:
        if tok.token_type == TokenType.SEMICOLON:
            pieces.append(text[start:tok.start])
            start = tok.end + 1
    pieces.append(text[start:])
    return [p.strip() for p in pieces if _has_code(p)]


def _has_code(piece: str) -> bool:
    try:
        return bool(dialect.Sqlwin().tokenize(piece))
    except Exception:
        return bool(piece.strip())


def parse_single(text: str) -> exp.Expr:
    nodes = [n for n in dialect.parse(text) if n is not None]
    if len(nodes) != 1:
        raise SqlwinError(f"expected one statement, got {len(nodes)}; use run_script for several")
    return nodes[0]


def compile_plan(node: exp.Expr, plan_obj: object, compiler: WindowCompiler) -> str:
    if isinstance(plan_obj, st.Passthrough):
        return plan_obj.sql if compiler.dialect == "spark" and plan_obj.sql else node.sql(dialect=compiler.dialect)
    if isinstance(plan_obj, st.WindowedQuery):
        check_batch_semantics(plan_obj)
        return compiler.render(compiler.compile(plan_obj.node, plan_obj.windows))
    if isinstance(plan_obj, st.Explain):
        inner = compile_plan(node.this, plan_obj.statement, compiler)
        if plan_obj.rewrite:
            return inner
        mode = (node.args.get("mode") or "").upper()
        return f"EXPLAIN {mode + ' ' if mode else ''}{inner}"
    kind = type(plan_obj).__name__
    raise SqlwinError.at(node, f"{_statement_name(kind)} is a streaming statement: it runs on a Spark session "
                               "(sqlwin.sql, the CLI, the JDBC server), it has no SQL text to rewrite to")


def check_batch_semantics(query: st.WindowedQuery) -> None:
    """A batch query returns the final results; clauses that would change them must say so."""
    if query.evict is not None:
        select = next(s for s in query.node.find_all(exp.Select) if s.args.get("evict"))
        raise SqlwinError.at(select.args["evict"], "EVICT changes what a window holds when it fires; "
                                                   "evictors run in streaming queries, not in batch ones")


def _statement_name(kind: str) -> str:
    return {"CreateStream": "CREATE STREAM", "CreateReplayStream": "CREATE STREAM ... FROM TABLE",
            "CreateStreamingTable": "CREATE STREAMING TABLE", "ShowStreamingTables": "SHOW STREAMING TABLES",
            "StopStreamingTable": "STOP STREAMING TABLE", "DropStreamingTable": "DROP STREAMING TABLE"}.get(kind, kind)


@diagnostics.in_user_terms
def compile_statement(text: str, target: str = "spark", catalog: Any = None, plan: str = "auto",
                      spark: Any = None) -> Compiled:
    with collector_paused():  # the trees are cyclic: collections during a compile only re-traverse them
        node = parse_single(text)
        cat = as_catalog(catalog)
        if spark is None and isinstance(cat, SparkCatalog):
            spark = cat.spark
        plan_obj = plan_statement(node, _resolver(cat, plan), text=text.strip().rstrip(";").strip())
        if spark is not None and target == "spark" and _streaming(spark, plan_obj):
            return Compiled("", plan_obj, target)  # run by sqlwin.streaming, not as one SQL text
        return Compiled(compile_plan(node, plan_obj, make_compiler(target, spark, plan)), plan_obj, target)


def _streaming(spark: Any, plan_obj: object) -> bool:
    from sqlwin.streaming.statements import is_streaming

    return is_streaming(spark, plan_obj)


def execute_statement(spark: Any, text: str, plan: str = "auto") -> StatementResult:
    """Run one statement on Spark; EXPLAIN REWRITE returns the produced SQL instead. A Spark error on the way
    reaches the caller as sqlwin reports it, not also as pyspark's JSON record (with its Java stack) on stderr."""
    with diagnostics.unlogged_spark_errors():
        return _execute(spark, text, plan)


def _execute(spark: Any, text: str, plan: str) -> StatementResult:
    compiled = compile_statement(text, "spark", catalog=spark, plan=plan, spark=spark)
    if not compiled.sql and _streaming(spark, compiled.plan):
        from sqlwin.streaming.statements import execute

        return execute(spark, text, compiled.plan)
    if isinstance(compiled.plan, st.Passthrough):
        from sqlwin.streaming.statements import check_plain_query

        check_plain_query(spark, compiled.plan)  # a stream read as a table: an error, not Spark's answer
    if isinstance(compiled.plan, st.Explain) and compiled.plan.rewrite:
        df = spark.createDataFrame([(compiled.sql,)], "rewritten string")
        return StatementResult(text, df, message=compiled.sql, rewritten=compiled.sql)
    rewritten = None if isinstance(compiled.plan, st.Passthrough) else compiled.sql
    return StatementResult(text, diagnostics.run_sql(spark, compiled.sql, text, rewritten), rewritten=rewritten)


def spark_sql_for(spark: Any, text: str) -> str:
    """The Spark SQL to run for one statement (the JDBC server's rewrite hook); text with ``SPARK_SQL_MARK``
    is Spark SQL already."""
    if SPARK_SQL_MARK in text:
        return text
    compiled = compile_statement(text, "spark", catalog=spark, spark=spark)
    if not compiled.sql and _streaming(spark, compiled.plan):
        from sqlwin.streaming.statements import execute, result_sql

        return result_sql(spark, execute(spark, text, compiled.plan))
    if isinstance(compiled.plan, st.Passthrough):
        from sqlwin.streaming.statements import check_plain_query

        check_plain_query(spark, compiled.plan)  # as sqlwin.sql does: a stream read as a table is an error
    if isinstance(compiled.plan, st.Explain) and compiled.plan.rewrite:
        return exp.select(exp.alias_(exp.Literal.string(compiled.sql), "rewritten")).sql(dialect="spark")
    diagnostics.analyse(spark, compiled.plan, compiled.sql, text)  # errors in the client's own SQL
    return compiled.sql
