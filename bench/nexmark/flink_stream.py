"""The ``flink-stream`` column of the suite: Apache Flink 2.3 (PyFlink's local mini-cluster, streaming mode,
parallelism 2) running the same query, translated to Flink SQL, over the same bids (issue 18, point 4).

How it runs, as ``bench.flink`` does: one Python process per query in Flink's own virtual environment
(``.venv-flink``, ``pip install apache-flink==2.3.0``, made on first use; ``bench.flink.flink_python``) runs
the query once (the warm-up, whose rows are the checked result), then times each further run from the job's
submission to its last result row (the mini-cluster's start is not counted, as Spark's session start is not).
``run`` returns those seconds (``self_timed``) instead of the suite timing the Python process around it.

The input: the streams' files of 250k events (``streams.Feed``: bids, persons, auctions), written once beside
them as CSV files (``flink_csv/<table>/``; PyFlink's filesystem connector reads parquet only with the
flink-parquet jars, which the pip package does not ship, while its csv format is built in), with the columns the
queries read (``COLUMNS``: the bids' ``url`` and ``seq`` left out, for instance) and ``date_time`` to the
millisecond (a Flink rowtime is ``TIMESTAMP(3)``; the timestamps have microseconds, which moves no row to another
window of these queries; a session's bounds and q7's ``date_time`` are compared to the microsecond-precise
expectation within the suite's tolerance).

Which rows: the answer compared is the one over the rows that are not late, for Flink as for the other
streams. Flink's file source reads the files in parallel and in no set order (``bench.flink`` explains it), so
its own watermark would not drop the rows the micro-batch streams drop; instead the CSV files hold only the
rows the streams keep (``date_time`` at or after the watermark in force for its file, each table's own:
``streams.InTime``'s ``__wm``) and Flink's watermark delay covers the whole input (nothing is late for Flink;
every window closes when the bounded input ends). That is the expectation's answer exactly when no row is late
for some of its windows and not for others: no row is within ``MARGIN_S`` (the widest window of the streamed
queries, CUMULATE's minute) before its watermark; the files are written only when that holds (Nexmark's late
bids are minutes late, its out-of-order ones 4 s, under the 5 s delay; persons and auctions are in order). Flink
does no late-row dropping then (0.1 % of the bids) and keeps every window open until the end: its state is the
whole input's windows.

Flink runs each query's streaming text (``Query.stream_sql``: q7 as a window join, like the other streams).
Flink SQL has no ``EMIT WITH TRIGGER`` (early/late firings), ``ALLOWED LATENESS`` or count windows: those
queries are skipped (``skip`` says why).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from bench.nexmark.engines import Context, Engine
from bench.nexmark.streams import DELAY_S, EXPECTED, feed_of, tables_of

if TYPE_CHECKING:
    from bench.nexmark.suite import Query

MARGIN_S = 60  # the widest window of the streamed queries (CUMULATE's minute): see the docstring
COLUMNS = {  # the columns the queries read, per table
    "bids": "auction BIGINT, bidder BIGINT, price BIGINT, channel STRING, date_time TIMESTAMP(3)",
    "persons": "id BIGINT, name STRING, date_time TIMESTAMP(3)",
    "auctions": "id BIGINT, seller BIGINT, date_time TIMESTAMP(3)",
}
WINDOW_TVFS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
UNSUPPORTED = {  # sqlwin clauses Flink SQL has no counterpart for
    r"\bEMIT\b": "Flink SQL has no EMIT clause (early/late firings)",
    r"\bALLOWED\s+LATENESS\b": "Flink SQL has no ALLOWED LATENESS",
    r"\bROWS\s+\d+\b|\bCOUNT\s*\(\s*TABLE\b": "Flink SQL has no count windows",
}


class Unsupported(Exception):
    """The query cannot be said in Flink SQL."""


def to_flink_sql(text: str) -> str:
    """sqlwin's window TVF SQL as Flink SQL: ``TUMBLE(TABLE t, ...)`` -> ``TABLE(TUMBLE(TABLE t, ...))``,
    ``INTERVAL '10' SECONDS`` -> ``INTERVAL '10' SECOND``, comments removed. Raises ``Unsupported``."""
    text = "\n".join(line.split("--", 1)[0] for line in text.splitlines())
    for pattern, why in UNSUPPORTED.items():
        if re.search(pattern, text, re.IGNORECASE):
            raise Unsupported(why)
    text = re.sub(r"(INTERVAL\s+'[^']*'\s+)(SECOND|MINUTE|HOUR|DAY)S\b", r"\1\2", text, flags=re.IGNORECASE)
    out, i = [], 0
    call = re.compile(rf"\b({'|'.join(WINDOW_TVFS)})\s*\(\s*TABLE\b", re.IGNORECASE)
    while m := call.search(text, i):
        end = _closing(text, text.index("(", m.start()))
        if text[:m.start()].rstrip().upper().endswith("TABLE("):  # already Flink's form
            out.append(text[i:end + 1])
        else:
            out.append(f"{text[i:m.start()]}TABLE({text[m.start():end + 1]})")
        i = end + 1
    out.append(text[i:])
    return "".join(out).strip().rstrip(";")


def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one at ``start``."""
    depth = 0
    for j in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j
    raise Unsupported("unbalanced parentheses")


