"""Where input schemas come from: a live SparkSession, a DuckDB connection, or a dict.

The planner asks a catalog for the schema of ``SELECT * FROM <relation>`` (already compiled for
that catalog's engine), so tables, views, CTEs and subqueries are all resolved by the engine
that will run the query; nothing is executed, only analysed.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from sqlwin.errors import SqlwinError
from sqlwin.plan.windows import Column


class Catalog(Protocol):
    dialect: str

    def schema_of(self, sql: str) -> tuple[Column, ...]:
        """Column names and Spark type strings of a query's result; raises SqlwinError."""


class SparkCatalog:
    dialect = "spark"

    def __init__(self, spark: Any):
        self.spark = spark

    def schema_of(self, sql: str) -> tuple[Column, ...]:
        try:
            schema = self.spark.sql(sql).schema
        except Exception as err:  # AnalysisException, ParseException: user-facing text only
            error = SqlwinError(_first_line(err))
            error.spark_error = err  # type: ignore[attr-defined]  # sqlwin.diagnostics re-points it
            raise error from None
        return tuple(Column(f.name, f.dataType.simpleString()) for f in schema.fields)


_DUCK_TYPES = {
    "TIMESTAMP": "timestamp", "TIMESTAMP WITH TIME ZONE": "timestamp", "TIMESTAMP_NS": "timestamp",
    "TIMESTAMP_MS": "timestamp", "TIMESTAMP_S": "timestamp", "BIGINT": "bigint", "INTEGER": "int",
    "SMALLINT": "smallint", "TINYINT": "tinyint", "VARCHAR": "string", "DOUBLE": "double",
    "FLOAT": "float", "BOOLEAN": "boolean", "DATE": "date", "HUGEINT": "decimal(38,0)",
}


def duckdb_type_to_spark(type_name: str) -> str:
    t = type_name.upper()
    if t.startswith("DECIMAL"):
        return t.lower().replace(" ", "")
    return _DUCK_TYPES.get(t, t.lower())


class DuckDBCatalog:
    dialect = "duckdb"

    def __init__(self, con: Any):
        self.con = con

    def schema_of(self, sql: str) -> tuple[Column, ...]:
        try:
            rows = self.con.execute(f"DESCRIBE {sql}").fetchall()
        except Exception as err:
            raise SqlwinError(_first_line(err)) from None
        return tuple(Column(r[0], duckdb_type_to_spark(r[1])) for r in rows)


class DictCatalog:
    """``{table: {column: spark_type}}``: resolves plain table names only."""

    dialect = "spark"

    def __init__(self, tables: dict[str, dict[str, str]]):
        self.tables = {k.lower(): v for k, v in tables.items()}

    def schema_of(self, sql: str) -> tuple[Column, ...]:
        m = re.fullmatch(r"\s*SELECT \* FROM ([\w.`\"]+)\s*", sql, re.IGNORECASE)
        name = m.group(1).strip('`"').lower() if m else None
        if name is None or name not in self.tables:
            raise LookupError(sql)
        return tuple(Column(c, t) for c, t in self.tables[name].items())


def as_catalog(obj: Any) -> Catalog | None:
    """Accept a SparkSession, a DuckDB connection, a dict, a Catalog, or None."""
    if obj is None or hasattr(obj, "schema_of"):
        return obj
    if isinstance(obj, dict):
        return DictCatalog(obj)
    module = type(obj).__module__
    if module.startswith("pyspark"):
        return SparkCatalog(obj)
    if module.startswith("duckdb") or module.startswith("_duckdb"):
        return DuckDBCatalog(obj)
    raise TypeError(f"cannot use {type(obj).__name__} as a catalog")


def _first_line(err: Exception) -> str:
    text = getattr(err, "desc", None) or str(err)
    text = re.sub(r"\s*JVM stacktrace:.*", "", text, flags=re.DOTALL)
    return text.strip().splitlines()[0] if text.strip() else type(err).__name__
