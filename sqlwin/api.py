"""The public facade: everything the CLI, the server and users call goes through here."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from sqlwin.gcpause import collector_paused
from sqlwin.pipeline import compile_statement, execute_statement, split_statements
from sqlwin.results import StatementResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["PLANS", "TARGETS", "StatementResult", "register", "rewrite", "run_script", "sql"]

TARGETS = ("spark", "duckdb")
PLANS = ("auto", "udtf")


def register(spark: SparkSession) -> None:
    """Register sqlwin's UDTFs (window assigners) in ``spark``, callable from plain Spark SQL."""
    from udtfs import register_all

    register_all(spark)


def rewrite(text: str, target: str = "spark", *, catalog: Any = None, plan: str = "auto") -> str:
    """The SQL that computes ``text`` on ``target`` ('spark' or 'duckdb').

    ``catalog`` gives input schemas (a SparkSession, a DuckDB connection, or a dict
    ``{table: {column: spark_type}}``); without one, type checks that need a schema are skipped
    and count windows cannot be planned.
    """
    with collector_paused():  # on again once the trees are garbage: one collection frees them
        return compile_statement(text, target=target, catalog=catalog, plan=plan).sql


def sql(spark: SparkSession, text: str, *, plan: str = "auto") -> DataFrame:
    """Run one sqlwin statement on ``spark`` and return its DataFrame."""
    result = execute_statement(spark, text, plan=plan)
    if result.dataframe is None:
        return spark.createDataFrame([(result.message or "OK",)], "result string")
    return result.dataframe


def run_script(spark: SparkSession, text: str, *, plan: str = "auto") -> Iterator[StatementResult]:
    """Run every statement of a script in order, yielding each result as it completes."""
    for statement in split_statements(text):
        yield execute_statement(spark, statement, plan=plan)
