"""A long-running custom-path streaming table on Spark's rate source (issue 17, point 5): do files and
micro-batch times stay bounded?

    python -m bench.soak [--minutes 10] [--rate 20000] [--trigger 1]

A sqlwin streaming table (10-second TUMBLE over 100 keys, ``ALLOWED LATENESS``, ``LATE ROWS TO``, an early
trigger: the custom path, its windows' state in Spark) reads ``--rate`` rows per second from Spark's rate
source with a ``--trigger``-second processing-time trigger, for ``--minutes``. Every 30 seconds it prints the
micro-batches so far, the median time of the last ones (Spark's ``durationMs.triggerExecution``), the input
rate Spark reports, and the file counts under the checkpoint (sqlwin's state: window versions, stored rows,
commits), the sink and the late rows. Bounded means: the state and sink file counts stop growing once
compaction and the windows' expiry keep pace, and the micro-batch time stays flat.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import sqlwin
from bench.streaming import load
from sqlwin.session import local_session
from sqlwin.streaming import catalog


def files_under(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file() and not p.name.startswith((".", "_")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--rate", type=int, default=20_000, help="rows per second (default 20000)")
    parser.add_argument("--trigger", type=float, default=1.0, help="seconds between micro-batches (default 1)")
    parser.add_argument("--compaction-batches", type=int, default=50,
                        help="the sink's compaction_batches option (default 50, the table default)")
    args = parser.parse_args()
    print(f"load before: {load()}", flush=True)
    root = Path(tempfile.mkdtemp(prefix="sqlwin-bench-soak-"))
    spark = local_session("sqlwin-bench-soak", {"spark.driver.memory": "4g"})
    try:
        import os

        os.environ["SQLWIN_STREAMING_DIR"] = str(root / "streams")
        sqlwin.sql(spark, f"CREATE STREAM soak_in (ts TIMESTAMP, v BIGINT, "
                          f"WATERMARK FOR ts AS ts - INTERVAL 2 SECONDS) USING rate "
                          f"OPTIONS (rowsPerSecond '{args.rate}')")
        sqlwin.sql(spark, f"""CREATE STREAMING TABLE soak_out
            OPTIONS ('trigger' '{args.trigger} seconds', 'compaction_batches' '{args.compaction_batches}') AS
            SELECT window_start, window_end, v % 100 AS k, SUM(v) AS s, COUNT(*) AS c
            FROM TUMBLE(TABLE soak_in, DESCRIPTOR(ts), INTERVAL 10 SECONDS)
            GROUP BY window_start, window_end, v % 100
            EMIT WITH TRIGGER AFTER WATERMARK EARLY EVERY 100000 ROWS
            ALLOWED LATENESS INTERVAL 5 SECONDS LATE ROWS TO soak_late""")
        table = catalog.find_table("soak_out")
        assert table.path == "custom", table.why
        started = time.monotonic()
        end = started + args.minutes * 60
        print(f"{'min':>6}{'batches':>9}{'median s':>10}{'rows/s':>10}   files per folder", flush=True)
        while time.monotonic() < end:
            time.sleep(min(30.0, max(0.0, end - time.monotonic())))
            progress = [p for p in table.query.recentProgress if p.get("numInputRows")]
            times = [p["durationMs"]["triggerExecution"] / 1000 for p in progress[-20:]]
            rate = progress[-1].get("processedRowsPerSecond", 0.0) if progress else 0.0
            status = table.status()
            folders = {f"{top.name}/{sub.name}": files_under(sub) for top in sorted((root / "streams").iterdir())
                       for sub in sorted(top.iterdir()) if sub.is_dir()}
            print(f"{(time.monotonic() - started) / 60:>6.1f}{status.micro_batches:>9}"
                  f"{statistics.median(times) if times else float('nan'):>10.2f}{rate:>10.0f}   "
                  + " ".join(f"{name}={n}" for name, n in folders.items()), flush=True)
        table.stop()
        print(f"\nrows in {status.rows_in:,}, late rows dropped {status.late_rows_dropped:,}, "
              f"open windows {status.open_windows}\nload after: {load()}")
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
