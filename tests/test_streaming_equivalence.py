"""GRAMMAR's promise "the same SQL, batch or streaming, with the same answer": a streaming run over rows fed as
several files, with no late rows, ends with the batch query's results, which equal DuckDB's (the oracle).

Every window kind runs as a streaming table over one stream (native and custom paths), fed the same files;
the last file also holds one far-future row of another key, which moves the watermark past every window (the
file's other rows are judged against the watermark before it, so none is late), so every window has fired its
one ON_TIME pane (default trigger, no late rows: exactly one result per window). For the count windows that
row is never numbered (its windows never complete), and no row of the data is at or behind the watermark when
it arrives, so no row is late for them either.
"""

from __future__ import annotations

import datetime as dt
import random

import pytest

import sqlwin
from sqlwin.streaming import catalog
from tests.difftools import EVENTS, load, normalize, on_duckdb, on_spark
from tests.streamtools import Feeder

pytestmark = pytest.mark.slow

T0 = dt.datetime(2024, 1, 1, 12)
DELAY_S = 60  # out-of-orderness below the watermark delay: no row is late

QUERIES = {
    "tumble_native": ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE {src}, "
                      "DESCRIPTOR(ts), INTERVAL 1 MINUTE, INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k",
                      "native"),
    "tumble_custom": ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE {src}, "
                      "DESCRIPTOR(ts), INTERVAL 1 MINUTE) GROUP BY window_start, window_end, k{lateness}", "custom"),
    "hop_native": ("SELECT window_start, window_end, k, MAX(v) AS m, COUNT(*) AS c FROM HOP(TABLE {src}, "
                   "DESCRIPTOR(ts), INTERVAL 30 SECONDS, INTERVAL 1 MINUTE) GROUP BY window_start, window_end, k",
                   "native"),
    "hop_custom": ("SELECT window_start, window_end, k, MIN(v) AS m, AVG(v) AS a FROM HOP(TABLE {src}, "
                   "DESCRIPTOR(ts), INTERVAL 20 SECONDS, INTERVAL 1 MINUTE) GROUP BY window_start, window_end, k"
                   "{lateness}", "custom"),
    "cumulate": ("SELECT window_start, window_end, k, SUM(v) AS s FROM CUMULATE(TABLE {src}, DESCRIPTOR(ts), "
                 "INTERVAL 20 SECONDS, INTERVAL 1 MINUTE) GROUP BY window_start, window_end, k", "custom"),
    "session": ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM SESSION(TABLE {src} "
                "PARTITION BY k, DESCRIPTOR(ts), INTERVAL 20 SECONDS) GROUP BY window_start, window_end, k",
                "custom"),
    "topn": ("SELECT window_start, window_end, k, v FROM (SELECT window_start, window_end, k, v, ROW_NUMBER() OVER "
             "(PARTITION BY window_start, window_end ORDER BY v DESC, k) AS rn FROM TUMBLE(TABLE {src}, "
             "DESCRIPTOR(ts), INTERVAL 1 MINUTE)) AS ranked WHERE rn <= 2", "custom"),
}

# Storm's count windows (GRAMMAR 1) and SESSION with a dynamic gap: the custom path's numbering and merging
# (COUNT(DISTINCT) keeps raw rows in state; the other aggregates keep partial aggregates)
COUNT_AND_DYNAMIC = {
    "tumble_rows": ("SELECT window_start, window_end, window_index, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE("
                    "TABLE {src} PARTITION BY k, DESCRIPTOR(ts), ROWS 3) GROUP BY window_start, window_end, "
                    "window_index, k", "custom"),
    "tumble_rows_global": ("SELECT window_start, window_end, MAX(v) AS m, COUNT(v) AS c FROM TUMBLE(TABLE {src}, "
                           "DESCRIPTOR(ts), ROWS 4) WHERE v IS NOT NULL OR k = 'a' GROUP BY window_start, window_end",
                           "custom"),
    "hop_rows_rows": ("SELECT window_start, window_end, window_index, k, SUM(v) AS s, COUNT(*) AS c FROM HOP(TABLE "
                      "{src} PARTITION BY k, DESCRIPTOR(ts), ROWS 2, ROWS 5) GROUP BY window_start, window_end, "
                      "window_index, k", "custom"),
    "hop_rows_gaps": ("SELECT window_start, window_end, k, COUNT(DISTINCT v) AS d FROM HOP(TABLE {src} PARTITION "
                      "BY k, DESCRIPTOR(ts), ROWS 3, ROWS 2) GROUP BY window_start, window_end, k", "custom"),
    "hop_rows_time": ("SELECT window_start, window_end, window_index, k, SUM(v) AS s, COUNT(*) AS c FROM HOP(TABLE "
                      "{src} PARTITION BY k, DESCRIPTOR(ts), ROWS 2, INTERVAL 90 SECONDS) GROUP BY window_start, "
                      "window_end, window_index, k", "custom"),
    "hop_time_rows": ("SELECT window_start, window_end, window_index, k, SUM(v) AS s, COUNT(*) AS c FROM HOP(TABLE "
                      "{src} PARTITION BY k, DESCRIPTOR(ts), INTERVAL 1 MINUTE, ROWS 3) GROUP BY window_start, "
                      "window_end, window_index, k", "custom"),
    "session_dynamic": ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM SESSION(TABLE {src} "
                        "PARTITION BY k, DESCRIPTOR(ts), CASE WHEN v >= 5 THEN INTERVAL 40 SECONDS WHEN v IS NULL "
                        "THEN NULL ELSE INTERVAL 10 SECONDS END) GROUP BY window_start, window_end, k", "custom"),
}


