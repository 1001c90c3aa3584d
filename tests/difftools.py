"""Differential testing: the same sqlwin query on Spark (native and UDTF plans) and on DuckDB."""

from __future__ import annotations

import datetime as dt
import decimal
import math
from collections.abc import Sequence

import sqlwin

# (name, spark type, duckdb type)
ColumnDef = tuple[str, str, str]

EVENTS: list[ColumnDef] = [("ts", "timestamp", "TIMESTAMP"), ("k", "string", "VARCHAR"), ("v", "int", "INTEGER")]


def load(spark, duck, name: str, columns: Sequence[ColumnDef], rows: Sequence[tuple]) -> None:
    """The same rows as a Spark temp view and a DuckDB table."""
    schema = ", ".join(f"`{c}` {t}" for c, t, _ in columns)
    spark.createDataFrame(list(rows), schema).createOrReplaceTempView(name)
    duck.execute(f"DROP TABLE IF EXISTS {name}")
    duck.execute(f"CREATE TABLE {name} ({', '.join(f'{c} {d}' for c, _, d in columns)})")
    if rows:
        duck.executemany(f"INSERT INTO {name} VALUES ({', '.join('?' for _ in columns)})", list(rows))


def _norm(value):
    if isinstance(value, float):
        return None if math.isnan(value) else round(value, 6)
    if isinstance(value, decimal.Decimal):
        return round(float(value), 6)
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return value.astimezone(dt.timezone.utc).replace(tzinfo=None)
    return value


def _key(row: tuple) -> tuple:
    return tuple((v is not None, str(type(v)), v if v is not None else 0) for v in row)


def normalize(rows) -> list[tuple]:
    return sorted((tuple(_norm(v) for v in r) for r in rows), key=_key)


def on_spark(spark, sql: str, plan: str = "auto") -> list[tuple]:
    return normalize(tuple(r) for r in sqlwin.sql(spark, sql, plan=plan).collect())


def on_duckdb(duck, sql: str) -> list[tuple]:
    return normalize(duck.execute(sqlwin.rewrite(sql, target="duckdb", catalog=duck)).fetchall())


def assert_same(spark, duck, sql: str, plans: Sequence[str] = ("auto", "udtf"), expected=None) -> list[tuple]:
    """Spark (every plan) and DuckDB agree, and equal ``expected`` when given; returns the rows."""
    oracle = on_duckdb(duck, sql)
    for plan in plans:
        got = on_spark(spark, sql, plan)
        assert got == oracle, f"spark plan={plan} differs from DuckDB for:\n{sql}\nspark:  {got}\nduckdb: {oracle}"
    if expected is not None:
        assert oracle == normalize(expected), f"unexpected result for:\n{sql}\ngot:      {oracle}\nexpected: {expected}"
    return oracle
