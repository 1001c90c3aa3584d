"""The batch engines of the suite, and what every engine shares: the ``Engine`` protocol and the ``Context``.

An engine runs a ``Query`` to completion (``run``, timed) and returns its full result for the check
(``result``). ``reference`` names the engine whose result it must equal before a timing counts (DuckDB for
batch engines; the streaming engines of ``bench.nexmark.streams`` have their own), and ``timed`` is false for
an engine that is only a reference.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

if TYPE_CHECKING:
    from bench.nexmark.suite import Query

TABLES = ("persons", "auctions", "bids")
REFERENCE = "duckdb"  # the oracle every batch engine's result is checked against


@dataclass
class Context:
    """What engines share for one data size: the sessions, where the parquet is, and scratch state."""

    spark: Any  # SparkSession
    duck: Any  # duckdb connection
    root: Path
    events: int
    feed_events: int = 250_000  # events per file of the streaming engines' input (one micro-batch each)
    cache: dict[str, Any] = field(default_factory=dict)  # built once per data set (the stream feed)


def register_tables(ctx: Context) -> None:
    """The same parquet as Spark temp views and DuckDB views."""
    for table in TABLES:
        ctx.spark.read.parquet(str(ctx.root / table)).createOrReplaceTempView(table)
        ctx.duck.execute(f"CREATE OR REPLACE VIEW {table} AS "
                         f"SELECT * FROM read_parquet('{ctx.root / table}/*.parquet')")


class Engine:
    """Runs queries one way. ``run`` must force the whole result (the timing); ``result`` returns it."""

    name = ""
    mode = "batch"  # or "streaming"
    reference = REFERENCE
    timed = True
    self_timed = False  # ``run`` returns the seconds to count (an engine timing its own jobs), else the suite times it
    checked_s: float | None = None  # a self-timed engine's seconds for its checked run

    def run(self, query: Query, ctx: Context) -> Any:
        raise NotImplementedError

    def skip(self, query: Query) -> str | None:
        """Why this engine cannot run ``query`` (printed, no measurement), else None."""
        return None

    def result(self, query: Query, ctx: Context) -> pd.DataFrame:
        raise NotImplementedError

    def compile_time(self, query: Query, ctx: Context) -> float | None:
        """Seconds spent before the engine runs anything (part of ``run``), when it is worth reporting."""
        return None


class SparkEngine(Engine):
    """Spark engines time the full job into the ``noop`` sink (every row and column computed, none kept)."""

    def dataframe(self, query: Query, ctx: Context):
        raise NotImplementedError

    def run(self, query: Query, ctx: Context) -> None:
        self.dataframe(query, ctx).write.format("noop").mode("overwrite").save()

    def result(self, query: Query, ctx: Context) -> pd.DataFrame:
        return self.dataframe(query, ctx).toPandas()


class SqlwinSpark(SparkEngine):
    name = "sqlwin"

    def dataframe(self, query: Query, ctx: Context):
        import sqlwin

        return sqlwin.sql(ctx.spark, query.sql)  # parse + plan + rewrite are part of the timing

    def compile_time(self, query: Query, ctx: Context) -> float | None:
        import sqlwin

        times = []
        for _ in range(3):
            start = time.perf_counter()
            sqlwin.rewrite(query.sql, target="spark", catalog=ctx.spark)  # schemas come from the session
            times.append(time.perf_counter() - start)
        return statistics.median(times)


class NativeSpark(SparkEngine):
    name = "native"

    def dataframe(self, query: Query, ctx: Context):
        return query.native(ctx.spark)


class DuckDB(Engine):
    """sqlwin's DuckDB backend on the same parquet; the result is materialized in a temp table."""

    name = "duckdb"

    def _sql(self, query: Query, ctx: Context) -> str:
        import sqlwin

        return sqlwin.rewrite(query.sql, target="duckdb", catalog=ctx.duck)

    def run(self, query: Query, ctx: Context) -> None:
        ctx.duck.execute(f"CREATE OR REPLACE TEMP TABLE __bench_out AS {self._sql(query, ctx)}")
        ctx.duck.execute("DROP TABLE __bench_out")

    def result(self, query: Query, ctx: Context) -> pd.DataFrame:
        return ctx.duck.execute(self._sql(query, ctx)).df()