def make_rows(seed: int) -> list[list[tuple]]:
    """Three micro-batches (windows and sessions across them): several keys, ties, rows exactly on window
    boundaries, out of order within the delay, NULL times (in no window) and NULL values."""
    rnd = random.Random(seed)
    batches = []
    for b in range(3):
        rows = []
        for _ in range(rnd.randint(8, 14)):
            second = b * 120 + rnd.choice([0, 20, 30, 60, 90, rnd.randint(0, 150)]) - rnd.randint(0, 45)
            ts = T0 + dt.timedelta(seconds=max(second, 0))
            rows.append((ts, rnd.choice("abc"), rnd.choice([1, 2, 5, 7, None])))
        rows.append((None, "a", 3))
        batches.append(rows)
    return batches


def test_streaming_equals_batch_and_duckdb(spark, duck, tmp_path, monkeypatch):
    run_equivalence(spark, duck, tmp_path, monkeypatch, QUERIES, "eq")


def test_count_windows_and_dynamic_sessions_stream_as_batch(spark, duck, tmp_path, monkeypatch):
    run_equivalence(spark, duck, tmp_path, monkeypatch, COUNT_AND_DYNAMIC, "cw")


def run_equivalence(spark, duck, tmp_path, monkeypatch, queries: dict, prefix: str) -> None:
    monkeypatch.setenv("SQLWIN_STREAMING_DIR", str(tmp_path / "root"))
    folder = tmp_path / "in"
    sqlwin.sql(spark, f"CREATE STREAM {prefix}_s (ts TIMESTAMP, k STRING, v INT, WATERMARK FOR ts AS ts - INTERVAL "
                      f"{DELAY_S} SECONDS) USING json OPTIONS (path '{folder}')")
    batches = make_rows(7)
    tables = []
    try:
        for name, (sql, path) in queries.items():
            text = sql.format(src=f"{prefix}_s", lateness=" ALLOWED LATENESS INTERVAL 1 SECOND")
            sqlwin.sql(spark, f"CREATE STREAMING TABLE {prefix}_{name} AS {text}")
            table = catalog.find_table(f"{prefix}_{name}")
            assert table.path == path, (name, table.why)
            tables.append(table)
        feeder = Feeder(folder)
        as_json = [[{"ts": t.isoformat(sep=" ") if t else None, "k": k, "v": v} for t, k, v in rows]
                   for rows in batches]
        # the far-future row rides in the last file: one file and its micro-batches fewer than a file of its own
        flush = {"ts": (T0 + dt.timedelta(days=1)).isoformat(sep=" "), "k": "zz", "v": 0}
        feeder.feed([*as_json[:-1], [*as_json[-1], flush]], *tables)
        load(spark, duck, f"{prefix}_t", EVENTS, [r for rows in batches for r in rows])
        for (name, (sql, _)), table in zip(queries.items(), tables, strict=True):
            batch_sql = sql.format(src=f"{prefix}_t", lateness="")
            expected = on_spark(spark, batch_sql)
            assert expected == on_duckdb(duck, batch_sql), name
            out = spark.table(f"{prefix}_{name}")
            out = out.where("k <> 'zz'") if "k" in out.columns else out
            panes = out.select("pane_timing", "is_final").distinct().collect()
            assert {(p.pane_timing, p.is_final) for p in panes} == {("ON_TIME", True)}, name
            streamed = normalize(tuple(r) for r in out.drop("pane_index", "pane_timing", "is_final",
                                                            "micro_batch").collect())
            assert streamed == expected, f"{name}: streaming differs from batch\n{streamed}\n{expected}"
            assert table.status().late_rows_dropped == 0
    finally:
        for table in tables:
            table.stop()
            catalog.remove_table(table.name)
