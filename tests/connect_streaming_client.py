"""The Spark Connect client of tests/test_connect.py's streaming checks (run as a script in its own process:
``python connect_streaming_client.py URL REPO WORK [MODE]``; prints one ``RESULT <json>`` line). With a MODE,
it first runs tests/connect_batch_checks.py's batch checks in that mode on the same session (``batch``).

Over one Connect session it runs, on streams of JSON files dropped one at a time (each file processed, with
the no-data micro-batches it causes, before the next one is written):

- the native path (TUMBLE, default emission) and the custom path (ALLOWED LATENESS, LATE ROWS TO; stopped
  after two files and started again by the same statement) over the rows of tests/test_streaming.py;
- a SESSION streaming table (custom path, sessions merging across micro-batches) and, on the same stream,
  cascaded windows (a staged query: every stage and its state on the server);
- a processing-time trigger on a stream that goes quiet (the wake-up timer runs on the server);
- replays of both custom queries over the same rows cut into the same micro-batches (``MICRO BATCH BY``);
- the batch query over the rows each run accepted, on Spark through Connect and on DuckDB, restricted to
  the windows that fired.

Values come back as JSON (timestamps as ISO text); tests/test_connect.py compares them.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
import time
import traceback

sys.path.insert(0, sys.argv[2])  # the repo: tests' data and tools

import duckdb
from pyspark.sql import SparkSession

import sqlwin
from sqlwin.streaming import catalog
from tests.connect_batch_checks import batch_checks
from tests.difftools import EVENTS, load, normalize, on_duckdb, on_spark
from tests.streamtools import Feeder
from tests.test_streaming import BATCHES, SESSION_BATCHES, at

DELAY_S = 2
TUMBLE = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), "
          "INTERVAL 10 SECONDS) GROUP BY window_start, window_end, k")
LATENESS = " ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO {late}"
SESSION = ("SELECT window_start, window_end, k, SUM(v) AS s, COUNT(*) AS c FROM SESSION(TABLE {src} PARTITION BY k, "
           "DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY window_start, window_end, k "
           "ALLOWED LATENESS INTERVAL 10 SECONDS LATE ROWS TO {late}")
CASCADE = ("SELECT window_start, window_end, SUM(s) AS total, COUNT(*) AS n FROM TUMBLE(TABLE(SELECT window_time "
           "AS rowtime, k, SUM(v) AS s FROM TUMBLE(TABLE {src}, DESCRIPTOR(ts), INTERVAL 5 SECONDS) GROUP BY "
           "window_start, window_end, window_time, k), DESCRIPTOR(rowtime), INTERVAL 20 SECONDS) "
           "GROUP BY window_start, window_end")
CASCADE_COLUMNS = ["window_start", "window_end", "total", "n", "pane_index", "pane_timing", "is_final", "micro_batch"]
PANES = ["window_start", "window_end", "k", "s", "c", "pane_index", "pane_timing", "is_final", "micro_batch"]
LATE = ["k", "v", "ts", "window_start", "window_end", "watermark", "reason", "micro_batch"]


def plain(value):
    return value.isoformat(sep=" ") if isinstance(value, dt.datetime) else value


def rows(df, columns: list[str]) -> list[list]:
    return [[plain(v) for v in r] for r in normalize(tuple(r) for r in df.select(*columns).collect())]


def as_tuples(batches) -> list[list[tuple]]:
    """(ts, k, v) per row (``EVENTS``' column order), per file."""
    return [[(dt.datetime.fromisoformat(r["ts"]), r["k"], r["v"]) for r in rows] for rows in batches]


def not_dropped_by_watermark(files: list[list[tuple]]) -> list[tuple]:
    """GRAMMAR 4 with lateness 0, worked out here on its own: the watermark in force for file i is the largest
    ts of the files before it minus the delay; a row is dropped when W >= its 10-second window's end."""
    kept, watermark = [], None
    for rows in files:
        for ts, k, v in rows:
            end = dt.datetime(ts.year, ts.month, ts.day, ts.hour, ts.minute, ts.second // 10 * 10) + \
                dt.timedelta(seconds=10)
            if watermark is None or watermark < end:
                kept.append((ts, k, v))
        latest = max(ts for ts, _, _ in rows) - dt.timedelta(seconds=DELAY_S)
        watermark = latest if watermark is None else max(watermark, latest)
    return kept


def batch_results(spark, duck, name: str, accepted: list[tuple], query: str, fired_ends: set) -> dict:
    """The batch query over the rows a run accepted, on Spark (through Connect) and DuckDB, for fired windows."""
    load(spark, duck, name, EVENTS, accepted)
    out = {}
    for engine, got in (("spark", on_spark(spark, query.format(src=name))),
                        ("duckdb", on_duckdb(duck, query.format(src=name)))):
        out[engine] = [[plain(v) for v in r] for r in got if plain(r[1]) in fired_ends]
    return out


def final_panes(panes: list[list]) -> list[list]:
    """The last pane of each window and key: its result once nothing more can change."""
    last: dict = {}
    for p in panes:
        key = tuple(p[:3])
        if key not in last or (p[8], p[5]) > (last[key][8], last[key][5]):
            last[key] = p
    return sorted([p[:5] for p in last.values()], key=lambda r: [str(v) for v in r])


def start(spark, sql: str):
    sqlwin.sql(spark, sql)
    return catalog.find_table(sql.split("TABLE", 1)[1].split()[0])


def replay(spark, name: str, files: list[list[tuple]], query: str, late: str) -> dict:
    """The query over a replay stream of the same rows, one micro-batch per file."""
    data = [(ts, k, v, i) for i, rows in enumerate(files) for ts, k, v in rows]
    spark.createDataFrame(data, "ts timestamp, k string, v int, file int").createOrReplaceTempView(f"{name}_rows")
    sqlwin.sql(spark, f"CREATE STREAM {name} FROM TABLE {name}_rows ARRIVAL ORDER BY file, ts, v MICRO BATCH BY file "
                      f"WATERMARK FOR ts AS ts - INTERVAL {DELAY_S} SECONDS")
    panes = sqlwin.sql(spark, query.format(src=name, late=late))
    return {"panes": rows(panes, PANES), "late": rows(spark.table(late), LATE)}


def processing_time_pane(spark, feed: Feeder) -> list[list]:
    """AFTER PROCESSING TIME on a stream that goes quiet: the timer that asks for the micro-batch runs in the
    server's foreachBatch worker. Waits for the pane, bounded; its content does not depend on timing."""
    sqlwin.sql(spark, f"CREATE STREAM quiet_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts) USING json "
                      f"OPTIONS (path '{feed.folder}')")
    table = start(spark, "CREATE STREAMING TABLE quiet_out AS SELECT window_start, window_end, k, SUM(v) AS s "
                         "FROM TUMBLE(TABLE quiet_s, DESCRIPTOR(ts), INTERVAL 1 HOUR) "
                         "GROUP BY window_start, window_end, k "
                         "EMIT WITH TRIGGER REPEATEDLY AFTER PROCESSING TIME DELAY INTERVAL 1 SECOND")
    feed.feed([[{"k": "a", "v": 4, "ts": plain(at(1))}, {"k": "a", "v": 5, "ts": plain(at(2))}]], table)
    deadline = time.monotonic() + 120
    while spark.table("quiet_out").count() < 1 and time.monotonic() < deadline:
        table.process_all_available()
        time.sleep(0.2)
    pane = rows(spark.table("quiet_out"), ["window_start", "k", "s", "pane_index", "pane_timing", "is_final"])
    table.stop()
    return pane


def show(spark) -> dict:
    """SHOW STREAMING TABLES, by name."""
    return {r.name: [r.name, r.status, r.path, r.micro_batches, r.rows_in, r.watermark, r.state_rows, r.open_windows,
                     r.late_rows_dropped, r.error] for r in sqlwin.sql(spark, "SHOW STREAMING TABLES").collect()}


def tumble_tables(spark, out: dict, feed: Feeder) -> None:
    """The native and the custom path side by side over one stream; the custom one stopped after two files
    and started again by the same statement (a file arrives meanwhile)."""
    sqlwin.sql(spark, f"CREATE STREAM bids_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
                      f"{DELAY_S} SECONDS) USING json OPTIONS (path '{feed.folder}')")
    custom_sql = "CREATE STREAMING TABLE custom_out AS " + TUMBLE.format(src="bids_s") + \
        LATENESS.format(late="custom_late")
    native = start(spark, "CREATE STREAMING TABLE native_out AS " + TUMBLE.format(src="bids_s"))
    custom = start(spark, custom_sql)
    out["paths"] = [[native.path, native.why], [custom.path, custom.why]]
    feed.feed(BATCHES[:2], native, custom)
    sqlwin.sql(spark, "STOP STREAMING TABLE custom_out")
    out["stopped"] = custom.status().status
    feed.write(BATCHES[2])  # arrives while custom_out is stopped
    native.process_all_available()
    custom = start(spark, custom_sql)  # the same statement resumes where it stopped
    custom.process_all_available()
    feed.feed(BATCHES[3:], native, custom)
    out["show"] = show(spark)
    out["native"] = {"panes": rows(spark.table("native_out"), PANES[:-1])}
    out["custom"] = {"panes": rows(spark.table("custom_out"), PANES), "late": rows(spark.table("custom_late"), LATE),
                     "read": rows(custom.read(), PANES)}
    native.stop()
    custom.stop()


def session_table(spark, out: dict, feed: Feeder) -> None:
    sqlwin.sql(spark, f"CREATE STREAM sess_s (k STRING, v INT, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL "
                      f"{DELAY_S} SECONDS) USING json OPTIONS (path '{feed.folder}')")
    sessions = start(spark, "CREATE STREAMING TABLE sess_out AS " + SESSION.format(src="sess_s", late="sess_late"))
    cascade = start(spark, "CREATE STREAMING TABLE casc_out AS " + CASCADE.format(src="sess_s"))
    out["paths"] += [[sessions.path, sessions.why], [cascade.path, cascade.why]]
    feed.feed(SESSION_BATCHES, sessions, cascade)
    out["show"]["sess_out"] = show(spark)["sess_out"]
    out["sessions"] = {"panes": rows(spark.table("sess_out"), PANES), "late": rows(spark.table("sess_late"), LATE)}
    out["cascade"] = {"panes": rows(spark.table("casc_out"), CASCADE_COLUMNS),
                      "late_rows_dropped": cascade.status().late_rows_dropped}
    sessions.stop()
    cascade.stop()


def main() -> None:
    url, work = sys.argv[1], sys.argv[3]
    os.environ["SQLWIN_STREAMING_DIR"] = os.path.join(work, "root")
    spark = SparkSession.builder.remote(url).getOrCreate()
    spark.conf.set("spark.sql.session.timeZone", "UTC")
    duck = duckdb.connect()
    duck.execute("SET TimeZone = 'UTC'")
    out: dict = {"session": type(spark).__module__}
    if len(sys.argv) > 4:  # the batch checks first, on the same session (one client process, not two)
        try:
            out["batch"] = batch_checks(spark, sys.argv[4])
        except Exception:
            out["batch_error"] = traceback.format_exc()
    try:  # one table or two at a time: every running query polls its sources on the server
        tumble_tables(spark, out, Feeder(os.path.join(work, "in")))
        session_table(spark, out, Feeder(os.path.join(work, "sessions")))
        out["processing_time"] = processing_time_pane(spark, Feeder(os.path.join(work, "quiet")))
    finally:
        for table in catalog.all_tables():
            table.stop()
    files = as_tuples(BATCHES)
    late_keys = {(r[0], r[1], r[2]) for r in out["custom"]["late"]}
    accepted = [r for rows_ in files for r in rows_ if (r[1], r[2], plain(r[0])) not in late_keys]
    fired = {p[1] for p in out["custom"]["panes"]}
    out["custom"]["final"] = final_panes(out["custom"]["panes"])
    out["custom"]["batch"] = batch_results(spark, duck, "custom_accepted", accepted, TUMBLE, fired)
    fired = {p[1] for p in out["native"]["panes"]}
    out["native"]["final"] = final_panes([[*p, 0] for p in out["native"]["panes"]])
    out["native"]["batch"] = batch_results(spark, duck, "native_accepted", not_dropped_by_watermark(files), TUMBLE,
                                           fired)
    out["replay_custom"] = replay(spark, "bids_r", files, TUMBLE + LATENESS, "replay_late")
    out["replay_sessions"] = replay(spark, "sess_r", as_tuples(SESSION_BATCHES), SESSION, "sess_replay_late")
    out["cascade"]["replay"] = rows(sqlwin.sql(spark, CASCADE.format(src="sess_r")), CASCADE_COLUMNS)
    print("RESULT " + json.dumps(out))
    spark.stop()


if __name__ == "__main__":
    main()
