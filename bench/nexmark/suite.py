"""The Nexmark suite: queries, the engines that run them, the equality check and the timed rounds.

Extension points (for the streaming columns):
- ``ENGINES``: name -> ``Engine``. An engine runs a ``Query`` to completion (``run``, timed) and
  returns its full result for the check (``result``). Add e.g. ``"sqlwin-stream"`` (sqlwin
  streaming over the same files), ``"native-stream"`` (hand-written Structured Streaming) or
  ``"replay"`` here.
- ``Query.engines``: which engines run that query (``BATCH_ENGINES`` by default); a streaming-capable
  query lists the streaming engines too. ``Query.extra`` holds per-engine material (e.g. a
  hand-written streaming job) keyed by engine name.
- ``RATIOS``: the (numerator, denominator) engine pairs printed and saved as ratios.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from bench.nexmark import native

QUERY_DIR = Path(__file__).parent / "queries"
TABLES = ("persons", "auctions", "bids")
BATCH_ENGINES = ("sqlwin", "native", "duckdb")
REFERENCE = "duckdb"  # the oracle every other engine's result is checked against
RATIOS: list[tuple[str, str]] = [("sqlwin", "native"), ("sqlwin", "duckdb")]


@dataclass
class Query:
    """One benchmark query: its sqlwin text (a file under ``queries/``) and its native Spark version."""

    name: str
    kind: str  # the window kind it exercises, for the table
    native: native.Native
    engines: tuple[str, ...] = BATCH_ENGINES
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        return QUERY_DIR / f"{self.name}.sql"

    @property
    def sql(self) -> str:
        return self.path.read_text()


QUERIES: list[Query] = [
    Query("q5_hot_items", "HOP", native.q5_hot_items),
    Query("q7_highest_bid", "TUMBLE", native.q7_highest_bid),
    Query("q8_new_users", "TUMBLE join", native.q8_new_users),
    Query("q11_user_sessions", "SESSION", native.q11_user_sessions),
    Query("cumulate_channel", "CUMULATE", native.cumulate_channel),
    Query("count_window", "ROWS 10", native.count_window),
    Query("topn_auctions", "Top-N", native.topn_auctions),
    Query("trigger_early_late", "EMIT early/late", native.trigger_early_late),
]


@dataclass
class Context:
    """What engines share for one data size: the sessions and where the parquet is."""

    spark: Any  # SparkSession
    duck: Any  # duckdb connection
    root: Path
    events: int


def register_tables(ctx: Context) -> None:
    """The same parquet as Spark temp views and DuckDB views."""
    for table in TABLES:
        ctx.spark.read.parquet(str(ctx.root / table)).createOrReplaceTempView(table)
        ctx.duck.execute(f"CREATE OR REPLACE VIEW {table} AS "
                         f"SELECT * FROM read_parquet('{ctx.root / table}/*.parquet')")


class Engine:
    """Runs queries one way. ``run`` must force the whole result (the timing); ``result`` returns it."""

    name = ""
    mode = "batch"  # "streaming" engines will set this

    def run(self, query: Query, ctx: Context) -> None:
        raise NotImplementedError

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


ENGINES: dict[str, Engine] = {e.name: e for e in (SqlwinSpark(), NativeSpark(), DuckDB())}


# ---- the equality check -------------------------------------------------------------------------

def normalize(df: pd.DataFrame) -> pd.DataFrame:
    """Engine-neutral values, columns by position, rows sorted: timestamps as UTC micros, numbers as float."""
    cols: dict[str, pd.Series] = {}
    for i, name in enumerate(df.columns):
        s = df.iloc[:, i]
        if isinstance(s.dtype, pd.DatetimeTZDtype):
            s = s.dt.tz_convert("UTC").dt.tz_localize(None)
        if pd.api.types.is_datetime64_any_dtype(s.dtype):
            s = s.astype("datetime64[us]").astype("int64").astype("float64").where(s.notna())
        elif pd.api.types.is_bool_dtype(s.dtype):
            s = s.astype("float64")
        elif pd.api.types.is_numeric_dtype(s.dtype) or s.map(lambda v: hasattr(v, "as_tuple")).any():
            s = pd.to_numeric(s, errors="coerce").astype("float64")
        else:
            s = s.astype("string")
        cols[f"c{i}_{name}"] = s.reset_index(drop=True)
    out = pd.DataFrame(cols)
    if out.empty:
        return out
    keys = pd.DataFrame({c: (v.round(6) if v.dtype == "float64" else v) for c, v in out.items()})
    order = keys.sort_values(list(keys.columns), na_position="first", kind="mergesort").index
    return out.loc[order].reset_index(drop=True)


def differences(got: pd.DataFrame, want: pd.DataFrame) -> str | None:
    """None when equal (floats within 1e-9 relative), else a short description of the first difference."""
    if got.shape[1] != want.shape[1]:
        return f"{got.shape[1]} columns, expected {want.shape[1]}"
    if len(got) != len(want):
        return f"{len(got)} rows, expected {len(want)}"
    for (gc, g), (_, w) in zip(got.items(), want.items(), strict=True):
        if g.dtype == "float64" and w.dtype == "float64":
            bad = ~(np.isclose(g.to_numpy(), w.to_numpy(), rtol=1e-9, atol=1e-9, equal_nan=True))
        else:
            bad = (g.astype("string").fillna("<NULL>") != w.astype("string").fillna("<NULL>")).to_numpy()
        if bad.any():
            i = int(np.argmax(bad))
            return (f"{int(bad.sum())} rows differ in column {gc}; first at sorted row {i}: "
                    f"{got.iloc[i].to_dict()} != {want.iloc[i].to_dict()}")
    return None


# ---- one query at one size: check, then interleaved timed rounds --------------------------------

@dataclass
class Measurement:
    events: int
    query: str
    kind: str
    engine: str
    status: str  # "ok", "mismatch", "error"
    rows: int | None = None
    times: list[float] = field(default_factory=list)
    detail: str = ""
    compile_s: float | None = None  # of ``times``, what went to compiling (sqlwin: parse, plan, rewrite)

    @property
    def median(self) -> float | None:
        return statistics.median(self.times) if self.times else None

    @property
    def best(self) -> float | None:
        """The fastest round: on a loaded machine, the run least disturbed by other work."""
        return min(self.times) if self.times else None


def measure(query: Query, ctx: Context, rounds: int, engines: dict[str, Engine] | None = None,
            say: Callable[[str], None] = print) -> list[Measurement]:
    """Check that every engine returns the reference's result, then time the ones that do.

    The check run is also the warm-up. Rounds are interleaved (one run of each engine per round, in
    alternating order) so a busy moment on a shared machine hits every engine alike; the medians are
    reported.
    """
    engines = engines or ENGINES
    names = [n for n in query.engines if n in engines]
    ms = {n: Measurement(ctx.events, query.name, query.kind, n, "ok") for n in names}
    results: dict[str, pd.DataFrame] = {}
    for n in names:
        try:
            results[n] = normalize(engines[n].result(query, ctx))
            ms[n].rows = len(results[n])
        except Exception as exc:  # keep going: the report says which engine failed and why
            ms[n].status, ms[n].detail = "error", f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:300]}"
    ref = REFERENCE if REFERENCE in results else next(iter(results), None)
    for n, df in results.items():
        if n != ref and (diff := differences(df, results[ref])):
            ms[n].status, ms[n].detail = "mismatch", f"vs {ref}: {diff}"
    for m in ms.values():
        if m.status != "ok":
            say(f"[bold red]{query.name}: {m.engine} {m.status.upper()}[/] {m.detail}")
    timed = [n for n in names if ms[n].status == "ok"]
    for r in range(rounds):
        for n in timed if r % 2 == 0 else timed[::-1]:  # alternate the order: no engine always runs first
            start = time.perf_counter()
            engines[n].run(query, ctx)
            ms[n].times.append(time.perf_counter() - start)
        say(f"  {query.name} round {r + 1}/{rounds}: "
            + "  ".join(f"{n} {ms[n].times[-1]:.2f}s" for n in timed))
    for n in timed:
        ms[n].compile_s = engines[n].compile_time(query, ctx)
    return list(ms.values())