FLINK_JOB = r'''
import datetime, json, sys, time
from pyflink.table import EnvironmentSettings, TableEnvironment

spec = json.loads(sys.argv[1])
env = TableEnvironment.create(EnvironmentSettings.in_streaming_mode())
env.get_config().set("parallelism.default", "2")
delay = datetime.timedelta(seconds=spec["delay_s"])  # as DAY TO SECOND: a SECOND interval has 2 digits
for name, table in spec["tables"].items():
    env.execute_sql(f"CREATE TEMPORARY TABLE {name} ({table['columns']}, WATERMARK FOR date_time AS date_time - "
                    f"INTERVAL '{delay.days} {delay.seconds // 3600}:{delay.seconds // 60 % 60}:{delay.seconds % 60}' "
                    "DAY TO SECOND) WITH ('connector' = 'filesystem', 'path' = "
                    f"'{table['path']}', 'format' = 'csv')")


def value(v):
    return v.isoformat(sep=" ") if isinstance(v, (datetime.datetime, datetime.date)) else v


def run():
    start = time.perf_counter()
    result = env.execute_sql(spec["sql"])
    with result.collect() as results:
        rows = [[value(v) for v in r] for r in results]
    return time.perf_counter() - start, result.get_table_schema().get_field_names(), rows


seconds, names, rows = run()  # the warm-up, and the checked result
times = [run()[0] for _ in range(spec["rounds"])]
print("RESULT " + json.dumps({"check_s": seconds, "columns": names, "rows": rows, "times": times}), flush=True)
'''


