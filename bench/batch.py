"""Batch benchmark: sqlwin vs hand-written native Spark vs DuckDB, side by side in one run.

    python bench/batch.py [--rows 1000000 5000000] [--repeat 3]

For each window kind it times, interleaved round by round, the sqlwin query (rewritten to native Spark SQL), the same
aggregation written by hand with Spark's own functions (``window()``, ``session_window()``, or
``explode(sequence())`` where Spark has no function), and DuckDB on the same parquet file, and
prints the ratios. Every timing forces the full result (Spark: the ``noop`` sink).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import duckdb

import sqlwin
from sqlwin.session import local_session

KINDS = {
    "TUMBLE": (
        "SELECT window_start, window_end, item, COUNT(*) AS n, SUM(price) AS total "
        "FROM TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' MINUTES) GROUP BY window_start, window_end, item",
        "SELECT window.start AS window_start, window.end AS window_end, item, COUNT(*) AS n, SUM(price) AS total "
        "FROM events GROUP BY window(ts, '10 minutes'), item",
    ),
    "HOP": (
        "SELECT window_start, window_end, item, COUNT(*) AS n, SUM(price) AS total "
        "FROM HOP(TABLE events, DESCRIPTOR(ts), INTERVAL '5' MINUTES, INTERVAL '10' MINUTES) "
        "GROUP BY window_start, window_end, item",
        "SELECT window.start AS window_start, window.end AS window_end, item, COUNT(*) AS n, SUM(price) AS total "
        "FROM events GROUP BY window(ts, '10 minutes', '5 minutes'), item",
    ),
    "CUMULATE": (
        "SELECT window_start, window_end, item, COUNT(*) AS n, SUM(price) AS total "
        "FROM CUMULATE(TABLE events, DESCRIPTOR(ts), INTERVAL '10' MINUTES, INTERVAL '1' HOUR) "
        "GROUP BY window_start, window_end, item",
        # Spark has no cumulate function: the natural hand-written form
        "SELECT ws AS window_start, ws + make_dt_interval(0, 0, 10 * k) AS window_end, item, COUNT(*) AS n, "
        "SUM(price) AS total FROM (SELECT *, window(ts, '1 hour').start AS ws FROM events) "
        "LATERAL VIEW explode(sequence(CAST(floor((unix_seconds(ts) - unix_seconds(ws)) / 600) AS INT) + 1, 6)) "
        "AS k GROUP BY ws, k, item",
    ),
    "SESSION": (
        "SELECT window_start, window_end, item, COUNT(*) AS n, SUM(price) AS total "
        "FROM SESSION(TABLE events PARTITION BY item, DESCRIPTOR(ts), INTERVAL '5' MINUTES) "
        "GROUP BY window_start, window_end, item",
        "SELECT session_window.start AS window_start, session_window.end AS window_end, item, COUNT(*) AS n, "
        "SUM(price) AS total FROM events GROUP BY session_window(ts, '5 minutes'), item",
    ),
}


def make_data(path: Path, rows: int) -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    # TIMESTAMPTZ is stored as a UTC instant, which Spark reads as TIMESTAMP (its usual event-time type)
    con.execute(f"""
        COPY (SELECT CAST(TIMESTAMP '2024-01-01' + to_microseconds(CAST(random() * 7 * 86400e6 AS BIGINT))
                          AS TIMESTAMPTZ) AS ts,
                     'item' || CAST(floor(random() * 1000) AS INT) AS item,
                     round(random() * 100, 2) AS price
              FROM range({rows})) TO '{path}' (FORMAT parquet)""")
    con.close()


def side_by_side(fns: list, repeat: int) -> list[float]:
    """Median seconds of each function, run interleaved (one of each per round) after a warm-up,
    so a busy moment on the machine hits all of them alike."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            fn()
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 5_000_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--kinds", nargs="+", default=list(KINDS))
    args = parser.parse_args()
    spark = local_session("sqlwin-bench", {"spark.driver.memory": "6g"})
    tmp = Path(tempfile.mkdtemp(prefix="sqlwin-bench-"))
    print(f"{'kind':<9}{'rows':>10}{'sqlwin s':>10}{'native s':>10}{'duckdb s':>10}"
          f"{'sqlwin/native':>15}{'sqlwin/duckdb':>15}")
    for rows in args.rows:
        path = tmp / f"events_{rows}.parquet"
        make_data(path, rows)
        spark.read.parquet(str(path)).createOrReplaceTempView("events")
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        con.execute(f"CREATE VIEW events AS SELECT * FROM read_parquet('{path}')")
        for kind in args.kinds:
            sqlwin_sql, native_sql = KINDS[kind]
            duck_sql = sqlwin.rewrite(sqlwin_sql, target="duckdb", catalog=con)
            t_sqlwin, t_native, t_duck = side_by_side([
                lambda q=sqlwin_sql: sqlwin.sql(spark, q).write.format("noop").mode("overwrite").save(),
                lambda q=native_sql: spark.sql(q).write.format("noop").mode("overwrite").save(),
                lambda q=duck_sql, c=con: c.execute(f"SELECT COUNT(*) FROM ({q})").fetchall(),
            ], args.repeat)
            print(f"{kind:<9}{rows:>10}{t_sqlwin:>10.2f}{t_native:>10.2f}{t_duck:>10.2f}"
                  f"{t_sqlwin / t_native:>15.2f}{t_sqlwin / t_duck:>15.1f}", flush=True)
        con.close()
    spark.stop()


if __name__ == "__main__":
    main()
