"""Watermark alignment (GRAMMAR 3, issue 20): how much state waits for a slow stream, with and without alignment.

    python -m bench.alignment [--steps 30] [--keys 50] [--rows-per-second 20]

Two file streams feed a window join (10-second TUMBLE, per key): at every step each gets one file, the fast one 10x
more event time per file (100 s against 10 s) at the same row rate. Both read one file per micro-batch
(``maxFilesPerTrigger 1``). The join emits a window once both watermarks pass its end, so without alignment the
fast side's windows wait in the join's state for the slow side, more at every step; with ``WITH WATERMARK ALIGNMENT
GROUP 'g' MAX DRIFT INTERVAL '30' SECONDS`` the fast stream reads on only while its watermark is within 30 s of the
slow one's, and its files wait in its folder. After each step it prints both runs' stored rows and open windows
(the table's status: every stage and the join), the files the fast stream has read, and the watermarks; at the end
both runs get a flush file and their results must be equal, and equal to DuckDB's batch join over every row.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import tempfile
import time
from pathlib import Path

import sqlwin
from bench.streaming import load
from sqlwin.session import local_session
from sqlwin.streaming import catalog

JOIN = """SELECT F.k, F.ws, F.n AS fast_rows, S.n AS slow_rows
FROM (SELECT k, window_start AS ws, window_end AS we, COUNT(*) AS n
      FROM TUMBLE(TABLE {fast}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY k, window_start, window_end) F
JOIN (SELECT k, window_start AS ws, window_end AS we, COUNT(*) AS n
      FROM TUMBLE(TABLE {slow}, DESCRIPTOR(ts), INTERVAL 10 SECONDS) GROUP BY k, window_start, window_end) S
ON F.k = S.k AND F.ws = S.ws AND F.we = S.we"""
FAST_SPAN, SLOW_SPAN = 100, 10  # seconds of event time per file
T0 = dt.datetime(2024, 1, 1)


def stamp(ms: int) -> str:
    return (T0 + dt.timedelta(milliseconds=ms)).isoformat(sep=" ", timespec="milliseconds")


def write(folder: Path, index: int, start: int, span: int, keys: int, rate: int) -> list[tuple[int, int]]:
    """One file of ``span`` seconds from ``start`` at ``rate`` rows per second, keys round robin; returns its rows."""
    rows = [(start * 1000 + i * 1000 // rate, i % keys) for i in range(span * rate)]
    tmp = folder.parent / f".{folder.name}-{index}.tmp"
    tmp.write_text("".join(json.dumps({"ts": stamp(ms), "k": k}) + "\n" for ms, k in rows))
    os.replace(tmp, folder / f"f{index:05d}.json")
    return rows


def run(spark, root: Path, aligned: bool, steps: int, keys: int, rate: int) -> tuple[list[dict], list, float]:
    """One run: the status after each step, the result after the flush, the seconds it took."""
    tag = "al" if aligned else "un"
    clause = "WITH WATERMARK ALIGNMENT GROUP 'g' MAX DRIFT INTERVAL '30' SECONDS" if aligned else ""
    folders = {side: root / tag / side for side in ("fast", "slow")}
    for side, folder in folders.items():
        folder.mkdir(parents=True)
        sqlwin.sql(spark, f"CREATE STREAM {tag}_{side} (ts TIMESTAMP, k INT, "
                          f"WATERMARK FOR ts AS ts) USING json OPTIONS (path '{folder}', maxFilesPerTrigger '1') "
                          f"{clause}")
    sqlwin.sql(spark, f"CREATE STREAMING TABLE {tag}_join AS " + JOIN.format(fast=f"{tag}_fast", slow=f"{tag}_slow"))
    table = catalog.find_table(f"{tag}_join")
    trace: list[dict] = []
    started = time.perf_counter()
    try:
        for step in range(steps):
            write(folders["fast"], step, step * FAST_SPAN, FAST_SPAN, keys, rate)
            write(folders["slow"], step, step * SLOW_SPAN, SLOW_SPAN, keys, rate)
            table.process_all_available()
            status = table.status()
            trace.append({"step": step + 1, "state_rows": status.state_rows, "open_windows": status.open_windows,
                          "rows_in": status.rows_in, "watermark": status.watermark})
        for folder in folders.values():  # a flush far ahead on both: every window of the data closes
            tmp = folder.parent / f".{folder.name}-flush.tmp"
            tmp.write_text(json.dumps({"ts": stamp(10 * steps * FAST_SPAN * 1000), "k": -1}) + "\n")
            os.replace(tmp, folder / "flush.json")
        table.process_all_available()  # the fast stream's waiting files are read, one per micro-batch
        seconds = time.perf_counter() - started
        result = sorted(tuple(r) for r in spark.table(f"{tag}_join").select("k", "ws", "fast_rows", "slow_rows")
                        .where("k >= 0").collect())
    finally:
        table.stop()
        catalog.remove_table(f"{tag}_join")
    return trace, result, seconds


def expected(every: list) -> list:
    """DuckDB's batch join over every row."""
    import duckdb

    con = duckdb.connect()
    con.execute("CREATE TABLE r (side VARCHAR, ms BIGINT, k INT)")
    con.executemany("INSERT INTO r VALUES (?, ?, ?)", every)
    rows = con.execute("""
        WITH w AS (SELECT side, k, (ms // 10000) * 10000 AS ws, COUNT(*) AS n FROM r GROUP BY ALL)
        SELECT f.k, f.ws, f.n, s.n FROM w f JOIN w s ON f.k = s.k AND f.ws = s.ws
        WHERE f.side = 'fast' AND s.side = 'slow' ORDER BY ALL""").fetchall()
    return sorted((k, T0 + dt.timedelta(milliseconds=ws), f, s) for k, ws, f, s in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--keys", type=int, default=50)
    parser.add_argument("--rows-per-second", type=int, default=20)
    args = parser.parse_args()
    print(f"load before: {load()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="sqlwin-bench-alignment-"))
    os.environ["SQLWIN_STREAMING_DIR"] = str(root / "streams")
    spark = local_session("sqlwin-bench-alignment")
    runs = {}
    for aligned in (False, True):
        runs[aligned] = run(spark, root, aligned, args.steps, args.keys, args.rows_per_second)
        print(f"{'aligned' if aligned else 'unaligned'}: {runs[aligned][2]:.1f} s, {len(runs[aligned][1])} rows",
              flush=True)
    every = [("fast", ms, k) for step in range(args.steps) for ms, k in
             [(step * FAST_SPAN * 1000 + i * 1000 // args.rows_per_second, i % args.keys)
              for i in range(FAST_SPAN * args.rows_per_second)]]
    every += [("slow", ms, k) for step in range(args.steps) for ms, k in
              [(step * SLOW_SPAN * 1000 + i * 1000 // args.rows_per_second, i % args.keys)
               for i in range(SLOW_SPAN * args.rows_per_second)]]
    want = expected(every)
    assert runs[False][1] == want, "the unaligned run differs from DuckDB's batch join"
    assert runs[True][1] == want, "the aligned run differs from DuckDB's batch join"
    print(f"both runs equal DuckDB's batch join: {len(want)} rows")
    print("| step | stored rows, unaligned | stored rows, aligned | open windows, unaligned | open windows, aligned "
          "| rows read, unaligned | rows read, aligned |")
    print("|---|---|---|---|---|---|---|")
    for u, a in zip(runs[False][0], runs[True][0], strict=True):
        if u["step"] in (1, 2, 5) or u["step"] % 5 == 0:
            print(f"| {u['step']} | {u['state_rows']} | {a['state_rows']} | {u['open_windows']} | "
                  f"{a['open_windows']} | {u['rows_in']} | {a['rows_in']} |")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