def flink_csv(ctx: Context) -> tuple[Path, int]:
    """The CSV files Flink reads (written once beside the feed: ``flink_csv/<table>/``) and its watermark delay
    in seconds (the whole input's span, every table's)."""
    feed = feed_of(ctx)
    folder = feed.folder / "flink_csv"
    marker = feed.folder / "flink_csv.json"  # not in the folder Flink reads
    if not marker.exists():
        import shutil

        import duckdb

        shutil.rmtree(folder, ignore_errors=True)
        con = duckdb.connect()
        con.execute("SET TimeZone = 'UTC'")
        lo = hi = None
        for table, columns in COLUMNS.items():
            (folder / table).mkdir(parents=True)
            names = [c.split()[0] for c in columns.split(", ")]
            files = ", ".join(f"'{p}'" for p in feed.files[table].values())
            con.execute(f"""CREATE OR REPLACE TEMP TABLE fed AS
                WITH rows AS (SELECT *, seq // {feed.events} AS f FROM read_parquet([{files}])),
                     tops AS (SELECT f, MAX(date_time) AS top FROM rows GROUP BY f),
                     marks AS (SELECT f, MAX(top) OVER (ORDER BY f ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                                         - INTERVAL {DELAY_S} SECOND AS wm FROM tops)
                SELECT rows.*, wm FROM rows JOIN marks USING (f)""")
            between = con.execute(f"SELECT COUNT(*) FROM fed WHERE date_time < wm AND date_time >= wm - INTERVAL "
                                  f"{MARGIN_S} SECOND").fetchone()[0]
            if between:
                raise RuntimeError(f"{between} {table} rows are late for some windows and not others: dropping late "
                                   "rows up front would not give the streams' answer (flink_stream's docstring)")
            select = ", ".join(f"strftime(CAST({c} AS TIMESTAMP), '%Y-%m-%d %H:%M:%S.%g')" if c == "date_time" else c
                               for c in names)
            for f, in con.execute("SELECT DISTINCT f FROM fed ORDER BY f").fetchall():
                con.execute(f"""COPY (SELECT {select} FROM fed WHERE f = {f} AND (wm IS NULL OR date_time >= wm)
                                      ORDER BY seq)
                                TO '{folder / table / f"part-{f:05d}.csv"}' (FORMAT csv, HEADER false)""")
            first, last = con.execute("SELECT MIN(date_time), MAX(date_time) FROM fed").fetchone()
            lo, hi = min(lo or first, first), max(hi or last, last)
        con.close()
        marker.write_text(json.dumps({"delay_s": int((hi - lo).total_seconds()) + 1}))
    return folder, json.loads(marker.read_text())["delay_s"]


class FlinkStream(Engine):
    name = "flink-stream"
    mode = "streaming"
    reference = EXPECTED
    self_timed = True  # ``run`` returns the job's own seconds (the Python process around it is not timed)
    rounds = 1  # timed runs asked of the process that makes the checked result (the suite sets it)

    def __init__(self, python: str | None = None):
        self.python = python
        self.pending: dict[str, list[float]] = {}
        self.checked_s: float | None = None

    def skip(self, query: Query) -> str | None:
        try:
            to_flink_sql(query.stream_sql)
        except Unsupported as exc:
            return str(exc)
        return None

    def _job(self, query: Query, ctx: Context, rounds: int) -> dict[str, Any]:
        from bench.flink import flink_python

        self.python = self.python or flink_python(os.environ.get("SQLWIN_FLINK_PYTHON"))
        folder, delay_s = flink_csv(ctx)
        script = folder.parent / "flink_nexmark_job.py"
        script.write_text(FLINK_JOB)
        tables = {t: {"columns": COLUMNS[t], "path": str(folder / t)} for t in tables_of(query.stream_sql)}
        spec = {"sql": to_flink_sql(query.stream_sql), "tables": tables, "delay_s": delay_s, "rounds": rounds}
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK", "SPARK_"))}
        done = subprocess.run([self.python, str(script), json.dumps(spec)], capture_output=True, text=True, env=env,
                              timeout=3600)
        for line in done.stdout.splitlines():
            if line.startswith("RESULT "):
                return json.loads(line[len("RESULT "):])
        causes = [line.strip() for line in done.stderr.splitlines() if "Exception" in line or "Error:" in line]
        raise RuntimeError(f"Flink failed (exit {done.returncode}): {' / '.join(causes[-2:])[:400]} "
                           f"{done.stderr.strip()[-1500:]}")

    def result(self, query: Query, ctx: Context) -> pd.DataFrame:
        out = self._job(query, ctx, self.rounds)
        self.pending[query.name] = list(out["times"])
        self.checked_s = out["check_s"]
        frame = pd.DataFrame(out["rows"], columns=out["columns"])
        for name in ("starttime", "endtime", "window_start", "window_end", "date_time"):
            if name in frame:
                frame[name] = pd.to_datetime(frame[name], format="ISO8601")
        return frame

    def run(self, query: Query, ctx: Context) -> float:
        """Seconds of one timed run: one the checked process made, else a new process (warm-up, one run)."""
        if self.pending.get(query.name):
            return self.pending[query.name].pop(0)
        return self._job(query, ctx, 1)["times"][0]
